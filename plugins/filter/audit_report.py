# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Fleet audit filters: build the report dict (docs/report-schema.md), decide whether the audit fails, format sizes.

The documentation of each filter is in the YAML file named after it next to this file.
Everything here is pure: no I/O, no clock, and the same input always gives the same output.
"""

from __future__ import annotations

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.kubenode.gc.plugins.module_utils._kubelet import IMAGE_GC_HIGH_THRESHOLD_PERCENT as DEFAULT_HIGH
from ansible_collections.kubenode.gc.plugins.module_utils._kubelet import IMAGE_GC_LOW_THRESHOLD_PERCENT as DEFAULT_LOW
from ansible_collections.kubenode.gc.plugins.module_utils.config._findings import SEVERITIES, gate_levels, sort_findings
from ansible_collections.kubenode.gc.plugins.module_utils.cri._image_pin_policy import runtime_kind as pin_kind
from ansible_collections.kubenode.gc.plugins.module_utils.gc._gc_policy import over_high_threshold
from ansible_collections.kubenode.gc.plugins.plugin_utils._fleet import as_int as _int, check_record, expand_summary, sorted_drift as _drift
from ansible_collections.kubenode.gc.plugins.plugin_utils._gc_table import human_bytes
from ansible_collections.kubenode.gc.plugins.plugin_utils._report_fleet import enrich
from ansible_collections.kubenode.gc.plugins.plugin_utils._report_storage import add as add_storage

SCHEMA_VERSION = 2
FAIL_ON = ("never", "failed", "drift", "warning", "error")
# Parts of a node dict, in the order they are checked, and where their findings come from.
PARTS = ("cri_info", "kubelet_config", "runtime_config", "image_gc_policy", "image_gc_prune", "container_gc", "image_pin")
FINDING_PARTS = ("kubelet_config", "runtime_config")
GC_PARTS = {"image_gc_policy": "image_gc", "image_gc_prune": "image_gc", "container_gc": "container_gc"}
IMAGEFS_KEYS = ("mountpoint", "capacity_bytes", "used_bytes", "available_bytes", "usage_percent")
RUNTIME_KEYS = ("name", "version", "endpoint", "sandbox_image")


def _text(value):
    """One line of text: whitespace runs collapsed; None stays None."""
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        value = " ".join(str(v) for v in value)
    return " ".join(str(value).split())


def _part(node, name):
    """Return (result, problem) for one registered result: problem is None, or (kind, message) for failed or skipped."""
    value = node.get(name)
    if value is None:
        return None, None
    if not isinstance(value, Mapping):
        return None, ("failed", "The %s result is a %s, not a registered task result." % (name, type(value).__name__))
    if value.get("failed") or value.get("unreachable"):
        return None, ("failed", _text(value.get("msg")) or "The %s task failed without a message." % name)
    if value.get("skipped"):
        return None, ("skipped", "skipped: %s" % (_text(value.get("skip_reason")) or "the task did not run"))
    return value, None


def _finding(source, severity, code, message):
    severity = str(severity or "").lower()
    return dict(source=source, severity=severity if severity in SEVERITIES else "warning", code=str(code or "unknown"),
                message=_text(message) or "")


def _runtime(cri):
    runtime = (cri or {}).get("runtime")
    runtime = runtime if isinstance(runtime, Mapping) else {}
    return {key: runtime.get(key) for key in RUNTIME_KEYS}


def _imagefs(cri, policy_run):
    filesystems = (cri or {}).get("imagefs")
    filesystems = [fs for fs in filesystems if isinstance(fs, Mapping)] if isinstance(filesystems, list) else []
    chosen = next((fs for fs in filesystems if fs.get("kind") == "image"), filesystems[0] if filesystems else {})
    out = {key: chosen.get(key) for key in IMAGEFS_KEYS}
    for key in IMAGEFS_KEYS[1:]:
        out[key] = _int(out[key])
    if out["usage_percent"] is None and policy_run is not None:
        # cri_info did not gather imagefs: image_gc measured the same filesystem with the same formula.
        out["usage_percent"] = _int(policy_run.get("usage_before"))
    return out


def _container_filesystems(cri):
    """The ``kind: container`` entries of cri_info.imagefs on another mountpoint than the image filesystem: a split image
    filesystem (cri-o's imagestore). cri-dockerd reports dockerd's data root as both: not split, nothing here."""
    filesystems = (cri or {}).get("imagefs")
    filesystems = filesystems if isinstance(filesystems, list) else []
    images = {fs.get("mountpoint") for fs in filesystems if isinstance(fs, Mapping) and fs.get("kind") == "image"}
    out = []
    for fs in filesystems:
        if isinstance(fs, Mapping) and fs.get("kind") == "container" and fs.get("mountpoint") not in images:
            entry = {key: fs.get(key) for key in IMAGEFS_KEYS}
            for key in IMAGEFS_KEYS[1:]:
                entry[key] = _int(entry[key])
            out.append(entry)
    return out


def _thresholds(kubelet):
    effective = (kubelet or {}).get("effective")
    if isinstance(effective, Mapping):
        high = _int(effective.get("imageGCHighThresholdPercent"))
        low = _int(effective.get("imageGCLowThresholdPercent"))
        return dict(high_percent=DEFAULT_HIGH if high is None else high, low_percent=DEFAULT_LOW if low is None else low,
                    source="kubelet_config")
    return dict(high_percent=DEFAULT_HIGH, low_percent=DEFAULT_LOW, source="default")


def _reclaimable(run):
    if run is None:
        return dict(count=None, bytes=None)
    removed = run.get("removed")
    removed = [r for r in removed if isinstance(r, Mapping)] if isinstance(removed, list) else []
    return dict(count=len(removed), bytes=sum(_int(r.get("size")) or 0 for r in removed))


def _count_list(result, key):
    if result is None:
        return None
    value = result.get(key)
    return len(value) if isinstance(value, list) else None


CREDENTIAL_RECORDS_GATE = "KubeletEnsureSecretPulledImages"


def _credential_records(kubelet, found):
    """The kubelet's pulled-image credential records (KEP-2535): the feature gate as the node sets it, and how many
    records ``<root_dir>/image_manager/pulled`` holds (the playbook's read-only ``find``; null when unknown)."""
    kubelet = kubelet if isinstance(kubelet, Mapping) else {}
    gates = kubelet.get("feature_gates")
    gate = gates.get(CREDENTIAL_RECORDS_GATE) if isinstance(gates, Mapping) else None
    root = _text(kubelet.get("root_dir")) or None
    pulled = None
    if isinstance(found, Mapping) and not found.get("failed") and not found.get("skipped") and isinstance(found.get("files"), list):
        pulled = len(found["files"])
    return dict(feature_gate=gate if isinstance(gate, bool) else None, directory=None if root is None else root.rstrip("/") + "/image_manager",
                pulled_records=pulled)


def _pinning(cri, pin, keep_images):
    """What the kubelet's own image GC may remove: keep-listed images the runtime does not pin (from image_pin in check
    mode: what it would pin), and whether the sandbox image is pinned (the kubelet protects only pinned images)."""
    images = (cri or {}).get("images")
    sandbox = [i for i in images if isinstance(i, Mapping) and i.get("sandbox_image")] if isinstance(images, list) else []
    runtime = _runtime(cri)
    supported = None if not runtime["name"] else pin_kind(runtime["name"], runtime["version"])[0] is not None
    unpinned = None
    if isinstance(pin, Mapping) and pin.get("supported"):
        unpinned = sorted(_text((i.get("repo_tags") or [i.get("id")])[0]) for i in pin.get("pinned") or [] if isinstance(i, Mapping))
    return dict(supported=supported,
                keep_images=len(keep_images) if isinstance(keep_images, (list, tuple)) else 0,
                keep_images_unpinned=unpinned,
                sandbox_image_pinned=bool(sandbox[0].get("pinned")) if sandbox else None)


def _pinning_findings(pinning, runtime):
    """Warnings where pinning would help now; info where the runtime cannot pin (containerd before 1.7.3: upgrade)."""
    findings = []
    if pinning["keep_images_unpinned"]:
        findings.append(_finding("image_pin", "warning", "keep_images_not_pinned",
                                 "%d keep-listed image(s) are not pinned in the runtime, so the kubelet's own image GC can remove them: %s "
                                 "(kubenode.gc.image_pin pins them)." % (len(pinning["keep_images_unpinned"]), ", ".join(pinning["keep_images_unpinned"]))))
    elif pinning["supported"] is False and pinning["keep_images"]:
        findings.append(_finding("image_pin", "info", "keep_images_not_pinned",
                                 "The runtime (%s %s) cannot pin images, so the kubelet's own image GC can remove the %d keep-listed pattern(s)' "
                                 "images; only this collection's runs honour the keep list." % (runtime["name"], runtime["version"], pinning["keep_images"])))
    if pinning["sandbox_image_pinned"] is False:
        findings.append(_finding("audit", "warning" if pinning["supported"] else "info", "sandbox_image_not_pinned",
                                 "The sandbox image %s is not pinned by the runtime; the kubelet protects only pinned images, so its image GC "
                                 "can remove it under disk pressure%s." % (runtime["sandbox_image"] or "(unknown)", "" if pinning["supported"] else
                                                                           " (containerd pins it from 1.7.3 on)")))
    return findings


def _node(node):
    error = _text(node.get("error")) or None
    results, parts_failed, findings = {}, {}, []
    for name in PARTS:
        result, problem = _part(node, name)
        results[name] = result
        if problem is None:
            continue
        kind, message = problem
        parts_failed[name] = message
        if error is None:
            # A failed node's parts fail or are skipped with it: its error says why, once.
            if kind == "failed":
                findings.append(_finding("audit", "error", "part_failed", "The %s check failed: %s" % (name, message)))
            else:
                findings.append(_finding("audit", "warning", "part_skipped", "The %s check did not run (%s)." % (name, message)))

    cri = results["cri_info"]
    policy_run = results["image_gc_policy"]
    imagefs = _imagefs(cri, policy_run)
    thresholds = _thresholds(results["kubelet_config"])
    usage = imagefs["usage_percent"]
    over = over_high_threshold(usage, thresholds["high_percent"])  # the cleanup's trigger too (kubenode.gc.imagefs_pressure)

    for name in FINDING_PARTS:
        items = (results[name] or {}).get("findings")
        for item in items if isinstance(items, list) else []:
            if isinstance(item, Mapping):
                findings.append(_finding(name, item.get("severity"), item.get("code"), item.get("message")))
    for name, source in GC_PARTS.items():
        errors = (results[name] or {}).get("errors")
        if isinstance(errors, list) and errors:
            text = " ".join(_text(e.get("msg")) or str(e.get("id")) for e in errors if isinstance(e, Mapping))
            findings.append(_finding(source, "error", "gc_errors", "The %s run reported %d error(s): %s" % (name, len(errors), text)))
    if over:
        findings.append(_finding("audit", "warning", "over_high_threshold",
                                 "The image filesystem %s is %d%% used, at or above the image GC high threshold of %d%% (%s)."
                                 % (imagefs["mountpoint"] or "(unknown mountpoint)", usage, thresholds["high_percent"], thresholds["source"])))
    if policy_run is not None and policy_run.get("insufficient") and not _int(policy_run.get("bytes_to_free")) and _int(policy_run.get("inodes_to_free")):
        findings.append(_finding("image_gc", "warning", "gc_insufficient",
                                 "Image GC under the node's policy would not bring inode usage from %s%% down to the low inode threshold "
                                 "(estimated); the rest is used by images in use or by non-image data." % policy_run.get("inodes_usage_before")))
    elif policy_run is not None and policy_run.get("insufficient") and policy_run.get("target") == "bytes":
        findings.append(_finding("image_gc", "warning", "gc_insufficient",
                                 "Image GC under the node's policy would free %s of the %s needed to bring the available bytes up to "
                                 "free_bytes_low; the rest is used by images in use or by non-image data."
                                 % (human_bytes(_int(policy_run.get("bytes_freed_estimated")) or 0), human_bytes(_int(policy_run.get("bytes_to_free")) or 0))))
    elif policy_run is not None and policy_run.get("insufficient"):
        findings.append(_finding("image_gc", "warning", "gc_insufficient",
                                 "Image GC under the node's policy would free %s of the %s needed to bring usage from %s%% down to the low "
                                 "threshold; the rest is used by images in use or by non-image data."
                                 % (human_bytes(_int(policy_run.get("bytes_freed_estimated")) or 0),
                                    human_bytes(_int(policy_run.get("bytes_to_free")) or 0), policy_run.get("usage_before"))))

    pinning = _pinning(cri, results["image_pin"], node.get("keep_images"))
    if cri is not None:
        findings += _pinning_findings(pinning, _runtime(cri))

    images = (cri or {}).get("images")
    images = [i for i in images if isinstance(i, Mapping)] if isinstance(images, list) else None
    return dict(
        host=str(node["host"]),
        status="failed" if error else "ok",
        error=error,
        runtime=_runtime(cri),
        imagefs=imagefs,
        container_filesystems=_container_filesystems(cri),
        thresholds=thresholds,
        over_high_threshold=over,
        images=dict(
            total=None if images is None else len(images),
            in_use=None if images is None else sum(1 for i in images if i.get("in_use")),
            reclaimable_policy=_reclaimable(policy_run),
            reclaimable_prune=_reclaimable(results["image_gc_prune"]),
        ),
        containers=dict(
            total=_count_list(cri, "containers"),
            reclaimable=_count_list(results["container_gc"], "removed_containers"),
            sandboxes=_count_list(results["container_gc"], "removed_sandboxes"),
        ),
        findings=sort_findings(findings, by=("source", "code", "message")),
        drift=_drift(node.get("drift")),
        parts_failed=parts_failed,
        metrics_file=_text(node.get("metrics_file")) or None,
        credential_records=_credential_records(results["kubelet_config"], node.get("credential_records")),
        pinning=pinning,
    )


def audit_report(nodes, generated_at=None, policy=None, top_images=50, eviction_margin_percent=5):
    """Build the fleet audit report (schema_version 2, docs/report-schema.md) from the playbook's per-node dicts."""
    if not isinstance(nodes, (list, tuple)):
        raise AnsibleFilterError("audit_report expects a list of node dicts, got a %s." % type(nodes).__name__)
    if policy is not None and not isinstance(policy, Mapping):
        raise AnsibleFilterError("audit_report expects policy to be a dict, got a %s." % type(policy).__name__)
    for index, node in enumerate(nodes):
        if not isinstance(node, Mapping) or not node.get("host"):
            raise AnsibleFilterError("audit_report expects every node to be a dict with a host, but item %d is not." % index)
    # the one validation (plugin_utils/_fleet.py): a node whose record has the wrong shape is a failed node, "malformed result"
    nodes = [expand_summary(check_record(node, node["host"])) for node in nodes]
    out = sorted((_node(node) for node in nodes), key=lambda n: n["host"])
    storage_top = add_storage(out, nodes)  # nodes[].storage and its findings (disk_usage), the fleet's top consumers
    counts = {severity: sum(1 for n in out for f in n["findings"] if f["severity"] == severity) for severity in SEVERITIES}
    summary = dict(
        nodes=len(out),
        nodes_ok=sum(1 for n in out if n["status"] == "ok"),
        nodes_failed=sum(1 for n in out if n["status"] == "failed"),
        nodes_over_high_threshold=sum(1 for n in out if n["over_high_threshold"]),
        nodes_with_drift=sum(1 for n in out if n["drift"]),
        findings=counts,
        reclaimable_bytes_policy=sum(n["images"]["reclaimable_policy"]["bytes"] or 0 for n in out),
        reclaimable_bytes_prune=sum(n["images"]["reclaimable_prune"]["bytes"] or 0 for n in out),
        # what storage_gc discard_unpacked_layers gives back, fleet-wide (disk_usage's unpacked_layer_blobs)
        unpacked_layer_blob_bytes=sum((n["storage"] or {}).get("categories", {}).get("unpacked_layer_blobs") or 0 for n in out),
    )
    report = dict(schema_version=SCHEMA_VERSION, generated_at=None if generated_at is None else str(generated_at),
                  policy=dict(policy or {}), summary=summary, nodes=out, storage_top=storage_top)
    # schema 2: health, headroom, eviction threshold, the fleet's images (plugin_utils/_report_fleet.py)
    margin = _int(eviction_margin_percent)
    if margin is None or margin < 0:
        raise AnsibleFilterError("audit_report expects eviction_margin_percent to be an integer, 0 or more, got %r." % (eviction_margin_percent,))
    return _unaudited_blank(enrich(report, nodes, top_images=_int(top_images) or 0, eviction_margin=margin))


def _unaudited_blank(report):
    """A node that could not be audited has its error only: no thresholds, eviction signals or policy defaults that would
    read as measured on it (the kubelet's 85/80 were never read from it)."""
    for node in report["nodes"]:
        if node["status"] == "failed":
            node["thresholds"] = {key: None for key in node["thresholds"]}
            node["eviction_signals"] = [dict({key: None for key in signal}, signal=signal.get("signal"), state="unknown")
                                        for signal in node["eviction_signals"]]
            node["over_high_threshold"] = node["near_eviction"] = False
    return report


def human_bytes_filter(value):
    """The human_bytes filter: human_bytes() with a filter error for values that are not a number of bytes."""
    try:
        return human_bytes(value)
    except (TypeError, ValueError):
        raise AnsibleFilterError("human_bytes expects a number of bytes, got %r." % (value,)) from None


def _plural(count, word):
    return "%d %s%s" % (count, word, "" if count == 1 else "s")


def audit_fail_reason(report, fail_on="error"):
    """Return None, or one sentence saying why the audit fails under O(fail_on) (never, failed, drift, warning or error):
    every value but never fails on a node that could not be audited."""
    if fail_on not in FAIL_ON:
        raise AnsibleFilterError("audit_fail_reason expects fail_on to be one of %s, got %r." % (", ".join(FAIL_ON), fail_on))
    if not isinstance(report, Mapping) or not isinstance(report.get("nodes"), list):
        raise AnsibleFilterError("audit_fail_reason expects the report dict of kubenode.gc.audit_report, with a nodes list.")
    nodes = report["nodes"]
    if fail_on == "never":
        return None
    failed = [n["host"] for n in nodes if n.get("status") == "failed"]
    reasons = []
    if failed:
        reasons.append("%s could not be audited (%s)" % (_plural(len(failed), "node"), ", ".join(failed)))
    if fail_on == "drift":
        drifted = [n["host"] for n in nodes if n.get("drift")]
        if drifted:
            reasons.append("%s drifted from the desired policy (%s)" % (_plural(len(drifted), "node"), ", ".join(drifted)))
    elif fail_on in ("warning", "error"):
        levels = gate_levels(fail_on)
        flagged = [n["host"] for n in nodes if any(f.get("severity") in levels for f in n.get("findings") or [])]
        counts = {s: sum(1 for n in nodes for f in n.get("findings") or [] if f.get("severity") == s) for s in levels}
        if flagged:
            found = " and ".join(_plural(counts[s], s) for s in levels if counts[s])
            reasons.append("%s on %s (%s)" % (found, _plural(len(flagged), "node"), ", ".join(flagged)))
    if not reasons:
        return None
    if fail_on == "failed":
        return "The audit fails: %s (kubenode_gc_audit_fail_on: never lets it pass)." % reasons[0]
    return "The audit fails on %s: %s." % (fail_on, "; ".join(reasons))


class FilterModule:
    """kubenode.gc fleet audit filters."""

    def filters(self):
        return {
            "audit_report": audit_report,
            "audit_fail_reason": audit_fail_reason,
            "human_bytes": human_bytes_filter,
        }
