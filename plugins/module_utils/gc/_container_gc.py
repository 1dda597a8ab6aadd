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
import re
import stat
import time

from ansible_collections.kubenode.gc.plugins.module_utils._durations import DurationError, parse_duration
from ansible_collections.kubenode.gc.plugins.module_utils._errors import GcError, OptionError
from ansible_collections.kubenode.gc.plugins.module_utils.cri import _ledger
from ansible_collections.kubenode.gc.plugins.module_utils.cri._cri import LOST_ANSWER_CODES, CriError, cri_options
from ansible_collections.kubenode.gc.plugins.module_utils.cri._snapshot import RUNTIME_BACK_WAIT, read_after_outage, read_containers, read_node, read_sandboxes
from ansible_collections.kubenode.gc.plugins.module_utils.gc import _container_policy as policy

KEPT_KEYS = ("running", "too_young", "within_limits", "sandbox_ready", "sandbox_in_use", "sandbox_newest")
# <kubelet root>/image_manager: the kubelet's pulled-image credential records (KEP-2535); nothing in or above it is removed
CREDENTIAL_RECORDS_DIR = "image_manager"
RESULT_KEYS = ("removed_containers", "removed_sandboxes", "removed_log_paths", "removed_symlinks", "kept", "errors", "already_removed", "unconfirmed")
# a directory below a log root is opened without following a symbolic link (the root itself is the configured path)
_ROOT_FLAGS = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = _ROOT_FLAGS | os.O_NOFOLLOW
# the kubelet's log file of one attempt: <attempt>.log (its rotated copies are <attempt>.log.<suffix>)
_ATTEMPT_LOG = re.compile(r"^[0-9]+\.log$")


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


class SymlinkInTheWay(Exception):
    """A symbolic link stands below a log root where the kubelet keeps a directory: it is never gone through."""

    def __init__(self, parts):
        super().__init__(os.sep.join(parts))
        self.parts = tuple(parts)


def open_below(root, parts):
    """A file descriptor of the directory ``root/parts[0]/parts[1]/...``: ``root`` is followed (it is the configured
    directory), each part below it is opened with O_NOFOLLOW relative to its parent. Raises SymlinkInTheWay at the first
    part that is a symbolic link, FileNotFoundError when a part is missing or is not a directory."""
    fd = os.open(root, _ROOT_FLAGS)
    for n, part in enumerate(parts):
        try:
            child = os.open(part, _DIR_FLAGS, dir_fd=fd)
        except OSError as exc:
            try:
                link = exc.errno in (errno.ELOOP, errno.ENOTDIR) and stat.S_ISLNK(os.lstat(part, dir_fd=fd).st_mode)
            except OSError:
                link = False
            os.close(fd)
            if link:
                raise SymlinkInTheWay(parts[: n + 1]) from None
            if exc.errno == errno.ENOTDIR:
                raise FileNotFoundError(errno.ENOENT, "not a directory") from None
            raise
        os.close(fd)
        fd = child
    return fd


def _group_logs(names):
    groups = {}
    for name in names:
        end = name.find(".log") + 4
        if end >= 4 and (len(name) == end or name[end] == "."):
            groups.setdefault(name[:end], []).append(name)
    return groups


class LogIndex:
    """The log directories a run looks at, each listed once (a node's dead containers share few directories, and one
    listing per container would make planning cost a directory read per container). Directories below a root are
    opened without following symbolic links: a link in the way is remembered, never listed through."""

    def __init__(self):
        self._groups = {}  # (root, parts): {"<attempt>.log": [that log and its rotated copies]} or a SymlinkInTheWay
        self._names = {}  # directory: set of names

    def _listing(self, directory):
        try:
            return os.listdir(directory)
        except OSError:
            return []

    def _group(self, root, parts):
        key = (root, tuple(parts))
        groups = self._groups.get(key)
        if groups is None:
            try:
                fd = open_below(root, parts)
            except SymlinkInTheWay as exc:
                groups = exc
            except OSError:
                groups = {}
            else:
                try:
                    groups = _group_logs(os.listdir(fd))
                except OSError:
                    groups = {}
                finally:
                    os.close(fd)
            self._groups[key] = groups
        return groups

    def logs(self, root, parts, current):
        """``current`` (``<attempt>.log``) and its rotated copies (``<attempt>.log.*``) in ``root/parts...``; raises
        SymlinkInTheWay when a part of the way is a symbolic link."""
        groups = self._group(root, parts)
        if isinstance(groups, SymlinkInTheWay):
            raise groups
        return groups.get(current, [])

    def exists(self, directory, name):
        names = self._names.get(directory)
        if names is None:
            names = self._names[directory] = set(self._listing(directory))
        return name in names


