# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""The sizes containerd reported for committed snapshots, kept between runs in the node's cache directory (_cache).

containerd measures a snapshot's size when it is committed, stores it, and answers every later ``snapshots.Usage`` of
that committed snapshot with the stored figure: the overlayfs and native snapshotters walk a directory only for an
active snapshot (``Usage`` in ``snapshots/overlay/overlay.go`` and ``snapshots/native/native.go`` from containerd
1.6 to 2.3; a committed snapshot cannot change). So asking again gives the same answer, at about 0.1 ms of gRPC
Python's CPU per call, 0.2 to 0.35 CPU-s of an audit over 2,000 images. The answers kept are those of committed
snapshots of those two snapshotters, each under its namespace, snapshotter, key and creation time as
``snapshots.List`` gives them: a snapshot removed and made again under the same key is another entry. Active snapshots
(writable layers), views and every other snapshotter are asked each run. One JSON file per runtime socket
(``usage.<16 hex of the socket's identity>.json``); it is rewritten only when the node's committed snapshots changed,
and then holds only those that exist. Root's alone, as every cache file, or not used.
"""

from __future__ import annotations

import json

from ansible_collections.kubenode.gc.plugins.module_utils import _cache
from ansible_collections.kubenode.gc.plugins.module_utils.cri._cri import socket_digest

FORMAT = 1
COMMITTED = 3  # containerd's snapshots.Kind COMMITTED
KEPT_SNAPSHOTTERS = frozenset({"overlayfs", "native"})  # their Usage of a committed snapshot is the size stored at commit


def file_name(endpoint):
    return "usage.%s.json" % socket_digest(endpoint)


def keepable(snapshotter, record):
    """Whether containerd's answer for this snapshot (an inventory record) is the figure it stored at commit."""
    return snapshotter in KEPT_SNAPSHOTTERS and record.get("kind") == COMMITTED and bool(record.get("created_ns"))


def parse(data):
    """{(namespace, snapshotter, key): (created_ns, size)} from a cache file's bytes; {} for anything else."""
    try:
        doc = json.loads(data.decode("utf-8"))
    except (AttributeError, UnicodeDecodeError, ValueError):
        return {}
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("snapshots"), list):
        return {}
    kept = {}
    for row in doc["snapshots"]:
        if not (isinstance(row, list) and len(row) == 5 and all(isinstance(v, str) for v in row[:3])
                and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in row[3:])):
            return {}
        kept[tuple(row[:3])] = (row[3], row[4])
    return kept


def entries(inventory):
    """What to keep of an inventory whose sizes are filled: its committed snapshots of KEPT_SNAPSHOTTERS, as ``parse``
    gives them."""
    out = {}
    for namespace, rec in inventory.items():
        for (snapshotter, key), snap in rec["snapshots"].items():
            if keepable(snapshotter, snap) and snap.get("size") is not None:
                out[(namespace, snapshotter, key)] = (snap["created_ns"], snap["size"])
    return out


def dump(kept):
    rows = [list(ref) + list(value) for ref, value in sorted(kept.items())]
    return json.dumps({"format": FORMAT, "snapshots": rows}, separators=(",", ":")).encode("utf-8")


def load(endpoint):
    """The sizes kept for the runtime at ``endpoint``; {} when there are none or the cache is not root's alone."""
    return parse(_cache.load(file_name(endpoint)) or b"")


def save(endpoint, inventory, kept):
    """Keep the committed snapshots' sizes of ``inventory`` when they are not what was ``kept``; True when written."""
    now = entries(inventory)
    return now != kept and _cache.store(file_name(endpoint), dump(now))
