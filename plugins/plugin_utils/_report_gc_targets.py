# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""The audit report's byte targets (headroom in bytes above free_bytes_high, a finding below it) and the node's GC timer
(kubenode.gc.gc_timer: installed, last run and its result, from the state file its runner writes). Pure."""

from __future__ import annotations

import json
from collections.abc import Mapping

from ansible_collections.kubenode.gc.plugins.module_utils._errors import KubenodeGcError
from ansible_collections.kubenode.gc.plugins.module_utils._quantity import byte_amount
from ansible_collections.kubenode.gc.plugins.plugin_utils._fleet import as_int as _int
from ansible_collections.kubenode.gc.plugins.plugin_utils._gc_table import human_bytes

TIMER_KEYS = ("finished_at", "result", "observe", "removed_images", "removed_containers", "bytes_freed", "message")


def _bytes(value):
    """A byte target as the playbook passed it (bytes or a quantity); None when unset or not a byte amount (image_gc, given the
    same value, fails the policy part with the sentence that says why)."""
    if value in (None, ""):
        return None
    try:
        return byte_amount("free_bytes", value)
    except KubenodeGcError:
        return None


def add(node, raw):
    """Add ``thresholds.free_bytes_high``/``free_bytes_low``, ``headroom.free_bytes_high_bytes``, the ``under_free_bytes_high``
    finding and ``gc_timer`` (with the ``gc_timer_failed`` finding) to ``node`` (changed in place)."""
    targets = raw.get("free_bytes_targets") if isinstance(raw.get("free_bytes_targets"), Mapping) else {}
    high, low = _bytes(targets.get("high")), _bytes(targets.get("low"))
    node["thresholds"]["free_bytes_high"] = high
    node["thresholds"]["free_bytes_low"] = low
    fs = node["imagefs"]
    available, capacity = fs.get("available_bytes"), fs.get("capacity_bytes")
    headroom = None
    if node["status"] != "failed" and high is not None and available is not None and capacity:
        headroom = min(available, capacity) - high
    node["headroom"]["free_bytes_high_bytes"] = headroom
    if headroom is not None and headroom < 0:
        node["findings"].append(dict(source="audit", severity="warning", code="under_free_bytes_high", message=(
            "The image filesystem %s has %s available, below the byte target free_bytes_high %s: image GC under the policy frees up to "
            "free_bytes_low %s." % (fs.get("mountpoint") or "(unknown mountpoint)", human_bytes(min(available, capacity)), human_bytes(high),
                                    human_bytes(low) if low is not None else "(unset)"))))
    node["gc_timer"] = gc_timer(raw.get("gc_timer"), node["status"] == "failed")
    if node["gc_timer"]["installed"] and node["gc_timer"]["result"] == "failed":
        node["findings"].append(dict(source="audit", severity="warning", code="gc_timer_failed", message=(
            "The node's GC timer (kubenode.gc.gc_timer) failed on its last run at %s: %s"
            % (node["gc_timer"]["finished_at"] or "(unknown time)", node["gc_timer"]["message"] or "no message."))))
    return node


def gc_timer(raw, failed=False):
    """``{installed, finished_at, result, observe, removed_images, removed_containers, bytes_freed, message}`` from the playbook's
    ``gc_timer`` dict (``installed``: the timer unit exists; ``state``: the text of the runner's state file, or empty); every
    value None for a failed node or when unknown, ``result`` None when the timer never ran (or its state file is unreadable)."""
    out = dict(installed=None, **dict.fromkeys(TIMER_KEYS))
    if failed or not isinstance(raw, Mapping):
        return out
    out["installed"] = bool(raw.get("installed")) if raw.get("installed") not in (None, "") else None
    state = raw.get("state")
    if isinstance(state, str):
        try:
            state = json.loads(state) if state.strip() else None
        except ValueError:
            state = None
    if isinstance(state, Mapping):
        out["finished_at"] = str(state["finished_at"]) if state.get("finished_at") else None
        out["result"] = state.get("result") if state.get("result") in ("ok", "failed") else None
        out["observe"] = state.get("observe") if isinstance(state.get("observe"), bool) else None
        for key in ("removed_images", "removed_containers", "bytes_freed"):
            out[key] = _int(state.get(key))
        out["message"] = " ".join(str(state["message"]).split()) if state.get("message") else None
    return out
