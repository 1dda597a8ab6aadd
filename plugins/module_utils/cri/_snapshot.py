# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""One read of a node through the CRI: runtime, image filesystems, images, containers, sandboxes.

Every list is read with one RPC (no per-object status calls, except ContainerStatus for image
volumes when asked, see ``read_image_mounts``).  The "is this image in use" matching lives here,
once: a container uses an image when its ``image_id``, ``image_ref`` or image spec names the
image's id, one of its tags or one of its repo digests, or when it mounts the image as a volume.
"""

from __future__ import annotations

import os
import time

from ansible_collections.kubenode.gc.plugins.module_utils._errors import KubenodeGcError
from ansible_collections.kubenode.gc.plugins.module_utils.cri import _sandbox_image
from ansible_collections.kubenode.gc.plugins.module_utils.cri._image_pin_policy import parse_version
from ansible_collections.kubenode.gc.plugins.module_utils.cri._image_ref import normalize_image_ref

CONTAINER_STATES = {0: "created", 1: "running", 2: "exited", 3: "unknown"}
SANDBOX_STATES = {0: "ready", 1: "notready"}
GATHER_CHOICES = ("runtime", "imagefs", "images", "containers", "sandboxes")

POD_UID_LABEL = "io.kubernetes.pod.uid"
POD_NAME_LABEL = "io.kubernetes.pod.name"
POD_NAMESPACE_LABEL = "io.kubernetes.pod.namespace"

# ContainerStatus calls in flight at once when reading image volume mounts
STATUS_CONCURRENCY = 32
# runtimes that cannot mount an image as a volume (KEP-4639): {runtime name: first version that can}
IMAGE_VOLUMES_SINCE = {"containerd": (2, 1), "cri-o": (1, 31)}
IMAGE_VOLUMES_NEVER = ("docker",)
# after an outage, how long a run waits for the runtime to answer again (a restart by a package upgrade takes seconds)
# before it reports the removals whose answer was lost as unconfirmed
RUNTIME_BACK_WAIT = 10.0
RUNTIME_BACK_INTERVAL = 0.5


def rfc3339(ns):
    """CRI nanoseconds since the epoch -> RFC 3339 UTC string with nanoseconds; 0 -> None."""
    if not ns:
        return None
    seconds, frac = divmod(int(ns), 1000000000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + ".%09dZ" % frac


def usage_percent(capacity, available):
    """The kubelet's image GC usage: 100 - floor(available*100/capacity), available clamped to capacity."""
    if not capacity:
        return None
    available = min(available, capacity)
    return 100 - (available * 100) // capacity


def statvfs_usage(mountpoint):
    """Capacity, availability and inodes of a filesystem, as cAdvisor reads them (statvfs, f_bavail)."""
    st = os.statvfs(mountpoint)
    capacity = st.f_blocks * st.f_frsize
    available = st.f_bavail * st.f_frsize
    return {
        "capacity_bytes": capacity,
        "available_bytes": available,
        "inodes_total": st.f_files,
        "inodes_free": st.f_ffree,
        "inodes_used": st.f_files - st.f_ffree,
        "usage_percent": usage_percent(capacity, available),
    }


sandbox_image_from_info = _sandbox_image.from_status_info


class ImageIndex:
    """Resolves any reference a container may carry (id, short id, tag, digest) to image ids."""

    def __init__(self, images):
        self._by_ref = {}
        for img in images:
            keys = [img["id"]] + list(img["repo_tags"]) + list(img["repo_digests"])
            if img["id"].startswith("sha256:"):
                keys.append(img["id"][len("sha256:"):])
            for key in keys:
                self._by_ref.setdefault(key, set()).add(img["id"])
                self._by_ref.setdefault(normalize_image_ref(key), set()).add(img["id"])

    def resolve(self, ref):
        if not ref:
            return set()
        return self._by_ref.get(ref) or self._by_ref.get(normalize_image_ref(ref)) or set()


