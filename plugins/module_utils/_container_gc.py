# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""One container_gc run: check the options, read the node, plan with _container_policy, remove, report.

No Ansible here. Log files are found from the kubelet's layout
(``<pod_logs_dir>/<namespace>_<pod>_<uid>/<container>/<attempt>.log`` and rotated copies, and the
legacy symlink ``<container_logs_dir>/<pod>_<namespace>_<container>-<id>.log``), so no per-container
status call is needed.
"""

from __future__ import annotations

import collections
import errno
import math
import os
import shutil
import time

from ansible_collections.kubenode.gc.plugins.module_utils import _container_policy as policy
from ansible_collections.kubenode.gc.plugins.module_utils import _ledger
from ansible_collections.kubenode.gc.plugins.module_utils._cri import CriError, cri_options
from ansible_collections.kubenode.gc.plugins.module_utils._durations import DurationError, parse_duration
from ansible_collections.kubenode.gc.plugins.module_utils._errors import GcError, OptionError
from ansible_collections.kubenode.gc.plugins.module_utils._snapshot import read_containers, read_node

KEPT_KEYS = ("running", "too_young", "within_limits", "sandbox_ready", "sandbox_in_use", "sandbox_newest")
# <kubelet root>/image_manager: the kubelet's pulled-image credential records (KEP-2535); nothing in or above it is removed
CREDENTIAL_RECORDS_DIR = "image_manager"
RESULT_KEYS = ("removed_containers", "removed_sandboxes", "removed_log_paths", "kept", "errors", "already_removed")


def options(params):
    """The module's parameters, checked, as run() takes them (min_age in ns)."""
    try:
        min_age = parse_duration(params["min_age"])
    except DurationError as exc:
        raise OptionError("min_age %r is not a Go duration such as 1m or 1h30m: %s." % (params["min_age"], exc))
    if min_age < 0:
        raise OptionError("invalid minimum garbage collection age: %s." % params["min_age"])
    for name in ("pod_logs_dir", "container_logs_dir"):
        if params.get(name) and os.path.exists(params[name]) and not os.path.isdir(params[name]):
            raise OptionError("%s %s exists but is not a directory." % (name, params[name]))
        if params.get(name) and CREDENTIAL_RECORDS_DIR in os.path.realpath(params[name]).split(os.sep):
            raise OptionError("%s %s is in the kubelet's %s directory (pulled-image credential records), which is never touched." % (
                name, params[name], CREDENTIAL_RECORDS_DIR))
    if not (math.isfinite(params["lock_timeout"]) and params["lock_timeout"] >= 0):
        raise OptionError("lock_timeout must be a finite number of seconds, 0 or more, got %s." % params["lock_timeout"])
    if params["parallelism"] < 1:
        raise OptionError("parallelism must be 1 or more, got %d." % params["parallelism"])
    names = ("lock_timeout", "parallelism", "max_per_pod_container", "max_containers", "sandboxes", "logs", "pod_logs_dir", "container_logs_dir",
             "active_pod_uids", "evicted_pod_uids", "evict_terminated_pods")
    return dict(cri_options(params), min_age=min_age, **{k: params[k] for k in names})


def log_link_name(c):
    """The kubelet's legacy symlink name: <pod>_<namespace>_<container>-<id>, truncated to 251 bytes, plus .log."""
    base = "%s_%s_%s-%s" % (c["pod_name"], c["pod_namespace"], c["name"], c["id"])
    return base.encode()[:251].decode(errors="ignore") + ".log"


class LogIndex:
    """The log directories a run looks at, each listed once (a node's dead containers share few directories, and one
    listing per container would make planning cost a directory read per container)."""

    def __init__(self):
        self._groups = {}  # directory: {"<attempt>.log": [that log and its rotated copies]}
        self._names = {}  # directory: set of names

    def _listing(self, directory):
        try:
            return os.listdir(directory)
        except OSError:
            return []

    def logs(self, directory, current):
        """``current`` (``<attempt>.log``) and its rotated copies (``<attempt>.log.*``) that exist in ``directory``."""
        groups = self._groups.get(directory)
        if groups is None:
            groups = self._groups[directory] = {}
            for name in self._listing(directory):
                end = name.find(".log") + 4
                if end >= 4 and (len(name) == end or name[end] == "."):
                    groups.setdefault(name[:end], []).append(name)
        return groups.get(current, [])

    def exists(self, directory, name):
        names = self._names.get(directory)
        if names is None:
            names = self._names[directory] = set(self._listing(directory))
        return name in names


