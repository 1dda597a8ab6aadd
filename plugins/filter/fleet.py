# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Filters the fleet playbooks use to turn per-host facts into one list (docs in the sibling YAML files)."""

from __future__ import annotations

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.kubenode.gc.plugins.plugin_utils._fleet import as_int, audit_record, check_record, drift_from_results, prometheus_label
from ansible_collections.kubenode.gc.plugins.plugin_utils._gc_table import apply_result, human_bytes, new_row, render_table


def _pairs(value, name, keep=False):
    if not isinstance(value, (list, tuple)):
        raise AnsibleFilterError("%s expects a list of [record, host] pairs, got %s." % (name, type(value).__name__))
    out = []
    for item in value:
        if not isinstance(item, (list, tuple)) or len(item) != 2:
            raise AnsibleFilterError("%s expects [record, host] pairs, got %r." % (name, item))
        record, host = item
        out.append((record if keep or isinstance(record, dict) else None, str(host)))
    return out


def audit_node(value):
    """A host's variables (hostvars[host]) after the audit play -> its audit record, or None when it has no audit result."""
    if not isinstance(value, Mapping):
        raise AnsibleFilterError("audit_node expects a host's variables (hostvars[host]), got %s." % type(value).__name__)
    return audit_record(value)


def audit_nodes(value):
    """[node record or None, host] pairs -> node records with their drift; a host without a record gets one with its error."""
    nodes = []
    for record, host in _pairs(value, "audit_nodes", keep=True):
        if record is None:
            record = {"host": host, "error": "The audit stopped on this host before it could read the node."}
        else:
            # the one validation (plugin_utils/_fleet.py): a record of the wrong shape becomes a failed node
            record = dict(check_record(record, host))
            record.setdefault("drift", drift_from_results(record))
        nodes.append(record)
    return nodes


# A cleanup history record's keys -> (the module result they come from, its key). The record names are fixed
# (history files on the nodes); this table is the one place that maps them, both ways.
CLEANUP_RECORD_KEYS = (
    ("containers", "container_gc", "removed_containers"),
    ("sandboxes", "container_gc", "removed_sandboxes"),
    ("log_paths", "container_gc", "removed_log_paths"),
    ("images", "image_gc", "removed"),
    ("usage_after", "image_gc", "usage_after"),
    ("bytes_to_free", "image_gc", "bytes_to_free"),
    ("bytes_freed_estimated", "image_gc", "bytes_freed_estimated"),
    ("bytes_freed_measured", "image_gc", "bytes_freed_measured"),
    ("target_reached", "image_gc", "target_reached"),
)
LIST_KEYS = ("containers", "sandboxes", "log_paths", "images")


STORAGE_KEYS = ("supported", "plan", "removed", "already_gone", "freed_bytes")


def _storage(result):
    """What storage_gc did, as the record keeps it (``storage``): None when it did not run."""
    if not result or result.get("skipped"):
        return None
    out = {key: result.get(key) for key in STORAGE_KEYS}
    for key in ("plan", "removed", "already_gone"):
        out[key] = [dict(item) for item in out[key] or [] if isinstance(item, dict)]
    out["freed_bytes"] = as_int(out["freed_bytes"])
    return out


def _listed(result):
    """What the listed removal did, as the record keeps it (``listed_images``): None when it did not run."""
    if not result or result.get("skipped"):
        return None
    return {"removed": [dict(i) for i in result.get("removed") or [] if isinstance(i, dict)],
            "present": [dict(i) for i in result.get("listed_kept") or [] if isinstance(i, dict)],
            "bytes_freed_estimated": as_int(result.get("bytes_freed_estimated")), "bytes_freed_measured": as_int(result.get("bytes_freed_measured"))}


def cleanup_record(image_gc, container_gc=None, storage_gc=None, image_listed=None, **fields):
    """A node's cleanup history record: ``fields`` plus what the image_gc, container_gc, storage_gc and listed removal
    (image_listed) results say (errors of all)."""
    results = {"image_gc": image_gc, "container_gc": container_gc, "storage_gc": storage_gc, "image_listed": image_listed}
    for name, result in results.items():
        if result is not None and not isinstance(result, dict):
            raise AnsibleFilterError("cleanup_record expects the registered %s result as a dict, got %s." % (name, type(result).__name__))
        results[name] = result if result is not None and not result.get("skipped") else {}
    record = dict(fields)
    for key, module, result_key in CLEANUP_RECORD_KEYS:
        value = results[module].get(result_key)
        record[key] = (value or []) if key in LIST_KEYS else value
    gc_steps = ("container_gc", "image_listed", "image_gc")
    record["errors"] = [e for step in gc_steps for e in results[step].get("errors") or []]
    # removals whose answer a runtime outage lost, not yet seen gone (issue 21, item 5): never dropped from the record
    record["unconfirmed"] = [u for step in gc_steps for u in results[step].get("unconfirmed") or []]
    # kubenode_gc_remove_images: each image the listed removal removed, and each listed image still present with its pods
    record["listed_images"] = _listed(results["image_listed"])
    if record["usage_after"] is None and record["listed_images"] is not None:
        record["usage_after"] = results["image_listed"].get("usage_after")  # a node below its thresholds: no threshold image GC
    # kubenode_gc_cleanup_storage: the objects storage_gc planned and removed, and the bytes it freed (null: it did not run)
    record["storage"] = _storage(results["storage_gc"])
    return record


