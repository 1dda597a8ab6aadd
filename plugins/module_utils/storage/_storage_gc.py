# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""storage_gc: options and run (lock, read containerd's metadata, plan, remove roots, let containerd's GC collect, measure).

On cri-dockerd (the Docker Engine behind it, docker/_engine): the plan is _docker_storage.plan (build cache records
unused for longer than ``build_cache_max_age``, and with ``remove_unused_volumes`` anonymous volumes no container
references), carried out through the Engine API only (``POST /build/prune`` of one record at a time, with the age as
BuildKit's own ``until`` filter; ``DELETE /volumes/{name}`` without force, which the engine refuses for a volume a
container uses), then confirmed from ``GET /system/df``. Images stay image_gc's; containers are never touched.

The plan is _storage_policy.plan (pure). The module removes roots and references only, through containerd's own API:
content.Abort for ingests, leases.Delete, images.Delete, (release_gc_roots) snapshots.Update or
content.Update without the labels that make the object a root (``containerd.io/gc.root``; from containerd 2.2
every label key that starts with it), and (discard_unpacked_layers) content.Update of k8s.io's manifests
without the layer references of unpacked images (_layer_blobs), as containerd's CRI pulls with its own
discard_unpacked_layers. It never deletes a blob or a snapshot: one synchronous
garbage collection (a transient lease deleted with ``sync``) then frees what only those roots kept;
the run lists containerd's metadata again to report what the collection really removed, and
measures the freed bytes with statvfs.
"""

from __future__ import annotations

import math
import os
import time

from ansible_collections.kubenode.gc.plugins.module_utils._common import CRI_COMMON_ARGS
from ansible_collections.kubenode.gc.plugins.module_utils._durations import DurationError, parse_duration
from ansible_collections.kubenode.gc.plugins.module_utils._errors import DockerApiError, KubenodeGcError, OptionError
from ansible_collections.kubenode.gc.plugins.module_utils.containerd import _containerd_collector
from ansible_collections.kubenode.gc.plugins.module_utils.containerd import _inventory
from ansible_collections.kubenode.gc.plugins.module_utils.containerd._client import ContainerdClient, ContainerdError
from ansible_collections.kubenode.gc.plugins.module_utils.cri import _ledger
from ansible_collections.kubenode.gc.plugins.module_utils.cri._cri_backend import cri_options
from ansible_collections.kubenode.gc.plugins.module_utils.cri._image_ref import check_keep_patterns, keep_matcher
from ansible_collections.kubenode.gc.plugins.module_utils.cri._snapshot import image_filesystem, read_imagefs
from ansible_collections.kubenode.gc.plugins.module_utils.docker._names import engine_api, is_docker
from ansible_collections.kubenode.gc.plugins.module_utils.storage import _docker_storage, _layer_blobs, _storage_policy

CRIO_WARNING = ("storage_gc does not act on %s: containers/storage has no API to free its storage safely while the runtime "
                "runs; drain the node, stop the kubelet and cri-o, run 'crio wipe' and start them again.")
DOCKER_ONLY = ("build_cache_max_age", "remove_unused_volumes")
CONTAINERD_ONLY = ("namespaces", "lease_max_age", "release_gc_roots", "discard_unpacked_layers")
SYNC_LEASE_PREFIX = "kubenode-gc-storage-gc-"
LABEL_CONCURRENCY = 64  # content.Update calls in flight


def options(params):
    opts = cri_options(params)
    namespaces = [str(n).strip() for n in params["namespaces"] or []]
    if _storage_policy.CRI_NAMESPACE in namespaces:
        raise OptionError("namespaces must not name k8s.io: its images are the kubelet's, which kubenode.gc.image_gc removes with the kubelet's rules.")
    if any(not n for n in namespaces):
        raise OptionError("namespaces must not contain an empty name, got %r." % (params["namespaces"],))
    opts["namespaces"] = namespaces
    try:
        check_keep_patterns(params["keep_images"] or [])
    except ValueError as exc:
        raise OptionError(str(exc)) from None
    opts["keep_images"] = list(params["keep_images"] or [])
    for name in ("ingest_max_age", "lease_max_age"):
        value = params[name]
        if value is None or value == "":
            opts[name] = None
            continue
        try:
            opts[name] = parse_duration(str(value))
        except DurationError as exc:
            raise OptionError("%s must be a Go duration such as 1h or 30m, got %r (%s)." % (name, value, exc)) from None
        if opts[name] < 0:
            raise OptionError("%s must not be negative, got %r." % (name, value))
    if opts["ingest_max_age"] is None:
        raise OptionError("ingest_max_age must be a Go duration such as 1h, got an empty value.")
    if not (math.isfinite(params["lock_timeout"]) and params["lock_timeout"] >= 0):
        raise OptionError("lock_timeout must be a finite number of seconds, 0 or more, got %s." % params["lock_timeout"])
    opts["lock_timeout"] = params["lock_timeout"]
    opts["release_gc_roots"] = bool(params["release_gc_roots"])
    opts["discard_unpacked_layers"] = bool(params["discard_unpacked_layers"])
    value = params.get("build_cache_max_age")
    opts["build_cache_max_age"] = None
    if value is not None and value != "":
        try:
            opts["build_cache_max_age"] = parse_duration(str(value))
        except DurationError as exc:
            raise OptionError("build_cache_max_age must be a Go duration such as 168h or 30m, got %r (%s)." % (value, exc)) from None
        if opts["build_cache_max_age"] < 0:
            raise OptionError("build_cache_max_age must not be negative, got %r." % (value,))
        opts["build_cache_max_age_text"] = str(value).strip()
    opts["remove_unused_volumes"] = bool(params.get("remove_unused_volumes"))
    return opts


def _set(opts, names):
    """The options of ``names`` given a value that does something."""
    return [n for n in names if opts.get(n)]


def _used(path):
    st = os.statvfs(path)
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def run(client, opts, check_mode=False):
    version = client.version()
    result = {"changed": False, "supported": True, "plan": [], "removed": [], "freed_bytes": 0, "warnings": []}
    if is_docker(version.runtime_name):
        if _set(opts, CONTAINERD_ONLY):
            result["warnings"].append("%s apply to containerd and do nothing on Docker Engine (cri-dockerd)." % ", ".join(_set(opts, CONTAINERD_ONLY)))
        if check_mode:
            _run_docker(client, opts, True, result)
            return result
        lock_warnings = []
        with _ledger.NodeLock(_ledger.node_lock_path(client.endpoint), opts["lock_timeout"], what="storage_gc", warnings=lock_warnings):
            _run_docker(client, opts, False, result)
        result["warnings"][:0] = lock_warnings
        return result
    if _set(opts, DOCKER_ONLY):
        names = " and ".join(_set(opts, DOCKER_ONLY))
        result["warnings"].append("%s apply to Docker Engine nodes (cri-dockerd) and do nothing on %s." % (names, version.runtime_name))
    if version.runtime_name != "containerd":
        result["supported"] = False
        result["warnings"].append(CRIO_WARNING % version.runtime_name)
        return result
    # the collector model of the release line containerd runs (an unknown version: the newest, and a warning says so)
    line, note = _containerd_collector.release_line(version.runtime_version)
    if note:
        result["warnings"].append(note)
    if check_mode:
        _run_locked(client, opts, True, result, line)
        return result
    lock_warnings = []
    with _ledger.NodeLock(_ledger.node_lock_path(client.endpoint), opts["lock_timeout"], what="storage_gc", warnings=lock_warnings):
        _run_locked(client, opts, False, result, line)
    result["warnings"][:0] = lock_warnings
    return result


def _key(step):
    """The step's object as _storage_policy.present() names it (a layer blob is a blob)."""
    kind = "content" if step["kind"] == _storage_policy.LAYER_KIND else step["kind"]
    return (kind, step["namespace"], step.get("snapshotter"), step["id"])


