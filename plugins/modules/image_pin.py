#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: image_pin
short_description: Pin container images in the runtime so that the kubelet's own image GC never removes them
version_added: 0.1.0
description:
  - Makes the images matching O(images) pinned in the container runtime, so that the CRI reports them C(pinned) and the
    kubelet's image garbage collector (and M(kubenode.gc.image_gc)) never removes them (KEP-2040). O(images) of
    M(kubenode.gc.image_gc) only protects images from this collection's runs; pinning protects them from the kubelet too.
  - B(containerd 1.7.3 and later, 2.x) - sets the label C(io.cri-containerd.pinned=pinned) on every containerd image record
    of a matching image (its tags, repo digests and id) through containerd's own images API
    (C(containerd.services.images.v1)) in the C(k8s.io) namespace, on the same socket as the CRI. It also sets the label
    C(io.kubenode.gc/pinned=true), the record of the pins this module made.
  - B(cri-o) - cri-o has no API to pin. The module writes C([crio.image] pinned_images) into the drop-in O(crio_dropin)
    (the exact tags of the matching images), then sends C(SIGHUP) to the cri-o process listening on the endpoint,
    which reloads C(pinned_images). TOML arrays replace each other across cri-o's config files, so the drop-in carries
    over the C(pinned_images) that C(crio.conf) and the other drop-ins set; the names this module pinned are recorded in
    a comment line of the drop-in.
  - B(containerd before 1.7.3) (1.6) cannot pin, its CRI never reports images pinned. The module then returns
    RV(supported=false) with one warning and changes nothing, so a mixed fleet does not fail. Other runtimes likewise.
  - An image the runtime already reports pinned (by its configuration, such as the sandbox image, or by a label someone
    else set) is left alone and not listed in RV(pinned).
  - Takes the node lock of M(kubenode.gc.image_gc) and M(kubenode.gc.container_gc) (see O(lock_timeout)) for real runs,
    so it never races a GC run on the same runtime endpoint.
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
      - Returns the exact plan in RV(pinned) and RV(unpinned) and changes nothing (no label, no drop-in, no reload).
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check mode), when in diff mode.
    support: full
    details:
      - Before and after lists of the pinned images (their tags, or the id of an untagged image).
  idempotent:
    description: When run twice in a row outside check mode, with the same arguments, the second run indicates no change.
    support: full
