# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""Values of the fleet playbooks' per-node records, read once for every filter. Pure: no I/O, no Ansible.

* ``as_int``: a number from a registered result (Jinja may have made it a string); None when it is none.
* ``drift_from_results``: the drift of a node, from its check-mode config module results.
* ``sorted_drift``: a drift list with exactly the report's keys, in a stable order.
* ``prometheus_label``: a label value escaped as the Prometheus text exposition format requires.
* ``check_record``: the one validation every audit record goes through before the report reads it: a record whose
  shape is not what the audit playbook registers becomes a failed node with the reason "malformed result".
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from ansible_collections.kubenode.gc.plugins.module_utils.node import _audit_summary as summary_format

DRIFT_KEYS = ("component", "key", "desired", "actual")
# config module result (in the audit record) -> the component its drift belongs to (None: the runtime the result names)
DRIFT_PARTS = (("kubelet_config", "kubelet"), ("runtime_config", None))


def as_int(value):
    """``int(value)``, or None for None, booleans and what is not a number."""
    if value is None or isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return None


def prometheus_label(value):
    """A label value for the Prometheus text format: backslash, double quote and line feed escaped (None is empty)."""
    text = "" if value is None else str(value)
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def drift_from_results(record):
    """Drift from the check-mode config module results (``<part>_drift``, else ``<part>``): what the desired settings would change."""
    out = []
    for part, component in DRIFT_PARTS:
        result = record.get(part + "_drift", record.get(part))
        if not isinstance(result, Mapping) or result.get("failed") or result.get("skipped"):
            continue
        for change in result.get("changes") or []:
            out.append({"component": component or result.get("runtime") or "runtime", "key": change.get("key"),
                        "desired": change.get("after"), "actual": change.get("before")})
    return out


def sorted_drift(items):
    """Drift items with exactly DRIFT_KEYS, sorted; anything that is not a list gives []."""
    if not isinstance(items, list):
        return []
    out = [{key: item.get(key) for key in DRIFT_KEYS} for item in items if isinstance(item, Mapping)]
    return sorted(out, key=lambda d: (str(d["component"]), str(d["key"]), str(d["desired"]), str(d["actual"])))


# ------------------------------------------------------------------------------------------- the audit record
# A host's audit record (the report's input, and the node_exporter template's kubenode_gc_audit_node): built once per
# host on the controller from what the audit play left in the host's variables, with no task per host.
AUDIT_RESULT = "kubenode_gc_audit_result"  # playbooks/audit.yml registers node_audit's result under this name
AUDIT_PARTS = ("cri_info", "kubelet_config", "kubelet_config_drift", "runtime_config", "runtime_config_drift", "image_gc_policy",
               "image_gc_prune", "image_listed", "container_gc", "disk_usage", "credential_records", "image_pin", "summary", "nodefs")


def audit_record(variables):
    """The audit record of a host whose variables (hostvars[host]: a mapping) hold the audit play's node_audit result,
    None when they hold none (the host never reached that task). A failed or unreachable run gives the record its
    ``error`` (the result's msg); an unreachable one keeps its result as ``cri_info``, for the report to say why. The
    playbook variables the report shows are taken as set for the host, else their defaults."""
    result = variables.get(AUDIT_RESULT) if isinstance(variables, Mapping) else None
    if not isinstance(result, Mapping):
        return None
    unreachable = bool(result.get("unreachable"))
    audit = result.get("audit")
    audit = audit if isinstance(audit, Mapping) else {}
    record = {"host": str(variables.get("inventory_hostname")),
              "error": result.get("msg", "failed") if unreachable or result.get("failed") else None}
    for part in AUDIT_PARTS:
        record[part] = audit.get(part)
    if "cri_info" not in audit and unreachable:
        record["cri_info"] = dict(result)
    record["gc_timer"] = audit.get("gc_timer", {"installed": None, "state": ""})
    record["remove_images"] = variables.get("kubenode_gc_remove_images", [])
    record["keep_images"] = variables.get("kubenode_gc_keep_images", [])
    metrics_dir = variables.get("kubenode_gc_audit_metrics_dir", "")
    record["metrics_file"] = "%s/kubenode_gc.prom" % metrics_dir if metrics_dir else None
    record["inodes_thresholds"] = {"high_percent": variables.get("kubenode_gc_inodes_high_threshold_percent"),
                                   "low_percent": variables.get("kubenode_gc_inodes_low_threshold_percent")}
    record["free_bytes_targets"] = {"high": variables.get("kubenode_gc_free_bytes_high"), "low": variables.get("kubenode_gc_free_bytes_low")}
    return record