def pod_log_dir_name(c):
    """The kubelet's pod log directory name of a container's pod: <namespace>_<pod>_<uid>."""
    return "%s_%s_%s" % (c["pod_namespace"], c["pod_name"], c["pod_uid"])


def container_logs(c, opts, index=None):
    """(existing log files of a container, current and rotated, and its legacy symlink; the symbolic link in the way
    of its log directory, or None). With a link in the way the files behind it are not listed: the link is what goes."""
    index = index or LogIndex()
    parts = (pod_log_dir_name(c), c["name"])
    root = opts["pod_logs_dir"]
    try:
        paths = [os.path.join(root, *(parts + (name,))) for name in sorted(index.logs(root, parts, "%d.log" % c["attempt"]))]
        symlink = None
    except SymlinkInTheWay as exc:
        symlink = os.path.join(root, *exc.parts)
        paths = [symlink]
    link = log_link_name(c)
    if index.exists(opts["container_logs_dir"], link):
        paths.append(os.path.join(opts["container_logs_dir"], link))
    return paths, symlink


def container_log_paths(c, opts, index=None):
    """Existing log files of a container (current and rotated) and its legacy symlink (or the symbolic link in the way)."""
    return container_logs(c, opts, index)[0]


def scan_pod_logs(root):
    """Every ``<pod dir>/<container dir>`` below the pod logs directory, as {(pod dir, container dir): {"<attempt>.log":
    [names]}}; only real directories are listed (a symbolic link is not gone through) and only ``<digits>.log`` groups
    are kept. Listed before the runtime's containers, so a file no container of that list owns belongs to a container that
    is gone."""
    found = {}
    try:
        pods = sorted(os.listdir(root))
    except OSError:
        return found
    for pod in pods:
        if pod == CREDENTIAL_RECORDS_DIR:
            continue
        try:
            fd = open_below(root, (pod,))
        except (SymlinkInTheWay, OSError):
            continue
        try:
            names = sorted(e.name for e in os.scandir(fd) if e.is_dir(follow_symlinks=False))
        except OSError:
            names = []
        finally:
            os.close(fd)
        for name in names:
            if name == CREDENTIAL_RECORDS_DIR:
                continue
            try:
                fd = open_below(root, (pod, name))
            except (SymlinkInTheWay, OSError):
                continue
            try:
                groups = {k: sorted(v) for k, v in _group_logs(os.listdir(fd)).items() if _ATTEMPT_LOG.match(k)}
            except OSError:
                groups = {}
            finally:
                os.close(fd)
            if groups:
                found[(pod, name)] = groups
    return found


def orphan_logs(scan, containers, skip_pods=()):
    """Log files of the scan that no container of ``containers`` (listed after the scan) owns: {(pod dir, container dir):
    [names]}, pod directories in ``skip_pods`` (removed whole) left out."""
    owned = {(pod_log_dir_name(c), c["name"], "%d.log" % c["attempt"]) for c in containers}
    out = {}
    for (pod, name), groups in sorted(scan.items()):
        if pod in skip_pods:
            continue
        names = [n for current in sorted(groups) if (pod, name, current) not in owned for n in groups[current]]
        if names:
            out[(pod, name)] = names
    return out


def dangling_links(directory):
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return []
    return [n for n in names if n.endswith(".log") and os.path.islink(os.path.join(directory, n)) and not os.path.exists(os.path.join(directory, n))]


