# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""The fleet view of the audit report (schema 2): node health, headroom, the fleet's images, groups and trends.

Pure: no I/O, no clock, no Ansible. ``enrich()`` adds the schema 2 fields to the report the audit_report filter
built; ``view()`` derives what the HTML and Markdown renderings show (worst-first rows, findings grouped by code,
drift grouped by key and value); ``history_point()`` reduces a report to what the trend charts need.
"""

from __future__ import annotations

from collections.abc import Mapping

from ansible_collections.kubenode.gc.plugins.module_utils._kubelet import EVICTION_HARD
from ansible_collections.kubenode.gc.plugins.module_utils._quantity import QuantityError, parse_quantity
from ansible_collections.kubenode.gc.plugins.module_utils.config._findings import SEVERITIES, sort_findings
from ansible_collections.kubenode.gc.plugins.module_utils.cri._image_ref import display_ref
from ansible_collections.kubenode.gc.plugins.plugin_utils import _report_eviction, _report_gc_targets, _report_listed
from ansible_collections.kubenode.gc.plugins.plugin_utils._fleet import as_int as _int
from ansible_collections.kubenode.gc.plugins.plugin_utils._gc_table import human_bytes

# Worst first: the order of the node table and of the status counts.
HEALTH = ("critical", "failed", "warning", "ok")
EVICTION_SIGNAL = "imagefs.available"
DEFAULT_EVICTION = EVICTION_HARD[EVICTION_SIGNAL]  # the kubelet's evictionHard default for imagefs.available
TOP_IMAGES = 50


def _result(value):
    """A registered result that succeeded, else None."""
    if not isinstance(value, Mapping) or value.get("failed") or value.get("unreachable") or value.get("skipped"):
        return None
    return value


def eviction_bytes(threshold, capacity):
    """The bytes an evictionHard ``imagefs.available`` value stands for: ``15%`` of capacity, or a quantity (``2Gi``)."""
    if threshold is None or capacity is None:
        return None
    text = str(threshold).strip()
    try:
        if text.endswith("%"):
            return int(float(text[:-1]) * capacity / 100)
        return int(parse_quantity(text).value)
    except (ValueError, QuantityError):
        return None


def high_headroom(available, capacity, high):
    """Bytes that can still be written before the kubelet's usage, 100 - floor(available * 100 / capacity), reaches
    ``high``; 0 or less when it is already there (then minus the bytes to free to get just under it)."""
    if available is None or not capacity or high is None:
        return None
    # usage < high  <=>  available * 100 >= (101 - high) * capacity
    need = -(-(101 - high) * capacity // 100)
    return available - need + 1


def _eviction_threshold(kubelet):
    effective = (kubelet or {}).get("effective")
    hard = effective.get("evictionHard") if isinstance(effective, Mapping) else None
    if isinstance(hard, Mapping):
        # an evictionHard map without imagefs.available has no image filesystem eviction threshold
        value = hard.get(EVICTION_SIGNAL)
        return (None if value is None else str(value)), "kubelet_config"
    return DEFAULT_EVICTION, "default"


def _health(node):
    if node["status"] == "failed":
        return "failed"
    severities = {f["severity"] for f in node["findings"]}
    eviction = node["headroom"]["eviction_bytes"]
    if "error" in severities or (eviction is not None and eviction < 0):
        return "critical"
    if "warning" in severities or node["over_high_threshold"]:
        return "warning"
    return "ok"


def _image_key(image):
    """repository:tag of an image (module_utils/cri/_image_ref.display_ref); node_audit's summary rows carry it as ``ref``."""
    ref = image.get("ref")
    if isinstance(ref, str):
        return ref
    return display_ref(image.get("repo_tags"), image.get("repo_digests"))


def split_ref(ref):
    """(repository, tag) of repository:tag, where the registry may have a port."""
    slash = ref.rfind("/")
    colon = ref.rfind(":")
    if colon > slash:
        return ref[:colon], ref[colon + 1:]
    return ref, ""


def _node_images(raw):
    """[(key, size, in_use, reclaimable)] of one node, from cri_info's images and the prune plan's removals."""
    cri = _result(raw.get("cri_info"))
    images = (cri or {}).get("images")
    if not isinstance(images, list):
        return []
    prune = _result(raw.get("image_gc_prune"))
    removed = (prune or {}).get("removed")
    reclaimable = {r.get("id") for r in removed if isinstance(r, Mapping)} if isinstance(removed, list) else set()
    out = []
    for image in images:
        if isinstance(image, Mapping):
            out.append((_image_key(image), _int(image.get("size")) or 0, bool(image.get("in_use")), image.get("id") in reclaimable))
    return out


