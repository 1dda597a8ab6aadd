#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: storage_gc
short_description: Free the storage the CRI cannot see - containerd's roots, Docker Engine's build cache and unused volumes
version_added: 0.1.0
description:
  - Plans and, outside check mode, frees containerd storage that no CRI tool (the kubelet, C(crictl), M(kubenode.gc.image_gc))
    can see, through containerd's own gRPC API on the CRI socket (namespaces, images, content, snapshots, leases, containers,
    sandboxes), and measures the freed bytes with C(statvfs).
  - The module never deletes a blob or a snapshot itself. It removes only roots and references it chose (stale ingests, old
    leases, images of O(namespaces), with O(release_gc_roots) C(containerd.io/gc.root) labels, and with
    O(discard_unpacked_layers) the layer references of unpacked images' manifests), then runs containerd's synchronous garbage
    collection once, which frees whatever only those kept. containerd's collector is the single judge of what is referenced.
  - "The plan predicts that collection with a model of containerd's collector, the rules of the release line containerd runs
    (its version, from the CRI): C(metadata/gc.go) of 1.6 and 1.7, C(core/metadata/gc.go) of 2.0/2.1, 2.2 and 2.3. Its roots:
    every lease whose C(containerd.io/gc.expire) has not passed, with the blobs, snapshots, ingests and (2.x) images it holds
    (without their references when it is labelled C(containerd.io/gc.flat)); every image record (2.x: until its
    C(containerd.io/gc.expire)); every ingest with an expiry of its own that has not passed (see B(Ingests)); every blob and
    snapshot labelled C(containerd.io/gc.root) (from 2.2: with any label key that starts so); every container (its snapshot
    and labels); every sandbox record (1.7 and later: its labels). An image references its target blob, a snapshot its
    parent, an ingest the blob it expects, and any object what its C(containerd.io/gc.ref.content*),
    C(containerd.io/gc.ref.snapshot.<snapshotter>) and (2.x) C(containerd.io/gc.ref.image*) labels name, in its namespace.
    From 2.2 an object labelled C(containerd.io/gc.bref.container*), C(containerd.io/gc.bref.content*),
    C(containerd.io/gc.bref.image*) or C(containerd.io/gc.bref.snapshot.<snapshotter>) (a blob, a snapshot, a container, an
    expired image record: what containerd 2.3's transfer service writes for the extra names of an image pulled under several)
    is kept as long as the object it names is. From 2.3 a C(containerd.io/gc.cond.snapshot*) label of an image record or a
    blob (V(usedat<DURATION|KEY) or V(usedat>DURATION|KEY)) keeps that snapshot while the object is kept and the snapshot's
    C(containerd.io/gc.cond.value-usedat) time is younger or older than the duration. What no root reaches is collected."
  - Works on containerd 1.6, 1.7, 2.0, 2.1, 2.2 and 2.3. A version of another line gets the newest line's rules (an older
    1.x gets 1.6's), and a warning says so. It also works on Docker Engine through cri-dockerd (below). On cri-o it
    returns RV(supported=false) with one warning naming the safe procedure (drain the node, C(crio wipe)) and changes
    nothing.
  - "B(Docker Engine) (the runtime behind cri-dockerd, CRI runtime name V(docker)): the module talks to the engine the running
    cri-dockerd's C(--docker-endpoint) names (else C(DOCKER_HOST), else C(unix:///var/run/docker.sock)), and only when that
    engine's data root is the image filesystem cri-dockerd reports. It removes, through the Engine API only, never files:
    BuildKit's build cache records not used for longer than O(build_cache_max_age) and not in use (one C(POST /build/prune)
    per record, children before their parents, with the age as BuildKit's own C(until) filter, so a record used since the
    plan stays), and with O(remove_unused_volumes) the anonymous volumes no container references (C(DELETE /volumes/{name})
    without force, which the engine refuses for a volume a container uses). Named volumes are never removed (Docker's
    own C(volume prune) also removes unused named volumes on Docker 20.10, so it is not used). Images stay
    M(kubenode.gc.image_gc)'s job, and no container, inside Kubernetes or outside it, is touched. RV(removed) is confirmed
    from C(GET /system/df) after the removals. The containerd options (O(namespaces), O(keep_images), O(ingest_max_age),
    O(lease_max_age), O(release_gc_roots), O(discard_unpacked_layers)) do nothing there (a warning names those set, but
    O(keep_images) and O(ingest_max_age), which have values everywhere); O(build_cache_max_age) and O(remove_unused_volumes) do
    nothing on containerd, also with a warning."
  - "Object kinds, what containerd's own garbage collector already does with each, and why this module's action is safe:"
  - "B(Ingests) (partial downloads, C(content.ListStatuses), one per namespace that opened it): containerd's GC keeps an ingest
    as long as a lease holds it, or, outside a lease, until an expiry of its own, which containerd writes (24 hours ahead)
    only on an ingest opened outside any lease: an ingest opened in a lease goes at the next collection once that lease is
    gone (after an aborted pull). The module aborts (C(content.Abort)), in each namespace, the ingests not written to for
    longer than O(ingest_max_age) (their C(updated_at)): a live download writes continuously, so it is never one of them.
    containerd's API does not show an ingest's own expiry: the plan takes an ingest a lease holds (or held, when the plan
    deletes that lease) to have none, as every pull opens its ingests in a lease, and keeps an ingest no lease holds, as
    containerd does with an expiry; a warning names those, which containerd removes if they have none."
  - "B(Leases): a lease keeps every blob, snapshot, ingest and image it names; the GC removes a lease only when it runs
    after the lease's C(containerd.io/gc.expire) label has passed, and a lease without that label lives for ever (pulls
    hold one for 24 hours by default, containerd/containerd#4667). The module deletes leases whose expiry has passed (the GC
    would delete them at its next run anyway) and, with O(lease_max_age), leases created longer ago than that; what a lease
    held is then collected only if nothing else references it. It never deletes the lease containerd 2.x's CRI keeps for a
    pod sandbox that still exists (named after the sandbox, it holds the pod's image volumes)."
  - "B(Images of other namespaces) (moby, buildkit, default, ...): the GC keeps an image record and everything it references
    for ever; the kubelet sees only C(k8s.io). The module deletes the image records of O(namespaces) (never C(k8s.io)),
    except those O(keep_images) matches and those a container of that namespace was created from; their blobs and
    snapshots go only when nothing else references them (a blob shared with C(k8s.io) stays, a chain an image record's own
    C(containerd.io/gc.ref.*) labels name stays with that record)."
  - "B(Blobs and snapshots): the GC removes those no root reaches, in every namespace and snapshotter. One labelled
    C(containerd.io/gc.root) (what C(ctr snapshots prepare) and C(commit), builders and other tools leave) is a root: the
    GC keeps it, and what it references, for ever (from containerd 2.2, any label key that starts with
    C(containerd.io/gc.root) does the same). The module keeps those too, and reports them (M(kubenode.gc.disk_usage) lists
    them with C(gc_root) and their age); with O(release_gc_roots) it removes those labels (C(snapshots.Update),
    C(content.Update)) from those that nothing else references, so that the GC collects them. The active snapshot of every
    container, running or not, is referenced by its container, and an unpack in progress holds its snapshots through the
    pull's lease, so neither is ever collected."
  - "B(Compressed layer blobs of unpacked images) (O(discard_unpacked_layers)): a pull keeps each layer twice, the compressed
    blob the registry served and its unpacked snapshot, and the image's manifest references the blobs
    (C(containerd.io/gc.ref.content.l.<n>) labels) for as long as the image is kept. containerd's own C(discard_unpacked_layers)
    setting pulls without those labels (its CRI's C(ChildGCLabelsFilterLayers), the same in 1.6, 1.7 and 2.x), so the GC frees
    the blobs once unpacked; it applies to new pulls only. This option does the same for the images already on the node: it
    removes those labels from the manifests (C(content.Update) with a field mask naming only them) and the GC frees the blobs.
    The manifests, the configs and the snapshots stay, so the CRI lists the same images with the same ids and sizes, and
    containers start from them as before."
  - "An image of C(k8s.io) counts as unpacked when every manifest it reaches (an index's too) that names layers has a config
    labelled C(containerd.io/gc.ref.snapshot.<snapshotter>), for every snapshotter the CRI unpacks into (its default one,
    from its CRI status on 1.x and from the image filesystems it reports on 2.x, and each runtime handler's), naming a
    committed snapshot whose chain of committed parents is as deep as the manifest's layers: the label containerd's unpacker writes once every layer is
    in, and that keeps the snapshots as long as the image. Never touched: an image not unpacked so (fetched without unpack,
    imported with C(--no-unpack), unpacked in another snapshotter only, an index with a manifest that is not); a manifest such
    an image also reaches; a blob that something else still references (another image's manifest, another namespace, a lease,
    a container or sandbox label), with the reference to it; any namespace but C(k8s.io). A label naming a blob that is absent
    (after a pull again, containerd labels the layers again though it downloads nothing) is left: nothing to free."
  - "What no longer works for such an image, as after containerd's own C(discard_unpacked_layers): exporting it
    (C(ctr images export), C(nerdctl save)) or pushing it from the node, and unpacking it into another snapshotter, since its
    compressed layers are gone. Pulling it again works (nothing is downloaded while its snapshots exist), and so does
    everything the kubelet does with it."
  - After the removals the module runs one synchronous garbage collection (a transient lease deleted with C(sync)), so blobs
    and snapshot directories released by the removals are gone when RV(freed_bytes) is measured, then lists containerd's
    metadata again; RV(removed) holds what the collection really removed, and a warning names any object of the plan it kept.
  - An object already gone when its turn comes (containerd's GC ran first) counts as done and is listed in RV(already_gone).
  - Takes the node lock of the GC modules (see O(lock_timeout)), so it never runs beside M(kubenode.gc.image_gc) or
    M(kubenode.gc.container_gc) on the same runtime.
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
      - Check mode returns the same RV(plan) a real run would start from and changes nothing.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check mode), when in diff mode.
    support: none
  idempotent:
    description: When run twice in a row outside check mode, with the same arguments, the second run indicates no change.
    support: full
options:
  namespaces:
    description:
      - The containerd namespaces whose images are deleted (except O(keep_images) and images a container of the namespace
        was created from). Empty deletes no image.
      - V(k8s.io) is refused with one sentence and nothing changes; its images are the kubelet's (M(kubenode.gc.image_gc)).
    type: list
    elements: str
    default: []
  keep_images:
    description:
      - Images of O(namespaces) never deleted, with the patterns of M(kubenode.gc.image_gc)'s O(kubenode.gc.image_gc#module:keep_images)
        (a full or at least 12-digit id prefix, or a C(repo:tag) glob).
    type: list
    elements: str
    default: []
  ingest_max_age:
    description:
      - Ingests (partial downloads) not written to for longer than this Go duration are aborted.
    type: str
    default: 1h
  lease_max_age:
    description:
      - Leases created longer ago than this Go duration are deleted, expired or not. Unset, only leases whose
        C(containerd.io/gc.expire) has passed are deleted. Keep it longer than the longest pull of the node.
    type: str
  build_cache_max_age:
    description:
      - Docker Engine only. Build cache records (BuildKit's, as C(docker system df -v) lists them) last used longer ago than
        this Go duration (C(168h), C(30m)) are removed, unless a build uses them now. A record an image shares (its layer
        is that image's) is removed from the cache with 0 bytes freed (the bytes stay with the image).
      - Unset, no build cache record is removed.
    type: str
  remove_unused_volumes:
    description:
      - Docker Engine only. Also remove the anonymous volumes (created without a name - Docker 23 and later label them
        C(com.docker.volume.anonymous), Docker 20.10 names them with 64 hexadecimal digits) of the C(local) driver that no
        container, running or not, references. Named volumes are never removed.
    type: bool
    default: false
  release_gc_roots:
    description:
      - Also remove the C(containerd.io/gc.root) label (on containerd 2.2 and later, every label whose key starts with it)
        from the blobs and snapshots that it alone keeps (nothing else would reference them once the planned roots are
        gone), so that containerd's garbage collection frees them.
      - Unset, such objects stay, and check mode does not list them.
    type: bool
    default: false
  discard_unpacked_layers:
    description:
      - Also remove, from the manifests of the unpacked images of C(k8s.io), the references to their compressed layer blobs,
        as containerd's C(discard_unpacked_layers) does at pull time, so that containerd's garbage collection frees the blobs
        (the description says which images count as unpacked, what stays, and what no longer works for such an image).
      - To have containerd pull new images so, set C(discard_unpacked_layers) in its configuration
        (M(kubenode.gc.runtime_config), the C(kubenode.gc.containerd_storage) role's C(containerd_storage_discard_unpacked_layers)).
      - Unset, the blobs stay and check mode does not list them (M(kubenode.gc.disk_usage) counts them in V(unpacked_layer_blobs)).
    type: bool
    default: false
  lock_timeout:
    description:
      - Seconds to wait for another kubenode.gc run (image_gc, container_gc, storage_gc) on the same node and runtime endpoint
        to finish before failing (outside check mode). A finite number, 0 or more. The lock is the one M(kubenode.gc.image_gc) documents.
    type: float
    default: 300
seealso:
  - module: kubenode.gc.disk_usage
  - module: kubenode.gc.image_gc
  - name: containerd garbage collection
    description: How containerd's own GC decides what to keep.
    link: https://github.com/containerd/containerd/blob/main/docs/garbage-collection.md
"""

EXAMPLES = r"""
- name: What would go?
  kubenode.gc.storage_gc:
    namespaces: [moby, buildkit, default]
  check_mode: true
  become: true
  register: storage_plan

- name: Free the second, compressed copy of every unpacked image's layers
  kubenode.gc.storage_gc:
    discard_unpacked_layers: true

- name: On a Docker Engine node, free build cache unused for a week and anonymous volumes no container references
  kubenode.gc.storage_gc:
    build_cache_max_age: 168h
    remove_unused_volumes: true
  become: true

- name: Free stale ingests, expired leases, the images Docker left in containerd, and what only gc.root labels keep
  kubenode.gc.storage_gc:
    namespaces: [moby]
    keep_images: ["docker.io/library/registry:*"]
    lease_max_age: 48h
    release_gc_roots: true
  become: true
"""

RETURN = r"""
supported:
  description: V(false) on a runtime other than containerd and Docker Engine (nothing changed).
  returned: always
  type: bool
plan:
  description:
    - "What the run frees, in order, each with C(kind), C(namespace), C(id) and C(bytes) (and C(snapshotter) for a snapshot).
      First what the module removes: V(ingest) (ref), V(lease) (id), V(image) (name), and with O(release_gc_roots) V(gc_root)
      (a blob's digest, or a snapshot's key with its C(snapshotter), whose C(containerd.io/gc.root) labels go), and with
      O(discard_unpacked_layers) V(layer_blob) (a compressed layer blob's digest in V(k8s.io), with C(images), the names of the
      images whose manifests name it: the module removes those references, then containerd's collection frees the blob). Then
      what containerd's collection frees after them, as the model of its collector predicts: V(content) (digest), V(snapshot)
      (key), and any V(lease), V(ingest) or (2.x) V(image) it removes by itself (the module never removes those itself: an
      ingest whose lease the plan deletes, an expired image record)."
    - "On Docker Engine, each with C(kind), C(id) and C(bytes) (no C(namespace)): V(build_cache) (the record's id; C(bytes) its
      size, 0 when an image shares it), children before their parents, then V(volume) (the volume's name; C(bytes) its usage)."
    - "C(bytes): what the object itself takes: an ingest's written bytes, a snapshot's usage, a blob's size (on the last record
      of that digest, a blob being one file for every namespace; a V(layer_blob)'s too), 0 for the records and labels. So the plan's bytes add up
      to what the run frees. The same in check mode and for real."
  returned: always
  type: list
  elements: dict
  sample: [{"kind": "image", "namespace": "moby", "id": "docker.io/library/golang:1.23", "bytes": 834000000},
           {"kind": "layer_blob", "namespace": "k8s.io", "id": "sha256:4ba683ed...", "bytes": 27000000,
            "images": ["docker.io/library/nginx:1.27"]}]
removed:
  description:
    - The objects of RV(plan) this run removed, or that containerd's collection removed after it, in order (same keys); empty in
      check mode. On a failure, those removed before it; an object already gone is in RV(already_gone), not here. A
      V(layer_blob) is here once containerd's collection removed it (its references removed before a failure are not, and the
      next collection frees those blobs).
  returned: always
  type: list
  elements: dict
freed_bytes:
  description: Used bytes of the image filesystem (on Docker Engine, of its data root) before minus after (C(statvfs)); 0 in check mode.
  returned: always
  type: int
already_gone:
  description: Objects of the plan that were gone when their turn came (counted as done).
  returned: when something was removed
  type: list
  elements: dict
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
from ansible_collections.kubenode.gc.plugins.module_utils.storage._storage_gc import ARGUMENT_SPEC, options, run


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    execute(module, options, run, cri_client)


if __name__ == "__main__":
    main()
