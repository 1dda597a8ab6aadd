#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: cri_info
short_description: Read a node's container runtime, image filesystems, images, containers and pod sandboxes over the CRI
version_added: 0.1.0
description:
  - Reads, through the Kubernetes CRI (C(runtime.v1)) API of containerd, cri-o or cri-dockerd, what the kubelet's
    garbage collectors look at on a node.
  - Each list is read with one CRI call; no per-image or per-container status calls are made.
  - Image filesystem capacity, availability and inodes come from C(statvfs) of the mountpoint the runtime reports,
    as the kubelet's cAdvisor does (containerd 1.6 reports only the bytes it uses).
author:
  - kubenode.gc contributors (@kubenode)
extends_documentation_fragment:
  - kubenode.gc.node_cache
  - kubenode.gc.cri
  - kubenode.gc.cri.ATTRIBUTES_READ_ONLY
  - kubenode.gc.cri.ACTIONGROUP_CRI
options:
  gather:
    description:
      - What to read. Images need the container list (to tell which are in use) and the runtime status (to tell the
        sandbox image), so those are read whenever V(images) is asked for, but returned only when asked for.
    type: list
    elements: str
    choices: [runtime, imagefs, images, containers, sandboxes]
    default: [runtime, imagefs, images, containers, sandboxes]
seealso:
  - name: Kubernetes CRI API
    description: The protobuf definition of the Container Runtime Interface.
    link: https://github.com/kubernetes/cri-api/blob/master/pkg/apis/runtime/v1/api.proto
"""

EXAMPLES = r"""
- name: Read everything the runtime knows
  kubenode.gc.cri_info:
  become: true
  register: cri

- name: Show image filesystem usage as the kubelet computes it
  ansible.builtin.debug:
    msg: "{{ cri.imagefs | map(attribute='usage_percent') | list }}"

- name: Read only the images of a cri-o node
  kubenode.gc.cri_info:
    cri_endpoint: unix:///run/crio/crio.sock
    gather:
      - images
  become: true
  register: crio_images

- name: List images no container references
  ansible.builtin.debug:
    msg: "{{ crio_images.images | rejectattr('in_use') | map(attribute='repo_tags') | list }}"
