#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: node_audit
short_description: Everything the kubenode.gc.audit playbook reads from one node, in one execution
version_added: 0.1.0
description:
  - Runs, in one execution on the node and in check mode, what the audit playbook used to run as a dozen tasks,
    M(kubenode.gc.cri_info) (runtime, image filesystem, images, containers), M(kubenode.gc.kubelet_config) (the effective
    configuration and, with desired settings, the drift), M(kubenode.gc.runtime_config) (the same for the runtime the node
    runs), two M(kubenode.gc.image_gc) plans (the node's policy and prune), M(kubenode.gc.image_pin) (which keep-listed
    images the runtime does not pin), M(kubenode.gc.container_gc) and M(kubenode.gc.disk_usage); and it measures the
    kubelet's root filesystem, counts the kubelet's pulled-image credential records and reads the state of
    P(kubenode.gc.gc_timer#role).
  - Each part is that module's own code with that module's options, checked as the module checks them, so RV(audit) holds
    for each part exactly what a task registering that module would hold, V(failed) and V(msg) included. One part failing
    does not stop the others.
  - It changes nothing. The single-purpose modules stay for plays that compose their own steps; this one exists so that an
    audit costs one Python start, one module transfer and one set of imports per node instead of eleven.
author:
  - kubenode.gc contributors (@kubenode)
extends_documentation_fragment:
  - kubenode.gc.node_cache
  - kubenode.gc.cri
  - kubenode.gc.cri.ATTRIBUTES_READ_ONLY
  - kubenode.gc.cri.ACTIONGROUP_CRI
options:
  kubelet_config:
    description:
      - Options of M(kubenode.gc.kubelet_config) for reading the kubelet configuration (O(kubenode.gc.kubelet_config#module:path),
        O(kubenode.gc.kubelet_config#module:flag_files), O(kubenode.gc.kubelet_config#module:config_dir)). An option set to
        V(null) counts as unset.
      - With C(settings), the desired KubeletConfiguration keys, the drift is computed too (the module in check mode with
        those settings), in RV(audit.kubelet_config_drift).
    type: dict
    default: {}
  runtime_config:
    description:
      - Options of M(kubenode.gc.runtime_config) for each runtime, under V(containerd) and V(crio); the one for the runtime the
        node runs (as its CRI reports it) is used. C(settings) there are the desired settings, for RV(audit.runtime_config_drift).
        O(kubenode.gc.runtime_config#module:runtime) and O(kubenode.gc.runtime_config#module:query_runtime) are set by this module.
    type: dict
    default: {}
  image_gc:
    description:
      - Options of M(kubenode.gc.image_gc) for the policy plan (for example C(inodes_high_threshold_percent), C(free_bytes_high),
        C(ledger_path)). Its thresholds and ages are not options here; they come from the node's policy
        (O(image_gc_overrides)).
    type: dict
    default: {}
  image_gc_overrides:
    description:
      - The playbook variables that override the node's own image GC policy (C(kubenode_gc_cleanup_high_threshold_percent),
        C(kubenode_gc_cleanup_low_threshold_percent), C(kubenode_gc_cleanup_image_min_age), C(kubenode_gc_cleanup_image_max_age));
        an unset one is V(null). Unset ones come from the node's effective kubelet configuration, else the kubelet's defaults,
        exactly as the kubenode.gc.image_gc_policy filter and the cleanup decide them.
    type: dict
    default: {}
  prune_min_age:
    description:
      - The O(kubenode.gc.image_gc#module:min_age) of the prune plan (every unused image); it shares the ledger and the lock
        with the policy plan.
    type: str
    default: 0s
  keep_images:
    description:
      - Images no plan may remove (O(kubenode.gc.image_gc#module:keep_images)); those the runtime does not pin are found with
        M(kubenode.gc.image_pin) in check mode, where the runtime can pin.
    type: list
    elements: str
    default: []
  remove_images:
    description:
      - Images to look for (O(kubenode.gc.image_gc#module:images) patterns, the cleanup's C(kubenode_gc_remove_images)) - the
        listed plan (M(kubenode.gc.image_gc) with O(kubenode.gc.image_gc#module:mode=listed) in check mode) says which of them
        are on the node, which the cleanup would remove, and which stay with the pods using them or the rule that keeps them.
      - Empty (the default) - no listed plan (RV(audit.image_listed) is V(null)).
    type: list
    elements: str
    default: []
  container_gc:
    description:
      - Options of M(kubenode.gc.container_gc) for its plan.
    type: dict
    default: {}
  disk_usage:
    description:
      - Options of M(kubenode.gc.disk_usage).
    type: dict
    default: {}
  kubelet_root_dir:
    description:
      - The kubelet's root directory, whose filesystem (nodefs) is measured for the kubelet's eviction thresholds.
    type: path
    default: /var/lib/kubelet
  gc_timer_unit:
    description:
      - The systemd timer unit of P(kubenode.gc.gc_timer#role); when it exists, its state file (C(gc-timer-state.json) next to
        the image ledger) is read.
    type: path
    default: /etc/systemd/system/kubenode-gc.timer
  detail:
    description:
      - V(full) returns each part as its module returns it.
      - V(summary) folds the lists that grow with the images, RV(kubenode.gc.cri_info#module:images) and both image GC plans'
        RV(kubenode.gc.image_gc#module:removed), into RV(audit.summary) (one short line per image) and leaves them out of those
        parts. On a node with 2,000 images this makes the result about a quarter of its size and costs the controller (and the
        job events an AWX or AAP job stores) much less; the kubenode.gc.audit playbook uses it.
    type: str
    choices: [full, summary]
    default: full
notes:
  - The module fails, with M(kubenode.gc.cri_info)'s sentence, only when the runtime cannot be read; RV(audit) then holds
    that part alone.
  - The parts' warnings are warned once each, prefixed with the part's name.
seealso:
  - module: kubenode.gc.cri_info
  - module: kubenode.gc.image_gc
  - module: kubenode.gc.disk_usage
"""

EXAMPLES = r"""
- name: Audit a node in one execution
  kubenode.gc.node_audit:
    kubelet_config:
      settings:
        imageGCHighThresholdPercent: 85
    runtime_config:
      containerd:
        settings:
          snapshotter: overlayfs
    image_gc_overrides:
      kubenode_gc_cleanup_high_threshold_percent: 80
    keep_images:
      - registry.k8s.io/pause:*
  register: audit

- name: Show the prune plan's reclaimable bytes
  ansible.builtin.debug:
    msg: "{{ audit.audit.image_gc_prune.removed | map(attribute='size') | sum }}"

- name: Audit a node with thousands of images, the image lists as one line per image
  kubenode.gc.node_audit:
    detail: summary
  register: audit

- name: Show the images the prune plan would remove
  ansible.builtin.debug:
    msg: "{{ audit.audit.summary.images | select('search', ' [a-z]*r[a-z]*$') | map('split', ' ') | map('first') }}"
"""

RETURN = r"""
rpc_calls:
  description: CRI calls made by all the parts together, per method (each part's own are in its result).
  returned: always
  type: dict
audit:
  description:
    - Each part's result, as a task registering that module would hold it (V(skipped) with a C(skip_reason) where a part did
      not run because the one it depends on failed; V(null) where it was not asked for).
  returned: always
  type: dict
  contains:
    cri_info:
      description: The M(kubenode.gc.cri_info) result (runtime, imagefs, images, containers).
      type: dict
      returned: always
    kubelet_config:
      description: The M(kubenode.gc.kubelet_config) result, read only.
      type: dict
      returned: when the runtime could be read
    kubelet_config_drift:
      description: The M(kubenode.gc.kubelet_config) result in check mode with the desired settings; V(null) without them.
      type: dict
      returned: when the runtime could be read
    runtime_config:
      description: The M(kubenode.gc.runtime_config) result for the runtime the node runs.
      type: dict
      returned: when the runtime could be read
    runtime_config_drift:
      description:
        - The M(kubenode.gc.runtime_config) result in check mode with the desired settings; V(null) without them.
        - Like RV(audit.runtime_config), it judges the files and command-line values of the runtime listening on the CRI socket
          (its C(/proc/<pid>/cmdline)), not the fallback layouts; it makes no CRI call of its own (RV(audit.runtime_config) has
          asked the runtime).
      type: dict
      returned: when the runtime could be read
    image_gc_policy:
      description: The M(kubenode.gc.image_gc) plan under the node's policy (check mode).
      type: dict
      returned: when the runtime could be read
    image_gc_prune:
      description: The M(kubenode.gc.image_gc) plan in prune mode (check mode).
      type: dict
      returned: when the runtime could be read
    image_listed:
      description:
        - The M(kubenode.gc.image_gc) plan in listed mode (check mode) for O(remove_images) - RV(kubenode.gc.image_gc#module:removed)
          the listed images no container uses, RV(kubenode.gc.image_gc#module:listed_kept) the others with their pods or rule;
          V(null) without O(remove_images).
      type: dict
      returned: when the runtime could be read
    image_pin:
      description: The M(kubenode.gc.image_pin) result in check mode; V(null) without keep-listed images or where the runtime cannot pin.
      type: dict
      returned: when the runtime could be read
    container_gc:
      description: The M(kubenode.gc.container_gc) plan (check mode).
      type: dict
      returned: when the runtime could be read
    disk_usage:
      description: The M(kubenode.gc.disk_usage) result.
      type: dict
      returned: when the runtime could be read
    credential_records:
      description: The files under C(<kubelet root>/image_manager/pulled) (C(files), each with its C(path)); none when the directory is absent.
      type: dict
      returned: when the runtime could be read
    nodefs:
      description: The kubelet root filesystem as C(stat -f -c '%S %b %a %c %d') prints it (block size, blocks, available, inodes, free inodes).
      type: str
      returned: when the runtime could be read
      sample: "4096 2621440 1310720 655360 600000"
    gc_timer:
      description: Whether the GC timer unit exists (C(installed)) and its state file's text (C(state), empty when none).
      type: dict
      returned: when the runtime could be read
      sample: {"installed": false, "state": ""}
    summary:
      description:
        - With O(detail=summary), the images in place of cri_info's C(images) in RV(audit.cri_info) and of the C(removed)
          lists of RV(audit.image_gc_policy) and RV(audit.image_gc_prune), which are left out.
      type: dict
      returned: when O(detail=summary) and the runtime could be read
      contains:
        image_columns:
          description: The fields of each line, V([id, ref, size, marks]).
          type: list
          elements: str
        images:
          description:
            - One line per image, C(<id> <ref> <size> <marks>), separated by single spaces.
            - C(ref) names the image in reports, its first tag in sorted order, else C(<repository>:<none>) of its first
              digest, else C(<none>:<none>). C(size) is the runtime's size of the image in bytes, as in
              RV(kubenode.gc.cri_info#module:images).
            - C(marks) has one letter for each that holds, or is C(-). V(u) means in use, V(p) pinned and V(s) the sandbox
              image. V(g) means the plan under the node's policy removes it, and V(r) the prune plan. V(n) means
              M(kubenode.gc.cri_info) did not list it, because a plan saw an image pulled between the two reads.
          type: list
          elements: str
          sample: ["sha256:3f57d9401f8d42f986df300f0c69192fc41da28ccc8d797829467780db3dd741 registry.k8s.io/pause:3.10 320368 ps",
                   "sha256:9c4e4a7b1d2f0e5a6b3c8d7e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c docker.io/library/nginx:1.27 72411776 gr"]
"""

# first: each file imported from the module's zip is compiled once, not twice (see _zipimport)
from ansible_collections.kubenode.gc.plugins.module_utils import _zipimport  # noqa: F401  pylint: disable=unused-import
from ansible.module_utils.basic import AnsibleModule

from ansible_collections.kubenode.gc.plugins.module_utils.node._node_audit import ARGUMENT_SPEC, execute


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    execute(module)


if __name__ == "__main__":
    main()
