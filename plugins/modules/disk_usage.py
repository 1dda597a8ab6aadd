#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: disk_usage
short_description: Attribute every used byte of a node's image filesystem to what holds it, including what the CRI cannot see
version_added: 0.1.0
description:
  - Reads the used bytes of the image filesystem (C(statvfs) of the mountpoint the runtime reports in C(ImageFsInfo), blocks
    minus free blocks) and attributes them to disjoint categories, each with its largest objects.
  - "On containerd the categories come from containerd's own API in every namespace (images, content, ingests, snapshots of
    every snapshotter containerd runs, as its introspection API lists them, leases, containers, sandboxes), following the
    references containerd's garbage collector of the running release line follows (the model M(kubenode.gc.storage_gc)
    describes: back references from 2.2, conditional references from 2.3; a version of another line gets the newest line's
    rules and a warning), so every byte counts once, in the first category that claims it, in this order:
    V(unpacked_layer_blobs), V(k8s_images), V(other_namespace_images), V(writable_layers), V(leased),
    V(unreferenced_snapshots); V(stale_ingests) and V(container_logs) are separate files."
  - Sizes come from the runtime's APIs (content sizes, C(snapshots.Usage) of snapshots, CRI C(ListContainerStats) for the
    writable layers of the CRI's containers), never from walking the content store. Only the containers' log directories
    and the pod volume directories are walked, at most O(walk_limit) entries in all.
  - The size of a committed overlayfs or native snapshot is the one containerd stored when it was committed, and the one
    it answers every later C(snapshots.Usage) with; it is asked once and kept on the node (see the notes on
    V(/var/cache/kubenode-gc)), so later runs ask only for the other snapshots and RV(rpc_calls) counts fewer calls.
  - On cri-o it reports what the CRI shows (images with the sizes cri-o gives, writable layers) and the logs;
    RV(not_visible) names the categories it cannot see there, which then count in V(unaccounted).
  - "On Docker Engine (cri-dockerd, CRI runtime name V(docker)) it attributes the used bytes of dockerd's data root (the image
    filesystem cri-dockerd reports) from the Engine API's C(GET /system/df), on the engine the running cri-dockerd's
    C(--docker-endpoint) names (else C(DOCKER_HOST), else C(unix:///var/run/docker.sock)), used only when its data root is
    that image filesystem: V(k8s_images), V(writable_layers), V(non_k8s_containers), V(container_logs), V(volumes),
    V(build_cache) and V(unaccounted) (the containerd categories are absent). Layers shared between images count once.
    It does not use C(ListContainerStats), which cri-dockerd answers without a container's writable layer until its stats
    cache has seen the container."
author:
  - kubenode.gc contributors (@kubenode)
extends_documentation_fragment:
  - kubenode.gc.node_cache
  - kubenode.gc.cri
  - kubenode.gc.cri.ATTRIBUTES_READ_ONLY
  - kubenode.gc.cri.ACTIONGROUP_CRI
options:
  pod_logs_dir:
    description:
      - Where to look for pod logs the CRI gives no log path for (C(<namespace>_<pod>_<uid>/<container>/<n>.log)), for
        example those of removed containers. The logs of every container the runtime knows are found where it writes them
        (its log path, wherever the kubelet's C(podLogsDir) puts it; on containerd read from containerd's own container
        records, on cri-o from C(ContainerStatus)). Their bytes count in V(container_logs) of the filesystem they are on.
    type: path
    default: /var/log/pods
  kubelet_root_dir:
    description:
      - The kubelet's root directory. When it is on another filesystem than the image filesystem, RV(nodefs) attributes that
        filesystem too (pod volumes under C(pods/<uid>/volumes), container logs, unaccounted).
    type: path
    default: /var/lib/kubelet
  walk_limit:
    description:
      - The most directory entries the walks of the pod log and pod volume directories visit in one run. A walk that reaches
        it stops, says so in RV(walks_stopped_early) and a warning, and the rest of its bytes count as unaccounted.
    type: int
    default: 200000
notes:
  - containerd serves its own API on the CRI socket; the module needs no C(ctr) and runs no subprocess.
  - V(unaccounted) is what C(statvfs) says is used minus every category; it holds filesystem metadata, containerd's own
    database and files no API reports (for example snapshot directories containerd lost track of). It can be slightly
    negative when a category was measured in a moment other files were removed.
seealso:
  - module: kubenode.gc.storage_gc
  - module: kubenode.gc.cri_info
"""

EXAMPLES = r"""
- name: Where do the bytes of the image filesystem go?
  kubenode.gc.disk_usage:
  become: true
  register: usage

- name: Show the categories, largest first
  ansible.builtin.debug:
    msg: "{{ usage.categories | dict2items | rejectattr('value', 'none') | sort(attribute='value.bytes', reverse=true)
             | map(attribute='key') | list }}"
"""

RETURN = r"""
runtime:
  description: The runtime's name, version and endpoint.
  returned: always
  type: dict
  sample: {"name": "containerd", "version": "1.7.24", "endpoint": "unix:///run/containerd/containerd.sock"}
mountpoint:
  description: The image filesystem's mountpoint, as the runtime reports it.
  returned: success
  type: str
used_bytes:
  description: Bytes in use on the image filesystem (C(statvfs), blocks minus free blocks, times the fragment size).
  returned: success
  type: int