# ------------------------------------------------------------------------------------------- record validation
# The shape of an audit record (audit_record, above), limited to what the report reads.
# A spec is a kind name, a dict (a mapping: its listed keys checked, others ignored) or a one-item list (a list of it).
# Kinds: "any" (not read as a structure), "scalar" (str, number, bool or null), "number" (a finite number or a string
# of one, at most MAX_NUMBER in magnitude, or null). A null is accepted for every key (it means "not there").
MAX_NUMBER = 2 ** 63
MALFORMED = "malformed result"
_FINDINGS = [{"severity": "scalar", "code": "scalar", "message": "scalar"}]
_ERRORS = [{"msg": "scalar", "id": "scalar"}]
_REMOVED = [{"id": "scalar", "size": "number"}]
_CHANGES = [{"key": "scalar"}]
_RESULT = {"msg": "any", "skip_reason": "any"}
RESULT_SPECS = {
    "cri_info": {
        "runtime": {"name": "scalar", "version": "scalar", "endpoint": "scalar", "sandbox_image": "scalar"},
        "imagefs": [{"kind": "scalar", "mountpoint": "scalar", "capacity_bytes": "number", "used_bytes": "number",
                     "available_bytes": "number", "usage_percent": "number", "inodes_total": "number", "inodes_free": "number"}],
        "images": [{"id": "scalar", "repo_tags": ["scalar"], "repo_digests": ["scalar"], "size": "number", "in_use": "scalar",
                    "pinned": "scalar", "sandbox_image": "scalar"}],
        "containers": ["any"],
    },
    "kubelet_config": {
        "effective": {"imageGCHighThresholdPercent": "number", "imageGCLowThresholdPercent": "number", "evictionHard": {}},
        "findings": _FINDINGS, "feature_gates": {}, "root_dir": "scalar", "changes": _CHANGES,
    },
    "runtime_config": {"findings": _FINDINGS, "runtime": "scalar", "changes": _CHANGES},
    "image_gc_policy": {"removed": _REMOVED, "errors": _ERRORS, "usage_before": "number", "bytes_to_free": "number",
                        "inodes_to_free": "number", "bytes_freed_estimated": "number", "insufficient": "scalar",
                        "inodes_usage_before": "number"},
    "image_gc_prune": {"removed": _REMOVED, "errors": _ERRORS},
    "image_listed": {"removed": [{"id": "scalar", "size": "number", "repo_tags": ["scalar"]}], "errors": _ERRORS,
                     "listed_kept": [{"id": "scalar", "repo_tags": ["scalar"], "patterns": ["scalar"], "reason": "scalar",
                                      "containers": [{"pod_namespace": "scalar", "pod_name": "scalar", "container": "scalar",
                                                      "state": "scalar", "running": "scalar", "outside_kubernetes": "scalar"}]}]},
    "container_gc": {"removed_containers": ["any"], "removed_sandboxes": ["any"], "errors": _ERRORS},
    "image_pin": {"supported": "scalar", "pinned": [{"id": "scalar", "repo_tags": ["scalar"]}]},
    "credential_records": {"files": ["any"]},
}
RESULT_SPECS["kubelet_config_drift"] = {"changes": _CHANGES, "runtime": "scalar"}
RESULT_SPECS["runtime_config_drift"] = RESULT_SPECS["kubelet_config_drift"]
RECORD_SPEC = {
    "host": "scalar", "error": "any", "keep_images": ["any"], "remove_images": ["scalar"], "metrics_file": "scalar", "nodefs": "scalar",
    "inodes_thresholds": {"high_percent": "number", "low_percent": "number"},
    "drift": [{"component": "scalar", "key": "scalar", "desired": "any", "actual": "any"}],
    "summary": {"image_columns": ["scalar"], "images": "any"},  # the rows: expand_summary checks them
}
# the record keys a template of ansible-core before 2.19 may hold as '' for null
NULLABLE = frozenset(RESULT_SPECS) | {"summary"}
_SCALARS = (str, int, float, bool)


def _number_problem(value):
    if isinstance(value, bool):
        return "is a boolean, not a number"
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return "is the text %r, not a number" % value[:40]
    if not isinstance(value, (int, float)):
        return "is a %s, not a number" % type(value).__name__
    if isinstance(value, float) and not math.isfinite(value) or abs(value) > MAX_NUMBER:
        return "is %s, not a plausible number" % ("out of range" if isinstance(value, int) else value)
    return None


