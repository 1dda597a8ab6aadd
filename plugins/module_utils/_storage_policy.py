# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""PURE attribution of a containerd image filesystem to categories, and storage_gc's plan (no I/O, no clock).

The input is an inventory of containerd's metadata, as ``_containerd._inventory`` reads it::

    {namespace: {"images": [{"name", "target"}],
                 "content": {digest: {"size", "labels"}},
                 "ingests": [{"ref", "offset", "total", "started_ns", "updated_ns"}],
                 "snapshots": {(snapshotter, key): {"parent", "kind", "labels", "size"}},
                 "leases": [{"id", "created_ns", "labels", "resources": [(type, id)]}],
                 "containers": [{"id", "image", "snapshotter", "snapshot_key", "labels"}]}}

References follow containerd's own garbage collector (metadata/gc.go): an image references its
target blob; a blob or snapshot references what its ``containerd.io/gc.ref.content*`` and
``containerd.io/gc.ref.snapshot.<snapshotter>`` labels name; a snapshot references its parent; a
container references its snapshot and its labels' references; a lease references its resources.
Every byte is counted once, in the first category that claims it, in this order: k8s_images,
other_namespace_images, writable_layers, leased, unreferenced_snapshots. A blob is one file in the
shared content store, so a blob held in k8s.io and in another namespace counts in k8s_images;
snapshots are per namespace on disk.
"""

from __future__ import annotations

import calendar
import re

CRI_NAMESPACE = "k8s.io"
CATEGORIES = ("k8s_images", "other_namespace_images", "writable_layers", "container_logs", "stale_ingests", "leased",
              "unreferenced_snapshots", "unaccounted")
NODEFS_CATEGORIES = ("pod_volumes", "container_logs", "unaccounted")
REF_CONTENT = "containerd.io/gc.ref.content"
REF_SNAPSHOT = "containerd.io/gc.ref.snapshot."
GC_ROOT = "containerd.io/gc.root"
LEASE_EXPIRE = "containerd.io/gc.expire"
OBJECTS_SHOWN = 10  # the largest objects listed per category
# the kinds of storage_gc's plan, in the order they are freed
PLAN_KINDS = ("ingest", "lease", "image", "snapshot")


def label_refs(labels, snapshotter_default=None):
    """(content digests, (snapshotter, key) pairs) that gc.ref labels name."""
    contents, snaps = [], []
    for key, value in labels.items():
        if key.startswith(REF_CONTENT):
            contents.append(value)
        elif key.startswith(REF_SNAPSHOT):
            snapshotter = key[len(REF_SNAPSHOT):].split("/", 1)[0] or snapshotter_default
            snaps.append((snapshotter, value))
    return contents, snaps


def reach(ns, content_roots, snapshot_roots):
    """Blobs and snapshots of namespace record ``ns`` reachable from the given roots: (set of digests, set of (snapshotter, key))."""
    content, snapshots = ns["content"], ns["snapshots"]
    seen_c, seen_s = set(), set()
    todo_c, todo_s = list(content_roots), list(snapshot_roots)
    while todo_c or todo_s:
        while todo_c:
            digest = todo_c.pop()
            if digest in seen_c or digest not in content:
                continue
            seen_c.add(digest)
            more_c, more_s = label_refs(content[digest]["labels"])
            todo_c += more_c
            todo_s += more_s
        while todo_s:
            ref = todo_s.pop()
            if ref in seen_s or ref not in snapshots:
                continue
            seen_s.add(ref)
            snap = snapshots[ref]
            if snap["parent"]:
                todo_s.append((ref[0], snap["parent"]))
            more_c, more_s = label_refs(snap["labels"], ref[0])
            todo_c += more_c
            todo_s += more_s
    return seen_c, seen_s


def lease_roots(lease):
    """(digests, snapshot refs, ingest refs) a lease holds."""
    contents, snaps, ingests = [], [], []
    for kind, rid in lease["resources"]:
        if kind == "content":
            contents.append(rid)
        elif kind.startswith("snapshots/"):
            snaps.append((kind.split("/", 1)[1], rid))
        elif kind == "ingests":
            ingests.append(rid)
    return contents, snaps, ingests


def container_roots(container):
    contents, snaps = label_refs(container["labels"])
    if container["snapshot_key"]:
        snaps.append((container["snapshotter"], container["snapshot_key"]))
    return contents, snaps


def image_groups(ns):
    """Image records grouped by target blob: [(display name, [record names], target digest)], by name."""
    groups = {}
    for img in sorted(ns["images"], key=lambda i: i["name"]):
        groups.setdefault(img["target"], []).append(img["name"])
    out = []
    for target, names in groups.items():
        shown = next((n for n in names if not n.startswith("sha256:")), names[0])
        out.append((shown, names, target))
    return sorted(out)


def expired(lease, now_ns):
    """True when a lease's containerd.io/gc.expire label (RFC 3339) lies before ``now_ns``; False without one or unparsable."""
    expire = expire_ns(lease)
    return expire is not None and expire < now_ns


