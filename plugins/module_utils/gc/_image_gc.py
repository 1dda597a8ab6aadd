# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""One image_gc run: read the node, update the ledger, plan, remove in batches, report.

No Ansible here: ``options()`` checks the module's parameters, ``run()`` takes a CriClient and
those options and returns the result dict (or raises GcError with the result so far). The
planning is _image_policy's; image references and keep patterns are _image_ref's.
"""

from __future__ import annotations

import collections
import math
import os
import time

from ansible_collections.kubenode.gc.plugins.module_utils._durations import DurationError, format_duration, parse_duration
from ansible_collections.kubenode.gc.plugins.module_utils._errors import DockerApiError, GcError, OptionError, PolicyError
from ansible_collections.kubenode.gc.plugins.module_utils.cri import _ledger
from ansible_collections.kubenode.gc.plugins.module_utils.cri._cri import LOST_ANSWER_CODES, CriError, cri_options
from ansible_collections.kubenode.gc.plugins.module_utils.cri._image_pin_policy import parse_version
from ansible_collections.kubenode.gc.plugins.module_utils.cri._image_ref import check_keep_patterns, keep_matcher, patterns_matching
from ansible_collections.kubenode.gc.plugins.module_utils.docker._names import engine_api, is_docker
from ansible_collections.kubenode.gc.plugins.module_utils.gc import _image_policy as policy
from ansible_collections.kubenode.gc.plugins.module_utils._kubelet import (
    IMAGE_GC_HIGH_THRESHOLD_PERCENT,
    IMAGE_GC_LOW_THRESHOLD_PERCENT,
    validate_ages,
    validate_inode_thresholds,
    validate_thresholds,
)
from ansible_collections.kubenode.gc.plugins.module_utils._quantity import byte_amount
from ansible_collections.kubenode.gc.plugins.module_utils.cri._snapshot import (
    RUNTIME_BACK_WAIT,
    image_filesystem,
    image_users,
    read_after_outage,
    read_containers,
    read_image_mounts,
    read_images,
    read_node,
    rfc3339,
    statvfs_usage,
    usage_percent,
)

RESULT_KEYS = ("removed", "kept", "usage_before", "usage_after", "bytes_to_free", "bytes_freed_estimated", "bytes_freed_measured",
               "target_reached", "insufficient", "errors", "ledger", "inodes_usage_before", "inodes_usage_after", "inodes_to_free",
               "inodes_freed_measured", "unconfirmed", "triggered_by", "target", "available_before", "available_after", "listed_kept")
# mode listed: what each reason of a named image that stays says in the warning (in_use is said by listed_kept's containers)
LISTED_RULES = {"sandbox": "the runtime's sandbox image", "pinned": "pinned by the runtime", "keep_list": "kept by keep_images"}

# containerd release lines whose CRI image cache follows image records deleted through containerd's images API (the CRI
# subscribes to containerd's image events): proven on each, with images pulled through the CRI, by
# tests/integration/test_image_gc_native.py. There the pipelined passes (max_age, prune) delete the records without a
# garbage collection and then collect once, instead of one synchronous collection per RemoveImage. Only the lines the
# test command runs are listed (not 2.0, not a future 2.4): other versions, other runtimes (cri-o) and smaller passes
# use the CRI.
NATIVE_LINES = ((1, 6), (1, 7), (2, 1), (2, 2), (2, 3))
# below this many images a pass gains nothing: the CRI's collections, shared by the calls in flight, cost no more than
# the one collection and the wait for the CRI's image cache
NATIVE_MIN_IMAGES = 32
NATIVE_LEASE_PREFIX = "kubenode-gc-image-gc-"
# how long the CRI's image cache may take to drop the deleted images before their records are removed through the CRI
CRI_CATCH_UP_SECONDS = 5.0


def native_removal(runtime):
    """Whether image_gc's pipelined passes remove through containerd's images API on ``runtime`` (read_runtime's record)."""
    if (runtime.get("name") or "").lower() != "containerd":
        return False
    version = parse_version(runtime.get("version"))
    return version is not None and any(version[0] == major and minor in (None, version[1]) for major, minor in NATIVE_LINES)


def record_names(img):
    """The names of an image's containerd records: its tags, its digests and its id (the CRI's own reference)."""
    return list(dict.fromkeys(list(img["repo_tags"]) + list(img.get("repo_digests") or ()) + [img["id"]]))


def free_bytes_targets(params):
    """(free_bytes_high, free_bytes_low) in bytes, checked: both or neither, and low >= high (GC starts below the first and
    frees until the second is available)."""
    high = byte_amount("free_bytes_high", params.get("free_bytes_high"))
    low = byte_amount("free_bytes_low", params.get("free_bytes_low"))
    if (high is None) != (low is None):
        raise OptionError("free_bytes_high and free_bytes_low must be set together, got only %s."
                          % ("free_bytes_high" if low is None else "free_bytes_low"))
    if high is not None and low < high:
        raise OptionError("free_bytes_low (%s) must be at least free_bytes_high (%s): the run starts when fewer than free_bytes_high "
                          "bytes are free and frees until free_bytes_low are." % (params["free_bytes_low"], params["free_bytes_high"]))
    return high, low


def percent_targets(params, bytes_on):
    """(high, low) threshold percents: the kubelet's defaults for the one not set; both None (no percent target) when neither
    is set and byte targets are."""
    high, low = params.get("high_threshold_percent"), params.get("low_threshold_percent")
    if high is None and low is None and bytes_on:
        return None, None
    return (IMAGE_GC_HIGH_THRESHOLD_PERCENT if high is None else high, IMAGE_GC_LOW_THRESHOLD_PERCENT if low is None else low)


def options(params):
    """The module's parameters, checked, as run() takes them: thresholds, durations in ns, limits."""
    free_high, free_low = free_bytes_targets(params)
    high, low = percent_targets(params, free_high is not None)
    opts = dict(cri_options(params), mode=params["mode"], high=high, low=low, free_bytes_high=free_high, free_bytes_low=free_low,
                keep_images=params["keep_images"], ledger_path=params["ledger_path"] or "", measure_freed=params["measure_freed"],
                fail_on_insufficient=params["fail_on_insufficient"], max_removals=params["max_removals"],
                parallelism=params["parallelism"], lock_timeout=params["lock_timeout"],
                inodes_high=params.get("inodes_high_threshold_percent"), inodes_low=params.get("inodes_low_threshold_percent"))
    try:
        if opts["high"] is not None:
            validate_thresholds(opts["high"], opts["low"])
        validate_inode_thresholds(opts["inodes_high"], opts["inodes_low"])
        for name in ("min_age", "max_age"):
            try:
                opts[name] = parse_duration(params[name])
            except DurationError as exc:
                raise PolicyError("%s %r is not a Go duration such as 90s or 1h30m: %s" % (name, params[name], exc))
        validate_ages(opts["min_age"], opts["max_age"])
    except PolicyError as exc:
        raise OptionError(str(exc).rstrip(".") + ".")
    if opts["max_removals"] is not None and opts["max_removals"] < 0:
        raise OptionError("max_removals must be 0 or more, got %d." % opts["max_removals"])
    if opts["parallelism"] < 1:
        raise OptionError("parallelism must be 1 or more, got %d." % opts["parallelism"])
    if opts["ledger_path"] and not os.path.isabs(opts["ledger_path"]):
        raise OptionError("ledger_path must be an absolute path, got %r." % opts["ledger_path"])
    if opts["ledger_path"] and "image_manager" in os.path.realpath(opts["ledger_path"]).split(os.sep):
        raise OptionError("ledger_path %s is in the kubelet's image_manager directory (pulled-image credential records), which is never touched."
                          % opts["ledger_path"])
    if not (math.isfinite(opts["lock_timeout"]) and opts["lock_timeout"] >= 0):
        raise OptionError("lock_timeout must be a finite number of seconds, 0 or more, got %s." % opts["lock_timeout"])
    try:
        check_keep_patterns(opts["keep_images"])
    except ValueError as exc:
        raise OptionError(str(exc))
    opts["images"] = listed_images(params)
    return opts


def listed_images(params):
    """The ``images`` of mode=listed, checked: required there (not empty), refused in every other mode."""
    images = params.get("images")
    if params["mode"] != "listed":
        if images:
            raise OptionError("images names the images mode=listed removes; it is not used with mode=%s, so remove it or set mode=listed." % params["mode"])
        return []
    if not images:
        raise OptionError("mode=listed needs images, the patterns of the images to remove (as in keep_images); none were given.")
    try:
        check_keep_patterns(images, "images", "remove")
    except ValueError as exc:
        raise OptionError(str(exc))
    return list(images)


def free_disk_space_failed(usage, capacity, freed):
    """The kubelet's FreeDiskSpaceFailed text (v1.35+)."""
    return (
        "Insufficient free disk space on the node's image filesystem (%d%% of %s used). Failed to free sufficient space by deleting unused images "
        "(freed %d bytes). Investigate disk usage, as it could be used by active images, logs, volumes, or other data." % (usage, format_size(capacity), freed)
    )


def free_bytes_failed(target, capacity, freed):
    """The byte target's shortfall, worded like FreeDiskSpaceFailed (the kubelet has no byte target, so no text of its own)."""
    return (
        "Insufficient free disk space on the node's image filesystem (free_bytes_low %s of %s not reached). Failed to free sufficient space "
        "by deleting unused images (freed %d bytes). Investigate disk usage, as it could be used by active images, logs, volumes, or other "
        "data." % (format_size(target), format_size(capacity), freed)
    )


def free_inodes_failed(usage, total, freed):
    """The inode pass's shortfall, worded like FreeDiskSpaceFailed (the kubelet has no inode GC, so no text of its own)."""
    return (
        "Insufficient free inodes on the node's image filesystem (%d%% of %d inodes used). Failed to free sufficient inodes by deleting unused images "
        "(freed %d inodes). Investigate inode usage, as it could be used by active images, logs, volumes, or other data." % (usage, total, freed)
    )


def format_size(n):
    """The kubelet's formatSize: binary units, one decimal."""
    if n < 1024:
        return "%d B" % n
    value = float(n)
    for unit in ("KiB", "MiB", "GiB"):
        value /= 1024
        if value < 1024:
            return "%.1f %s" % (value, unit)
    return "%.1f TiB" % (value / 1024)


def _describe(img):
    return "%s (%s)" % (img["id"], ", ".join(img["repo_tags"]) or "untagged")


def run(client, opts, check_mode=False, now=None, statvfs=statvfs_usage):
    """Run image GC with options() output; returns the module result (with ``warnings`` and ``diff``)."""
    if check_mode:
        return _run(client, opts, True, now, statvfs)
    lock_warnings = []
    with _ledger.NodeLock(_ledger.node_lock_path(client.endpoint), opts["lock_timeout"], warnings=lock_warnings):
        result = _run(client, opts, False, now, statvfs)
    result["warnings"][:0] = lock_warnings
    return result


def docker_users(client, mountpoint, containers, sandboxes):
    """On cri-dockerd: (the Docker Engine's client, the containers it runs that the CRI does not list, as container
    records). An image such a container uses is in use, as one a pod uses; without the engine no image can be judged
    unused, so the run fails before anything is removed."""
    docker_engine = engine_api()
    try:
        engine, _info = docker_engine.connect(client.path, mountpoint, timeout=client.timeout, api_calls=client.rpc_calls)
    except DockerApiError as exc:
        raise GcError("image_gc cannot see the containers Docker runs outside Kubernetes, which may use images the CRI lists as "
                      "unused, so it removes nothing: %s" % str(exc).rstrip(".") + ".") from None
    try:
        cri_ids = {c["id"] for c in containers} | {s["id"] for s in sandboxes}
        return engine, docker_engine.outside_containers(engine, cri_ids)
    except DockerApiError as exc:
        engine.close()
        raise GcError("image_gc cannot list the containers Docker runs outside Kubernetes, so it removes nothing: %s" % str(exc).rstrip(".") + ".") from None


def observe(client, opts, now=None):
    """Record what the node runs in the ledger and remove nothing (kubenode.gc.gc_timer's observe-only mode): under the node
    lock, read the node and update the records as a run does (first_detected, last_used), then save the ledger. Returns
    ``{"images", "in_use", "ledger", "warnings", "usage_before", "available_before", "would_remove", "bytes_would_free"}``:
    ``would_remove`` is the plan a run would carry out now (check mode's ``removed`` entries), ``bytes_would_free`` their
    sizes' sum; LedgerError/CriError as run()."""
    if not opts["ledger_path"]:
        raise OptionError("Observing needs a ledger_path: without one there is nothing to record.")
    warnings = []
    with _ledger.NodeLock(_ledger.node_lock_path(client.endpoint), opts["lock_timeout"], warnings=warnings):
        state = _State(client, opts, now, writing=True)
        if state.engine is not None:
            state.engine.close()
        state.ledger["images"] = state.records
        _ledger.save(state.ledger_path, state.ledger)
    planned = new_result(state.plan, True)
    _predict(planned, state, opts)
    return {"images": len(state.images), "in_use": sum(1 for i in state.images if i["in_use"]), "warnings": warnings + state.warnings,
            "ledger": {"path": state.ledger_path, "saved": True, "records": len(state.records)},
            "usage_before": state.plan.usage_before, "available_before": state.plan.available_before,
            "would_remove": planned["removed"], "bytes_would_free": planned["bytes_freed_estimated"]}


class _State:
    """What one run read and decided: the node's images and image filesystem, the ledger and the plan."""

    def __init__(self, client, opts, now, writing=False):
        node = read_node(client, ("runtime", "imagefs", "images"), image_volumes=True)
        self.image_mounts = node["image_mounts"]  # None where the runtime has no image volumes
        self.native = native_removal(node["runtime"])
        fs = image_filesystem(node["imagefs"])
        if fs is None:
            raise GcError("The runtime at %s reports no image filesystem (ImageFsInfo)." % client.endpoint)
        # cri-dockerd: the engine's containers the CRI does not list use images too (docker run, compose, CI jobs)
        self.engine = None
        if is_docker(node["runtime"]["name"]):
            self.engine, outside = docker_users(client, fs["mountpoint"], node["containers"], node["sandboxes"])
            if outside:
                node["containers"] = node["containers"] + outside
                users = image_users(node["images"], node["containers"])
                for img in node["images"]:
                    img["used_by"] = users.get(img["id"], [])
                    img["in_use"] = bool(img["used_by"])
        self.mountpoint, self.capacity, self.available = fs["mountpoint"], fs["capacity_bytes"] or 0, fs["available_bytes"] or 0
        self.inodes_total, self.inodes_free = fs.get("inodes_total") or 0, fs.get("inodes_free") or 0
        self.free_time = now if now is not None else time.time_ns()
        self.ledger_path = opts["ledger_path"]
        self.warnings = []
        if self.ledger_path:
            _ledger.check_path(self.ledger_path, writing, self.warnings)  # a run that writes it refuses another user's path
            self.ledger = _ledger.load(self.ledger_path, self.free_time, self.warnings)
        else:
            self.ledger = _ledger.new_ledger(self.free_time)
        self.images = policy.dedupe(node["images"])
        _assume_gone(self.images, opts.get("assume_gone"))
        self.containers = {c["id"]: c for c in node["containers"]}
        self.raced = []  # images that came into use during the run (the executor's)
        in_use = {i["id"] for i in self.images if i["in_use"]}
        created = {c["id"]: c["created_at_ns"] for c in node["containers"]}
        hints = {i["id"]: min(created[c] for c in i["used_by"]) for i in self.images if i["used_by"]}
        self.records = policy.detect(self.ledger["images"], self.images, in_use, self.free_time, self.free_time, hints)
        gc_opts = policy.PlanOptions(opts["mode"], opts["high"], opts["low"], opts["min_age"], opts["max_age"],
                                     keep=keep_matcher(opts["keep_images"]), max_removals=opts["max_removals"],
                                     inodes_high=opts.get("inodes_high"), inodes_low=opts.get("inodes_low"),
                                     free_bytes_high=opts.get("free_bytes_high"), free_bytes_low=opts.get("free_bytes_low"),
                                     listed=keep_matcher(opts.get("images")))
        self.plan = policy.plan(self.images, self.records, gc_opts, self.free_time, self.capacity, self.available,
                                tracking_since=self.ledger["created"], inodes=(self.inodes_total, self.inodes_free))


def _assume_gone(images, gone):
    """Plan as if the containers and images of ``gone`` ({"containers", "images"}: ids; node_cleanup's check mode passes what
    its earlier steps plan to remove) were gone: those images leave the list, and those containers use nothing."""
    if not gone:
        return
    images[:] = [i for i in images if i["id"] not in gone["images"]]
    for img in images:
        img["used_by"] = [c for c in img["used_by"] if c not in gone["containers"]]
        img["in_use"] = bool(img["used_by"])


def _run(client, opts, check_mode, now, statvfs):
    state = _State(client, opts, now, writing=not check_mode)
    try:
        return _run_state(client, opts, check_mode, statvfs, state)
    finally:
        if state.engine is not None:
            state.engine.close()


def _run_state(client, opts, check_mode, statvfs, state):
    plan = state.plan
    result = new_result(plan, check_mode, opts["mode"])
    result["ledger"]["path"] = state.ledger_path
    result["warnings"].extend(state.warnings)
    if check_mode:
        _predict(result, state, opts)
    else:
        _remove(result, state, opts, client, statvfs)
    _finish(result, state.images)
    _warn_too_young(result, state, opts, check_mode)
    if opts["mode"] == "listed":
        _report_listed(result, state, opts)
    stop = result.pop("stop_message", None)
    ledger_failure = result.pop("ledger_message", None)
    if ledger_failure and (stop or result["errors"] or plan.error):
        result["warnings"].append(ledger_failure)  # the first failure is the message, this one a warning
    if stop:
        raise GcError(stop, _public(result))
    if result["errors"]:
        raise GcError("Removing %d image(s) failed: %s" % (len(result["errors"]), " ".join(e["msg"] for e in result["errors"])), _public(result))
    if plan.error:
        # the kubelet's InvalidDiskCapacity, after the age pass ran
        raise GcError("%s (mountpoint %s)." % (plan.error, state.mountpoint), _public(result))
    if ledger_failure:
        raise GcError(ledger_failure, _public(result))
    shortfall = result.pop("insufficient_message", None)
    if result["insufficient"] and opts["fail_on_insufficient"]:
        raise GcError(shortfall, _public(result))
    return result


def _iso(ns):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ns // 10**9))


def _warn_too_young(result, state, opts, check_mode):
    """A run that removes nothing because every candidate is younger than min_age by the ledger's first sighting says so."""
    young = state.plan.too_young
    if result["removed"] or result["errors"] or not young or state.plan.eligible:
        return
    first = min(img["first_detected"] for img in young)
    newest = max(img["first_detected"] for img in young)
    where = "the ledger %s" % state.ledger_path if state.ledger_path else "this run (no ledger: ledger_path is empty)"
    sightings = "first sighting %s" % _iso(first) if _iso(first) == _iso(newest) else "first sightings %s to %s" % (_iso(first), _iso(newest))
    result["warnings"].append(
        "%s no image: all %d candidate(s) are younger than min_age %s, counted from when image_gc first saw them on this node "
        "(%s, by %s); the first becomes eligible at %s. On a node image_gc never saw, set min_age "
        "(kubenode_gc_cleanup_image_min_age in kubenode.gc.cleanup) to 0s to free space now." % (
            "Would remove" if check_mode else "Removed", len(young), format_duration(opts["min_age"]), sightings, where,
            _iso(first + opts["min_age"])))


def new_result(plan, check_mode, mode=None):
    """The result of a run of ``plan`` before anything is removed (``listed_kept`` a list in mode listed, else None)."""
    return {
        "removed": [],
        "kept": dict(plan.kept),
        "usage_before": plan.usage_before,
        "usage_after": plan.usage_before,
        "bytes_to_free": max(plan.bytes_to_free, 0),
        "bytes_freed_estimated": 0,
        "bytes_freed_measured": None if check_mode else 0,
        "target_reached": True,
        "insufficient": False,
        "errors": [],
        "ledger": {"path": "", "saved": False, "records": 0},
        "warnings": [],
        "inodes_usage_before": plan.inodes_usage_before,
        "inodes_usage_after": plan.inodes_usage_before,
        "inodes_to_free": max(plan.inodes_to_free, 0),
        "inodes_freed_measured": None if check_mode else 0,
        "unconfirmed": [],
        "triggered_by": list(plan.triggered_by),
        "target": plan.target,
        "available_before": plan.available_before,
        "available_after": plan.available_before,
        "listed_kept": [] if mode == "listed" else None,
    }


def _container_entry(container):
    """A container using an image, as listed_kept names it: its pod, its name, its state; ``outside_kubernetes`` for a
    container the CRI does not list (cri-dockerd's engine runs it for someone else: no pod, its Docker name)."""
    return {"pod_namespace": container["pod_namespace"], "pod_name": container["pod_name"], "container": container["name"],
            "state": container["state"], "running": container["state"] == "running",
            "outside_kubernetes": bool(container.get("outside_kubernetes"))}


def _report_listed(result, state, opts):
    """Mode listed: ``listed_kept`` names each image a pattern names that stays, with why (the containers using it, or the
    rule), and a pattern naming a sandbox, pinned or keep-listed image is named in a warning."""
    matching = patterns_matching(opts["images"])
    kept = list(state.plan.listed_kept) + [(img, "in_use") for img in state.raced]
    for img, reason in kept:
        patterns = matching(img)
        users = [state.containers[c] for c in img.get("used_by") or [] if c in state.containers]
        result["listed_kept"].append({"id": img["id"], "repo_tags": list(img["repo_tags"]), "patterns": patterns, "reason": reason,
                                      "containers": [_container_entry(c) for c in users]})
        if reason in LISTED_RULES:
            result["warnings"].append("images pattern%s %s name%s %s, %s: it is never removed and stays." % (
                "s" if len(patterns) > 1 else "", ", ".join(repr(p) for p in patterns), "" if len(patterns) > 1 else "s",
                _describe(img), LISTED_RULES[reason]))


def _predict(result, state, opts):
    """Check mode: the plan as the result, freed bytes and usage after estimated from the image sizes."""
    plan = state.plan
    space_reason = opts["mode"] if opts["mode"] in ("prune", "listed") else "space"
    result["removed"] = [_entry(i, "age") for i in plan.age] + [_entry(i, space_reason) for i in plan.space] + [_entry(i, "inodes") for i in plan.inode_space]
    result["bytes_freed_estimated"] = sum(r["size"] for r in result["removed"])
    if state.capacity:
        result["usage_after"] = usage_percent(state.capacity, state.available + result["bytes_freed_estimated"])
        result["available_after"] = min(state.capacity, state.available + result["bytes_freed_estimated"])
    if state.inodes_total:
        # every planned removal frees the average inodes per image (the CRI gives no per-image count)
        per_image = policy.inode_estimate(state.inodes_total - state.inodes_free, len(state.images))
        result["inodes_usage_after"] = usage_percent(state.inodes_total, min(state.inodes_total, state.inodes_free + per_image * len(result["removed"])))
    if plan.threshold_hit and plan.estimated_short:
        # a planned shortfall is a result, not a warning: nothing has failed yet (the real run warns)
        _insufficient(result, plan, state.capacity, sum(i["size"] for i in plan.space), warn=False)
    if plan.inode_hit and plan.inodes_estimated_short:
        _insufficient_inodes(result, plan, state.inodes_total, plan.inode_estimate * len(plan.inode_space), warn=False)


def _remove(result, state, opts, client, statvfs):
    """The removals: age pass, then prune or the threshold pass; then what was freed, what was kept, the ledger."""
    plan, capacity = state.plan, state.capacity
    executor = _Executor(client, opts, result, getattr(state, "image_mounts", None), getattr(state, "native", False), getattr(state, "engine", None))
    executor.remove(plan.age, "age")
    if executor.stopped:
        pass
    elif result["errors"]:
        # freeOldImages' error ends GarbageCollect before the threshold pass
        result["stop_message"] = "wanted to free images older than %s, encountered errors in image deletion: %s" % (
            format_duration(opts["max_age"]), _aggregate(result["errors"]))
    elif opts["mode"] in ("prune", "listed"):
        executor.remove(plan.space, opts["mode"])
    elif plan.threshold_hit:
        budget = None if opts["max_removals"] is None else max(0, opts["max_removals"] - len(result["removed"]))
        target_available = plan.target_available
        if opts["measure_freed"]:
            def remaining():
                return target_available - min(statvfs(state.mountpoint)["available_bytes"], capacity)
        else:
            def remaining():
                return plan.bytes_to_free - executor.freed_by_reason["space"]
        errors_before = len(result["errors"])
        # measured: only images of the size-based plan (what check mode returns), measurement may stop earlier, never go
        # further; unmeasured: the kubelet's freeSpace, which goes on past a failed removal
        candidates = plan.space if opts["measure_freed"] else plan.eligible
        executor.until(candidates, "space", remaining, budget, calibrate=opts["measure_freed"])
        if executor.stalled:
            result["warnings"].append(
                "Removing %d image(s) freed no measurable space on %s (the runtime frees space lazily, or their layers are shared with images "
                "still in use), so the threshold pass stopped there rather than remove more than needed." % (executor.stalled, state.mountpoint))
        if executor.stopped:
            pass
        elif len(result["errors"]) > errors_before:
            # freeSpace's error replaces the FreeDiskSpaceFailed event
            result["stop_message"] = "wanted to free %d bytes, but freed %d bytes space with errors in image deletion: %s" % (
                plan.bytes_to_free, executor.freed_by_reason["space"], _aggregate(result["errors"][errors_before:]))
        elif remaining() > 0:
            _insufficient(result, plan, capacity, executor.freed_by_reason["space"])
    if plan.inode_hit and not result.get("stop_message") and not executor.stopped:
        _inode_pass(result, state, opts, executor, statvfs)
    # removals whose answer was lost: sorted by a list of images read once the runtime answers again (after an outage,
    # a bounded wait for a restart)
    executor.confirm(RUNTIME_BACK_WAIT if executor.stopped else 0)
    executor.confirm_removed()
    if executor.stopped:
        # the runtime failed mid-run (it went away, or the container re-list failed): no further call, the partial result
        more = " (%d more unconfirmed)" % len(result["unconfirmed"]) if result["unconfirmed"] else ""
        result["stop_message"] = "The run stopped after %d image(s) were removed%s: %s" % (len(result["removed"]), more, executor.stopped)
    if result["unconfirmed"]:
        result["warnings"].append(
            "The runtime did not answer %d removal(s) and was not back within %g seconds to confirm them (unconfirmed: %s); their ledger records "
            "are kept, and the next run finds out what is gone." % (len(result["unconfirmed"]), RUNTIME_BACK_WAIT, ", ".join(
                result["unconfirmed"][:5]) + (", ..." if len(result["unconfirmed"]) > 5 else "")))

    after = statvfs(state.mountpoint)
    result["bytes_freed_estimated"] = sum(r["size"] for r in result["removed"])
    result["bytes_freed_measured"] = max(0, after["available_bytes"] - state.available)
    result["usage_after"] = after["usage_percent"] if capacity else None
    result["available_after"] = after["available_bytes"] if capacity else None
    if state.inodes_total and after.get("inodes_total"):
        result["inodes_usage_after"] = usage_percent(after["inodes_total"], after["inodes_free"])
        result["inodes_freed_measured"] = max(0, after["inodes_free"] - state.inodes_free)
    # one reason per image not removed: what the plan protected or skipped, races, and the rest not needed
    kept = result["kept"]
    kept["in_use"] += len(executor.raced)
    failed = len([e for e in result["errors"] if e["id"]]) + len(result["unconfirmed"]) + executor.interrupted
    kept["not_needed"] = len(state.images) - len(result["removed"]) - failed - sum(v for k, v in kept.items() if k != "not_needed")
    state.raced = list(executor.raced)
    for img in executor.raced:
        result["warnings"].append("Image %s came into use during the run and was kept." % _describe(img))
    if state.ledger_path:
        for entry in result["removed"]:
            state.records.pop(entry["id"], None)
        state.ledger["images"] = state.records
        result["ledger"]["records"] = len(state.records)
        try:
            _ledger.save(state.ledger_path, state.ledger)
        except _ledger.LedgerError as exc:
            # the old ledger stays as it was (atomic write); what was removed is still reported
            text = str(exc)
            result["ledger_message"] = "Removed %d image(s), but %s" % (len(result["removed"]), text[0].lower() + text[1:]) if result["removed"] else text
        else:
            result["ledger"]["saved"] = True


def _inode_pass(result, state, opts, executor, statvfs):
    """The inode pass (no kubelet equivalent): after the byte pass, the eligible images left, in the same order, in
    measured batches until statvfs shows inode usage at or below the low inode threshold."""
    plan, total = state.plan, state.inodes_total
    target_free = policy.target_inodes_free(total, opts["inodes_low"])

    def remaining():
        return target_free - min(statvfs(state.mountpoint)["inodes_free"], total)

    if remaining() <= 0:
        return  # the passes before freed enough inodes
    gone = {r["id"] for r in result["removed"]} | {e["id"] for e in result["errors"]} | {i["id"] for i in executor.raced} | set(executor.pending)
    planned_ids = {i["id"] for i in plan.inode_space}
    # only images of the plan (what check mode returns): measurement may stop earlier, never go further
    candidates = [i for i in plan.eligible if i["id"] not in gone and i["id"] in planned_ids]
    budget = None if opts["max_removals"] is None else max(0, opts["max_removals"] - len(result["removed"]))
    executor.stalled = 0
    per_image = max(1, plan.inode_estimate)
    executor.until(candidates, "inodes", remaining, budget, calibrate=True, weight=lambda img: per_image)
    freed = max(0, statvfs(state.mountpoint)["inodes_free"] - state.inodes_free)
    if executor.stalled:
        result["warnings"].append(
            "Removing %d image(s) freed no inodes on %s (the runtime frees them lazily, or their layers are shared with images still in use), "
            "so the inode pass stopped there rather than remove more than needed." % (executor.stalled, state.mountpoint))
    if remaining() > 0:
        _insufficient_inodes(result, plan, total, freed)


def _insufficient_inodes(result, plan, total, freed, warn=True):
    """Inode usage not down to the low inode threshold; the byte pass's shortfall message, if any, stays the one a failure gives."""
    result["target_reached"] = False
    result["insufficient"] = True
    message = free_inodes_failed(plan.inodes_usage_before, total, freed)
    result.setdefault("insufficient_message", message)
    if warn:
        result["warnings"].append(message)


def _aggregate(errors):
    """apimachinery's errors.NewAggregate text: one error is its own text, several are [e1, e2] (duplicates collapsed)."""
    texts = list(dict.fromkeys(e["msg"] for e in errors))
    return texts[0] if len(texts) == 1 else "[%s]" % ", ".join(texts)


def _insufficient(result, plan, capacity, freed, warn=True):
    """Not down to the low threshold: the kubelet's FreeDiskSpaceFailed text, as a warning unless ``warn`` is false (a plan)."""
    result["target_reached"] = False
    result["insufficient"] = True
    if plan.target == "bytes":
        result["insufficient_message"] = free_bytes_failed(plan.target_available, capacity, freed)
    else:
        result["insufficient_message"] = free_disk_space_failed(plan.usage_before, capacity, freed)
    if warn:
        result["warnings"].append(result["insufficient_message"])


def _finish(result, images):
    gone = {r["id"] for r in result["removed"]}
    before = sorted(_describe(i) for i in images)
    after = sorted(_describe(i) for i in images if i["id"] not in gone)
    result["diff"] = {"before": "\n".join(before) + "\n", "after": "\n".join(after) + "\n"}
    # a removal whose answer was lost may have happened: it counts as a change until a run shows otherwise
    result["changed"] = bool(result["removed"] or result.get("unconfirmed"))


def _public(result):
    """The result a failed run returns: the documented keys, changed and the warnings."""
    return dict({k: result[k] for k in RESULT_KEYS}, changed=result["changed"], warnings=result["warnings"])


def _entry(img, reason):
    return {
        "id": img["id"],
        "repo_tags": list(img["repo_tags"]),
        "size": img["size"],
        "reason": reason,
        "first_detected": rfc3339(img["first_detected"]),
        "last_used": rfc3339(img["last_used"]),
    }


class _Executor:
    """Removes images through a pipeline of concurrent calls, re-listing containers before each batch of calls."""

    def __init__(self, client, opts, result, image_mounts=None, native=False, engine=None):
        self.client = client
        self.engine = engine  # cri-dockerd's Docker Engine: its containers are listed with the CRI's before each batch
        self.via_cri = []  # images whose RemoveImage answered success: confirmed from the image list at the end
        self.listed_after = None  # the image ids a list read after the last removal holds
        self.native = native  # containerd whose CRI follows its images API: the pipelined passes remove through it
        self.image_mounts = image_mounts  # {container id: mounted image refs} already read, or None: no image volumes
        self.parallelism = max(1, opts["parallelism"])
        self.result = result
        self.raced = []
        self.freed_by_reason = {"age": 0, "space": 0, "prune": 0, "inodes": 0, "listed": 0}
        self.stalled = 0  # removals of the last batch when it freed no measurable space (the pass stopped), else 0
        self.stopped = None  # the CriError that stopped the run: the runtime is unavailable, or the container re-list failed
        self.pending = {}  # removals whose answer was lost: {id: (image, reason, CriError)}, in result["unconfirmed"] until confirmed
        self.interrupted = 0  # removals whose answer was lost in an outage and that a later list found not done

    def _still_unused(self, batch):
        """Drop images a container started using since the plan (race with the kubelet)."""
        containers = read_containers(self.client, [])
        if self.image_mounts is not None:
            # mounts are fixed at creation: only containers created since the last look need a ContainerStatus
            read_image_mounts(self.client, containers, self.image_mounts)
        if self.engine is not None:
            # every container of the engine, those outside Kubernetes among them (the CRI's own are listed twice: harmless)
            docker_engine = engine_api()
            try:
                containers += docker_engine.outside_containers(self.engine, set())
            except DockerApiError as exc:
                raise CriError(str(exc)) from None
        users = image_users(batch, containers)
        keep = [i for i in batch if i["id"] not in users]
        self.raced.extend(i for i in batch if i["id"] in users)
        return keep

    def _checked(self, batch):
        """``batch`` without the images a container started using since the plan; None (and the run stops) when the
        containers cannot be listed: without that list no image can be judged unused."""
        try:
            return self._still_unused(batch)
        except CriError as exc:
            self.result["errors"].append({"id": "", "msg": str(exc)})
            self.stopped = exc
            return None

    def confirm(self, wait):
        """Sort the removals whose answer was lost by a list of images read once the runtime answers (within ``wait``
        seconds): gone ones are removed, ones still there failed (an error of their own unless the runtime was away: the
        outage is then the one error), and without an answer they stay unconfirmed."""
        if not self.pending:
            return
        listed = read_after_outage(self.client, read_images, wait)
        if listed is None:
            return
        there = {i["id"] for i in listed}
        self.listed_after = there  # read after every removal: it confirms the others too (confirm_removed)
        for image_id, (img, reason, exc) in self.pending.items():
            self.result["unconfirmed"].remove(image_id)
            if image_id not in there:
                self._removed(img, reason)
            elif exc.code == "UNAVAILABLE":
                self.interrupted += 1
            else:
                self.result["errors"].append({"id": image_id, "msg": str(exc)})
        self.pending = {}

    def _start(self, img):
        return img, self.client.call_async("RemoveImage", image={"image": img["id"]})

    def _collect(self, img, fut, reason):
        """Wait for one RemoveImage; True when it answered success (confirm_removed() then checks the image list)."""
        try:
            fut.result()
        except CriError as exc:
            user = engine_api().conflict_container(str(exc)) if self.engine is not None else None
            if user:
                # Docker refused: a container it started since the last list uses the image (it may have untagged it first)
                self.raced.append(img)
                self.result["warnings"].append("Docker refused to remove image %s: container %s uses it (it came into use during the run); "
                                               "Docker may have removed some of its tags before refusing." % (_describe(img), user))
                return False
            self._failed(img, reason, exc)
            return False
        self._removed(img, reason)
        self.via_cri.append(img["id"])
        return True

    def confirm_removed(self):
        """A removal is confirmed from the image list, never from RemoveImage's answer alone (cri-dockerd answers success
        for a name it removes nothing of): one ListImages after the removals; an image RemoveImage answered for that is
        still listed is not removed but a failed removal."""
        if not self.via_cri or self.stopped:
            return
        listed = self.listed_after
        if listed is None:
            try:
                listed = {i["id"] for i in read_images(self.client)}
            except CriError as exc:
                self.result["errors"].append({"id": "", "msg": str(exc)})
                self.stopped = exc
                return
        still = set(self.via_cri) & listed
        if not still:
            return
        for entry in [r for r in self.result["removed"] if r["id"] in still]:
            self.result["removed"].remove(entry)
            self.freed_by_reason[entry["reason"]] -= entry["size"]
            msg = "The runtime answered RemoveImage of %s with success but still lists the image." % entry["id"]
            self.result["errors"].append({"id": entry["id"], "msg": msg})

    def _removed(self, img, reason):
        self.result["removed"].append(_entry(img, reason))
        self.freed_by_reason[reason] += img["size"]

    def _failed(self, img, reason, exc):
        """One removal failed with ``exc``: an error, or unconfirmed when its answer was lost."""
        if exc.code == "UNAVAILABLE" and self.stopped is None:
            self.stopped = exc  # the runtime went away: no new call; the outage is one error of the run
            self.result["errors"].append({"id": "", "msg": str(exc)})
        if exc.code in LOST_ANSWER_CODES:
            # the runtime may have removed it: unconfirmed until a list of images says
            self.pending[img["id"]] = (img, reason, exc)
            self.result["unconfirmed"].append(img["id"])
        else:
            self.result["errors"].append({"id": img["id"], "msg": str(exc)})

    def _remove_batch(self, batch, reason):
        """Remove one batch (all in flight at once) and wait for all of it: the measured passes measure between batches."""
        batch = self._checked(batch)
        if batch is None:
            return []
        started = [self._start(img) for img in batch]
        return [img for img, fut in started if self._collect(img, fut, reason)]

    def remove(self, images, reason):
        """Remove every image of the list through a pipeline that keeps up to ``parallelism`` RemoveImage calls in
        flight, with no pause between batches (containerd's content GC is shared by the calls waiting for it, so a full
        pipeline is what makes it fast). Containers are listed again before each run of ``parallelism`` new calls, while
        the earlier calls are still in flight: an image's call starts at most ``parallelism`` calls after the container
        list that found it unused. On containerd whose CRI follows its images API (``native``), a pass of at least
        NATIVE_MIN_IMAGES images deletes the records instead (_remove_native), under the same rules."""
        if self.native and len(images) >= NATIVE_MIN_IMAGES:
            self._remove_native(images, reason)
            return
        self._pipeline(images, lambda img: self._start(img)[1], lambda fut: fut.done(), lambda img, fut: self._collect(img, fut, reason))

    def _pipeline(self, images, start, done, collect):
        """remove()'s pipeline: ``start(img)`` starts an image's removal and returns what ``done()`` (answered yet?) and
        ``collect(img, started)`` (wait, record the outcome) take; at most ``parallelism`` in flight, the containers
        listed again before each run of ``parallelism`` new ones."""
        window = collections.deque()
        for first in range(0, len(images), self.parallelism):
            while window and done(window[0][1]):
                collect(*window.popleft())  # answers already in: an UNAVAILABLE one stops the run here
            if self.stopped:
                break
            batch = self._checked(images[first : first + self.parallelism])
            if batch is None:
                break
            for img in batch:
                if self.stopped:
                    break
                if len(window) >= self.parallelism:
                    collect(*window.popleft())
                window.append((img, start(img)))
        while window:
            collect(*window.popleft())

    def _remove_native(self, images, reason):
        """remove() through containerd's images API: the same pipeline and container re-lists, each image's records
        (record_names) deleted without a garbage collection; then one synchronous collection for the pass, and a wait
        (CRI_CATCH_UP_SECONDS at most) until the CRI's image cache, which follows containerd's image events, lists none
        of them. An image the CRI still lists then goes through RemoveImage: an image is reported removed once the CRI
        no longer lists it (or, when the CRI cannot list images and the run stops, once containerd deleted its records)."""
        # imported here: containerd's API client and its generated messages cost every other run an import for nothing
        from ansible_collections.kubenode.gc.plugins.module_utils.containerd._client import (  # pylint: disable=import-outside-toplevel
            CRI_NAMESPACE,
            ContainerdClient,
        )

        api = ContainerdClient(self.client)
        deleted = []

        def collect(img, futures):
            errors = []
            for fut in futures:  # every answer is awaited, even after a failure
                try:
                    fut.result()
                except CriError as exc:
                    if exc.code != "NOT_FOUND":  # no record of that name: already gone
                        errors.append(exc)
            if errors:
                self._failed(img, reason, errors[0])
            else:
                deleted.append(img)

        self._pipeline(images, lambda img: [api.delete_image_async(CRI_NAMESPACE, name) for name in record_names(img)],
                       lambda futures: all(f.done() for f in futures), collect)
        if not deleted:
            return
        if self.stopped:
            # the runtime went away: their records are gone, containerd collects them when it is back
            for img in deleted:
                self._removed(img, reason)
            return
        try:
            api.collect_garbage(CRI_NAMESPACE, NATIVE_LEASE_PREFIX)
        except CriError as exc:
            self.result["warnings"].append("The garbage collection after removing %d image(s) failed (%s); containerd frees their space at its "
                                           "next one." % (len(deleted), str(exc).rstrip(".")))
        # containerd answered every deletion: when the CRI cannot list images (the run stops), they are removed all the same
        listed = self._cri_catch_up({img["id"] for img in deleted}) or set()
        for img in deleted:
            if img["id"] not in listed:
                self._removed(img, reason)
        left = [img for img in deleted if img["id"] in listed]
        while left and not self.stopped:
            batch, left = left[: self.parallelism], left[self.parallelism :]
            for img, fut in [self._start(img) for img in batch]:
                self._collect(img, fut, reason)

    def _cri_catch_up(self, ids):
        """Which of ``ids`` the CRI still lists once its image cache caught up (CRI_CATCH_UP_SECONDS at most), or None
        (the run stops) when it cannot list images."""
        deadline = time.monotonic() + CRI_CATCH_UP_SECONDS
        pause = 0.005
        while True:
            try:
                listed = {i["id"] for i in read_images(self.client)} & ids
            except CriError as exc:
                self.result["errors"].append({"id": "", "msg": str(exc)})
                self.stopped = exc
                return None
            if not listed or time.monotonic() >= deadline:
                return listed
            time.sleep(pause)
            pause = min(pause * 2, 0.2)

    def until(self, candidates, reason, remaining, budget, calibrate=False, weight=None):
        """Remove candidates in order until ``remaining()`` (bytes, or what ``weight`` counts, still to free) is <= 0 after a
        successful removal. Each batch is sized to the remaining need: by the images' sizes (or ``weight(img)``), scaled
        (when ``calibrate``) by how many bytes a removed byte of image size really freed so far,
        which starts from a first batch of one image.

        When ``calibrate``: a batch that frees no measurable space ends the pass (``stalled``). The
        callers pass only images of the plan check mode returns, so a pass never goes past it."""
        if weight is None:
            def weight(img):
                return img["size"]
        queue = list(candidates)
        queue.reverse()  # pop() from the end
        taken = 0
        need = remaining()
        succeeded = 0
        ratio = 1.0
        while queue and (budget is None or taken < budget) and not self.stopped:
            if succeeded and need <= 0:
                break
            limit = 1 if calibrate and not succeeded else self.parallelism
            batch, total = [], 0
            while queue and len(batch) < limit and (budget is None or taken + len(batch) < budget):
                img = queue.pop()
                batch.append(img)
                total += weight(img) * ratio
                if total >= need:
                    break
            taken += len(batch)
            removed = self._remove_batch(batch, reason)
            done = len(removed)
            succeeded += done
            if self.stopped:
                break
            before_need, need = need, remaining()
            est = sum(weight(i) for i in removed)
            if calibrate and est > 0:
                if before_need <= need:
                    # removals that free nothing measurable: going on could remove every eligible image for nothing
                    self.stalled = done
                    break
                ratio = min(10.0, max(0.1, float(before_need - need) / est))
        return self.freed_by_reason[reason]


# The module's own options (plugins/modules/image_gc.py documents them), here so that kubenode.gc.node_audit runs it too; the
# module adds the CRI options (_common.CRI_COMMON_ARGS, which imports Ansible: the gc_timer runner runs without it).
OWN_ARGUMENT_SPEC = dict(
    mode=dict(type="str", choices=["threshold", "prune", "listed"], default="threshold"),
    images=dict(type="list", elements="str"),
    high_threshold_percent=dict(type="int"),
    low_threshold_percent=dict(type="int"),
    free_bytes_high=dict(type="raw"),
    free_bytes_low=dict(type="raw"),
    inodes_high_threshold_percent=dict(type="int"),
    inodes_low_threshold_percent=dict(type="int"),
    min_age=dict(type="str", default="2m"),
    max_age=dict(type="str", default="0s"),
    keep_images=dict(type="list", elements="str", default=[]),
    ledger_path=dict(type="path", default="/var/lib/kubenode-gc/image-ledger.json"),
    measure_freed=dict(type="bool", default=True),
    fail_on_insufficient=dict(type="bool", default=False),
    max_removals=dict(type="int"),
    parallelism=dict(type="int", default=512),
    lock_timeout=dict(type="float", default=300.0),
)