def _results_of(record):
    """The image_gc and container_gc results a cleanup record was made from (CLEANUP_RECORD_KEYS backwards)."""
    results = {"image_gc": {"usage_before": record.get("usage_before"), "errors": record.get("errors")}, "container_gc": {}}
    for key, module, result_key in CLEANUP_RECORD_KEYS:
        value = record.get(key)
        results[module][result_key] = (value or []) if key in LIST_KEYS else value
    return results


def _row(record, host):
    if record is None:
        return {"host": host, "status": "failed", "message": "The cleanup stopped on this host before it finished.", "errors": 0}
    status = record.get("status")
    if status == "skipped" or status == "failed" and "images" not in record:  # a node that was never cleaned
        return {
            "host": host,
            "status": status,
            "message": record.get("error") or record.get("reason"),
            "usage_before": record.get("usage_before"),
            "usage_after": record.get("usage_after"),
            "errors": 0,
        }
    row = new_row(host, bool(record.get("check_mode")))
    results = _results_of(record)
    apply_result(row, "container", results["container_gc"])
    apply_result(row, "image", results["image_gc"])
    listed = record.get("listed_images")
    if isinstance(listed, dict):
        apply_result(row, "image", {"removed": listed.get("removed"), "listed_kept": listed.get("present"), "usage_after": record.get("usage_after"),
                                    "bytes_freed_measured": listed.get("bytes_freed_measured"),
                                    "bytes_freed_estimated": listed.get("bytes_freed_estimated")})
    if status == "failed":  # a GC run failed: what it did before, and its error
        row["status"], row["message"] = "failed", record.get("error")
    return row


def _kinds(items):
    counts = {}
    for item in items:
        counts[item.get("kind")] = counts.get(item.get("kind"), 0) + 1
    return ", ".join("%d %s%s" % (n, kind, "" if n == 1 else "s") for kind, n in sorted(counts.items(), key=lambda kv: str(kv[0])))


def storage_line(record, host):
    """The summary line of what storage_gc did on one node (None when it did not run)."""
    storage = record.get("storage") if isinstance(record, dict) else None
    if not isinstance(storage, dict):
        return None
    if storage.get("supported") is False:
        return "%s: storage_gc: not supported on this runtime, nothing changed." % host
    if record.get("check_mode"):
        plan = storage.get("plan") or []
        return "%s: storage_gc would remove %d object(s)%s." % (host, len(plan), " (%s)" % _kinds(plan) if plan else "")
    removed = storage.get("removed") or []
    gone = storage.get("already_gone") or []
    return "%s: storage_gc removed %d object(s)%s, freed %s%s." % (
        host, len(removed), " (%s)" % _kinds(removed) if removed else "", human_bytes(as_int(storage.get("freed_bytes")) or 0),
        "; %d already gone" % len(gone) if gone else "")


def cleanup_summary(value):
    """[cleanup record or None, host] pairs -> the summary table as a list of lines, then what storage_gc did per node."""
    pairs = _pairs(value, "cleanup_summary")
    rows = [_row(record, host) for record, host in pairs]
    for row in rows:
        for key in ("usage_before", "usage_after"):
            row[key] = as_int(row.get(key))
    lines = render_table(rows, title="kubenode.gc cleanup").splitlines()
    storage = [line for line in (storage_line(record, host) for record, host in sorted(pairs, key=lambda p: p[1])) if line]
    if storage:
        lines += ["Containerd storage the CRI cannot see (kubenode.gc.storage_gc; not in the table's freed bytes):"] + storage
    return lines


class FilterModule:
    def filters(self):
        return {"audit_node": audit_node, "audit_nodes": audit_nodes, "prometheus_label": prometheus_label, "cleanup_record": cleanup_record,
                "cleanup_summary": cleanup_summary}
