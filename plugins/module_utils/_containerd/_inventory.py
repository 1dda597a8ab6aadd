# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""One read of containerd's metadata in every namespace, as the plain records _storage_policy takes.

Per namespace: images.List, content.List (one stream: digest, size, labels), content.ListStatuses
(ingests), containers.List, leases.List plus leases.ListResources per lease, and snapshots.List per
snapshotter (overlayfs and every other one a container or label names). Sizes come from the API,
never from walking the store: blobs from content.List, snapshots from snapshots.Usage (only for the
snapshots whose size is attributed, USAGE_CONCURRENCY calls in flight).
"""

from __future__ import annotations

from ansible_collections.kubenode.gc.plugins.module_utils._containerd._client import DEFAULT_SNAPSHOTTER, ContainerdError, timestamp_ns
from ansible_collections.kubenode.gc.plugins.module_utils._storage_policy import REF_SNAPSHOT

USAGE_CONCURRENCY = 64


def read(client, namespaces=None):
    """{namespace: record} for every namespace (or the given ones)."""
    names = client.namespaces() if namespaces is None else list(namespaces)
    inventory = {}
    for ns in names:
        rec = {"images": [], "content": {}, "ingests": [], "snapshots": {}, "leases": [], "containers": []}
        for img in client.images(ns):
            rec["images"].append({"name": img.name, "target": img.target.digest})
        snapshotters = {DEFAULT_SNAPSHOTTER}
        for info in client.content(ns):
            labels = dict(info.labels)
            rec["content"][info.digest] = {"size": int(info.size), "labels": labels}
            snapshotters.update(k[len(REF_SNAPSHOT):].split("/", 1)[0] for k in labels if k.startswith(REF_SNAPSHOT))
        for st in client.ingests(ns):
            rec["ingests"].append({"ref": st.ref, "offset": int(st.offset), "total": int(st.total),
                                   "started_ns": timestamp_ns(st.started_at), "updated_ns": timestamp_ns(st.updated_at)})
        for c in client.containers(ns):
            rec["containers"].append({"id": c.id, "image": c.image, "snapshotter": c.snapshotter or DEFAULT_SNAPSHOTTER,
                                      "snapshot_key": c.snapshot_key, "labels": dict(c.labels)})
            if c.snapshotter:
                snapshotters.add(c.snapshotter)
        for lease in client.leases(ns):
            try:
                resources = [(r.type, r.id) for r in client.lease_resources(ns, lease.id)]
            except ContainerdError as exc:
                if exc.code != "NOT_FOUND":
                    raise
                continue  # gone since the list
            rec["leases"].append({"id": lease.id, "created_ns": timestamp_ns(lease.created_at), "labels": dict(lease.labels), "resources": resources})
        for snapshotter in sorted(snapshotters):
            try:
                infos = client.snapshots(ns, snapshotter)
            except ContainerdError as exc:
                if snapshotter != DEFAULT_SNAPSHOTTER and exc.code in ("NOT_FOUND", "INVALID_ARGUMENT", "UNKNOWN", "FAILED_PRECONDITION"):
                    continue  # a snapshotter this containerd does not run
                raise
            for info in infos:
                rec["snapshots"][(snapshotter, info.name)] = {
                    "parent": info.parent, "kind": int(info.kind), "labels": dict(info.labels), "created_ns": timestamp_ns(info.created_at), "size": None}
        inventory[ns] = rec
    return inventory


def fill_usage(client, inventory, wanted):
    """Set ``size`` of the snapshots named in ``wanted`` [(namespace, snapshotter, key)] from snapshots.Usage.

    A snapshot gone since the list (NOT_FOUND) has size 0."""
    for start in range(0, len(wanted), USAGE_CONCURRENCY):
        chunk = wanted[start:start + USAGE_CONCURRENCY]
        futures = [(ref, client.usage_async(*ref)) for ref in chunk]
        for (ns, snapshotter, key), fut in futures:
            try:
                size = int(fut.result().size)
            except ContainerdError as exc:
                if exc.code != "NOT_FOUND":
                    raise
                size = 0
            inventory[ns]["snapshots"][(snapshotter, key)]["size"] = size