def expire_ns(lease):
    text = lease["labels"].get(LEASE_EXPIRE)
    return parse_rfc3339(text) if text else None


def parse_rfc3339(text):
    """RFC 3339 (as Go's time.RFC3339 writes it) -> ns since the epoch, or None."""
    m = re.match(r"^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$", text.strip())
    if not m:
        return None
    y, mo, d, h, mi, s = (int(x) for x in m.groups()[:6])
    frac = m.group(7) or ""
    seconds = calendar.timegm((y, mo, d, h, mi, s, 0, 0, 0))
    zone = m.group(8)
    if zone not in ("Z", "z"):
        sign = 1 if zone[0] == "+" else -1
        seconds -= sign * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    nanos = int((frac[1:] + "000000000")[:9]) if frac else 0
    return seconds * 1000000000 + nanos


class _Claims:
    """Bytes claimed so far: each blob (global) and snapshot (per namespace) counts once."""

    def __init__(self, inventory):
        self.inventory = inventory
        self.content = set()
        self.snapshots = set()

    def take(self, namespace, digests, snaps):
        ns = self.inventory[namespace]
        total = 0
        for digest in digests:
            if digest not in self.content:
                self.content.add(digest)
                total += ns["content"][digest]["size"]
        for ref in snaps:
            key = (namespace,) + ref
            if key not in self.snapshots:
                self.snapshots.add(key)
                total += ns["snapshots"][ref].get("size") or 0
        return total


def summarise(items):
    """A category as returned: {"bytes": the sum, "objects": the OBJECTS_SHOWN largest, largest first}."""
    items = sorted(items, key=lambda o: (-o["bytes"], o.get("namespace") or "", o.get("id") or o.get("name") or ""))
    return {"bytes": sum(o["bytes"] for o in items), "objects": items[:OBJECTS_SHOWN]}


def needs_usage(inventory, cri_container_snapshots=True):
    """The snapshots whose size attribution needs (snapshots.Usage): every one but the active snapshots of
    k8s.io containers, whose writable layers the CRI's ListContainerStats measures. [(namespace, snapshotter, key)]"""
    skip = set()
    if cri_container_snapshots:
        for c in inventory.get(CRI_NAMESPACE, {}).get("containers", ()):
            if c["snapshot_key"]:
                skip.add((CRI_NAMESPACE, c["snapshotter"], c["snapshot_key"]))
    out = []
    for namespace in sorted(inventory):
        for ref, snap in sorted(inventory[namespace]["snapshots"].items()):
            if (namespace,) + ref not in skip:
                out.append((namespace,) + ref)
    return out


def _namespaces(inventory):
    """k8s.io first (its images claim shared blobs), then the others by name."""
    return [n for n in [CRI_NAMESPACE] + sorted(n for n in inventory if n != CRI_NAMESPACE) if n in inventory]


