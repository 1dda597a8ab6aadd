# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""containerd's garbage collector as a pure model: which objects its mark phase reaches (pure, no I/O).

The rules are those of containerd's collector (``metadata/gc.go`` in 1.6 and 1.7, ``core/metadata/gc.go`` in
2.x), applied to the plain records of _containerd._inventory:

Roots, per namespace:
  - every lease whose ``containerd.io/gc.expire`` (RFC 3339) has not passed (an unparsable value does not expire),
    and each resource it holds: blobs, snapshots, ingests and (2.x) images; a lease labelled ``containerd.io/gc.flat``
    holds its resources without their label references (a flat snapshot still keeps its parents);
  - every image record (2.x: unless its ``containerd.io/gc.expire`` has passed);
  - every ingest not held by a lease (containerd gives those an expiry 24 hours after they were opened);
  - every blob and every snapshot labelled ``containerd.io/gc.root``;
  - every container: its snapshot (when it names a snapshotter) and its label references;
  - every sandbox record (1.7, 2.x): its label references.
References:
  - an image: its target blob and its label references;
  - a blob: its label references;
  - a snapshot: its parent and its label references;
  - an ingest: the blob it expects.
Label references: ``containerd.io/gc.ref.content`` (alone or followed by ``.`` or ``/`` and any name) names a blob,
``containerd.io/gc.ref.snapshot.<snapshotter>[/<name>]`` a snapshot of that snapshotter, and on 2.x
``containerd.io/gc.ref.image`` (same naming as content) an image record. References never leave their namespace.

A node is a tuple: ("content", ns, digest), ("snapshot", ns, snapshotter, key), ("image", ns, name),
("ingest", ns, ref) or ("lease", ns, id). Whatever the mark phase does not reach, the collector removes.
"""

from __future__ import annotations

import calendar
import re

REF_CONTENT = "containerd.io/gc.ref.content"
REF_SNAPSHOT = "containerd.io/gc.ref.snapshot."
REF_IMAGE = "containerd.io/gc.ref.image"
GC_ROOT = "containerd.io/gc.root"
GC_EXPIRE = "containerd.io/gc.expire"
GC_FLAT = "containerd.io/gc.flat"
UNLEASED_INGEST_TTL_NS = 24 * 3600 * 1000000000


def major(version):
    """containerd's major version from its version string ("1.7.24", "v2.1.1"); 2 when unreadable (the newest rules)."""
    m = re.match(r"^v?(\d+)\.", str(version or ""))
    return int(m.group(1)) if m else 2


def parse_rfc3339(text):
    """RFC 3339 (as Go's time.RFC3339 writes it) -> ns since the epoch, or None."""
    m = re.match(r"^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$", (text or "").strip())
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


def expired(labels, now_ns):
    """True when ``containerd.io/gc.expire`` lies before ``now_ns``; False without one or when unparsable (as containerd)."""
    text = labels.get(GC_EXPIRE)
    expire = parse_rfc3339(text) if text else None
    return expire is not None and expire < now_ns


def _named(key, prefix):
    return key == prefix or (key.startswith(prefix) and key[len(prefix)] in "./")


def label_refs(ns, labels, gc_major=2):
    """The nodes the gc.ref labels of an object in namespace ``ns`` name."""
    out = []
    for key in sorted(labels):
        value = labels[key]
        if _named(key, REF_CONTENT):
            out.append(("content", ns, value))
        elif key.startswith(REF_SNAPSHOT):
            out.append(("snapshot", ns, key[len(REF_SNAPSHOT):].split("/", 1)[0], value))
        elif gc_major >= 2 and _named(key, REF_IMAGE):
            out.append(("image", ns, value))
    return out


def lease_resources(ns, lease):
    """The nodes a lease holds (its resources: content, snapshots/<snapshotter>, ingests, images)."""
    out = []
    for kind, rid in lease["resources"]:
        if kind == "content":
            out.append(("content", ns, rid))
        elif kind.startswith("snapshots/"):
            out.append(("snapshot", ns, kind.split("/", 1)[1], rid))
        elif kind == "ingests":
            out.append(("ingest", ns, rid))
        elif kind == "images":
            out.append(("image", ns, rid))
    return out


def container_refs(ns, container, gc_major=2):
    """The nodes a container keeps: its snapshot (when it names a snapshotter) and its label references."""
    out = []
    if container["snapshotter"] and container["snapshot_key"]:
        out.append(("snapshot", ns, container["snapshotter"], container["snapshot_key"]))
    return out + label_refs(ns, container["labels"], gc_major)


def _leased_ingests(rec):
    return {rid for lease in rec["leases"] for kind, rid in lease["resources"] if kind == "ingests"}