def pod_log_dirs(directory):
    """Entries of the pod logs directory that are directories or symbolic links (never followed: a link is removed as a link)."""
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return []
    out = []
    for n in names:
        try:
            mode = os.lstat(os.path.join(directory, n)).st_mode
        except OSError:
            continue
        if stat.S_ISDIR(mode) or stat.S_ISLNK(mode):
            out.append(n)
    return out


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
    # the log files are listed before the containers: a file that no container of the later list owns is a gone container's
    # (node_audit, which reads the node once for all its parts, scans before that read: ``pod_log_scan``)
    scan = opts.get("pod_log_scan")
    if scan is None:
        scan = scan_pod_logs(opts["pod_logs_dir"]) if opts["logs"] else {}
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

    result = {"removed_containers": [], "removed_sandboxes": [], "removed_log_paths": [], "removed_symlinks": [], "errors": [],
              "already_removed": [], "unconfirmed": []}
    kept = dict.fromkeys(KEPT_KEYS, 0)
    kept.update(kept_c)

    if check_mode:
        gone = {c["id"] for c in to_remove}
        result["removed_containers"] = [_container_entry(c) for c in to_remove]
        index = LogIndex()
        for c in to_remove:
            paths, symlink = container_logs(c, opts, index)
            _add_paths(result, paths, symlink)
        remaining = [c for c in containers if c["id"] not in gone]
    else:
        index, pending = LogIndex(), {}
        # the log directories are listed before the removals, as check mode lists them: a runtime that deletes a
        # container's log path with it (cri-dockerd, its link to Docker's json-file log) leaves the same paths to report
        for c in to_remove:
            container_logs(c, opts, index)
        outage = _remove_containers(client, to_remove, opts, result, index, pending)
        remaining = containers
        if outage is not None:
            # the lost answers are sorted by a list read once the runtime is back (a restart), if it comes back in time
            listed = read_after_outage(client, lambda cl: read_containers(cl, sandboxes), RUNTIME_BACK_WAIT) if result["unconfirmed"] else None
            _confirm_containers(result, listed, opts, pending, index)
            result["errors"].append({"id": "", "msg": str(outage)})
            return _finish(result, kept, containers, sandboxes, warnings, stopped=True)
        if to_remove:
            # what really remains: the sandboxes' activity, the dangling links and the lost answers are judged on it
            try:
                remaining = read_containers(client, sandboxes)
            except CriError as exc:
                _confirm_containers(result, None, opts, pending, index)
                result["errors"].append({"id": "", "msg": str(exc)})
                return _finish(result, kept, containers, sandboxes, warnings, stopped=exc.code == "UNAVAILABLE")
            _confirm_containers(result, remaining, opts, pending, index)

    if opts["sandboxes"]:
        sb_remove, kept_s = policy.plan_sandboxes(sandboxes, remaining, **pods)
        for reason, count in kept_s.items():
            kept["sandbox_" + reason] = count
        if check_mode:
            result["removed_sandboxes"] = [_sandbox_entry(s) for s in sb_remove]
        else:
            pending = {}
            outage = _remove_sandboxes(client, sb_remove, opts["parallelism"], result, pending)
            if pending:
                listed = read_after_outage(client, read_sandboxes, 0 if outage is None else RUNTIME_BACK_WAIT)
                _confirm_sandboxes(result, listed, pending)
            if outage is not None:
                result["errors"].append({"id": "", "msg": str(outage)})
                return _finish(result, kept, containers, sandboxes, warnings, stopped=True)

    if opts["logs"]:
        removed_dirs = set()
        if active is not None or evicted:
            for name in policy.plan_pod_log_dirs(pod_log_dirs(opts["pod_logs_dir"]), deleted):
                removed_dirs.add(name)
                if check_mode:
                    _add_paths(result, [os.path.join(opts["pod_logs_dir"], name)], _symlink_or_none(opts["pod_logs_dir"], name))
                else:
                    _remove_tree(opts["pod_logs_dir"], name, result)
        # logs of containers that are gone from the runtime (removed by a run whose answer was lost, say): no container of
        # the list read after the scan owns them
        for (pod, name), names in orphan_logs(scan, containers, removed_dirs).items():
            if check_mode:
                _add_paths(result, [os.path.join(opts["pod_logs_dir"], pod, name, n) for n in names], None)
            else:
                _unlink_below(opts["pod_logs_dir"], (pod, name), names, result, "")
        links = dangling_links(opts["container_logs_dir"])
        if check_mode:
            # the links the removals above would leave dangling
            planned = set(result["removed_log_paths"])
            links = sorted(set(links) | {n for n in _listing(opts["container_logs_dir"]) if _link_target(opts["container_logs_dir"], n) in planned})
        for name in policy.plan_container_log_links(links, remaining):
            path = os.path.join(opts["container_logs_dir"], name)
            if path not in result["removed_log_paths"] and (check_mode or _remove_path(path, result)):
                result["removed_log_paths"].append(path)

    return _finish(result, kept, containers, sandboxes, warnings)