def _run_locked(client, opts, check_mode, result, line):
    filesystems = read_imagefs(client)
    imagefs = image_filesystem(filesystems)
    if imagefs is None:
        raise KubenodeGcError("The runtime at %s reports no image filesystem (ImageFsInfo)." % client.endpoint, result=result)
    api = ContainerdClient(client)
    inventory = _inventory.read(api)
    _inventory.measure(api, inventory, _storage_policy.needs_usage(inventory))
    # listed after containerd's metadata: a sandbox started since has a lease the plan cannot have seen
    sandboxes = [s.id for s in client.list_pod_sandbox()]
    snapshotters = None
    if opts["discard_unpacked_layers"]:
        snapshotters, _source = _layer_blobs.cri_snapshotters(dict(client.status(verbose=True).info),
                                                              [fs["mountpoint"] for fs in filesystems if fs["kind"] == "image"])
        if not snapshotters:
            result["warnings"].append(_layer_blobs.NO_SNAPSHOTTER % (client.endpoint, "discard_unpacked_layers removes no layer reference"))
    steps = _storage_policy.plan(inventory, opts["namespaces"], keep_matcher(opts["keep_images"]), opts["ingest_max_age"],
                                 opts["lease_max_age"], time.time_ns(), sandboxes=sandboxes, line=line,
                                 release_gc_roots=opts["release_gc_roots"], discard_snapshotters=snapshotters)
    result["plan"] = [_shown(s) for s in steps]
    result["warnings"] += _storage_policy.notes(inventory, steps)
    if check_mode or not steps:
        return
    before = _used(imagefs["mountpoint"])
    result["already_gone"] = []
    # the steps the module carries out itself; the others (``collected``) are what containerd's collection then frees,
    # a lease, ingest or image among them too: the module never removes those itself
    actions = [s for s in steps if not s.get(_storage_policy.COLLECTED)]
    for step in actions:
        try:
            _free(api, step, inventory, line)
        except ContainerdError as exc:
            if exc.code == "NOT_FOUND":
                # containerd's own GC was first: done, though not by this run
                result["already_gone"].append({k: step[k] for k in ("kind", "namespace", "id")})
                continue
            result["freed_bytes"] = before - _used(imagefs["mountpoint"])
            raise KubenodeGcError("storage_gc stopped at %s %s in namespace %s: %s" % (step["kind"], step["id"], step["namespace"], exc),
                                  result=result) from None
        result["removed"].append(_shown(step))
        result["changed"] = True
    _release_layers(api, [s for s in steps if s["kind"] == _storage_policy.LAYER_KIND], result, imagefs["mountpoint"], before)
    api.collect_garbage(steps[0]["namespace"], SYNC_LEASE_PREFIX)
    # what containerd's collection really removed: the planned objects no longer listed
    left = _storage_policy.present(_inventory.read(api))
    for step in steps:
        if not step.get(_storage_policy.COLLECTED):
            continue
        if _key(step) in left:
            result["warnings"].append("containerd's garbage collection kept %s %s in namespace %s, which the plan expected it to free."
                                      % (step["kind"], step["id"], step["namespace"]))
        else:
            result["removed"].append(_shown(step))
            result["changed"] = True
    result["freed_bytes"] = before - _used(imagefs["mountpoint"])