def objects(inventory, now_ns):
    """Every object of the containerd categories, each with the bytes it alone holds, in claim order (the one walk
    attribute() and plan() share): {category: [object]}. Image objects carry ``names`` (every record) and ``in_use``
    (a container of its namespace was created from one of them); unreferenced snapshots come children first."""
    claims = _Claims(inventory)
    out = {"k8s_images": [], "other_namespace_images": [], "writable_layers": [], "stale_ingests": [], "leased": [],
           "unreferenced_snapshots": []}
    namespaces = _namespaces(inventory)
    for namespace in namespaces:
        ns = inventory[namespace]
        used = {c["image"] for c in ns["containers"]}
        category = "k8s_images" if namespace == CRI_NAMESPACE else "other_namespace_images"
        for shown, names, target in image_groups(ns):
            size = claims.take(namespace, *reach(ns, [target], []))
            out[category].append({"namespace": namespace, "name": shown, "id": target, "bytes": size, "names": names,
                                  "in_use": bool(used & set(names))})
    for namespace in namespaces:
        ns = inventory[namespace]
        for c in ns["containers"]:
            # k8s.io containers' active snapshots have no size here: the CRI measures them (attribute's ``writable``)
            size = claims.take(namespace, *reach(ns, *container_roots(c)))
            if namespace != CRI_NAMESPACE:
                out["writable_layers"].append({"namespace": namespace, "id": c["id"], "name": c["image"], "bytes": size})
    seen = set()
    for namespace in namespaces:
        for ing in inventory[namespace]["ingests"]:
            if ing["ref"] not in seen:
                seen.add(ing["ref"])
                out["stale_ingests"].append({"namespace": namespace, "id": ing["ref"], "bytes": ing["offset"], "total_bytes": ing["total"],
                                             "age_seconds": _age(now_ns, ing["started_ns"]), "idle_seconds": _age(now_ns, ing["updated_ns"])})
    for namespace in namespaces:
        ns = inventory[namespace]
        for lease in sorted(ns["leases"], key=lambda item: item["id"]):
            contents, snaps, _ingests = lease_roots(lease)
            out["leased"].append({"namespace": namespace, "id": lease["id"], "bytes": claims.take(namespace, *reach(ns, contents, snaps)),
                                  "expires": lease["labels"].get(LEASE_EXPIRE), "expired": expired(lease, now_ns),
                                  "age_seconds": _age(now_ns, lease["created_ns"])})
    for namespace in namespaces:
        ns = inventory[namespace]
        for ref in _leaves_first(ns, unreferenced_snapshots(inventory, namespace, claims.snapshots)):
            out["unreferenced_snapshots"].append({"namespace": namespace, "id": ref[1], "snapshotter": ref[0],
                                                  "bytes": claims.take(namespace, (), [ref]),
                                                  "gc_root": GC_ROOT in ns["snapshots"][ref]["labels"]})
    return out


# keys of objects() that only the plan needs
_INTERNAL = ("names", "in_use")


def attribute(inventory, used_bytes, writable, logs, now_ns):
    """The image filesystem's categories.

    ``writable``: [{"namespace", "id", "name", "bytes"}] of the CRI's containers (ListContainerStats);
    ``logs``: [{"namespace", "name", "id", "bytes"}] per pod, or None when the logs are on another filesystem.
    Returns {category: {"bytes", "objects"}}; ``unaccounted`` has no objects."""
    cats = objects(inventory, now_ns)
    cats["writable_layers"] += [dict(w) for w in writable]
    cats["container_logs"] = list(logs or [])
    result = {}
    for name in CATEGORIES[:-1]:
        result[name] = summarise([{k: v for k, v in o.items() if k not in _INTERNAL} for o in cats[name]])
    result["unaccounted"] = {"bytes": used_bytes - sum(c["bytes"] for c in result.values()), "objects": []}
    return result


