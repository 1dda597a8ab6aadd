# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""disk_usage: options and run (the I/O); the attribution itself is _storage_policy's (pure).

Reads: CRI Version, ImageFsInfo and ListContainerStats (one call for every writable layer), ListPodSandbox and
ListContainers; on containerd its own API (containerd/_inventory, one list per kind and namespace), whose container
records carry each CRI container's log path (the CRI plugin's metadata extension, containerd/_cri_metadata): a
constant number of list calls in all. ContainerStatus (for its log path) is asked only for the containers no record
gives a path for: every container on cri-o; on containerd only those without a usable extension or made after the
records were read. Then statvfs of the image filesystem and of the kubelet's root; bounded walks of the containers'
log directories, of the pod log directories the CRI names none in, and of the pod volume directories (``walk_limit``
entries in all, and the result says which walk stopped early).
"""

from __future__ import annotations

import os
import time

from ansible_collections.kubenode.gc.plugins.module_utils._common import CRI_COMMON_ARGS
from ansible_collections.kubenode.gc.plugins.module_utils._errors import DockerApiError, KubenodeGcError, OptionError
from ansible_collections.kubenode.gc.plugins.module_utils.containerd import _containerd_collector, _cri_metadata
from ansible_collections.kubenode.gc.plugins.module_utils.containerd import _inventory
from ansible_collections.kubenode.gc.plugins.module_utils.containerd._client import ContainerdClient
from ansible_collections.kubenode.gc.plugins.module_utils.cri import _snapshot
from ansible_collections.kubenode.gc.plugins.module_utils.cri._cri_backend import cri_options
from ansible_collections.kubenode.gc.plugins.module_utils.docker._names import engine_api, is_docker
from ansible_collections.kubenode.gc.plugins.module_utils.storage import _crio_storage, _docker_storage, _layer_blobs, _storage_policy

# what disk_usage cannot see on cri-o (containers/storage has no namespaces, ingests or leases)
CRIO_NOT_VISIBLE = ("other_namespace_images", "stale_ingests", "leased")


def options(params):
    opts = cri_options(params)
    for name in ("pod_logs_dir", "kubelet_root_dir"):
        if not params[name] or not os.path.isabs(params[name]):
            raise OptionError("%s must be an absolute path, got %r." % (name, params[name]))
        opts[name] = params[name]
    if params["walk_limit"] < 1:
        raise OptionError("walk_limit must be 1 or more directory entries, got %s." % params["walk_limit"])
    opts["walk_limit"] = params["walk_limit"]
    return opts


def used_bytes(path):
    """Bytes in use on the filesystem holding ``path`` (statvfs: blocks minus free blocks) and its device."""
    st = os.statvfs(path)
    return (st.f_blocks - st.f_bfree) * st.f_frsize, os.stat(path).st_dev


class Walker:
    """Bounded directory walks: at most ``limit`` entries over all walks of a run; never follows symlinks."""

    def __init__(self, limit):
        self.left = limit
        self.stopped = []  # directories whose walk stopped early

    def size(self, top):
        """Bytes allocated (st_blocks) below ``top``, and whether the walk saw everything."""
        total = 0
        stack = [top]
        while stack:
            path = stack.pop()
            try:
                entries = list(os.scandir(path))
            except OSError:
                continue
            for entry in entries:
                if self.left <= 0:
                    if top not in self.stopped:
                        self.stopped.append(top)
                    return total, False
                self.left -= 1
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                total += st.st_blocks * 512
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
        return total, True


def pod_dirs(parent):
    try:
        return sorted(e for e in os.listdir(parent) if os.path.isdir(os.path.join(parent, e)))
    except OSError:
        return []


def pod_logs(walker, logs_dir):
    """Per pod log directory (<namespace>_<pod>_<uid>) of ``logs_dir``: {"namespace", "name", "id", "bytes", "dev"}."""
    out = []
    for name in pod_dirs(logs_dir):
        path = os.path.join(logs_dir, name)
        size, _complete = walker.size(path)
        namespace, _sep, rest = name.partition("_")
        out.append({"namespace": namespace, "name": rest.rsplit("_", 1)[0] if "_" in rest else rest, "id": name, "bytes": size, "dev": _dev(path)})
    return out


def log_dirs(client, known=None):
    """{pod sandbox id: (pod metadata, [directories of its containers' log files])} of the CRI's containers, matched to
    their pods by ListContainers. The log path of a container is ``known``'s ({container id: absolute log path}, what
    containerd's records say), else ContainerStatus's, asked only for the containers ``known`` does not hold."""
    known = known or {}
    pods = {s.id: s.metadata for s in client.list_pod_sandbox()}
    sandbox_of = {c.id: c.pod_sandbox_id for c in client.list_containers()}
    paths = {cid: known[cid] for cid in sandbox_of if cid in known}
    asked = [cid for cid in sandbox_of if cid not in paths]
    for cid, status in _snapshot.container_statuses(client, asked, concurrency=None):
        if status is not None:  # None: removed since the list
            paths[cid] = status.log_path
    out = {}
    for cid, sandbox in sandbox_of.items():
        path = paths.get(cid)
        if path and os.path.isabs(path) and sandbox in pods:
            out.setdefault(sandbox, (pods[sandbox], set()))[1].add(os.path.dirname(os.path.normpath(path)))
    return out


def container_logs(walker, client, logs_dir, known=None):
    """Per pod, the bytes of its containers' log directories, where the runtime writes them (the CRI's log paths, from
    ``known`` where given: see log_dirs); then the pod directories of ``logs_dir`` (the fallback) that hold none of
    those. [{"namespace", "name", "id", "bytes", "dev"}]"""
    found = log_dirs(client, known)
    walked = _Walked()
    out = []
    for sandbox in sorted(found, key=lambda s: (found[s][0].namespace, found[s][0].name, s)):
        meta, dirs = found[sandbox]
        total, dev = 0, None
        for path in sorted(dirs):
            if walked.inside(path):
                continue
            size, _complete = walker.size(path)
            walked.add(path)
            total += size
            dev = _dev(path) if dev is None else dev
        out.append({"namespace": meta.namespace, "name": meta.name, "id": "%s_%s_%s" % (meta.namespace, meta.name, meta.uid), "bytes": total, "dev": dev})
    for item in pod_logs(_Skipping(walker, walked), logs_dir):
        if not walked.overlaps(os.path.join(logs_dir, item["id"])):
            out.append(item)
    return out


class _Walked:
    """The directories already walked, resolved, with every ancestor of each: whether a path lies in one of them, or holds
    one, costs the path's depth, not the number walked (a node has a log directory per container)."""

    def __init__(self):
        self.paths = set()
        self.ancestors = set()

    def add(self, path):
        real = os.path.realpath(path)
        self.paths.add(real)
        for up in _lineage(real):
            self.ancestors.add(up)

    def inside(self, path):
        """``path`` is a walked directory or lies below one."""
        return any(up in self.paths for up in _lineage(os.path.realpath(path)))

    def overlaps(self, path):
        """``path`` lies in a walked directory, or holds one."""
        return os.path.realpath(path) in self.ancestors or self.inside(path)


def _lineage(real):
    """A resolved path, then each of its parents up to the root."""
    while True:
        yield real
        parent = os.path.dirname(real)
        if parent == real:
            return
        real = parent


class _Skipping:
    """A Walker that counts nothing in or above the directories already walked (a ``_Walked``)."""

    def __init__(self, walker, walked):
        self.walker = walker
        self.walked = walked

    def size(self, top):
        if self.walked.overlaps(top):
            return 0, True
        return self.walker.size(top)


def _on(items, dev):
    """The log objects on the filesystem ``dev``, without their device."""
    return [{k: v for k, v in item.items() if k != "dev"} for item in items if item["dev"] == dev]


def pod_volumes(walker, kubelet_root):
    """Per pod: the bytes of <kubelet root>/pods/<uid>/volumes (emptyDir and the like)."""
    pods = os.path.join(kubelet_root, "pods")
    out = []
    for uid in pod_dirs(pods):
        size, _complete = walker.size(os.path.join(pods, uid, "volumes"))
        out.append({"namespace": None, "id": uid, "bytes": size})
    return out


def writable_layers(pending):
    """The CRI's writable layer of every container, from one ListContainerStats call started with call_async."""
    out = []
    for s in pending.result().stats:
        labels = s.attributes.labels
        size = s.writable_layer.used_bytes.value if s.HasField("writable_layer") and s.writable_layer.HasField("used_bytes") else 0
        out.append({"namespace": labels.get(_snapshot.POD_NAMESPACE_LABEL), "id": s.attributes.id, "name": s.attributes.metadata.name, "bytes": int(size)})
    return out


def docker_logs(walker, data_root, containers):
    """{container id: bytes of its log files in the data root} (Docker's json-file logs, ``containers/<id>/<id>-json.log``
    and its rotated copies; the ``local`` driver's ``containers/<id>/local-logs/``): one directory listing per container,
    counted in the walker's limit."""
    out = {}
    for cid in containers:
        if not cid or "/" in cid or cid.startswith("."):
            continue
        top = os.path.join(data_root, "containers", cid)
        try:
            entries = list(os.scandir(top))
        except OSError:
            continue
        total = 0
        for entry in entries:
            if walker.left <= 0:
                if top not in walker.stopped:
                    walker.stopped.append(top)
                break
            walker.left -= 1
            try:
                if entry.name.startswith(cid + "-json.log") and entry.is_file(follow_symlinks=False):
                    total += entry.stat(follow_symlinks=False).st_blocks * 512
                elif entry.name == "local-logs" and entry.is_dir(follow_symlinks=False):
                    total += walker.size(entry.path)[0]
            except OSError:
                continue
        out[cid] = total
    return out


def _run_docker(client, opts, result, imagefs, used):
    """disk_usage on cri-dockerd: the data root's categories from the Docker Engine's ``GET /system/df`` (the engine behind
    the CRI socket, see docker/_engine) and the containers' log files."""
    docker_engine = engine_api()
    engine, info = docker_engine.connect_for(client, imagefs["mountpoint"], "disk_usage", result)
    try:
        df = engine.system_df()
    except DockerApiError as exc:
        raise KubenodeGcError(str(exc), result=result) from None
    finally:
        engine.close()
    walker = Walker(opts["walk_limit"])
    root = info.get("DockerRootDir") or imagefs["mountpoint"]
    logs = docker_logs(walker, root, [c.get("Id") for c in df.get("Containers") or []])
    # the kubelet's pod log directories hold links to those files; files of their own there (left by earlier runtimes,
    # or by hand) count where they are
    pods = pod_logs(walker, opts["pod_logs_dir"])
    image_dev = _dev(imagefs["mountpoint"])
    result.update(mountpoint=imagefs["mountpoint"], used_bytes=used, categories=_docker_storage.attribute(df, used, logs, _on(pods, image_dev)),
                  not_visible=[])
    return _nodefs(result, opts, walker, image_dev, pods)


def _nodefs(result, opts, walker, image_dev, logs):
    """The kubelet root filesystem's categories (``nodefs``, None when it is the image filesystem: ``logs``, the pod
    logs found, count on the filesystem they are on) and what the directory walks left out; returns ``result``."""
    result["nodefs"] = None
    root_dev = _dev(opts["kubelet_root_dir"])
    if root_dev is not None and root_dev != image_dev:
        node_used, _dev_ = used_bytes(opts["kubelet_root_dir"])
        volumes = pod_volumes(walker, opts["kubelet_root_dir"])
        result["nodefs"] = {"mountpoint": _mountpoint(opts["kubelet_root_dir"]), "used_bytes": node_used,
                            "categories": _storage_policy.nodefs_categories(node_used, volumes, _on(logs, root_dev))}
    result["walks_stopped_early"] = list(walker.stopped)
    if walker.stopped:
        result["warnings"].append("The directory walks stopped after walk_limit (%d) entries in %s; their bytes are partly unaccounted."
                                  % (opts["walk_limit"], ", ".join(walker.stopped)))
    return result


def run(client, opts, check_mode=False):
    started = time.monotonic()
    version = client.version()
    runtime = {"name": version.runtime_name, "version": version.runtime_version, "endpoint": client.endpoint}
    result = {"changed": False, "runtime": runtime, "warnings": []}
    filesystems = _snapshot.read_imagefs(client)
    imagefs = _snapshot.image_filesystem(filesystems)
    if imagefs is None:
        raise KubenodeGcError("The runtime at %s reports no image filesystem (ImageFsInfo)." % client.endpoint, result=result)
    try:
        used, image_dev = used_bytes(imagefs["mountpoint"])
    except OSError as exc:
        raise KubenodeGcError("Cannot statvfs the image filesystem %s: %s." % (imagefs["mountpoint"], exc.strerror or exc), result=result) from None
    if is_docker(runtime["name"]):
        _run_docker(client, opts, result, imagefs, used)
        result["elapsed_seconds"] = round(time.monotonic() - started, 3)
        return result
    walker = Walker(opts["walk_limit"])
    # the runtime gathers every container's stats while containerd's own lists are read
    stats = client.call_async("ListContainerStats")
    api = inventory = known = None
    if runtime["name"] == "containerd":
        api = ContainerdClient(client)
        inventory = _inventory.read(api)
        # each CRI container's log path is in its record: no ContainerStatus per container (the CRI for any record without)
        known = _cri_metadata.log_paths(inventory)
    logs = container_logs(walker, client, opts["pod_logs_dir"], known)
    now = time.time_ns()
    # with a split image filesystem (cri-o's imagestore) the writable layers live on the container filesystem
    split = _snapshot.split_imagefs(filesystems)
    if split:
        containerfs = next(fs["mountpoint"] for fs in filesystems if fs["kind"] == "container")
        result["warnings"].append("The writable layers are on the container filesystem %s, not on the image filesystem; "
                                  "writable_layers is empty here." % containerfs)
    if runtime["name"] == "containerd":
        writable = [] if split else writable_layers(stats)
        # the CRI measures its containers' writable layers; the others' (ctr, nerdctl, sandboxes) are snapshots.Usage's
        _inventory.measure(api, inventory, _storage_policy.needs_usage(inventory, {w["id"] for w in writable}))
        # the collector model of the release line containerd runs (an unknown version: the newest, and a warning says so)
        line, note = _containerd_collector.release_line(version.runtime_version)
        if note:
            result["warnings"].append(note)
        # the snapshotters the CRI unpacks images into: an image unpacked in each needs its compressed layer blobs no more
        snapshotters, _source = _layer_blobs.cri_snapshotters(dict(client.status(verbose=True).info),
                                                              [fs["mountpoint"] for fs in filesystems if fs["kind"] == "image"])
        if not snapshotters:
            result["warnings"].append(_layer_blobs.NO_SNAPSHOTTER % (client.endpoint, "unpacked_layer_blobs is 0"))
        categories = _storage_policy.attribute(inventory, used, writable, _on(logs, image_dev), now, line, snapshotters=snapshotters)
        not_visible = []
    else:
        writable = [] if split else writable_layers(stats)
        storage = _crio_storage.read(_crio_storage.roots([fs["mountpoint"] for fs in filesystems]))
        if storage["unreadable"] or not storage["images"]:
            categories = _crio_categories(client, used, writable, _on(logs, image_dev))
            not_visible = list(CRIO_NOT_VISIBLE) + ["unreferenced_snapshots"]
            what = "the CRI's image sizes (containers/storage's files %s are not readable)" % ", ".join(storage["unreadable"] or ["(none found)"])
        else:
            categories = _crio_storage.attribute(storage, used, writable, _on(logs, image_dev))
            not_visible = list(CRIO_NOT_VISIBLE)
            what = "containers/storage's images and layers (unreferenced_snapshots: layers no image or container references)"
        result["warnings"].append(
            "On %s disk_usage sees %s, the writable layers and the logs; it cannot see %s (containers/storage has no namespaces, "
            "ingests or leases), which count as unaccounted." % (runtime["name"], what, ", ".join(not_visible)))
    result.update(mountpoint=imagefs["mountpoint"], used_bytes=used, categories=categories, not_visible=not_visible)
    _nodefs(result, opts, walker, image_dev, logs)
    result["elapsed_seconds"] = round(time.monotonic() - started, 3)
    return result


def _crio_categories(client, used, writable, logs):
    """cri-o when its storage files cannot be read: images (the CRI's sizes) and writable layers."""
    images = []
    for img in client.list_images():
        name = next(iter(img.repo_tags), None) or img.id
        images.append({"namespace": None, "name": name, "id": img.id, "bytes": int(img.size)})
    cats = {name: [] for name in _storage_policy.CATEGORIES}
    cats["k8s_images"] = images
    cats["writable_layers"] = writable
    cats["container_logs"] = logs or []
    result = {}
    for name in _storage_policy.CATEGORIES:
        if name in CRIO_NOT_VISIBLE or name == "unreferenced_snapshots":
            result[name] = None
        elif name == "unpacked_layer_blobs":
            result[name] = _crio_storage.no_compressed_layers()
        elif name != "unaccounted":
            result[name] = _storage_policy.summarise(cats[name])
    result["unaccounted"] = {"bytes": used - sum(c["bytes"] for c in result.values() if c), "objects": []}
    return {name: result[name] for name in _storage_policy.CATEGORIES}


def _dev(path):
    try:
        return os.stat(path).st_dev
    except OSError:
        return None


def _mountpoint(path):
    path = os.path.realpath(path)
    while not os.path.ismount(path):
        path = os.path.dirname(path)
    return path


# The module's options (plugins/modules/disk_usage.py documents them); here so that kubenode.gc.node_audit runs it too.
ARGUMENT_SPEC = dict(
    CRI_COMMON_ARGS,
    pod_logs_dir=dict(type="path", default="/var/log/pods"),
    kubelet_root_dir=dict(type="path", default="/var/lib/kubelet"),
    walk_limit=dict(type="int", default=200000),
)