def _problem(value, spec, where):
    """None when ``value`` has the shape ``spec`` describes, else one phrase naming where it does not."""
    if value is None or spec == "any":
        return None
    if spec == "number" and value == "":
        return None  # a null through a template of ansible-core before 2.19, which renders none as ''
    if spec == "scalar":
        if not isinstance(value, _SCALARS):
            return "%s is a %s, not a single value" % (where, type(value).__name__)
        if isinstance(value, float) and not math.isfinite(value):
            return "%s is %s" % (where, value)
        return None
    if spec == "number":
        problem = _number_problem(value)
        return None if problem is None else "%s %s" % (where, problem)
    if isinstance(spec, list):
        if not isinstance(value, (list, tuple)):
            return "%s is a %s, not a list" % (where, type(value).__name__)
        for index, item in enumerate(value):
            problem = _problem(item, spec[0], "%s[%d]" % (where, index))
            if problem is not None:
                return problem
        return None
    if not isinstance(value, Mapping):
        return "%s is a %s, not a dict" % (where, type(value).__name__)
    for key, sub in spec.items():
        problem = _problem(value.get(key), sub, "%s.%s" % (where, key))
        if problem is not None:
            return problem
    return None


def record_problem(record):
    """None when an audit record has the shape the report reads, else one phrase saying where it does not."""
    if not isinstance(record, Mapping):
        return "the record is a %s, not a dict" % type(record).__name__
    problem = _problem(record, RECORD_SPEC, "record")
    if problem is not None:
        return problem
    for part, spec in RESULT_SPECS.items():
        value = record.get(part)
        if value is None:
            continue
        if not isinstance(value, Mapping):
            return "%s is a %s, not a registered task result" % (part, type(value).__name__)
        problem = _problem(value, _RESULT, part)
        if problem is None and not (value.get("failed") or value.get("skipped") or value.get("unreachable")):
            # a failed or skipped result is read for its message only
            problem = _problem(value, spec, part)
        if problem is not None:
            return problem
    return None


def check_record(record, host):
    """The record when its shape is right, else a failed node's record whose error starts with "malformed result"."""
    if isinstance(record, Mapping) and any(record.get(part) == "" for part in NULLABLE):
        # a part left out (null) through a template of ansible-core before 2.19, which renders none as ''
        record = {k: (None if k in NULLABLE and v == "" else v) for k, v in record.items()}
    problem = record_problem(record)
    if problem is None:
        problem = summary_problem(record.get("summary"))
    if problem is None:
        return record
    return {"host": str(host), "error": "%s: %s." % (MALFORMED, problem)}


def _ok_part(value, key):
    return isinstance(value, Mapping) and key not in value and not value.get("failed") and not value.get("skipped")


def summary_problem(summary):
    """None when node_audit's summary (detail=summary) is absent or has the shape expand_summary reads, else a phrase."""
    if summary is None:
        return None
    if tuple(summary.get("image_columns") or ()) != summary_format.COLUMNS:
        return "record.summary.image_columns is not %s" % " ".join(summary_format.COLUMNS)
    lines = summary.get("images") or []
    if not isinstance(lines, (list, tuple)):
        return "record.summary.images is a %s, not a list" % type(lines).__name__
    for index, line in enumerate(lines):
        # the lines are many: checked here in one pass, not by the generic walk
        fields = line.split(" ") if isinstance(line, str) else ()
        if len(fields) != 4 or not (fields[2].isascii() and fields[2].isdigit()) or not summary_format.ALL_MARKS.issuperset(fields[3]) or not fields[3]:
            return "record.summary.images[%d] is not a line <id> <ref> <size> <marks>" % index
        if len(fields[2]) > 19 and int(fields[2]) > MAX_NUMBER:
            return "record.summary.images[%d] has a size out of range" % index
    return None


def expand_summary(record):
    """A checked record (check_record) with node_audit's summary lines (detail=summary) turned back into the lists the
    report reads: cri_info's ``images`` (each with its ``ref``) and each image_gc plan's ``removed``. A record without a
    summary is returned as it is."""
    summary = record.get("summary") if isinstance(record, Mapping) else None
    if summary is None:
        return record
    rows = [line.split(" ") for line in summary.get("images") or ()]
    record = dict(record)
    if _ok_part(record.get("cri_info"), "images"):
        record["cri_info"] = dict(record["cri_info"], images=[
            dict({"id": i, "ref": ref, "size": int(size)}, **{key: mark in marks for key, mark in summary_format.MARKS})
            for i, ref, size, marks in rows if summary_format.UNLISTED not in marks])
    for part, mark in summary_format.PLAN_MARKS:
        if _ok_part(record.get(part), "removed"):
            record[part] = dict(record[part], removed=[{"id": i, "size": int(size)} for i, _ref, size, marks in rows if mark in marks])
    return record
