# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""Eviction signals and inode thresholds of the audit report: how close each node is to the kubelet's hard eviction
thresholds for imagefs.available, imagefs.inodesFree, nodefs.available and nodefs.inodesFree, and whether its image
filesystem's inode usage is at or above image_gc's inode high threshold.

Pure: no I/O, no clock, no Ansible. ``add()`` adds ``eviction_signals``, ``near_eviction``, the inode thresholds and
their findings to one node of the report.
"""

from __future__ import annotations

from collections.abc import Mapping

from ansible_collections.kubenode.gc.plugins.module_utils._kubelet import EVICTION_HARD
from ansible_collections.kubenode.gc.plugins.module_utils._quantity import QuantityError, parse_quantity
from ansible_collections.kubenode.gc.plugins.module_utils.cri._snapshot import usage_percent
from ansible_collections.kubenode.gc.plugins.plugin_utils._fleet import as_int as _int

# signal -> (filesystem, measure); the filesystem's (total, free) keys per measure
SIGNALS = (("imagefs.available", "imagefs", "bytes"), ("imagefs.inodesFree", "imagefs", "inodes"),
           ("nodefs.available", "nodefs", "bytes"), ("nodefs.inodesFree", "nodefs", "inodes"))
MEASURE_KEYS = {"bytes": ("capacity_bytes", "available_bytes"), "inodes": ("inodes_total", "inodes_free")}
DEFAULT_MARGIN_PERCENT = 5
STATES = ("reached", "near", "ok", "off", "unknown")


def parse_statfs(text):
    """The nodefs measure the audit playbook takes (``stat -f -c '%S %b %a %c %d' <kubelet root>``: block size, blocks,
    blocks available, inodes, free inodes) as a filesystem dict, or None when it is missing or not five integers."""
    fields = str(text or "").split()
    if len(fields) != 5:
        return None
    try:
        size, blocks, avail, files, ffree = (int(f) for f in fields)
    except ValueError:
        return None
    return dict(capacity_bytes=size * blocks, available_bytes=size * avail, inodes_total=files, inodes_free=ffree)


def threshold_amount(threshold, total):
    """What an evictionHard value stands for on a filesystem of ``total`` bytes or inodes: ``10%`` of it, or a quantity
    (``2Gi``, ``1000``); None when unreadable."""
    if threshold is None or total is None:
        return None
    text = str(threshold).strip()
    try:
        if text.endswith("%"):
            return float(text[:-1]) * total / 100
        return float(parse_quantity(text).value)
    except (ValueError, QuantityError):
        return None


def _hard(kubelet):
    """(evictionHard map, source): the kubelet_config result's effective map, else the kubelet's defaults."""
    effective = (kubelet or {}).get("effective") if isinstance(kubelet, Mapping) else None
    hard = effective.get("evictionHard") if isinstance(effective, Mapping) else None
    if isinstance(hard, Mapping):
        return hard, "kubelet_config"
    return EVICTION_HARD, "default"


def signal_state(free, total, threshold, margin):
    """(state, free percent, threshold percent): ``reached`` when free < threshold (the kubelet evicts), ``near`` when free
    is less than ``margin`` percentage points above it, ``ok``; ``off`` without a threshold, ``unknown`` without a measure."""
    if threshold is None:
        return "off", None, None
    if not total or free is None:
        return "unknown", None, None
    amount = threshold_amount(threshold, total)
    if amount is None:
        return "unknown", None, None
    free_pct, threshold_pct = round(free * 100.0 / total, 1), round(amount * 100.0 / total, 1)
    if free < amount:
        return "reached", free_pct, threshold_pct
    if free < amount + margin * total / 100.0:
        return "near", free_pct, threshold_pct
    return "ok", free_pct, threshold_pct


def _image_fs(cri):
    filesystems = (cri or {}).get("imagefs") if isinstance(cri, Mapping) else None
    filesystems = [fs for fs in filesystems if isinstance(fs, Mapping)] if isinstance(filesystems, list) else []
    return next((fs for fs in filesystems if fs.get("kind") == "image"), filesystems[0] if filesystems else {})


def _ok(value):
    if not isinstance(value, Mapping) or value.get("failed") or value.get("unreachable") or value.get("skipped"):
        return None
    return value


def add(node, raw, margin=DEFAULT_MARGIN_PERCENT):
    """Add ``eviction_signals``, ``near_eviction``, ``thresholds.inodes_high_percent``/``inodes_low_percent`` and the
    ``near_eviction``, ``eviction_threshold_reached`` (signals other than imagefs.available, which the report already
    checks) and ``over_inodes_high_threshold`` findings to ``node`` (changed in place)."""
    failed = node["status"] == "failed"
    hard, source = _hard(_ok(raw.get("kubelet_config")))
    fs = {"imagefs": {} if failed else _image_fs(_ok(raw.get("cri_info"))), "nodefs": None if failed else parse_statfs(raw.get("nodefs"))}
    signals = []
    for signal, where, measure in SIGNALS:
        total_key, free_key = MEASURE_KEYS[measure]
        measured = fs[where] or {}
        threshold = hard.get(signal)
        threshold = None if threshold is None else str(threshold)
        state, free_pct, threshold_pct = signal_state(_int(measured.get(free_key)), _int(measured.get(total_key)), threshold, margin)
        signals.append(dict(signal=signal, threshold=threshold, source=source, free_percent=free_pct, threshold_percent=threshold_pct,
                            state=state))
        where_text = "The image filesystem %s" % (node["imagefs"]["mountpoint"] or "(unknown mountpoint)") if where == "imagefs" \
            else "The kubelet's root filesystem (nodefs)"
        what = "of its inodes free" if measure == "inodes" else "of its space available"
        if state == "near":
            node["findings"].append(dict(source="audit", severity="warning", code="near_eviction", message=(
                "%s has %.1f%% %s, within %s percentage points of the kubelet's hard eviction threshold %s %s (%s)."
                % (where_text, free_pct, what, margin, signal, threshold, source))))
        elif state == "reached" and signal != "imagefs.available":
            node["findings"].append(dict(source="audit", severity="error", code="eviction_threshold_reached", message=(
                "%s has %.1f%% %s, below the kubelet's hard eviction threshold %s %s (%s): the kubelet evicts pods to reclaim it."
                % (where_text, free_pct, what, signal, threshold, source))))
    node["eviction_signals"] = signals
    node["near_eviction"] = any(s["state"] == "near" for s in signals)

    inodes = raw.get("inodes_thresholds") if isinstance(raw.get("inodes_thresholds"), Mapping) else {}
    high, low = _int(inodes.get("high_percent")), _int(inodes.get("low_percent"))
    node["thresholds"]["inodes_high_percent"] = high
    node["thresholds"]["inodes_low_percent"] = low
    image_fs = fs["imagefs"]
    total, free = _int(image_fs.get("inodes_total")), _int(image_fs.get("inodes_free"))
    node["imagefs"]["inodes_usage_percent"] = usage_percent(total, free) if total and free is not None else None
    usage = node["imagefs"]["inodes_usage_percent"]
    if high is not None and usage is not None and usage >= high:
        node["findings"].append(dict(source="audit", severity="warning", code="over_inodes_high_threshold", message=(
            "The image filesystem %s has %d%% of its inodes used, at or above the image GC inode high threshold of %d%%."
            % (node["imagefs"]["mountpoint"] or "(unknown mountpoint)", usage, high))))
    return node


def _num(value):
    return ("%.1f" % value).rstrip("0").rstrip(".")


def signals_text(node):
    """One line of plain text for the renderings: each eviction signal with a threshold, its free share, threshold and state."""
    parts = []
    for s in node.get("eviction_signals") or []:
        if s["state"] == "off":
            continue
        if s["free_percent"] is None:
            parts.append("%s %s: not measured" % (s["signal"], s["threshold"]))
        else:
            parts.append("%s %s%% free (threshold %s, %s%%): %s" % (s["signal"], _num(s["free_percent"]), s["threshold"],
                                                                    _num(s["threshold_percent"]), s["state"]))
    return "; ".join(parts) or "no hard eviction threshold"
