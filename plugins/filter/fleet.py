# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Filters the fleet playbooks use to turn per-host facts into one list (docs in the sibling YAML files)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.kubenode.gc.plugins.plugin_utils._fleet import as_int, drift_from_results
from ansible_collections.kubenode.gc.plugins.plugin_utils._gc_table import apply_result, new_row, render_table


def _pairs(value, name):
    if not isinstance(value, (list, tuple)):
        raise AnsibleFilterError("%s expects a list of [record, host] pairs, got %s." % (name, type(value).__name__))
    out = []
    for item in value:
        if not isinstance(item, (list, tuple)) or len(item) != 2:
            raise AnsibleFilterError("%s expects [record, host] pairs, got %r." % (name, item))
        record, host = item
        out.append((record if isinstance(record, dict) else None, str(host)))
    return out


def audit_nodes(value):
    """[node record or None, host] pairs -> node records with their drift; a host without a record gets one with its error."""
    nodes = []
    for record, host in _pairs(value, "audit_nodes"):
        if record is None:
            record = {"host": host, "error": "The audit stopped on this host before it could read the node."}
        else:
            record = dict(record)
            record.setdefault("drift", drift_from_results(record))
        nodes.append(record)
    return nodes


def _row(record, host):
    if record is None:
        return {"host": host, "status": "failed", "message": "The cleanup stopped on this host before it finished.", "errors": 0}
    status = record.get("status")
    if status in ("failed", "skipped"):
        return {
            "host": host,
            "status": status,
            "message": record.get("error") or record.get("reason"),
            "usage_before": record.get("usage_before"),
            "usage_after": record.get("usage_after"),
            "errors": 0,
        }
    row = new_row(host, bool(record.get("check_mode")))
    apply_result(row, "container", {"removed_containers": record.get("containers") or [], "removed_sandboxes": record.get("sandboxes") or [],
                                    "removed_log_paths": record.get("log_paths") or []})
    image_keys = ("usage_before", "usage_after", "bytes_freed_measured", "bytes_freed_estimated", "target_reached", "errors")
    image_result = {key: record.get(key) for key in image_keys}
    image_result["removed"] = record.get("images") or []
    apply_result(row, "image", image_result)
    return row


def cleanup_summary(value):
    """[cleanup record or None, host] pairs -> the summary table as a list of lines."""
    rows = [_row(record, host) for record, host in _pairs(value, "cleanup_summary")]
    for row in rows:
        for key in ("usage_before", "usage_after"):
            row[key] = as_int(row.get(key))
    return render_table(rows, title="kubenode.gc cleanup").splitlines()


class FilterModule:
    def filters(self):
        return {"audit_nodes": audit_nodes, "cleanup_summary": cleanup_summary}