"""

RETURN = r"""
runtime:
  description: The container runtime answering on the endpoint.
  returned: V(runtime) in O(gather)
  type: dict
  contains:
    name:
      description: Runtime name from CRI C(Version).
      type: str
      sample: containerd
    version:
      description: Runtime version from CRI C(Version).
      type: str
      sample: 1.6.20~ds1
    api_version:
      description: CRI API version the runtime speaks.
      type: str
      sample: v1
    endpoint:
      description: The endpoint used, in C(unix:///path) form.
      type: str
      sample: unix:///run/containerd/containerd.sock
    sandbox_image:
      description:
        - The sandbox (pause) image the runtime is configured with. It comes from the runtime's verbose CRI C(Status)
          (containerd 1.x and cri-o name it there); else, as containerd 2.x no longer does, from the verbose
          C(PodSandboxStatus) of the newest pod sandbox (one more call); else from the config file the containerd
          listening on the endpoint was started with (C(--config), by default C(/etc/containerd/config.toml);
          version 3 C(pinned_images.sandbox), version 2 C(sandbox_image)). V(null) when none of them says.
      type: str
      sample: registry.k8s.io/pause:3.6
imagefs:
  description:
    - The filesystems the runtime reports for images (RV(imagefs[].kind=image)) and, on runtimes with a split image
      filesystem, for containers (RV(imagefs[].kind=container)).
  returned: V(imagefs) in O(gather)
  type: list
  elements: dict
  contains:
    kind:
      description: V(image) or V(container).
      type: str
      sample: image
    mountpoint:
      description: The mountpoint the runtime reports.
      type: str
      sample: /var/lib/containerd/io.containerd.snapshotter.v1.overlayfs
    used_bytes:
      description: Bytes the runtime says it uses there; V(null) when it does not say.
      type: int
      sample: 1073741824
    capacity_bytes:
      description: Filesystem size from C(statvfs); V(null) when the mountpoint cannot be read from the module.
      type: int
      sample: 53687091200
    available_bytes:
      description: Bytes available to unprivileged users (C(f_bavail)), as the kubelet counts them.
      type: int
      sample: 21474836480
    inodes_total:
      description: Inodes of the filesystem.
      type: int
      sample: 3276800
    inodes_free:
      description: Free inodes.
      type: int
      sample: 3000000
    inodes_used:
      description: Used inodes (total minus free).
      type: int
      sample: 276800
    usage_percent:
      description:
        - Usage as the kubelet's image GC computes it, C(100 - floor(available * 100 / capacity)), so it rounds up.
          Compare it with C(imageGCHighThresholdPercent).
      type: int
      sample: 60
split_imagefs:
  description: Whether the runtime reports a container filesystem on a different device than its image filesystem.
  returned: V(imagefs) in O(gather)
  type: bool
  sample: false
images:
  description: Every image the runtime lists.
  returned: V(images) in O(gather)
  type: list
  elements: dict
  contains:
    id:
      description: Image id.
      type: str
      sample: sha256:0b91269eb3cd9f42007139daa49bc24b48dc849e570f70580eae3fdb3e1a07b0
    repo_tags:
      description: Tags, in full (C(docker.io/library/busybox:1.36)) also where the runtime lists docker.io's images by their
        short names (Docker Engine); Docker's C(<none>:<none>) placeholder is no tag.
      type: list
      elements: str
      sample: [registry.k8s.io/coredns/coredns:v1.11.1]
    repo_digests:
      description: Repository digests, in full as the tags.
      type: list
      elements: str
      sample: [registry.k8s.io/coredns/coredns@sha256:1eeb4c7316bacb1d4c8ead65571cd92dd21e27359f0d4917f1a5822a73b75db1]
    size:
      description: Size in bytes as the runtime reports it (layers shared with other images are counted in each).
      type: int
      sample: 18182961
    pinned:
      description: Whether the runtime marks the image pinned (never garbage-collected).
      type: bool
      sample: false
    sandbox_image:
      description: Whether this is the runtime's sandbox (pause) image, pinned or not.
      type: bool
      sample: false
    in_use:
      description:
        - Whether any container, in any state, references the image by id, image ref, tag or repo digest.
      type: bool
      sample: true
    used_by:
      description: Ids of the containers that reference the image.
      type: list
      elements: str
      sample: [3378a314c948198cadd0c15759a8f895b670a9dc74bad51678907cc320adcbbb]
containers:
  description: Every container the runtime lists, in any state.
  returned: V(containers) in O(gather)
  type: list
  elements: dict
  contains:
    id:
      description: Container id.
      type: str
      sample: 3378a314c948198cadd0c15759a8f895b670a9dc74bad51678907cc320adcbbb
    name:
      description: Container name (the name in the pod spec).
      type: str
      sample: coredns
    attempt:
      description: Restart attempt number.
      type: int
      sample: 0
    pod_uid:
      description: UID of the pod, from the kubelet's labels or the sandbox metadata.
      type: str
      sample: 8c3a4c5e-1d8e-4b36-9f87-0f2b1b7f6c11
    pod_name:
      description: Name of the pod.
      type: str
      sample: coredns-5dd5756b68-x2v9q
    pod_namespace:
      description: Namespace of the pod.
      type: str
      sample: kube-system
    sandbox_id:
      description: Id of the pod sandbox the container belongs to.
      type: str
      sample: 5d3a89cbbef7a10454a1edd8af44b51ee4325881f79aadb4dd8f19855ac8344a
    state:
      description: V(created), V(running), V(exited) or V(unknown).
      type: str
      sample: running
    created_at:
      description: Creation time, RFC 3339 in UTC.
      type: str
      sample: "2026-11-22T04:01:40.368168343Z"
    image_id:
      description:
        - The image id the container runs, as the kubelet reads it (CRI C(image_id), or C(image_ref) when the runtime
          does not fill C(image_id)).
      type: str
      sample: sha256:0b91269eb3cd9f42007139daa49bc24b48dc849e570f70580eae3fdb3e1a07b0
    image_ref:
      description: The CRI C(image_ref) of the container.
      type: str
      sample: sha256:0b91269eb3cd9f42007139daa49bc24b48dc849e570f70580eae3fdb3e1a07b0
sandboxes:
  description: Every pod sandbox the runtime lists.
  returned: V(sandboxes) in O(gather)
  type: list
  elements: dict
  contains:
    id:
      description: Sandbox id.
      type: str
      sample: 5d3a89cbbef7a10454a1edd8af44b51ee4325881f79aadb4dd8f19855ac8344a
    name:
      description: Pod name.
      type: str
      sample: coredns-5dd5756b68-x2v9q
    namespace:
      description: Pod namespace.
      type: str
      sample: kube-system
    uid:
      description: Pod UID.
      type: str
      sample: 8c3a4c5e-1d8e-4b36-9f87-0f2b1b7f6c11
    attempt:
      description: Sandbox attempt number.
      type: int
      sample: 0
    state:
      description: V(ready) or V(notready).
      type: str
      sample: ready
    created_at:
      description: Creation time, RFC 3339 in UTC.
      type: str
      sample: "2026-11-22T04:01:40.290130239Z"
rpc_calls:
  description: How many CRI calls of each method the module made.
  returned: always
  type: dict
  sample: {"Version": 1, "Status": 1, "ImageFsInfo": 1, "ListImages": 1, "ListContainers": 1, "ListPodSandbox": 1}
"""

# first: each file imported from the module's zip is compiled once, not twice (see _zipimport)
from ansible_collections.kubenode.gc.plugins.module_utils import _zipimport  # noqa: F401  pylint: disable=unused-import
from ansible.module_utils.basic import AnsibleModule

from ansible_collections.kubenode.gc.plugins.module_utils._common import execute
from ansible_collections.kubenode.gc.plugins.module_utils.cri._cri_backend import cri_client
from ansible_collections.kubenode.gc.plugins.module_utils.cri._cri_info import ARGUMENT_SPEC, options, run


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    execute(module, options, run, cri_client)


if __name__ == "__main__":
    main()
