# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""The audit report as Markdown: the same fleet view as the HTML page, as tables. Pure: report in, text out."""

from __future__ import annotations

from ansible_collections.kubenode.gc.plugins.plugin_utils import _report_eviction as eviction
from ansible_collections.kubenode.gc.plugins.plugin_utils import _report_fleet as fleet
from ansible_collections.kubenode.gc.plugins.plugin_utils import _report_storage as storage
from ansible_collections.kubenode.gc.plugins.plugin_utils._md_table import cell, row
from ansible_collections.kubenode.gc.plugins.plugin_utils._gc_table import human_bytes
from ansible_collections.kubenode.gc.plugins.plugin_utils._report_listed import why as listed_why

HOSTS_SHOWN = 50
IMAGES_SHOWN = 20


def txt(value):
    return "-" if value is None else " ".join(str(value).split())


def _pct(value):
    return "-" if value is None else "%d%%" % value


def _count_bytes(r):
    return "-" if r["count"] is None else "%d (%s)" % (r["count"], human_bytes(r["bytes"]))


def _runtime(r):
    return " ".join(v for v in (r["name"], r["version"]) if isinstance(v, str)) or "-"


def _fs_used(fs):
    if fs["capacity_bytes"] is None or fs["available_bytes"] is None:
        return "-"
    return "%s / %s" % (human_bytes(fs["capacity_bytes"] - fs["available_bytes"]), human_bytes(fs["capacity_bytes"]))


def _headroom(value, limit=0):
    """Bytes of headroom; at or under ``limit`` it is past the threshold: what must be freed."""
    if value is None:
        return "-"
    return "over by %s" % human_bytes(limit + 1 - value) if value <= limit else human_bytes(value)


def _hosts(hosts):
    more = len(hosts) - HOSTS_SHOWN
    return ", ".join(hosts[:HOSTS_SHOWN]) + (" and %d more" % more if more > 0 else "")


def _trend(view):
    points = view["points"]
    if len(points) < 2:
        return ["No earlier audit to compare with."]
    out = ["| audit | nodes | mean usage | max usage | over high | reclaimable (policy) | reclaimable (prune) |",
           "|---|---:|---:|---:|---:|---:|---:|"]
    for p in points[-10:]:
        out.append(row(
            p["generated_at"], p["nodes"], "-" if p["usage_mean"] is None else "%s%%" % fleet._pct(p["usage_mean"]),
            _pct(p["usage_max"]), p["over_high"], human_bytes(p["reclaimable_policy"]), human_bytes(p["reclaimable_prune"])))
    if len(points) > 10:
        out.append("")
        out.append("The last 10 of %d audits." % len(points))
    return out


def render(report, history=None):
    """The Markdown report for ``report`` (schema 2)."""
    view = fleet.view(report, history)
    s = report["summary"]
    health = s["nodes_by_health"]
    lines = ["# Kubernetes node disk audit", "",
             "Generated %s by kubenode.gc, report schema version %s." % (txt(report["generated_at"]), txt(report["schema_version"])), "",
             fleet.summary_line(report, history), "",
             "- Nodes: %d (%d audited, %d failed)" % (s["nodes"], s["nodes_ok"], s["nodes_failed"]),
             "- By health: " + ", ".join("%s %d" % (h, health[h]) for h in fleet.HEALTH),
             "- At or over the image GC high threshold: %d" % s["nodes_over_high_threshold"],
             "- Near a hard eviction threshold: %d" % s.get("nodes_near_eviction", 0),
             "- With drift from the desired policy: %d" % s["nodes_with_drift"],
             "- Findings: %d error, %d warning, %d info" % (s["findings"]["error"], s["findings"]["warning"], s["findings"]["info"]),
             "- Reclaimable under the nodes' policies: %s" % human_bytes(s["reclaimable_bytes_policy"]),
             "- Reclaimable by pruning unused images: %s" % human_bytes(s["reclaimable_bytes_prune"]),
             "- Compressed layer blobs of unpacked images (storage_gc discard_unpacked_layers): %s"
             % human_bytes(s.get("unpacked_layer_blob_bytes") or 0)]
    if report["policy"]:
        lines.append("- Desired policy: " + ", ".join("%s=%s" % (k, txt(v)) for k, v in sorted(report["policy"].items())))
    lines += ["", "## Nodes, worst first", "",
              "| host | health | status | runtime | imagefs used | usage % | high/low | to high threshold | to eviction "
              "| reclaimable (policy) | reclaimable (prune) | findings (E/W/I) | drift |",
              "|---|---|---|---|---|---:|---|---:|---:|---:|---:|---|---:|"]
    for node in view["ranked"]:
        c = view["counts"][node["host"]]
        th = node["thresholds"]
        lines.append(row(
            node["host"], node["health"], node["status"], _runtime(node["runtime"]), _fs_used(node["imagefs"]),
            "%s%s" % (_pct(node["imagefs"]["usage_percent"]), " (over)" if node["over_high_threshold"] else ""),
            "%s/%s" % (_pct(th["high_percent"]), _pct(th["low_percent"])), _headroom(node["headroom"]["high_threshold_bytes"]),
            _headroom(node["headroom"]["eviction_bytes"], limit=-1), _count_bytes(node["images"]["reclaimable_policy"]),
            _count_bytes(node["images"]["reclaimable_prune"]), "%d/%d/%d" % (c["error"], c["warning"], c["info"]), len(node["drift"])))
    lines += ["", "## Findings by code", ""]
    if view["findings"]:
        lines += ["| severity | source | code | nodes | spread | example | hosts |", "|---|---|---|---:|---|---|---|"]
        for g in view["findings"]:
            lines.append(row(g["severity"], g["source"], g["code"], g["nodes"], g["scope"], g["example"], _hosts(g["hosts"])))
    else:
        lines.append("No findings on any node.")
    lines += ["", "## Drift by setting", ""]
    if view["drift"]:
        lines += ["| component | key | desired | actual | nodes | hosts |", "|---|---|---|---|---:|---|"]
        for g in view["drift"]:
            for v in g["values"]:
                lines.append(row(g["component"], g["key"], v["desired"], v["actual"], v["nodes"], _hosts(v["hosts"])))
    else:
        lines.append("No node differs from the desired policy.")
    lines += ["", "## Images holding the most disk", ""]
    images = report.get("images") or []
    if images:
        lines += ["%d distinct repository:tag references; the largest %d by bytes over all nodes." % (s["image_refs"], min(len(images), IMAGES_SHOWN)),
                  "", "| repository:tag | nodes | bytes | reclaimable | in use on |", "|---|---:|---:|---:|---:|"]
        for i in images[:IMAGES_SHOWN]:
            lines.append(row(i["ref"], i["nodes"], human_bytes(i["bytes"]), human_bytes(i["reclaimable_bytes"]), i["in_use_nodes"]))
    else:
        lines.append("No image lists were read.")
    lines += _listed_section(report)
    lines += ["", "## Disk use by category", ""] + storage.markdown_top(report)
    lines += ["", "## Trend", ""] + _trend(view)
    for node in view["ranked"]:
        lines += _node_section(node)
    return "\n".join(lines) + "\n"