def _release_layers(api, layer_steps, result, mountpoint, before):
    """Remove the manifests' layer references the layer_blob steps name: one content.Update per manifest, naming all of its
    labels to remove, LABEL_CONCURRENCY in flight. A manifest gone since the read (NOT_FOUND) took its references with it."""
    labels = {}
    for step in layer_steps:
        for manifest, key in step["labels"]:
            labels.setdefault((step["namespace"], manifest), set()).add(key)
    todo = sorted(labels)
    for start in range(0, len(todo), LABEL_CONCURRENCY):
        chunk = todo[start:start + LABEL_CONCURRENCY]
        pending = [(ns, m, api.remove_content_labels_async(ns, m, sorted(labels[(ns, m)]))) for ns, m in chunk]
        failure = None
        for ns, manifest, future in pending:
            try:
                future.result()
            except ContainerdError as exc:
                if exc.code != "NOT_FOUND" and failure is None:
                    failure = (ns, manifest, exc)
                continue
            result["changed"] = True
        if failure is not None:
            result["freed_bytes"] = before - _used(mountpoint)
            ns, manifest, exc = failure
            raise KubenodeGcError("storage_gc stopped at the layer references of manifest %s in namespace %s: %s" % (manifest, ns, exc),
                                  result=result) from None


def _run_docker(client, opts, check_mode, result):
    """storage_gc on the Docker Engine behind cri-dockerd: plan from ``GET /system/df``, remove through the Engine API one
    object at a time, confirm from ``GET /system/df`` again, measure with statvfs."""
    imagefs = image_filesystem(read_imagefs(client))
    if imagefs is None:
        raise KubenodeGcError("The runtime at %s reports no image filesystem (ImageFsInfo)." % client.endpoint, result=result)
    docker_engine = engine_api()
    engine, _info = docker_engine.connect_for(client, imagefs["mountpoint"], "storage_gc", result)
    try:
        _docker_steps(engine, opts, check_mode, result, imagefs["mountpoint"])
    except DockerApiError as exc:
        raise KubenodeGcError(str(exc), result=result) from None
    finally:
        engine.close()


