#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: node_cleanup
short_description: One node's part of a kubenode.gc.cleanup run, in one execution
version_added: 0.1.0
description:
  - Does on the node, in one execution, what the cleanup playbook did as a dozen tasks, in the same order
    (docs/guarantees.md describes the cleanup's promises; this module keeps them).
  - Reads the runtime (M(kubenode.gc.cri_info)). Completes the history records of interrupted runs in O(history_dir) (the
    images their node had that are gone now), except in check mode.
  - Reads the node's kubelet configuration (M(kubenode.gc.kubelet_config)) and decides its image GC policy as the
    kubenode.gc.image_gc_policy filter does (O(image_gc_overrides), else the node's configuration, else the kubelet's
    defaults). A node below its high threshold (and its inode and byte targets, when set) is skipped when
    O(only_over_threshold) and O(image_mode=threshold), unless O(remove_images) is set; then only its threshold image GC
    is skipped (RV(image_gc_skipped) says why).
  - Otherwise writes a provisional history record (what an interrupted run leaves), then runs, each with its module's own
    code and options, M(kubenode.gc.image_pin) (O(pin)), M(kubenode.gc.container_gc) (O(containers)),
    the listed removal (M(kubenode.gc.image_gc) with O(kubenode.gc.image_gc#module:mode=listed), O(remove_images)),
    M(kubenode.gc.image_gc) and M(kubenode.gc.storage_gc) (O(storage)); a step that fails, the pin included, ends the run
    (the steps after it do not run) and the module fails with its sentence, returning what every step did.
  - The final history record is the playbook's to write (RV(record_file)); in check mode nothing is written.
author:
  - kubenode.gc contributors (@kubenode)
extends_documentation_fragment:
  - kubenode.gc.node_cache
  - kubenode.gc.cri
  - kubenode.gc.cri.ACTIONGROUP_CRI
attributes:
  check_mode:
    description: Can run in check mode and return changed status prediction without modifying the target.
    support: full
    details:
      - Returns every step's plan and writes nothing (no history record; interrupted runs' records are completed by the next
        real run). Image GC's real run may stop earlier than its plan when the measured usage reaches the low threshold
        (M(kubenode.gc.image_gc)).
      - The listed removal's plan counts the containers container GC plans to remove as gone, and the threshold image GC's
        plan the images the listed removal plans to remove, as the real run finds them; so the listed removal's plan is
        what the real run removes.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check mode), when in diff mode.
    support: none
  idempotent:
    description: When run twice in a row outside check mode, with the same arguments, the second run indicates no change.
    support: partial
    details:
      - A second run removes nothing more, but writes a new history record when the node is still over its high threshold.
options:
  host:
    description: The node's name in the history records (the inventory hostname).
    type: str
    required: true
  history_dir:
    description:
      - Where the node's history records are (created with mode C(0700)). A directory whose path goes through a directory or
        symbolic link another user owns (or a directory group or others may write) is refused with one sentence naming it,
        and nothing is written.
    type: path
    default: /var/lib/kubenode-gc/history
  kubelet_config:
    description: Options of M(kubenode.gc.kubelet_config) for reading the node's kubelet configuration (for example C(path)).
    type: dict
    default: {}
  image_gc_overrides:
    description:
      - The playbook variables that override the node's own policy (C(kubenode_gc_cleanup_high_threshold_percent),
        C(kubenode_gc_cleanup_low_threshold_percent), C(kubenode_gc_cleanup_image_min_age),
        C(kubenode_gc_cleanup_image_max_age)); an unset one is V(null).
    type: dict
    default: {}
  image_mode:
    description: O(kubenode.gc.image_gc#module:mode).
    type: str
    choices: [threshold, prune]
    default: threshold
  only_over_threshold:
    description: Skip a node below its high threshold (and below its inode and byte targets, when set), unless O(image_mode=prune).
    type: bool
    default: true
  image_gc:
    description:
      - Options of M(kubenode.gc.image_gc) (for example C(inodes_high_threshold_percent), C(free_bytes_high), C(ledger_path));
        its thresholds and ages come from the node's policy. An option set to V(null) or an empty string counts as unset.
    type: dict
    default: {}
  keep_images:
    description: Images never to remove, for image GC, storage GC and the pins.
    type: list
    elements: str
    default: []
  remove_images:
    description:
      - Images to remove from the node whatever its usage, after container GC and before the threshold image GC - the
        patterns of O(kubenode.gc.image_gc#module:images) (written like O(keep_images)), removed with
        O(kubenode.gc.image_gc#module:mode=listed). An image a container still uses, the sandbox image, pinned and
        keep-listed images stay (RV(image_listed) says why and which pods).
      - Empty (the default) - no listed removal.
    type: list
    elements: str
    default: []
  pin:
    description: Before removing anything, pin the keep-listed images with M(kubenode.gc.image_pin).
    type: bool
    default: false
  containers:
    description: Run container GC (M(kubenode.gc.container_gc)) before image GC.
    type: bool
    default: true
  container_gc:
    description: Options of M(kubenode.gc.container_gc).
    type: dict
    default: {}
  storage:
    description: After image GC, run M(kubenode.gc.storage_gc).
    type: bool
    default: false
  storage_gc:
    description: Options of M(kubenode.gc.storage_gc) (C(namespaces), C(ingest_max_age), C(lease_max_age), C(release_gc_roots)).
    type: dict
    default: {}
notes:
  - Each step takes the node lock of the GC modules in turn, as the separate tasks did.
seealso:
  - module: kubenode.gc.image_gc
  - module: kubenode.gc.container_gc
  - module: kubenode.gc.storage_gc
"""

EXAMPLES = r"""
- name: Clean a node over its high threshold, with its own kubelet policy
  kubenode.gc.node_cleanup:
    host: "{{ inventory_hostname }}"
    keep_images:
      - registry.k8s.io/pause:*
  register: cleanup

- name: Say what went
  ansible.builtin.debug:
    msg: "{{ cleanup.status }}: {{ cleanup.image_gc.removed | default([]) | map(attribute='repo_tags') | list }}"
"""

RETURN = r"""
status:
  description:
    - V(cleaned) (V(planned) in check mode), V(skipped) (below its thresholds, RV(reason) says why), V(unreadable) (the runtime
      could not be read), V(policy_error) (the node's policy is wrong; nothing was cleaned) or V(failed) (a step failed).
  returned: always
  type: str
reason:
  description: Why a skipped node was skipped, one sentence naming its thresholds and where they came from.
  returned: when skipped
  type: str
usage_before:
  description: The image filesystem's usage percent before (the kubelet's formula).
  returned: when the runtime could be read
  type: int
policy:
  description: The image GC policy used (C(high_threshold_percent), C(low_threshold_percent), C(min_age), C(max_age)) and
    where each value came from (C(sources), C(described)).
  returned: when the runtime could be read and the policy is valid
  type: dict
record_file:
  description: The history record of this run (the provisional one was written there, except in check mode).
  returned: when the node was not skipped
  type: str
rpc_calls:
  description: CRI calls made by the pin and GC steps together, per method (each step's own are in its result).
  returned: always
  type: dict
interrupted_records:
  description: The history records of interrupted runs this run completed.
  returned: always
  type: list
  elements: str
image_pin:
  description: The M(kubenode.gc.image_pin) result, V(null) when it did not run.
  returned: always
  type: dict
container_gc:
  description: The M(kubenode.gc.container_gc) result, V(null) when it did not run.
  returned: always
  type: dict
image_listed:
  description: The M(kubenode.gc.image_gc) result of the listed removal (O(remove_images)), V(null) when it did not run.
  returned: always
  type: dict
image_gc:
  description: The M(kubenode.gc.image_gc) result, V(null) when it did not run.
  returned: always
  type: dict
image_gc_skipped:
  description: Why the threshold image GC did not run on a node below its thresholds that the listed removal cleaned.
  returned: when O(remove_images) is set and the node is below its thresholds
  type: str
storage_gc:
  description: The M(kubenode.gc.storage_gc) result, V(null) when it did not run.
  returned: always
  type: dict
"""

# first: each file imported from the module's zip is compiled once, not twice (see _zipimport)
from ansible_collections.kubenode.gc.plugins.module_utils import _zipimport  # noqa: F401  pylint: disable=unused-import
from ansible.module_utils.basic import AnsibleModule

from ansible_collections.kubenode.gc.plugins.module_utils.node._node_cleanup import ARGUMENT_SPEC, execute


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    execute(module)


if __name__ == "__main__":
    main()