def _listed_section(report):
    """Where each listed image (kubenode_gc_remove_images) is, and which pods use it; nothing when no image is listed."""
    listed = report.get("listed_images")
    if not listed:
        return []
    lines = ["", "## Listed images", "",
             "Patterns (kubenode_gc_remove_images): %s. On %d node(s), used by pods on %d."
             % (", ".join("`%s`" % p for p in listed["patterns"]), listed["nodes_with"], listed["nodes_in_use"]), ""]
    if not listed["images"]:
        return lines + ["No listed image is on any node."]
    lines += ["| image | node | state | why |", "|---|---|---|---|"]
    for image in listed["images"]:
        for n in image["nodes"]:
            lines.append("| %s | %s | %s | %s |" % (cell(image["ref"]), cell(n["host"]), n["state"], cell(listed_why(n))))
    return lines


def _gate(value):
    return "unset (the kubelet version's default)" if value is None else ("enabled" if value else "disabled")


def _node_section(node):
    fs, th, img, ct = node["imagefs"], node["thresholds"], node["images"], node["containers"]
    out = ["", "## %s" % txt(node["host"]), ""]
    if node["status"] == "failed":
        # nothing was measured: its reason only, no thresholds or usage that would read as measured
        return out + ["**Not audited:** %s" % txt(node["error"])]
    out += [
        "- Health: %s" % node["health"],
        "- Runtime: %s at %s, sandbox image %s" % (txt(_runtime(node["runtime"])), txt(node["runtime"]["endpoint"]), txt(node["runtime"]["sandbox_image"])),
        "- Image filesystem: %s, %s used (%s, %s available; the runtime counts %s as its own); thresholds high %s, low %s (%s); "
        "eviction at imagefs.available %s (%s)"
        % (txt(fs["mountpoint"]), _pct(fs["usage_percent"]), _fs_used(fs), human_bytes(fs["available_bytes"]), human_bytes(fs["used_bytes"]),
           _pct(th["high_percent"]), _pct(th["low_percent"]), th["source"], txt(th["eviction_available"]), th["eviction_source"]),
    ]
    out += [
        "- Container filesystem (split image filesystem): %s, %s used (%s, %s available)"
        % (txt(cfs["mountpoint"]), _pct(cfs["usage_percent"]), _fs_used(cfs), human_bytes(cfs["available_bytes"]))
        for cfs in node.get("container_filesystems") or []
    ]
    out += [
        "- Headroom: %s to the high threshold, %s to eviction"
        % (_headroom(node["headroom"]["high_threshold_bytes"]), _headroom(node["headroom"]["eviction_bytes"], limit=-1)),
        "- Eviction signals%s: %s" % (" (**near eviction**)" if node.get("near_eviction") else "", cell(eviction.signals_text(node))),
        "- Images: %s (%s in use); reclaimable under the node's policy %s, by pruning %s"
        % (txt(img["total"]), txt(img["in_use"]), _count_bytes(img["reclaimable_policy"]), _count_bytes(img["reclaimable_prune"])),
        "- Containers: %s; reclaimable: %s dead containers, %s sandboxes" % (txt(ct["total"]), txt(ct["reclaimable"]), txt(ct["sandboxes"])),
    ]
    out += storage.markdown_node(node)
    if node["metrics_file"]:
        out.append("- Metrics: %s" % txt(node["metrics_file"]))
    cred = node.get("credential_records")
    if cred:
        out.append("- Credential records (%s): %s pulled-image records; feature gate KubeletEnsureSecretPulledImages %s"
                   % (txt(cred["directory"]), txt(cred["pulled_records"]), _gate(cred["feature_gate"])))
    if node["parts_failed"]:
        out += ["", "Checks that did not complete:", ""] + ["- %s: %s" % (k, txt(v)) for k, v in sorted(node["parts_failed"].items())]
    out.append("")
    if node["findings"]:
        out += ["Findings:", ""] + ["- **%s** %s `%s`: %s" % (f["severity"], f["source"], f["code"], txt(f["message"])) for f in node["findings"]]
    else:
        out.append("No findings.")
    out.append("")
    if node["drift"]:
        out += ["Drift:", "", "| component | key | desired | actual |", "|---|---|---|---|"]
        out += [row(d["component"], d["key"], d["desired"], d["actual"]) for d in node["drift"]]
    else:
        out.append("No drift.")
    return out