def _listing(directory):
    try:
        return sorted(os.listdir(directory))
    except OSError:
        return []


def _link_target(directory, name):
    try:
        return os.path.join(directory, os.readlink(os.path.join(directory, name)))
    except OSError:
        return None


def _symlink_or_none(root, name):
    path = os.path.join(root, name)
    return path if os.path.islink(path) else None


def _add_paths(result, paths, symlink):
    """Check mode: ``paths`` would be removed (a symbolic link in the way among them, as a link)."""
    for path in paths:
        if path not in result["removed_log_paths"]:
            result["removed_log_paths"].append(path)
    if symlink is not None and symlink not in result["removed_symlinks"]:
        result["removed_symlinks"].append(symlink)


def _finish(result, kept, containers, sandboxes, warnings, stopped=False):
    """The result from what was really done; raises GcError (with that result) when anything failed."""
    result["kept"] = kept
    # a removal whose answer was lost may have happened: it counts as a change until a run shows otherwise
    result["changed"] = bool(result["removed_containers"] or result["removed_sandboxes"] or result["removed_log_paths"] or result["unconfirmed"])
    removed_c = {c["id"] for c in result["removed_containers"]}
    removed_s = {s["id"] for s in result["removed_sandboxes"]}
    result["diff"] = {
        "before": {"containers": sorted(c["id"] for c in containers), "sandboxes": sorted(s["id"] for s in sandboxes)},
        "after": {"containers": sorted(c["id"] for c in containers if c["id"] not in removed_c),
                  "sandboxes": sorted(s["id"] for s in sandboxes if s["id"] not in removed_s)},
    }
    warnings = list(warnings)
    for path in result["removed_symlinks"]:
        warnings.append("%s is a symbolic link where the kubelet keeps a directory; it was removed as a link and nothing it points to was "
                        "touched." % path)
    if result["unconfirmed"]:
        warnings.append("The runtime did not answer %d removal(s) and was not back within %g seconds to confirm them (unconfirmed: %s); the next "
                        "run finds out what is gone and removes the logs of containers that are." % (
                            len(result["unconfirmed"]), RUNTIME_BACK_WAIT, ", ".join(result["unconfirmed"][:5]) + (
                                ", ..." if len(result["unconfirmed"]) > 5 else "")))
    if warnings:
        result["warnings"] = warnings
    if result["errors"]:
        partial = dict({k: result[k] for k in RESULT_KEYS}, changed=result["changed"], diff=result["diff"])
        if warnings:
            partial["warnings"] = list(warnings)
        if stopped:
            unconfirmed = " (%d more unconfirmed)" % len(result["unconfirmed"]) if result["unconfirmed"] else ""
            raise GcError("The runtime became unavailable after %d container(s) and %d sandbox(es) were removed%s, so the run stopped: %s" % (
                len(result["removed_containers"]), len(result["removed_sandboxes"]), unconfirmed, result["errors"][-1]["msg"]), partial)
        raise GcError("Removing %d object(s) failed: %s" % (len(result["errors"]), " ".join(e["msg"] for e in result["errors"])), partial)
    return result


def _credential_path(root, name):
    return CREDENTIAL_RECORDS_DIR in os.path.realpath(root).split(os.sep) + [name]


def _holds_credential_dir(dir_fd):
    """True when the directory open at ``dir_fd`` holds a kubelet image_manager directory at any depth (links not followed)."""
    with os.scandir(dir_fd) as entries:
        subdirs = [e.name for e in entries if e.is_dir(follow_symlinks=False)]
    if CREDENTIAL_RECORDS_DIR in subdirs:
        return True
    for name in subdirs:
        try:
            fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
        except OSError:
            continue
        try:
            if _holds_credential_dir(fd):
                return True
        finally:
            os.close(fd)
    return False