def image_users(images, containers, index=None):
    """{image id: sorted ids of containers (any state) that reference it}; ``index``: the ImageIndex of ``images``, when the
    caller has built it already."""
    index = index if index is not None else ImageIndex(images)
    users = {}
    for c in containers:
        found = set()
        for ref in (c["image_id"], c["image_ref"], c["image"]) + tuple(c.get("image_mounts", ())):
            found |= index.resolve(ref)
        for image_id in found:
            users.setdefault(image_id, []).append(c["id"])
    return {k: sorted(v) for k, v in users.items()}


def supports_image_volumes(runtime):
    """Whether a runtime (the ``read_runtime`` record) can mount images as volumes (KEP-4639).

    containerd 2.1+ and cri-o 1.31+ can; older containerd rejects such a container at creation, and
    cri-dockerd (runtime name ``docker``) has no image volumes. Any other runtime, or a version that
    does not parse, is assumed to support them: asking costs RPCs, not asking could lose an image."""
    name = (runtime or {}).get("name") or ""
    if name in IMAGE_VOLUMES_NEVER:
        return False
    since = IMAGE_VOLUMES_SINCE.get(name)
    if since is None:
        return True
    version = parse_version(runtime.get("version"))
    return version is None or version >= since


def container_statuses(client, ids, concurrency):
    """(id, ContainerStatus) for each of ``ids``: one ContainerStatus call each, at most ``concurrency`` in flight (None:
    all at once). A container gone since it was listed (NOT_FOUND) gives None; any other failure raises the CriError."""
    step = concurrency or max(1, len(ids))
    for start in range(0, len(ids), step):
        futures = [(cid, client.call_async("ContainerStatus", container_id=cid)) for cid in ids[start : start + step]]
        for cid, fut in futures:
            try:
                status = fut.result().status
            except KubenodeGcError as exc:
                if getattr(exc, "code", None) != "NOT_FOUND":
                    raise
                status = None
            yield cid, status


def read_image_mounts(client, containers, known=None):
    """Set ``image_mounts`` (the image references of its image volume mounts) on every container record.

    ListContainers does not carry mounts, so this makes one ContainerStatus call per container not in
    ``known`` ({container id: image references}, updated in place; a container's mounts never change
    once it is created), at most STATUS_CONCURRENCY in flight. A container gone since the list
    (NOT_FOUND) mounts nothing; any other failure raises the CriError."""
    known = {} if known is None else known
    todo = [c["id"] for c in containers if c["id"] not in known]
    for cid, status in container_statuses(client, todo, STATUS_CONCURRENCY):
        known[cid] = [] if status is None else [m.image.image for m in status.mounts if m.HasField("image") and m.image.image]
    for c in containers:
        c["image_mounts"] = list(known.get(c["id"], ()))
    return known


def read_runtime(client, sandboxes=None, status_info=None):
    """Version, endpoint and sandbox image (see _sandbox_image).

    ``sandboxes``: a callable returning the node's sandbox records, read at most once per node read;
    the sandbox list is needed only when the runtime's Status does not name its sandbox image.
    ``status_info``: a dict that receives the runtime's verbose Status info (its configuration, for runtime_config)."""
    version = client.version()
    status = client.status(verbose=True)
    if status_info is not None:
        status_info.update(dict(status.info))
    image, _source = _sandbox_image.discover(client, dict(status.info), sandboxes or (lambda: read_sandboxes(client)))
    return {
        "name": version.runtime_name,
        "version": version.runtime_version,
        "api_version": version.runtime_api_version,
        "endpoint": client.endpoint,
        "sandbox_image": image,
    }


def read_imagefs(client):
    """Image and container filesystems: the runtime's mountpoints and used bytes, plus statvfs."""
    resp = client.image_fs_info()
    filesystems = []
    for kind, entries in (("image", resp.image_filesystems), ("container", resp.container_filesystems)):
        for fs in entries:
            mountpoint = fs.fs_id.mountpoint
            entry = {
                "kind": kind,
                "mountpoint": mountpoint,
                "used_bytes": fs.used_bytes.value if fs.HasField("used_bytes") else None,
                "capacity_bytes": None,
                "available_bytes": None,
                "inodes_total": None,
                "inodes_free": None,
                "inodes_used": None,
                "usage_percent": None,
            }
            try:
                entry.update(_measured(client, mountpoint))
            except OSError:
                pass
            filesystems.append(entry)
    return filesystems


