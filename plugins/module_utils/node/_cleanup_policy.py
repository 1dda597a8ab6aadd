# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""The cleanup's per-node decisions, pure (no I/O): kubenode.gc.node_cleanup takes them on the node and the cleanup
playbook's filters (imagefs_pressure, cleanup_images_seen, cleanup_interrupted) read them from here."""

from __future__ import annotations

import os
from collections.abc import Mapping

from ansible_collections.kubenode.gc.plugins.module_utils.cri._snapshot import usage_percent
from ansible_collections.kubenode.gc.plugins.module_utils.gc import _gc_policy


def images_seen(images):
    """What a provisional history record keeps of cri_info's images: id, tags and size of each."""
    return [{"id": i.get("id"), "repo_tags": list(i.get("repo_tags") or []), "size": i.get("size")} for i in images if isinstance(i, Mapping)]


RECONSTRUCTED = ("reconstructed by the next run: the images this run's node had when it started that were gone when the next run "
                 "started (removed by this run, or in between by another actor such as the kubelet's own image GC); its container "
                 "removals are not known")


def complete_interrupted(record, images, now=None):
    """The history record of an interrupted run, completed: ``images`` are the ones of ``images_before`` that are no longer
    among the node's ``images`` (cri_info's list now); ``in_progress`` false, so that it is completed once."""
    present = {i.get("id") for i in images if isinstance(i, Mapping)}
    before = [i for i in record.get("images_before") or [] if isinstance(i, Mapping)]
    out = {k: v for k, v in record.items() if k != "images_before"}
    gone = [dict(i, reason="interrupted_run") for i in before if i.get("id") not in present]
    out.update(status="interrupted", in_progress=False, images=gone, reconstructed_at=None if now is None else str(now),
               bytes_freed_estimated=sum(i.get("size") or 0 for i in gone if isinstance(i.get("size"), int)), note=RECONSTRUCTED)
    return out


def pressure_reasons(fs, high, inodes_high=None, free_high=None):
    """Why an image filesystem needs image GC: one phrase per measure at or above its high mark (usage percent against
    ``high``; available bytes strictly below ``free_high``; inode usage against ``inodes_high``). Empty when none is."""
    reasons = []
    usage = fs.get("usage_percent")
    if _gc_policy.over_high_threshold(usage, high):
        reasons.append("imagefs usage %d%% is at or above the high threshold %d%%" % (int(usage), high))
    available, capacity = fs.get("available_bytes"), fs.get("capacity_bytes")
    if free_high is not None and available is not None and capacity:
        available = min(int(available), int(capacity))
        if available < free_high:
            reasons.append("imagefs has %d bytes available, below free_bytes_high %d" % (available, free_high))
    total, free = fs.get("inodes_total"), fs.get("inodes_free")
    if inodes_high is not None and total and free is not None:
        inodes = usage_percent(int(total), int(free))
        if inodes >= inodes_high:
            reasons.append("imagefs inode usage %d%% is at or above the inode high threshold %d%%" % (inodes, inodes_high))
    return reasons


def skip_reason(usage, high, source, inodes_high=None, free_bytes_high=None):
    """The sentence of a node the cleanup skips, below its thresholds."""
    text = "imagefs usage %s%% is below the high threshold %s%% (%s)" % (usage, high, source)
    if inodes_high not in (None, ""):
        text += " and its inode usage below the inode high threshold %s%%" % inodes_high
    if free_bytes_high not in (None, ""):
        text += " and not below free_bytes_high %s available" % free_bytes_high
    return text


def record_name(history_dir, now):
    """A history record's path: the UTC start time, to the microsecond."""
    return os.path.join(history_dir, now.strftime("%Y%m%dT%H%M%S.%fZ") + ".json")


def iso(now):
    return now.replace(tzinfo=None).isoformat() + "Z"