def container_log_paths(c, opts, index=None):
    """Existing log files of a container (current and rotated) and its legacy symlink."""
    index = index or LogIndex()
    container_dir = os.path.join(opts["pod_logs_dir"], "%s_%s_%s" % (c["pod_namespace"], c["pod_name"], c["pod_uid"]), c["name"])
    paths = [os.path.join(container_dir, name) for name in sorted(index.logs(container_dir, "%d.log" % c["attempt"]))]
    link = log_link_name(c)
    if index.exists(opts["container_logs_dir"], link):
        paths.append(os.path.join(opts["container_logs_dir"], link))
    return paths


def dangling_links(directory):
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return []
    return [n for n in names if n.endswith(".log") and os.path.islink(os.path.join(directory, n)) and not os.path.exists(os.path.join(directory, n))]


def pod_log_dirs(directory):
    try:
        return sorted(n for n in os.listdir(directory) if os.path.isdir(os.path.join(directory, n)))
    except FileNotFoundError:
        return []


def _container_entry(c):
    return {k: c[k] for k in ("id", "pod_uid", "pod_name", "name", "state", "created_at", "reason")}


def _sandbox_entry(s):
    return {"id": s["id"], "pod_uid": s["uid"], "pod_name": s["name"], "pod_namespace": s["namespace"], "state": s["state"],
            "created_at": s["created_at"], "reason": s["reason"]}


def run(client, opts, check_mode=False, now=None):
    """Run container GC with options() output; returns the module result (with ``diff``), or raises GcError when a removal failed.

    Outside check mode the run holds the node lock of the runtime endpoint (the one image_gc takes too).
    """
    if check_mode:
        return _run(client, opts, True, now)
    lock_warnings = []
    with _ledger.NodeLock(_ledger.node_lock_path(client.endpoint), opts["lock_timeout"], what="container_gc", warnings=lock_warnings):
        result = _run(client, opts, False, now)
    if lock_warnings:
        result["warnings"] = lock_warnings + result.get("warnings", [])
    return result


def _run(client, opts, check_mode, now):
    node = read_node(client, ("containers", "sandboxes"))
    containers, sandboxes = node["containers"], node["sandboxes"]
    now = now if now is not None else time.time_ns()

    active = None if opts["active_pod_uids"] is None else set(opts["active_pod_uids"])
    evicted = set(opts["evicted_pod_uids"] or ())
    running_pods = {c["pod_uid"] for c in containers if c["state"] == "running"}
    warnings = []
    if active is not None and running_pods - active:
        # a list of live pods that misses pods with running containers is almost always a mistake (a failed API query)
        missing = sorted(running_pods - active)
        warnings.append("active_pod_uids does not list %d pod(s) that have running containers (%s); they are treated as live and "
                        "nothing of theirs is removed." % (len(missing), ", ".join(missing[:5]) + (", ..." if len(missing) > 5 else "")))

    def deleted(uid):
        # ShouldPodContentBeRemoved: an evicted pod, or one missing from the list of live pods; without that list
        # no other pod is treated as deleted (the kubelet before all sources are ready). A pod with a running
        # container is never deleted, whatever the lists say.
        return uid not in running_pods and (uid in evicted or (active is not None and uid not in active))

    ready_pods = {s["uid"] for s in sandboxes if s["state"] == "ready"} | {c["pod_uid"] for c in containers if c["state"] == "running"}

    def terminated(uid):
        # node-local: no ready sandbox and no running container left (or deleted); like deletion, it needs the
        # list of live pods (the kubelet decides it only once all pod sources are ready)
        return active is not None and (deleted(uid) or uid not in ready_pods)

    pods = dict(deleted=deleted, terminated=terminated, evict_terminated=opts["evict_terminated_pods"])
    to_remove, kept_c = policy.plan_containers(containers, now, opts["min_age"], opts["max_per_pod_container"], opts["max_containers"], **pods)

    result = {"removed_containers": [], "removed_sandboxes": [], "removed_log_paths": [], "errors": [], "already_removed": []}
    kept = dict.fromkeys(KEPT_KEYS, 0)
    kept.update(kept_c)

    if check_mode:
        gone = {c["id"] for c in to_remove}
        result["removed_containers"] = [_container_entry(c) for c in to_remove]
        index = LogIndex()
        for c in to_remove:
            result["removed_log_paths"] += container_log_paths(c, opts, index)
        remaining = [c for c in containers if c["id"] not in gone]
    else:
        try:
            _remove_containers(client, to_remove, opts, result)
            remaining = read_containers(client, sandboxes) if to_remove else containers
        except RuntimeUnavailable:
            return _finish(result, kept, containers, sandboxes, warnings, stopped=True)
        except CriError as exc:  # the re-read after the removals
            result["errors"].append({"id": "", "msg": str(exc)})
            return _finish(result, kept, containers, sandboxes, warnings, stopped=exc.code == "UNAVAILABLE")

    if opts["sandboxes"]:
        sb_remove, kept_s = policy.plan_sandboxes(sandboxes, remaining, **pods)
        for reason, count in kept_s.items():
            kept["sandbox_" + reason] = count
        if check_mode:
            result["removed_sandboxes"] = [_sandbox_entry(s) for s in sb_remove]
        else:
            try:
                _remove_sandboxes(client, sb_remove, opts["parallelism"], result)
            except RuntimeUnavailable:
                return _finish(result, kept, containers, sandboxes, warnings, stopped=True)

    if opts["logs"]:
        if active is not None or evicted:
            for name in policy.plan_pod_log_dirs(pod_log_dirs(opts["pod_logs_dir"]), deleted):
                path = os.path.join(opts["pod_logs_dir"], name)
                if check_mode or _remove_path(path, result, tree=True):
                    result["removed_log_paths"].append(path)
        links = dangling_links(opts["container_logs_dir"])
        for name in policy.plan_container_log_links(links, remaining):
            path = os.path.join(opts["container_logs_dir"], name)
            if path not in result["removed_log_paths"] and (check_mode or _remove_path(path, result)):
                result["removed_log_paths"].append(path)

    return _finish(result, kept, containers, sandboxes, warnings)


