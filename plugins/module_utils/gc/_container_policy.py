# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""The kubelet's container, sandbox and log garbage collection as pure functions (no I/O, no clock).

Follows pkg/kubelet/kuberuntime/kuberuntime_gc.go:

* ``plan_containers``  = evictContainers (MinAge on creation time, per (pod uid, name) units,
                         deleted pods first, then MaxPerPodContainer, then MaxContainers);
* ``plan_sandboxes``   = evictSandboxes (keep the newest sandbox of every live pod; remove only
                         sandboxes that are not ready and that no container references);
* ``plan_pod_log_dirs`` and ``plan_container_log_links`` = evictPodLogsDirectories.

Pod state comes from the caller as two predicates over pod uids: ``deleted(uid)`` (the kubelet's
ShouldPodContentBeRemoved) and ``terminated(uid)`` (ShouldPodRuntimeBeRemoved). Ties the kubelet
leaves to an unstable sort are broken by id, so plans are deterministic.
"""

from __future__ import annotations

KEPT_CONTAINER_REASONS = ("running", "too_young", "within_limits")
KEPT_SANDBOX_REASONS = ("ready", "in_use", "newest")


def _never(uid):
    return False


def _gc_uid(c):
    return c["label_pod_uid"] if "label_pod_uid" in c else c["pod_uid"] or ""


def _newest_first(containers):
    # equal creation times: the higher id counts as newer, as for sandboxes
    return sorted(containers, key=lambda c: (c["created_at_ns"], c["id"]), reverse=True)


def plan_containers(containers, now, min_age, max_per_pod_container, max_containers, deleted=_never, terminated=_never, evict_terminated=False):
    """evictContainers: return (to remove in order, each with a ``reason``; kept counts).

    containers: records with id, name, pod_uid, state (created/running/exited/unknown), created_at_ns, and
    optionally label_pod_uid: the io.kubernetes.pod.uid label ("" without it), which evictableContainers
    groups by; a container without the label belongs to no pod (uid ""), not to its sandbox's pod.
    min_age: ns; a container created less than min_age before ``now`` is never removed.
    max_per_pod_container / max_containers: negative means no limit.
    Reasons: ``pod_deleted``, ``pod_terminated``, ``per_container_limit``, ``node_limit``.
    """
    kept = dict.fromkeys(KEPT_CONTAINER_REASONS, 0)
    units = {}
    for c in containers:
        if c["state"] == "running":
            kept["running"] += 1
        elif c["created_at_ns"] > now - min_age:
            kept["too_young"] += 1
        else:
            units.setdefault((_gc_uid(c), c["name"]), []).append(c)

    removals = []

    def remove(items, reason):
        for c in items:
            removals.append(dict(c, reason=reason))

    # pods that are gone: every evictable container of theirs
    for key in sorted(units):
        uid = key[0]
        if deleted(uid):
            remove(_newest_first(units.pop(key))[::-1], "pod_deleted")
        elif evict_terminated and terminated(uid):
            remove(_newest_first(units.pop(key))[::-1], "pod_terminated")

    def enforce(limit, reason):
        for key in sorted(units):
            ordered = _newest_first(units[key])
            if len(ordered) > limit:
                units[key] = ordered[:limit]
                remove(ordered[limit:][::-1], reason)

    if max_per_pod_container >= 0:
        enforce(max_per_pod_container, "per_container_limit")

    if max_containers >= 0:
        total = sum(len(v) for v in units.values())
        if total > max_containers:
            enforce(max(1, max_containers // len(units)), "node_limit")
            rest = _newest_first([c for v in units.values() for c in v])
            if len(rest) > max_containers:
                remove(rest[max_containers:][::-1], "node_limit")
                gone = {c["id"] for c in rest[max_containers:]}
                units = {k: [c for c in v if c["id"] not in gone] for k, v in units.items()}

    kept["within_limits"] = sum(len(v) for v in units.values())
    return removals, kept


def plan_sandboxes(sandboxes, containers, deleted=_never, terminated=_never, evict_terminated=False):
    """evictSandboxes: return (to remove, oldest first per pod, with a ``reason``; kept counts).

    sandboxes: records with id, uid, state (ready/notready), created_at_ns.
    containers: the containers that still exist (their sandbox_id makes a sandbox active).
    """
    referenced = {c["sandbox_id"] for c in containers}
    kept = dict.fromkeys(KEPT_SANDBOX_REASONS, 0)
    pods = {}
    for s in sandboxes:
        pods.setdefault(s["uid"], []).append(s)
    removals = []
    for uid in sorted(pods):
        ordered = sorted(pods[uid], key=lambda s: (s["created_at_ns"], s["id"]))
        if deleted(uid):
            count, reason = len(ordered), "pod_deleted"
        elif evict_terminated and terminated(uid):
            count, reason = len(ordered), "pod_terminated"
        else:
            count, reason = len(ordered) - 1, "superseded"
        for position, s in enumerate(ordered):
            # one kept reason per sandbox, strongest first
            if s["state"] == "ready":
                kept["ready"] += 1
            elif s["id"] in referenced:
                kept["in_use"] += 1
            elif position >= count:
                kept["newest"] += 1
            else:
                removals.append(dict(s, reason=reason))
    return removals, kept


def pod_uid_of_log_dir(name):
    """The pod uid a /var/log/pods entry names: the text after the last ``_`` (``<ns>_<name>_<uid>`` or ``<uid>``)."""
    return name.rsplit("_", 1)[-1]


def plan_pod_log_dirs(entries, deleted):
    """Entries of the pod logs directory (in listing order) whose pod is deleted."""
    return [e for e in entries if deleted(pod_uid_of_log_dir(e))]


def container_id_of_log_link(name):
    """The container id a /var/log/containers symlink names (after the last ``-``, minus ``.log``), or None."""
    if not name.endswith(".log"):
        return None
    cid = name[: -len(".log")].rsplit("-", 1)[-1]
    return cid if len(cid) >= 6 else None


def plan_container_log_links(dangling, containers):
    """Dangling ``*.log`` symlinks to remove: unparsable, container gone, or container exited.

    dangling: names of symlinks whose target does not exist. containers: the containers that still exist.
    A link to a running, created or unknown container is kept (log rotation races, kubernetes#52172).
    The id may be cut short by the 251-byte name limit: like the runtime's ContainerStatus, a unique id prefix
    resolves to its container, and an unknown or ambiguous one counts as not found.
    """
    state = {c["id"]: c["state"] for c in containers}
    out = []
    for name in dangling:
        cid = container_id_of_log_link(name)
        if cid is not None and cid not in state:
            matches = [i for i in state if i.startswith(cid)]
            cid = matches[0] if len(matches) == 1 else None
        if cid is None or state[cid] == "exited":
            out.append(name)
    return out