def _rmtree_at(parent_fd, name):
    """Remove the directory ``name`` of ``parent_fd`` and everything in it, every step relative to an open directory and
    never through a symbolic link: a link (also one that replaced a directory meanwhile) is unlinked as a link."""
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            os.unlink(name, dir_fd=parent_fd)
            return
        raise
    try:
        with os.scandir(fd) as entries:
            items = [(e.name, e.is_dir(follow_symlinks=False)) for e in entries]
        for child, is_dir in items:
            if is_dir:
                _rmtree_at(fd, child)
            else:
                os.unlink(child, dir_fd=fd)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=parent_fd)


def _refuse_credentials(result, path):
    result["errors"].append({"id": path, "msg": "Refused to remove %s: it is or holds a kubelet %s directory (pulled-image credential "
                                                "records), which this collection never touches." % (path, CREDENTIAL_RECORDS_DIR)})


def _remove_tree(root, name, result):
    """Remove the pod log directory ``root/name`` (a deleted pod's): a symbolic link there is removed as a link and reported."""
    path = os.path.join(root, name)
    if _credential_path(root, name):
        _refuse_credentials(result, path)
        return False
    try:
        rfd = os.open(root, _ROOT_FLAGS)
    except OSError as exc:
        result["errors"].append({"id": path, "msg": "Cannot remove %s: %s." % (path, exc.strerror or exc)})
        return False
    try:
        mode = os.lstat(name, dir_fd=rfd).st_mode
        if stat.S_ISLNK(mode):
            os.unlink(name, dir_fd=rfd)
            result["removed_symlinks"].append(path)
        elif stat.S_ISDIR(mode):
            fd = os.open(name, _DIR_FLAGS, dir_fd=rfd)
            try:
                held = _holds_credential_dir(fd)
            finally:
                os.close(fd)
            if held:
                _refuse_credentials(result, path)
                return False
            _rmtree_at(rfd, name)
        else:
            return False
    except OSError as exc:
        if exc.errno != errno.ENOENT:
            result["errors"].append({"id": path, "msg": "Cannot remove %s: %s." % (path, exc.strerror or exc)})
        return False
    finally:
        os.close(rfd)
    result["removed_log_paths"].append(path)
    return True


def _remove_path(path, result):
    """Unlink one entry (a link of the container logs directory): never followed."""
    if _credential_path(os.path.dirname(path), os.path.basename(path)):
        _refuse_credentials(result, path)
        return False
    try:
        os.unlink(path)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return False
        result["errors"].append({"id": path, "msg": "Cannot remove %s: %s." % (path, exc.strerror or exc)})
        return False
    return True


def _unlink_below(root, parts, names, result, owner):
    """Unlink the files ``names`` of the directory ``root/parts...``, opened part by part without following a link. A
    symbolic link in the way is removed as a link (reported in removed_symlinks) and nothing behind it is touched."""
    try:
        fd = open_below(root, parts)
    except SymlinkInTheWay as exc:
        _remove_symlink(root, exc.parts, result, owner)
        return
    except FileNotFoundError:
        return
    except OSError as exc:
        path = os.path.join(root, *parts)
        result["errors"].append({"id": owner or path, "msg": "Cannot open the log directory %s: %s." % (path, exc.strerror or exc)})
        return
    try:
        for name in names:
            path = os.path.join(root, *(tuple(parts) + (name,)))
            try:
                os.unlink(name, dir_fd=fd)
            except FileNotFoundError:
                if owner:
                    # listed before the container's removal, gone after it: it went with its container (cri-dockerd's
                    # RemoveContainer deletes the CRI log path, its link to Docker's json-file log, itself)
                    result["removed_log_paths"].append(path)
                continue
            except OSError as exc:
                what = "Removed container %s but not its log %s" % (owner, path) if owner else "Cannot remove %s" % path
                result["errors"].append({"id": owner or path, "msg": "%s: %s." % (what, exc.strerror or exc)})
                continue
            result["removed_log_paths"].append(path)
    finally:
        os.close(fd)