def _docker_steps(engine, opts, check_mode, result, mountpoint):
    steps = _docker_storage.plan(engine.system_df(), time.time_ns(), opts["build_cache_max_age"], opts["remove_unused_volumes"])
    result["plan"] = [dict(s) for s in steps]
    if check_mode or not steps:
        return
    before = _used(mountpoint)
    result["already_gone"] = []
    for step in steps:
        try:
            if step["kind"] == "build_cache":
                # BuildKit checks the age itself too (its "until" filter): a record used since the plan stays
                engine.prune_build_cache({"id": [step["id"]], "until": [opts["build_cache_max_age_text"]]})
            else:
                engine.remove_volume(step["id"])
        except DockerApiError as exc:
            if exc.status == 404:
                result["already_gone"].append({k: step[k] for k in ("kind", "id")})
            elif exc.status == 409:
                result["warnings"].append("Docker kept %s %s: %s" % (step["kind"].replace("_", " "), step["id"], str(exc)))
            else:
                result["freed_bytes"] = before - _used(mountpoint)
                raise KubenodeGcError("storage_gc stopped at %s %s: %s" % (step["kind"], step["id"], exc), result=result) from None
    # what is really gone: the planned objects Docker no longer lists
    df = engine.system_df()
    left = {("build_cache", r.get("ID")) for r in df.get("BuildCache") or []} | {("volume", v.get("Name")) for v in df.get("Volumes") or []}
    gone = {(g["kind"], g["id"]) for g in result["already_gone"]}
    for step in steps:
        if (step["kind"], step["id"]) in gone:
            continue
        if (step["kind"], step["id"]) in left:
            result["warnings"].append("Docker kept %s %s, which the plan expected to go (it came into use since the plan, or a newer "
                                      "record holds it)." % (step["kind"].replace("_", " "), step["id"]))
        else:
            result["removed"].append(dict(step))
            result["changed"] = True
    result["freed_bytes"] = before - _used(mountpoint)


def _shown(step):
    return {k: step[k] for k in ("kind", "namespace", "id", "bytes", "snapshotter", "images") if k in step}


def _free(api, step, inventory, line):
    kind, ns = step["kind"], step["namespace"]
    if kind == "ingest":
        api.abort_ingest(ns, step["id"])
    elif kind == "lease":
        api.delete_lease(ns, step["id"], sync=False)
    elif kind == "image":
        api.delete_image(ns, step["id"], sync=False)
    elif kind == _storage_policy.RELEASE_KIND and step.get("snapshotter") is not None:
        labels = inventory[ns]["snapshots"][(step["snapshotter"], step["id"])]["labels"]
        api.remove_snapshot_labels(ns, step["snapshotter"], step["id"], _containerd_collector.root_keys(labels, line))
    elif kind == _storage_policy.RELEASE_KIND:
        labels = inventory[ns]["content"][step["id"]]["labels"]
        api.remove_content_labels(ns, step["id"], _containerd_collector.root_keys(labels, line))


# The module's options (plugins/modules/storage_gc.py documents them); here so that kubenode.gc.node_audit runs it too.
ARGUMENT_SPEC = dict(
    CRI_COMMON_ARGS,
    namespaces=dict(type="list", elements="str", default=[]),
    keep_images=dict(type="list", elements="str", default=[]),
    ingest_max_age=dict(type="str", default="1h"),
    lease_max_age=dict(type="str"),
    lock_timeout=dict(type="float", default=300.0),
    release_gc_roots=dict(type="bool", default=False),
    discard_unpacked_layers=dict(type="bool", default=False),
    build_cache_max_age=dict(type="str"),
    remove_unused_volumes=dict(type="bool", default=False),
)
