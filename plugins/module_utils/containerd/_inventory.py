# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""One read of containerd's metadata in every namespace, as the plain records _storage_policy takes.

Per namespace: images.List, content.List (one stream: digest, size, labels), content.ListStatuses
(ingests), containers.ListStream (with the CRI plugin's metadata extension, kept unparsed), the sandbox
store's List, leases.List plus leases.ListResources per lease, and snapshots.List per snapshotter (every
snapshotter plugin containerd runs, as its introspection API says, plus any other one a container or a
snapshot-naming label names). Sizes come from the API, never from walking the store: blobs from content.List, snapshots
from snapshots.Usage (only for the snapshots whose size is attributed, USAGE_CONCURRENCY calls in flight; a committed
snapshot's size containerd stored at commit is asked once and kept on the node: _usage_cache).
"""

from __future__ import annotations

import concurrent.futures

from ansible_collections.kubenode.gc.plugins.module_utils.containerd._client import DEFAULT_SNAPSHOTTER, ContainerdError, timestamp_ns
from ansible_collections.kubenode.gc.plugins.module_utils.containerd._containerd_collector import named_snapshotters
from ansible_collections.kubenode.gc.plugins.module_utils.containerd import _usage_cache
from ansible_collections.kubenode.gc.plugins.module_utils.containerd._cri_metadata import CONTAINER_METADATA

USAGE_CONCURRENCY = 64
LIST_CONCURRENCY = 8


def read(client, namespaces=None):
    """{namespace: record} for every namespace (or the given ones).

    The lists of every namespace are asked for at once (LIST_CONCURRENCY calls in flight): containerd answers them
    from its database in parallel, so the read takes about as long as its largest list."""
    names = client.namespaces() if namespaces is None else list(namespaces)
    running = _running_snapshotters(client)
    with concurrent.futures.ThreadPoolExecutor(LIST_CONCURRENCY) as pool:
        asked = {}
        for ns in names:
            asked[ns] = {kind: pool.submit(fn, ns) for kind, fn in (("images", client.images), ("content", client.content),
                                                                    ("ingests", client.ingests), ("containers", client.containers),
                                                                    ("leases", client.leases), ("sandboxes", client.sandboxes))}
            asked[ns]["snapshots"] = {s: pool.submit(_snapshots, client, ns, s) for s in running}
        return {ns: _record(client, pool, ns, asked[ns], running) for ns in names}


def _running_snapshotters(client):
    """The snapshotters containerd runs (introspection); overlayfs alone when it does not say."""
    try:
        return client.snapshotters() or [DEFAULT_SNAPSHOTTER]
    except ContainerdError as exc:
        if exc.code in ("UNIMPLEMENTED", "PERMISSION_DENIED"):
            return [DEFAULT_SNAPSHOTTER]
        raise


def _snapshots(client, ns, snapshotter):
    try:
        return client.snapshots(ns, snapshotter)
    except ContainerdError as exc:
        if snapshotter != DEFAULT_SNAPSHOTTER and exc.code in ("NOT_FOUND", "INVALID_ARGUMENT", "UNKNOWN", "FAILED_PRECONDITION"):
            return []  # a snapshotter that does not serve (a label names one this containerd does not run)
        raise


def _record(client, pool, ns, asked, running):
    rec = {"images": [], "content": {}, "ingests": [], "snapshots": {}, "leases": [], "containers": [], "sandboxes": []}
    snapshotters = set()
    for img in asked["images"].result():
        rec["images"].append({"name": img.name, "target": img.target.digest, "labels": dict(img.labels)})
        snapshotters.update(named_snapshotters(img.labels))
    for info in asked["content"].result():
        labels = dict(info.labels)
        rec["content"][info.digest] = {"size": int(info.size), "labels": labels, "created_ns": timestamp_ns(info.created_at)}
        snapshotters.update(named_snapshotters(labels))
    for st in asked["ingests"].result():
        rec["ingests"].append({"ref": st.ref, "offset": int(st.offset), "total": int(st.total), "expected": st.expected,
                               "started_ns": timestamp_ns(st.started_at), "updated_ns": timestamp_ns(st.updated_at)})
    for c in asked["containers"].result():
        # an empty snapshotter: the container has no snapshot (containerd's GC follows none); cri_metadata: the raw
        # JSON the CRI plugin records (its log path, for disk_usage: _cri_metadata), None on containers it did not make
        meta = c.extensions[CONTAINER_METADATA].value if CONTAINER_METADATA in c.extensions else None
        rec["containers"].append({"id": c.id, "image": c.image, "snapshotter": c.snapshotter,
                                  "snapshot_key": c.snapshot_key, "labels": dict(c.labels), "cri_metadata": meta})
        if c.snapshotter:
            snapshotters.add(c.snapshotter)
        snapshotters.update(named_snapshotters(c.labels))
    for sb in asked["sandboxes"].result():
        rec["sandboxes"].append({"id": sb.sandbox_id, "labels": dict(sb.labels)})
    leases = asked["leases"].result()
    resources = [pool.submit(client.lease_resources, ns, lease.id) for lease in leases]
    for lease, fut in zip(leases, resources):
        try:
            held = [(r.type, r.id) for r in fut.result()]
        except ContainerdError as exc:
            if exc.code != "NOT_FOUND":
                raise
            continue  # gone since the list
        rec["leases"].append({"id": lease.id, "created_ns": timestamp_ns(lease.created_at), "labels": dict(lease.labels), "resources": held})
    others = {s: pool.submit(_snapshots, client, ns, s) for s in sorted(snapshotters - set(running) - {""})}
    for snapshotter, fut in sorted(asked["snapshots"].items()) + sorted(others.items()):
        for info in fut.result():
            rec["snapshots"][(snapshotter, info.name)] = {
                "parent": info.parent, "kind": int(info.kind), "labels": dict(info.labels), "created_ns": timestamp_ns(info.created_at), "size": None}
    return rec


def fill_usage(client, inventory, wanted, kept=None):
    """Set ``size`` of the snapshots named in ``wanted`` [(namespace, snapshotter, key)] from snapshots.Usage, or from
    ``kept`` (_usage_cache: {ref: (created_ns, size)}) for a committed snapshot whose answer containerd stored at commit
    and that was measured before under the same creation time.

    A snapshot gone since the list (NOT_FOUND) has size 0."""
    kept = kept or {}
    asked = []
    for ref in wanted:
        ns, snapshotter, key = ref
        record = inventory[ns]["snapshots"][(snapshotter, key)]
        known = kept.get(ref)
        if known is not None and known[0] == record["created_ns"] and _usage_cache.keepable(snapshotter, record):
            record["size"] = known[1]
        else:
            asked.append(ref)
    for start in range(0, len(asked), USAGE_CONCURRENCY):
        chunk = asked[start:start + USAGE_CONCURRENCY]
        futures = [(ref, client.usage_async(*ref)) for ref in chunk]
        for (ns, snapshotter, key), fut in futures:
            try:
                size = int(fut.result().size)
            except ContainerdError as exc:
                if exc.code != "NOT_FOUND":
                    raise
                size = 0
            inventory[ns]["snapshots"][(snapshotter, key)]["size"] = size


def measure(client, inventory, wanted):
    """fill_usage with the sizes kept on the node for this runtime (_usage_cache), and keep the new ones."""
    endpoint = client.cri.endpoint
    kept = _usage_cache.load(endpoint)
    fill_usage(client, inventory, wanted, kept)
    _usage_cache.save(endpoint, inventory, kept)