def fleet_images(per_node, top=TOP_IMAGES):
    """The images by repository:tag across nodes, most bytes first (then by name), at most ``top`` of them.

    ``per_node`` is [(host, [(key, size, in_use, reclaimable)])]. Returns (entries, number of distinct references).
    """
    acc = {}
    for host, images in per_node:
        for key, size, in_use, reclaimable in images:
            entry = acc.get(key)
            if entry is None:
                entry = acc[key] = [0, 0, set(), set(), set()]
            entry[0] += size
            entry[2].add(host)
            if in_use:
                entry[3].add(host)
            if reclaimable:
                entry[1] += size
                entry[4].add(host)
    ranked = sorted(acc.items(), key=lambda item: (-item[1][0], item[0]))[:top]
    out = []
    for key, (size, reclaimable, hosts, in_use, recl_hosts) in ranked:
        repository, tag = split_ref(key)
        out.append(dict(ref=key, repository=repository, tag=tag, nodes=len(hosts), in_use_nodes=len(in_use), bytes=size,
                        reclaimable_bytes=reclaimable, reclaimable_nodes=len(recl_hosts)))
    return out, len(acc)


def enrich(report, raw_nodes, top_images=TOP_IMAGES, eviction_margin=_report_eviction.DEFAULT_MARGIN_PERCENT):
    """Add the schema 2 fields to ``report`` (changed in place and returned); ``raw_nodes`` are the filter's input;
    ``eviction_margin``: percentage points above a hard eviction threshold that count as near it."""
    raw_by_host = {}
    for raw in raw_nodes:
        raw_by_host.setdefault(str(raw["host"]), raw)
    per_node = []
    usages = []
    for node in report["nodes"]:
        raw = raw_by_host.get(node["host"], {})
        fs = node["imagefs"]
        threshold, source = _eviction_threshold(_result(raw.get("kubelet_config")))
        threshold_bytes = eviction_bytes(threshold, fs["capacity_bytes"])
        node["thresholds"]["eviction_available"] = threshold
        node["thresholds"]["eviction_available_bytes"] = threshold_bytes
        node["thresholds"]["eviction_source"] = source
        available = fs["available_bytes"]
        high = high_headroom(available, fs["capacity_bytes"], node["thresholds"]["high_percent"])
        node["headroom"] = dict(
            high_threshold_bytes=None if node["status"] == "failed" else high,
            eviction_bytes=None if node["status"] == "failed" or available is None or threshold_bytes is None
            else available - threshold_bytes,
        )
        if node["headroom"]["eviction_bytes"] is not None and node["headroom"]["eviction_bytes"] < 0:
            message = ("The image filesystem %s has %s available, below the kubelet's hard eviction threshold imagefs.available %s (%s): "
                       "the kubelet evicts pods to reclaim it." % (fs["mountpoint"] or "(unknown mountpoint)", human_bytes(available), threshold, source))
            node["findings"].append(dict(source="audit", severity="error", code="eviction_threshold_reached", message=message))
        _report_eviction.add(node, raw, eviction_margin)
        _report_gc_targets.add(node, raw)
        _report_listed.add(node, raw)
        node["findings"] = sort_findings(node["findings"], by=("source", "code", "message"))
        node["health"] = _health(node)
        if node["status"] != "failed":
            per_node.append((node["host"], _node_images(raw)))
            if fs["usage_percent"] is not None:
                usages.append(fs["usage_percent"])
    images, refs = fleet_images(per_node, top_images)
    summary = report["summary"]
    summary["findings"] = {severity: sum(1 for n in report["nodes"] for f in n["findings"] if f["severity"] == severity)
                           for severity in SEVERITIES}
    summary["nodes_by_health"] = {h: sum(1 for n in report["nodes"] if n["health"] == h) for h in HEALTH}
    summary["nodes_near_eviction"] = sum(1 for n in report["nodes"] if n["near_eviction"])
    summary["usage_percent_mean"] = round(sum(usages) / len(usages), 1) if usages else None
    summary["usage_percent_max"] = max(usages) if usages else None
    summary["image_refs"] = refs
    report["images"] = images
    report["listed_images"] = _report_listed.fleet(report["nodes"])  # kubenode_gc_remove_images, None without it
    return report