def _shared(client, key, make, copy):
    """``make()``. While ``client`` shares the node's reads (its ``node_memo``: node_audit's and node_cleanup's parts, cleared
    by any call that may change the node), it is made once under ``key``, and each caller gets ``copy(value)`` of its own."""
    memo = getattr(client, "node_memo", None)
    if memo is None:
        return make()
    if key not in memo:
        memo[key] = make()
    return copy(memo[key])


def _measured(client, mountpoint):
    """statvfs_usage of ``mountpoint``, measured once while ``client`` shares the node's reads."""
    return _shared(client, ("statvfs", mountpoint), lambda: statvfs_usage(mountpoint), dict)


def image_filesystem(filesystems):
    """The filesystem image GC measures: the first one the runtime reports as its image filesystem, or None."""
    return next((fs for fs in filesystems if fs.get("kind") == "image"), None)


def split_imagefs(filesystems):
    """True when the runtime reports a container filesystem on another device than its image filesystem."""
    devices = {}
    for fs in filesystems:
        try:
            dev = os.stat(fs["mountpoint"]).st_dev
        except OSError:
            dev = fs["mountpoint"]
        devices.setdefault(fs["kind"], set()).add(dev)
    return bool(devices.get("container")) and devices.get("container") != devices.get("image")


# Docker's placeholders for an image without a tag or a digest (an untagged image of a build), which cri-dockerd passes on
NO_NAME = ("<none>:<none>", "<none>@<none>")


def full_names(names):
    """An image's tags or digests in their full form, as containerd and cri-o list them (docker.io/library/busybox:1.36):
    Docker lists docker.io's images by their short names (busybox:1.36), and a fleet report groups one image under one
    name whatever the runtime. Docker's placeholders for no name are no names."""
    return list(dict.fromkeys(normalize_image_ref(n) for n in names if n and n not in NO_NAME))


def read_images(client):
    images = []
    for img in client.list_images():
        images.append(
            {
                "id": img.id,
                "repo_tags": full_names(img.repo_tags),
                "repo_digests": full_names(img.repo_digests),
                "size": int(img.size),
                "pinned": bool(img.pinned),
            }
        )
    images.sort(key=lambda i: i["id"])
    return images


def read_sandboxes(client):
    sandboxes = []
    for s in client.list_pod_sandbox():
        sandboxes.append(
            {
                "id": s.id,
                "name": s.metadata.name,
                "namespace": s.metadata.namespace,
                "uid": s.metadata.uid,
                "attempt": int(s.metadata.attempt),
                "state": SANDBOX_STATES.get(s.state, str(s.state)),
                "created_at": rfc3339(s.created_at),
                "created_at_ns": int(s.created_at),
            }
        )
    sandboxes.sort(key=lambda s: (s["created_at_ns"], s["id"]))
    return sandboxes


def read_containers(client, sandboxes):
    by_sandbox = {s["id"]: s for s in sandboxes}
    containers = []
    for c in client.list_containers():
        labels = c.labels
        pod = by_sandbox.get(c.pod_sandbox_id, {})
        containers.append(
            {
                "id": c.id,
                "name": c.metadata.name,
                "attempt": int(c.metadata.attempt),
                "pod_uid": labels.get(POD_UID_LABEL) or pod.get("uid"),
                # the uid the kubelet's container GC groups by: the label only ("" without it, no sandbox fallback)
                "label_pod_uid": labels.get(POD_UID_LABEL) or "",
                "pod_name": labels.get(POD_NAME_LABEL) or pod.get("name"),
                "pod_namespace": labels.get(POD_NAMESPACE_LABEL) or pod.get("namespace"),
                "sandbox_id": c.pod_sandbox_id,
                "state": CONTAINER_STATES.get(c.state, str(c.state)),
                "created_at": rfc3339(c.created_at),
                "created_at_ns": int(c.created_at),
                # the kubelet's ImageID: CRI image_id, falling back to image_ref (runtimes before CRI v1.30)
                "image_id": c.image_id or c.image_ref,
                "image_ref": c.image_ref,
                "image": c.image.image,
            }
        )
    containers.sort(key=lambda c: (c["created_at_ns"], c["id"]))
    return containers