options:
  images:
    description:
      - The images to pin, with the syntax of O(kubenode.gc.image_gc#module:keep_images). Each entry is a full image id
        (V(sha256:...)), a short id (at least 12 hex digits), or a glob over tags and repo digests such as
        V(registry.k8s.io/*) or V(docker.io/library/busybox:1.36). Short names are matched in their normalised form too.
      - Only images present on the node are pinned; on cri-o the drop-in names their exact tags, so an image pulled
        later under a matching name is pinned by the next run.
    type: list
    elements: str
    default: []
  exclusive:
    description:
      - Also unpin the images this module pinned earlier that O(images) no longer matches. Only pins made by this module
        are removed (containerd - records carrying C(io.kubenode.gc/pinned=true); cri-o - the names recorded in
        O(crio_dropin)); pins set by the runtime's configuration or by anyone else stay.
      - On containerd an image stays pinned when another of its records carries a pinned label this module did not set.
    type: bool
    default: false
  crio_dropin:
    description:
      - cri-o only. The drop-in file holding the pins. By default C(99-kubenode-gc-pinned.conf) in the C(--config-dir) of
        the cri-o process listening on the endpoint (V(/etc/crio/crio.conf.d) when it names none); only a cri-o root runs
        from a root-owned executable is believed (and sent C(SIGHUP)).
      - Must be absolute and in a directory cri-o reads, after any drop-in that sets C(pinned_images) itself. A path through a
        directory or symbolic link another user owns (or a directory group or others may write) is refused with one
        sentence naming it, and nothing is written.
    type: path
  lock_timeout:
    description:
      - Seconds to wait for another kubenode.gc run on the same node and runtime endpoint to finish before failing.
        A finite number, 0 or more. The lock is the one of O(kubenode.gc.image_gc#module:lock_timeout).
    type: float
    default: 300
notes:
  - Labels on containerd - C(io.cri-containerd.pinned=pinned) (containerd's) and C(io.kubenode.gc/pinned=true) (this
    module's record). containerd applies label changes to its CRI image cache asynchronously; the module waits up to
    10 seconds until the CRI reports the new state, and warns if it does not.
  - containerd 2.x can also pin through its config (C([plugins."io.containerd.cri.v1.images".pinned_images])); that
    table is not managed by this module.
  - On cri-o the sandbox (pause) image is always pinned by cri-o itself.
seealso:
  - module: kubenode.gc.image_gc
  - name: KEP-2040 pinned images
    description: The CRI's pinned field, which the kubelet's image GC honours.
    link: https://github.com/kubernetes/enhancements/tree/master/keps/sig-node/2040-kubelet-cri
"""

EXAMPLES = r"""
- name: Pin the platform images so that the kubelet never removes them
  kubenode.gc.image_pin:
    images:
      - registry.k8s.io/*
      - "*/coredns:*"
  become: true

- name: Pin exactly this list; unpin what an earlier run pinned and the list no longer names
  kubenode.gc.image_pin:
    images: "{{ node_keep_images }}"
    exclusive: true
  become: true

- name: Show what would be pinned
  kubenode.gc.image_pin:
    images:
      - registry.k8s.io/*
  check_mode: true
  diff: true
  become: true
  register: pin_plan
"""

RETURN = r"""
supported:
  description: Whether the runtime can pin images (containerd 1.7.3 and later, cri-o). V(false) means nothing was done.
  returned: always
  type: bool
  sample: true
pinned:
  description: Images this run pinned (in check mode, would pin).
  returned: always
  type: list
  elements: dict
  contains:
    id:
      description: Image id.
      type: str
      sample: sha256:0b91269eb3cd9f42007139daa49bc24b48dc849e570f70580eae3fdb3e1a07b0
    repo_tags:
      description: Tags.
      type: list
      elements: str
      sample: [registry.k8s.io/coredns/coredns:v1.11.1]
unpinned:
  description: Images whose pins made by this module were removed because of O(exclusive) (in check mode, would be).
  returned: always
  type: list
  elements: dict
  contains:
    id:
      description: Image id.
      type: str
      sample: sha256:0b91269eb3cd9f42007139daa49bc24b48dc849e570f70580eae3fdb3e1a07b0
    repo_tags:
      description: Tags.
      type: list
      elements: str
      sample: [docker.io/library/busybox:1.36]
crio_dropin:
  description: The cri-o drop-in that holds the pins.
  returned: on cri-o
  type: str
  sample: /etc/crio/crio.conf.d/99-kubenode-gc-pinned.conf
rpc_calls:
  description: How many calls of each method the module made (containerd's images API as C(containerd.images.<Method>)).
  returned: always
  type: dict
  sample: {"Version": 1, "ListImages": 2, "containerd.images.List": 1, "containerd.images.Update": 2}
"""

# first: each file imported from the module's zip is compiled once, not twice (see _zipimport)
from ansible_collections.kubenode.gc.plugins.module_utils import _zipimport  # noqa: F401  pylint: disable=unused-import
from ansible.module_utils.basic import AnsibleModule

from ansible_collections.kubenode.gc.plugins.module_utils._common import execute
from ansible_collections.kubenode.gc.plugins.module_utils.cri._cri_backend import cri_client
from ansible_collections.kubenode.gc.plugins.module_utils.gc._image_pin import ARGUMENT_SPEC, options, run


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    execute(module, options, run, cri_client)


if __name__ == "__main__":
    main()