def roots(inventory, now_ns, gc_major=2, skip=frozenset(), gc_roots=True):
    """The collector's roots: [(node, flat)].

    ``skip``: nodes (leases, images, ingests) taken away before the collection; ``gc_roots``: False leaves out the
    blobs and snapshots that are roots only through their ``containerd.io/gc.root`` label (or ``skip`` names them)."""
    out = []
    for ns in sorted(inventory):
        rec = inventory[ns]
        for lease in rec["leases"]:
            node = ("lease", ns, lease["id"])
            if node in skip or expired(lease["labels"], now_ns):
                continue
            flat = GC_FLAT in lease["labels"]
            out.append((node, False))
            out += [(r, flat and r[0] != "ingest") for r in lease_resources(ns, lease)]
        for img in rec["images"]:
            node = ("image", ns, img["name"])
            if node in skip or (gc_major >= 2 and expired(img.get("labels") or {}, now_ns)):
                continue
            out.append((node, False))
        leased = _leased_ingests(rec)
        for ing in rec["ingests"]:
            node = ("ingest", ns, ing["ref"])
            if node not in skip and ing["ref"] not in leased and (not ing["started_ns"] or now_ns - ing["started_ns"] < UNLEASED_INGEST_TTL_NS):
                out.append((node, False))
        if gc_roots:
            for digest in sorted(rec["content"]):
                node = ("content", ns, digest)
                if GC_ROOT in rec["content"][digest]["labels"] and node not in skip:
                    out.append((node, False))
            for ref in sorted(rec["snapshots"]):
                node = ("snapshot", ns) + ref
                if GC_ROOT in rec["snapshots"][ref]["labels"] and node not in skip:
                    out.append((node, False))
        for c in rec["containers"]:
            out += [(r, False) for r in container_refs(ns, c, gc_major)]
        for sb in rec.get("sandboxes", ()):  # none on containerd 1.6, which has no sandbox store
            out += [(r, False) for r in label_refs(ns, sb["labels"], gc_major)]
    return out


def references(inventory, node, flat, gc_major=2):
    """The nodes ``node`` references: [(node, flat)]; nothing for a node that does not exist (a dead edge)."""
    kind, ns = node[0], node[1]
    rec = inventory.get(ns)
    if rec is None:
        return []
    if kind == "content":
        info = rec["content"].get(node[2])
        return [] if info is None or flat else [(r, False) for r in label_refs(ns, info["labels"], gc_major)]
    if kind == "snapshot":
        snap = rec["snapshots"].get(node[2:])
        if snap is None:
            return []
        out = [(("snapshot", ns, node[2], snap["parent"]), flat)] if snap["parent"] else []
        return out if flat else out + [(r, False) for r in label_refs(ns, snap["labels"], gc_major)]
    if kind == "image":
        img = next((i for i in rec["images"] if i["name"] == node[2]), None)
        if img is None:
            return []
        out = [(("content", ns, img["target"]), flat)] if img["target"] else []
        return out if flat else out + [(r, False) for r in label_refs(ns, img.get("labels") or {}, gc_major)]
    if kind == "ingest":
        ing = next((i for i in rec["ingests"] if i["ref"] == node[2]), None)
        return [(("content", ns, ing["expected"]), False)] if ing is not None and ing.get("expected") else []
    return []


def reach(inventory, start, gc_major=2):
    """Every node reachable from ``start`` ([(node, flat)] or [node]), the flat marks stripped (containerd's tricolor mark)."""
    todo = [s if isinstance(s[1], bool) else (s, False) for s in start]
    seen = set(todo)
    out = set()
    while todo:
        item = todo.pop()
        out.add(item[0])
        for ref in references(inventory, item[0], item[1], gc_major):
            if ref not in seen:
                seen.add(ref)
                todo.append(ref)
    return out


def marked(inventory, now_ns, gc_major=2, skip=frozenset(), gc_roots=True):
    """Every node the collector's mark phase reaches (see ``roots`` for ``skip`` and ``gc_roots``)."""
    return reach(inventory, roots(inventory, now_ns, gc_major, skip, gc_roots), gc_major)


def every_node(inventory, gc_major=2):
    """Every object the collector could remove: blobs, snapshots, leases, ingests and (2.x) images, by namespace."""
    out = []
    for ns in sorted(inventory):
        rec = inventory[ns]
        out += [("content", ns, d) for d in sorted(rec["content"])]
        out += [("snapshot", ns) + ref for ref in sorted(rec["snapshots"])]
        out += [("lease", ns, lease["id"]) for lease in rec["leases"]]
        out += [("ingest", ns, ing["ref"]) for ing in rec["ingests"]]
        if gc_major >= 2:
            out += [("image", ns, img["name"]) for img in rec["images"]]
    return out


def collected(inventory, now_ns, gc_major=2, skip=frozenset(), gc_roots=True):
    """The objects a collection removes once the leases, images and ingests of ``skip`` are gone (and its blobs and
    snapshots are no roots through their gc.root label): every node the mark phase does not reach, but those removed
    beforehand."""
    kept = marked(inventory, now_ns, gc_major, skip, gc_roots)
    return [n for n in every_node(inventory, gc_major) if n not in kept and not (n in skip and n[0] in ("lease", "image", "ingest"))]