def _remove_symlink(root, parts, result, owner):
    """Unlink the symbolic link ``root/parts...`` itself (its parents opened without following links)."""
    path = os.path.join(root, *parts)
    try:
        fd = open_below(root, parts[:-1])
    except SymlinkInTheWay as exc:  # a parent became a link meanwhile: that one goes
        _remove_symlink(root, exc.parts, result, owner)
        return
    except FileNotFoundError:
        return
    except OSError as exc:
        result["errors"].append({"id": owner or path, "msg": "Cannot remove the symbolic link %s: %s." % (path, exc.strerror or exc)})
        return
    try:
        if not stat.S_ISLNK(os.lstat(parts[-1], dir_fd=fd).st_mode):
            return  # replaced by a directory meanwhile: nothing to do now
        os.unlink(parts[-1], dir_fd=fd)
    except FileNotFoundError:
        return
    except OSError as exc:
        result["errors"].append({"id": owner or path, "msg": "Cannot remove the symbolic link %s: %s." % (path, exc.strerror or exc)})
        return
    finally:
        os.close(fd)
    result["removed_log_paths"].append(path)
    result["removed_symlinks"].append(path)


def _pipeline(client, calls, parallelism, on_answer):
    """Make the ``(key, method, fields)`` calls of the iterable ``calls`` with up to ``parallelism`` of them in flight
    (no pause between batches), and call ``on_answer(key, error)`` for each answer, in the calls' order (``error`` is
    None on success). Answers already in are collected before each new call, so an UNAVAILABLE one is seen at once:
    after it no new call is made, the calls still in flight are collected (each answer is passed on: their successes
    count, their lost answers are re-checked), and the first UNAVAILABLE error is returned."""
    window = collections.deque()
    unavailable = None

    def collect():
        nonlocal unavailable
        key, call = window.popleft()
        try:
            call.result()
        except CriError as exc:
            if exc.code == "UNAVAILABLE" and unavailable is None:
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


def _remove_containers(client, containers, opts, result, index=None, pending=None):
    """Remove containers through a pipeline of up to ``parallelism`` RemoveContainer calls in flight; each one's logs
    go right after its own removal succeeded. Returns the UNAVAILABLE error that stopped the run, or None.

    An UNKNOWN container is stopped first. When RemoveContainer fails, the logs stay. A container that is already gone
    (NOT_FOUND, another run removed it) is "already removed": no error, and not counted as removed by this run. A
    removal whose answer was lost (LOST_ANSWER_CODES) goes to ``result["unconfirmed"]`` (and ``pending``: {id: (record,
    error)}) until a list of containers says whether it happened. After an UNAVAILABLE error no new call
    is made: the calls already in flight are collected (their successes count).
    """
    stop_failed = []
    index = LogIndex() if index is None else index
    pending = {} if pending is None else pending
    result.setdefault("unconfirmed", [])

    def calls():
        for c in containers:
            if c["state"] == "unknown":
                try:
                    client.stop_container(c["id"], 0)
                except CriError as exc:
                    if exc.code == "UNAVAILABLE":
                        stop_failed.append(exc)
                        return
                    result["errors"].append({"id": c["id"], "msg": "Container %s is in unknown state and could not be stopped, so it was kept: %s" % (
                        c["id"], exc)})
                    continue
            yield c, "RemoveContainer", {"container_id": c["id"]}

    def on_answer(c, exc):
        if exc is None:
            _remove_logs(c, opts, result, index)
            result["removed_containers"].append(_container_entry(c))
        elif exc.code == "NOT_FOUND":
            result["already_removed"].append(c["id"])
        elif exc.code in LOST_ANSWER_CODES:
            result["unconfirmed"].append(c["id"])
            pending[c["id"]] = (c, exc)
        else:
            result["errors"].append({"id": c["id"], "msg": str(exc)})

    return _pipeline(client, calls(), opts["parallelism"], on_answer) or (stop_failed[0] if stop_failed else None)


def _confirm_containers(result, listed, opts, pending, index):
    """Sort the removals whose answer was lost by a list of the containers read afterwards (None: the runtime did not
    answer): gone ones are removed (and their logs go now), ones still there failed (an error, unless the runtime was
    away: then the outage is the one error), the rest stay unconfirmed."""
    if listed is None or not pending:
        return
    there = {c["id"] for c in listed}
    for cid, (c, exc) in pending.items():
        result["unconfirmed"].remove(cid)
        if cid not in there:
            _remove_logs(c, opts, result, index)
            result["removed_containers"].append(_container_entry(c))
        elif exc.code != "UNAVAILABLE":
            result["errors"].append({"id": cid, "msg": str(exc)})