def _finish(result, kept, containers, sandboxes, warnings, stopped=False):
    """The result from what was really done; raises GcError (with that result) when anything failed."""
    result["kept"] = kept
    result["changed"] = bool(result["removed_containers"] or result["removed_sandboxes"] or result["removed_log_paths"])
    removed_c = {c["id"] for c in result["removed_containers"]}
    removed_s = {s["id"] for s in result["removed_sandboxes"]}
    result["diff"] = {
        "before": {"containers": sorted(c["id"] for c in containers), "sandboxes": sorted(s["id"] for s in sandboxes)},
        "after": {"containers": sorted(c["id"] for c in containers if c["id"] not in removed_c),
                  "sandboxes": sorted(s["id"] for s in sandboxes if s["id"] not in removed_s)},
    }
    if warnings:
        result["warnings"] = list(warnings)
    if result["errors"]:
        partial = dict({k: result[k] for k in RESULT_KEYS}, changed=result["changed"], diff=result["diff"])
        if warnings:
            partial["warnings"] = list(warnings)
        if stopped:
            raise GcError("The runtime became unavailable after %d container(s) and %d sandbox(es) were removed, so the run stopped: %s" % (
                len(result["removed_containers"]), len(result["removed_sandboxes"]), result["errors"][-1]["msg"]), partial)
        raise GcError("Removing %d object(s) failed: %s" % (len(result["errors"]), " ".join(e["msg"] for e in result["errors"])), partial)
    return result


def _holds_credential_records(path, tree):
    """True when ``path`` is in a kubelet image_manager directory or (a tree) holds one."""
    if CREDENTIAL_RECORDS_DIR in os.path.realpath(path).split(os.sep):
        return True
    if tree and not os.path.islink(path):
        for _root, dirs, _files in os.walk(path):
            if CREDENTIAL_RECORDS_DIR in dirs:
                return True
    return False


def _remove_path(path, result, tree=False):
    if _holds_credential_records(path, tree):
        result["errors"].append({"id": path, "msg": "Refused to remove %s: it is or holds a kubelet %s directory (pulled-image credential "
                                                    "records), which this collection never touches." % (path, CREDENTIAL_RECORDS_DIR)})
        return False
    try:
        if tree:
            shutil.rmtree(path)
        else:
            os.unlink(path)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return False
        result["errors"].append({"id": path, "msg": "Cannot remove %s: %s." % (path, exc.strerror or exc)})
        return False
    return True