def read_after_outage(client, read, wait=RUNTIME_BACK_WAIT, interval=RUNTIME_BACK_INTERVAL, clock=time.monotonic, sleep=time.sleep):
    """``read(client)`` once the runtime answers again: a fresh connection each try, every ``interval`` seconds, for at most
    ``wait`` seconds (0: one try). Returns what ``read`` returned, or None when the runtime did not answer in time."""
    deadline = clock() + wait
    while True:
        close = getattr(client, "close", None)
        if close is not None:
            close()  # a channel that saw the runtime go away may sit in its reconnect backoff: start afresh
        try:
            return read(client)
        except KubenodeGcError:
            if clock() + interval > deadline:
                return None
            sleep(interval)


def _indexed_images(client):
    """read_images and its ImageIndex (thousands of references, each normalized): built once while ``client`` shares the
    node's reads, each caller getting records of its own to annotate (the index is only read)."""

    def make():
        images = read_images(client)
        return images, ImageIndex(images)

    def copy(value):
        images, index = value
        return [dict(img, repo_tags=list(img["repo_tags"]), repo_digests=list(img["repo_digests"])) for img in images], index

    return _shared(client, "images", make, copy)


def read_node(client, gather=GATHER_CHOICES, image_volumes=False):
    """Read what ``gather`` asks for, with one RPC per list; returns a dict of internal records.

    With ``image_volumes`` and ``images`` gathered, on a runtime that supports image volumes, images
    mounted as volumes count as used too (one ContainerStatus per container, see read_image_mounts;
    ``node["image_mounts"]`` then holds what was read, else it is None)."""
    gather = set(gather)
    node = {}
    read = {}

    def sandboxes():
        if "sandboxes" not in read:
            read["sandboxes"] = read_sandboxes(client)
        return read["sandboxes"]

    if gather & {"runtime", "images"}:
        node["runtime"] = read_runtime(client, sandboxes)
    if "imagefs" in gather:
        node["imagefs"] = read_imagefs(client)
        node["split_imagefs"] = split_imagefs(node["imagefs"])
    if gather & {"images", "containers", "sandboxes"}:
        node["sandboxes"] = sandboxes()
        node["containers"] = read_containers(client, node["sandboxes"])
    if "images" in gather:
        node["image_mounts"] = None
        if image_volumes and supports_image_volumes(node["runtime"]):
            node["image_mounts"] = read_image_mounts(client, node["containers"])
        images, index = _indexed_images(client)
        users = image_users(images, node["containers"], index)
        sandbox_ids = index.resolve(node["runtime"]["sandbox_image"])
        for img in images:
            img["used_by"] = users.get(img["id"], [])
            img["in_use"] = bool(img["used_by"])
            img["sandbox_image"] = img["id"] in sandbox_ids
        node["images"] = images
    return node


PUBLIC_KEYS = {
    "images": ("id", "repo_tags", "repo_digests", "size", "pinned", "sandbox_image", "in_use", "used_by"),
    "containers": ("id", "name", "attempt", "pod_uid", "pod_name", "pod_namespace", "sandbox_id", "state", "created_at", "image_id", "image_ref"),
    "sandboxes": ("id", "name", "namespace", "uid", "attempt", "state", "created_at"),
}


def public(kind, records):
    """Records of ``kind`` with exactly the documented return keys."""
    keys = PUBLIC_KEYS[kind]
    return [{k: r[k] for k in keys} for r in records]