def _remove_sandboxes(client, sandboxes, parallelism, result, pending=None):
    """Stop, then remove, the sandboxes through pipelines of up to ``parallelism`` calls in flight; returns the UNAVAILABLE
    error that stopped the run, or None. A sandbox already gone (NOT_FOUND) is "already removed"; a removal whose answer
    was lost is unconfirmed until a list of sandboxes says. After an UNAVAILABLE error the calls in flight are collected."""
    stopped, removed = [], []
    pending = {} if pending is None else pending
    result.setdefault("unconfirmed", [])

    def answered(done, removal):
        def on_answer(s, exc):
            if exc is None:
                done.append(s)
            elif exc.code == "NOT_FOUND":
                result["already_removed"].append(s["id"])
            elif removal and exc.code in LOST_ANSWER_CODES:
                result["unconfirmed"].append(s["id"])
                pending[s["id"]] = (s, exc)
            elif exc.code != "UNAVAILABLE" or removal:
                result["errors"].append({"id": s["id"], "msg": str(exc)})
        return on_answer

    unavailable = _pipeline(client, ((s, "StopPodSandbox", {"pod_sandbox_id": s["id"]}) for s in sandboxes), parallelism, answered(stopped, False))
    if unavailable is None:
        unavailable = _pipeline(client, ((s, "RemovePodSandbox", {"pod_sandbox_id": s["id"]}) for s in stopped), parallelism,
                                answered(removed, True))
    result["removed_sandboxes"].extend(_sandbox_entry(s) for s in removed)
    return unavailable


def _confirm_sandboxes(result, listed, pending):
    """The sandbox removals whose answer was lost, sorted by a list of sandboxes read afterwards (None: no answer)."""
    if listed is None:
        return
    there = {s["id"] for s in listed}
    for sid, (s, exc) in pending.items():
        result["unconfirmed"].remove(sid)
        if sid not in there:
            result["removed_sandboxes"].append(_sandbox_entry(s))
        elif exc.code != "UNAVAILABLE":
            result["errors"].append({"id": sid, "msg": str(exc)})


def _remove_logs(c, opts, result, index=None):
    """A removed container's log files (never through a symbolic link) and its legacy link."""
    index = index or LogIndex()
    parts = (pod_log_dir_name(c), c["name"])
    try:
        names = sorted(index.logs(opts["pod_logs_dir"], parts, "%d.log" % c["attempt"]))
    except SymlinkInTheWay:
        names = []
    _unlink_below(opts["pod_logs_dir"], parts, names, result, c["id"])
    link = log_link_name(c)
    if index.exists(opts["container_logs_dir"], link):
        path = os.path.join(opts["container_logs_dir"], link)
        try:
            os.unlink(path)
        except FileNotFoundError:
            return
        except OSError as exc:
            result["errors"].append({"id": c["id"], "msg": "Removed container %s but not its log %s: %s." % (c["id"], path, exc.strerror or exc)})
            return
        result["removed_log_paths"].append(path)


# The module's own options (plugins/modules/container_gc.py documents them), here so that kubenode.gc.node_audit runs it too; the
# module adds the CRI options (_common.CRI_COMMON_ARGS, which imports Ansible: the gc_timer runner runs without it).
OWN_ARGUMENT_SPEC = dict(
    min_age=dict(type="str", default="0s"),
    max_per_pod_container=dict(type="int", default=1),
    max_containers=dict(type="int", default=-1),
    sandboxes=dict(type="bool", default=True),
    logs=dict(type="bool", default=True),
    pod_logs_dir=dict(type="path", default="/var/log/pods"),
    container_logs_dir=dict(type="path", default="/var/log/containers"),
    active_pod_uids=dict(type="list", elements="str"),
    evicted_pod_uids=dict(type="list", elements="str"),
    evict_terminated_pods=dict(type="bool", default=False),
    parallelism=dict(type="int", default=64),
    lock_timeout=dict(type="float", default=300.0),
)