def unreferenced_snapshots(inventory, namespace, claimed):
    """Snapshots of a namespace that no image, container or lease reaches (each a (snapshotter, key)).

    ``claimed``: {(namespace, snapshotter, key)} already reached; any descendant of a reached snapshot is
    not reached through it, so a chain kept only by a gc.root label on its top is unreferenced whole."""
    ns = inventory[namespace]
    reached = set()
    images = [t for _s, _n, t in image_groups(ns)]
    roots_c, roots_s = list(images), []
    for c in ns["containers"]:
        cc, cs = container_roots(c)
        roots_c += cc
        roots_s += cs
    for lease in ns["leases"]:
        lc, ls, _li = lease_roots(lease)
        roots_c += lc
        roots_s += ls
    _digests, reached = reach(ns, roots_c, roots_s)
    return [ref for ref in ns["snapshots"] if ref not in reached and (namespace,) + ref not in claimed]


def _age(now_ns, then_ns):
    return max(0, (now_ns - then_ns) // 1000000000) if then_ns else None


def nodefs_categories(used_bytes, volumes, logs):
    """The kubelet root filesystem's categories (pod_volumes, container_logs, unaccounted)."""
    result = {"pod_volumes": summarise(volumes), "container_logs": summarise(logs or [])}
    result["unaccounted"] = {"bytes": used_bytes - result["pod_volumes"]["bytes"] - result["container_logs"]["bytes"], "objects": []}
    return result


def plan(inventory, namespaces, keep, ingest_max_age_ns, lease_max_age_ns, now_ns, sandboxes=()):
    """storage_gc's plan: [{kind, namespace, id, bytes}] in the order they are freed (plus ``snapshotter`` for snapshots).

    ``namespaces``: the containerd namespaces whose images go; ``keep``: a predicate on an image
    record ({"id", "repo_tags", "repo_digests"}) or None; ages in ns (``ingest_max_age_ns`` None: no ingest;
    ``lease_max_age_ns`` None: only expired leases); ``sandboxes``: ids of the CRI's pod sandboxes, whose k8s.io
    leases (containerd 2.x holds the image volumes of a pod through a lease named after its sandbox) are never
    planned. Bytes are each object's share as ``attribute`` counts it; an image with several names is planned once
    per name, its bytes on the first."""
    full = objects(inventory, now_ns)
    steps = []
    for ing in full["stale_ingests"]:
        if ingest_max_age_ns is not None and ing["idle_seconds"] is not None and ing["idle_seconds"] * 1000000000 > ingest_max_age_ns:
            steps.append({"kind": "ingest", "namespace": ing["namespace"], "id": ing["id"], "bytes": ing["bytes"]})
    live = {(CRI_NAMESPACE, s) for s in sandboxes}
    for lease in full["leased"]:
        if (lease["namespace"], lease["id"]) in live:
            continue
        old = lease_max_age_ns is not None and lease["age_seconds"] is not None and lease["age_seconds"] * 1000000000 > lease_max_age_ns
        if lease["expired"] or old:
            steps.append({"kind": "lease", "namespace": lease["namespace"], "id": lease["id"], "bytes": lease["bytes"]})
    wanted = set(namespaces) - {CRI_NAMESPACE}
    for img in full["other_namespace_images"]:
        if img["namespace"] not in wanted or img["in_use"]:
            continue
        record = {"id": img["id"], "repo_tags": [n for n in img["names"] if not n.startswith("sha256:")], "repo_digests": []}
        if keep is not None and keep(record):
            continue
        for n, name in enumerate(img["names"]):
            steps.append({"kind": "image", "namespace": img["namespace"], "id": name, "bytes": img["bytes"] if n == 0 else 0})
    for snap in full["unreferenced_snapshots"]:
        steps.append({"kind": "snapshot", "namespace": snap["namespace"], "id": snap["id"], "bytes": snap["bytes"], "snapshotter": snap["snapshotter"]})
    return steps


def _leaves_first(ns, refs):
    """Order snapshots so that every child comes before its parent (containerd refuses to remove a parent)."""
    refs = sorted(refs)
    wanted = set(refs)
    depth = {}

    def level(ref):
        if ref in depth:
            return depth[ref]
        parent = ns["snapshots"][ref]["parent"]
        pref = (ref[0], parent)
        depth[ref] = 0 if not parent or pref not in wanted else level(pref) + 1
        return depth[ref]

    return sorted(refs, key=lambda r: (-level(r), r))