def _pipeline(client, calls, parallelism, on_answer):
    """Make the ``(key, method, fields)`` calls of the iterable ``calls`` with up to ``parallelism`` of them in flight
    (no pause between batches), and call ``on_answer(key, error)`` for each answer, in the calls' order (``error`` is
    None on success). Answers already in are collected before each new call, so an UNAVAILABLE one is seen at once:
    after it no new call is made, the calls still in flight are collected (their successes count, a further
    UNAVAILABLE answer of the same outage is not reported again), and it is returned."""
    window = collections.deque()
    unavailable = None

    def collect():
        nonlocal unavailable
        key, call = window.popleft()
        try:
            call.result()
        except CriError as exc:
            if exc.code == "UNAVAILABLE":
                if unavailable is not None:
                    return
                unavailable = exc
            on_answer(key, exc)
            return
        on_answer(key, None)

    for key, method, fields in calls:
        while window and (len(window) >= parallelism or window[0][1].done()):
            collect()
        if unavailable is not None:
            break
        window.append((key, client.call_async(method, **fields)))
    while window:
        collect()
    return unavailable


def _remove_containers(client, containers, opts, result):
    """Remove containers through a pipeline of up to ``parallelism`` RemoveContainer calls in flight; each one's logs
    go right after its own removal succeeded.

    An UNKNOWN container is stopped first. When RemoveContainer fails, the logs stay. A container that is already gone
    (NOT_FOUND, another run removed it) is "already removed": no error, and not counted as removed by this run. After
    an UNAVAILABLE error no new call is made: the calls already in flight are collected (their successes count) and
    RuntimeUnavailable ends the run.
    """
    stop_failed = []
    index = LogIndex()

    def calls():
        for c in containers:
            if c["state"] == "unknown":
                try:
                    client.stop_container(c["id"], 0)
                except CriError as exc:
                    result["errors"].append({"id": c["id"], "msg": "Container %s is in unknown state and could not be stopped, so it was kept: %s" % (
                        c["id"], exc)})
                    if exc.code == "UNAVAILABLE":
                        stop_failed.append(exc)
                        return
                    continue
            yield c, "RemoveContainer", {"container_id": c["id"]}

    def on_answer(c, exc):
        if exc is None:
            _remove_logs(c, opts, result, index)
            result["removed_containers"].append(_container_entry(c))
        elif exc.code == "NOT_FOUND":
            result["already_removed"].append(c["id"])
        else:
            result["errors"].append({"id": c["id"], "msg": str(exc)})

    unavailable = _pipeline(client, calls(), opts["parallelism"], on_answer) or (stop_failed[0] if stop_failed else None)
    if unavailable is not None:
        raise RuntimeUnavailable(str(unavailable))


def _remove_sandboxes(client, sandboxes, parallelism, result):
    """Stop, then remove, the sandboxes through pipelines of up to ``parallelism`` calls in flight; returns the ones
    removed, in order. A sandbox already gone (NOT_FOUND) is "already removed". After an UNAVAILABLE error the calls in
    flight are collected and RuntimeUnavailable ends the run."""
    stopped, removed = [], []

    def answered(done):
        def on_answer(s, exc):
            if exc is None:
                done.append(s)
            elif exc.code == "NOT_FOUND":
                result["already_removed"].append(s["id"])
            else:
                result["errors"].append({"id": s["id"], "msg": str(exc)})
        return on_answer

    unavailable = _pipeline(client, ((s, "StopPodSandbox", {"pod_sandbox_id": s["id"]}) for s in sandboxes), parallelism, answered(stopped))
    if unavailable is None:
        unavailable = _pipeline(client, ((s, "RemovePodSandbox", {"pod_sandbox_id": s["id"]}) for s in stopped), parallelism, answered(removed))
    result["removed_sandboxes"].extend(_sandbox_entry(s) for s in removed)
    if unavailable is not None:
        raise RuntimeUnavailable(str(unavailable))
    return removed


def _remove_logs(c, opts, result, index=None):
    for path in container_log_paths(c, opts, index):
        try:
            os.unlink(path)
        except FileNotFoundError:
            continue
        except OSError as exc:
            result["errors"].append({"id": c["id"], "msg": "Removed container %s but not its log %s: %s." % (c["id"], path, exc.strerror or exc)})
            continue
        result["removed_log_paths"].append(path)


class RuntimeUnavailable(Exception):
    """The runtime went away mid-run: stop calling it."""