categories:
  description:
    - "Category name to C({bytes, objects}): C(objects) are the largest objects behind it (at most 10), largest first, each
      with C(namespace) (containerd's namespace; the pod's namespace for writable layers and logs), C(id) and/or C(name), and
      C(bytes)."
    - V(k8s_images) are the images of containerd's C(k8s.io) namespace (the CRI's), their blobs and unpacked snapshots; a blob
      shared with another namespace counts here. An image object's C(id) is its target (manifest or index) digest and its
      C(name) its first name that is not a digest; a blob or layer shared by several images counts for the first by name.
    - V(unpacked_layer_blobs) are the compressed layer blobs of the C(k8s.io) images whose layers are all unpacked in the
      snapshotters the CRI uses, the second copy of those layers, which M(kubenode.gc.storage_gc) with
      O(kubenode.gc.storage_gc#module:discard_unpacked_layers) frees (the module's description says which images count).
      Only blobs that would then go count (not one another image, namespace, lease or label still needs). Each object is a
      blob, with C(id) its digest, C(bytes), and C(images), the names of the images whose manifests name it. These bytes are not
      in V(k8s_images). V(0) on cri-o, which keeps no compressed copy of a layer.
    - V(writable_layers) are the containers' writable layers in every namespace; for the CRI's containers as CRI
      C(ListContainerStats) reports them, for the others (C(ctr), C(nerdctl), pod sandboxes) their snapshot's usage. The
      CRI's are empty, with a warning, when the runtime reports them on a separate container filesystem (cri-o with C(imagestore)).
    - V(container_logs) are the containers' log directories on this filesystem, per pod (C(id) V(<namespace>_<pod>_<uid>)).
    - V(stale_ingests) are partial downloads (content ingests, one per namespace that holds the ref, C(age_seconds) since
      they began, C(idle_seconds) since their last write), counted here even when a lease holds them.
    - V(leased) are blobs and snapshots kept only by leases, per lease with C(expires) (its C(containerd.io/gc.expire)
      label), C(expired) and C(age_seconds).
    - V(unreferenced_snapshots) are the snapshots and blobs (C(kind) V(snapshot) with its C(snapshotter), or V(content)) no
      image, container or lease references. First those a C(containerd.io/gc.root) label (from containerd 2.2, any label key
      that starts so) keeps (C(gc_root=true), with what
      they reference), which containerd's GC keeps for ever and M(kubenode.gc.storage_gc) releases only with
      O(kubenode.gc.storage_gc#module:release_gc_roots); then those nothing keeps (C(gc_root=false)), which containerd's next
      garbage collection removes. Each with C(age_seconds) since it was created.
    - V(unaccounted) is RV(used_bytes) minus all of the above.
    - A category the module cannot see on this runtime (see RV(not_visible)) is V(null).
    - "On Docker Engine the categories are these instead (disjoint, adding up to RV(used_bytes)): V(k8s_images), every image
      of the engine (the CRI lists them all) with their layers once (Docker's C(LayersSize)); an image object has C(id),
      C(name) (its first tag), C(bytes) (what only it holds), C(shared_bytes) (layers it shares with other images) and
      C(containers) (how many use it). V(writable_layers), the writable layers of the containers the kubelet created
      (their C(io.kubernetes.*) labels: pod containers and sandboxes), each with C(id), C(name) (Docker's), C(namespace) and
      C(pod). V(non_k8s_containers), the writable layers of every other container (C(docker run), compose, CI jobs), each
      with C(id), C(name), C(image) and C(state) (V(running), V(created), V(exited) or V(unknown)). V(container_logs),
      Docker's json-file logs in the data root (C(containers/<id>/<id>-json.log*), where the CRI's log paths link to),
      per container (C(id), C(name), C(namespace), C(kubernetes)), plus files of their own in the kubelet's pod log
      directories on that filesystem. V(volumes), the engine's volumes (C(name), C(bytes), C(in_use) - a container, in any
      state, references it - C(anonymous) and C(driver)). V(build_cache), BuildKit's cache records no image shares (C(id),
      C(type), C(bytes), C(in_use), C(last_used)), as C(docker system df) counts them; a record an image shares is that
      image's layer, in V(k8s_images). V(unaccounted), Docker's own metadata, its containerd's files and anything else on
      that filesystem."
  returned: success
  type: dict
  sample:
    k8s_images: {"bytes": 1048576000, "objects": [{"namespace": "k8s.io", "name": "docker.io/library/nginx:1.27", "id": "sha256:...",
                                                    "bytes": 73400320}]}
    unaccounted: {"bytes": 1048576, "objects": []}
nodefs:
  description:
    - "The kubelet root filesystem when it is another filesystem than the image filesystem, else V(null):
      C(mountpoint), C(used_bytes) and C(categories) V(pod_volumes) (per pod uid), V(container_logs) and V(unaccounted)."
  returned: success
  type: dict
not_visible:
  description: The categories this runtime does not let the module see (cri-o has no namespaces, ingests or leases; empty on Docker Engine).
  returned: success
  type: list
  elements: str
walks_stopped_early:
  description: Directories whose walk stopped at O(walk_limit).
  returned: success
  type: list
  elements: str
elapsed_seconds:
  description: Seconds the module spent reading and attributing.
  returned: success
  type: float
rpc_calls:
  description: How many calls of each method the module made (containerd's own API as C(containerd.<service>.<Method>), Docker's
    Engine API as C(docker.<Operation>)).
  returned: always
  type: dict
"""

# first: each file imported from the module's zip is compiled once, not twice (see _zipimport)
from ansible_collections.kubenode.gc.plugins.module_utils import _zipimport  # noqa: F401  pylint: disable=unused-import
from ansible.module_utils.basic import AnsibleModule

from ansible_collections.kubenode.gc.plugins.module_utils._common import execute
from ansible_collections.kubenode.gc.plugins.module_utils.cri._cri_backend import cri_client
from ansible_collections.kubenode.gc.plugins.module_utils.storage._disk_usage import ARGUMENT_SPEC, options, run


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    execute(module, options, run, cri_client)


if __name__ == "__main__":
    main()