# ---------------------------------------------------------------------------------------------- the view
def rank_key(node):
    """Worst first: health, then usage (highest first, unknown last), then the smaller eviction headroom, then host."""
    usage = node["imagefs"]["usage_percent"]
    eviction = node.get("headroom", {}).get("eviction_bytes")
    return (HEALTH.index(node.get("health", "ok")), usage is None, -(usage or 0), eviction is None, eviction or 0, node["host"])


def _severity_counts(node):
    counts = {"error": 0, "warning": 0, "info": 0}
    for f in node["findings"]:
        counts[f["severity"]] = counts.get(f["severity"], 0) + 1
    return counts


def audited_count(nodes):
    """The nodes a spread is measured against: those audited (a failed node has no findings or drift to count)."""
    return sum(1 for n in nodes if n.get("status") != "failed")


def _scope(count, total):
    if total and count == total:
        return "every node"
    if count == 1:
        return "one-off"
    if total and count * 2 >= total:
        return "fleet-wide"
    return "some nodes"


def findings_by_code(nodes):
    """Findings grouped by (severity, source, code): the hosts each affects, worst and most widespread first."""
    total = audited_count(nodes)
    groups = {}
    for node in nodes:
        for f in node["findings"]:
            key = (f["severity"], f["source"], f["code"])
            entry = groups.setdefault(key, {"hosts": [], "messages": {}, "count": 0})
            entry["count"] += 1
            if not entry["hosts"] or entry["hosts"][-1] != node["host"]:
                entry["hosts"].append(node["host"])
            entry["messages"][f["message"]] = entry["messages"].get(f["message"], 0) + 1
    out = []
    for (severity, source, code), entry in groups.items():
        message = sorted(entry["messages"].items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
        out.append(dict(severity=severity, source=source, code=code, nodes=len(entry["hosts"]), hosts=entry["hosts"],
                        findings=entry["count"], example=message, distinct_messages=len(entry["messages"]),
                        scope=_scope(len(entry["hosts"]), total)))
    severities = ("error", "warning", "info")
    out.sort(key=lambda g: (severities.index(g["severity"]) if g["severity"] in severities else 9, -g["nodes"], g["source"], g["code"]))
    return out


def _value(value):
    return "-" if value is None else str(value)


def drift_by_key(nodes):
    """Drift grouped by (component, key), then by (desired, actual): how many nodes have each value."""
    total = audited_count(nodes)
    groups = {}
    for node in nodes:
        for d in node["drift"]:
            key = (_value(d["component"]), _value(d["key"]))
            values = groups.setdefault(key, {})
            values.setdefault((_value(d["desired"]), _value(d["actual"])), []).append(node["host"])
    out = []
    for (component, key), values in groups.items():
        variants = [dict(desired=desired, actual=actual, nodes=len(hosts), hosts=hosts)
                    for (desired, actual), hosts in sorted(values.items(), key=lambda kv: (-len(kv[1]), kv[0]))]
        hosts = sorted({h for v in variants for h in v["hosts"]})
        out.append(dict(component=component, key=key, nodes=len(hosts), scope=_scope(len(hosts), total), values=variants))
    out.sort(key=lambda g: (-g["nodes"], g["component"], g["key"]))
    return out


def history_point(report):
    """What the trend charts keep of a report: its time, fleet figures and each audited node's usage and reclaimable bytes.

    A failed node is left out (it was not measured, so it is not 0 bytes); a report where no node was audited has
    ``audited`` 0 and no fleet figures, and ``trend()`` leaves it out."""
    if not isinstance(report, Mapping) or not isinstance(report.get("nodes"), list):
        return None
    usages, reclaimable, audited = {}, {}, 0
    for node in report["nodes"]:
        if isinstance(node, Mapping) and node.get("status") != "failed" and node.get("host") is not None:
            audited += 1
            usage = _int((node.get("imagefs") or {}).get("usage_percent"))
            if usage is not None:
                usages[str(node["host"])] = usage
            images = node.get("images") if isinstance(node.get("images"), Mapping) else {}
            policy = images.get("reclaimable_policy") if isinstance(images.get("reclaimable_policy"), Mapping) else {}
            if _int(policy.get("bytes")) is not None:
                reclaimable[str(node["host"])] = _int(policy.get("bytes"))
    summary = report.get("summary") if isinstance(report.get("summary"), Mapping) else {}
    return dict(
        generated_at=None if report.get("generated_at") is None else str(report["generated_at"]),
        nodes=len(report["nodes"]),
        audited=audited,
        usage_mean=round(sum(usages.values()) / len(usages), 1) if usages else None,
        usage_max=max(usages.values()) if usages else None,
        reclaimable_policy=_int(summary.get("reclaimable_bytes_policy")) if audited else None,
        reclaimable_prune=_int(summary.get("reclaimable_bytes_prune")) if audited else None,
        over_high=_int(summary.get("nodes_over_high_threshold")) if audited else None,
        usage=usages,
        reclaimable=reclaimable,
    )


def trend(history, report):
    """The points to chart, oldest first: ``history`` (history_point dicts, any order) then this report; earlier audits
    where no node could be audited are left out."""
    points = [p for p in (history or []) if isinstance(p, Mapping) and p.get("generated_at") and p.get("audited", 1)]
    current = history_point(report)
    points = [p for p in points if p["generated_at"] != current["generated_at"]]
    points.sort(key=lambda p: p["generated_at"])
    return points + [current]


def since_last(points):
    """The change since the previous audit over the nodes audited in both (a failed audit is neither 0 nor a change):
    dict(usage_mean=(now, before) or None, reclaimable_policy=(now, before) or None, since=its time), or None."""
    if len(points) < 2:
        return None
    before, now = points[-2], points[-1]
    out = dict(since=before["generated_at"], usage_mean=None, reclaimable_policy=None)
    common = sorted(set(before.get("usage") or {}) & set(now.get("usage") or {}))
    if common:
        out["usage_mean"] = (round(sum(now["usage"][h] for h in common) / len(common), 1),
                             round(sum(before["usage"][h] for h in common) / len(common), 1))
    if isinstance(before.get("reclaimable"), Mapping):
        common = sorted(set(before["reclaimable"]) & set(now.get("reclaimable") or {}))
        if common:
            out["reclaimable_policy"] = (sum(now["reclaimable"][h] for h in common), sum(before["reclaimable"][h] for h in common))
    elif before.get("reclaimable_policy") is not None and now.get("reclaimable_policy") is not None:
        out["reclaimable_policy"] = (now["reclaimable_policy"], before["reclaimable_policy"])
    return out


def view(report, history=None):
    """Everything the renderings show, derived from the report (and the history points)."""
    nodes = report["nodes"]
    ranked = sorted(nodes, key=rank_key)
    points = trend(history, report)
    previous = points[-2] if len(points) > 1 else None
    return dict(
        ranked=ranked,
        counts={n["host"]: _severity_counts(n) for n in nodes},
        findings=findings_by_code(nodes),
        drift=drift_by_key(nodes),
        points=points,
        previous=previous,
        since_last=since_last(points),
        series={host: [p["usage"].get(host) for p in points] for host in (n["host"] for n in nodes)},
    )


def summary_line(report, history=None):
    """One line for the console: the fleet's state and, with history, the change since the previous audit."""
    s = report["summary"]
    health = s.get("nodes_by_health") or {}
    parts = ["%d node%s" % (s["nodes"], "" if s["nodes"] == 1 else "s")]
    parts.append(", ".join("%d %s" % (health.get(h, 0), h) for h in HEALTH if health.get(h)) or "none audited")
    line = "%s, health: %s" % (parts[0], parts[1])
    line += "; %d over the high threshold" % s["nodes_over_high_threshold"]
    if s.get("usage_percent_mean") is not None:
        line += "; usage mean %s%%, max %s%%" % (_pct(s["usage_percent_mean"]), s["usage_percent_max"])
    line += "; reclaimable %s (policy), %s (prune)" % (human_bytes(s["reclaimable_bytes_policy"]), human_bytes(s["reclaimable_bytes_prune"]))
    since = since_last(trend(history, report))
    if since and since["usage_mean"] is not None:
        delta = since["usage_mean"][0] - since["usage_mean"][1]
        line += "; mean usage %s since %s" % (("%+.1f points" % delta) if delta else "unchanged", since["since"])
    return line + "."


def _pct(value):
    return ("%.1f" % value).rstrip("0").rstrip(".")
