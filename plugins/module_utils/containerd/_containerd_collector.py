# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""containerd's garbage collector as a pure model, one rule set per release line (no I/O, no clock).

The one source of what references what, for disk_usage's attribution and storage_gc's plan. ``Collector`` follows
containerd's own collector (``metadata/gc.go`` in 1.6 and 1.7, ``core/metadata/gc.go`` in 2.x) over the plain records
of containerd/_inventory, function by function: ``roots`` is its scanRoots, ``references`` its references (back
references first), ``all`` its scanAll, ``marked`` its tricolor mark; whatever the mark does not reach, the collection
removes. The release lines (``release_line`` picks one from the running containerd's version):

1.6   roots: every lease whose ``containerd.io/gc.expire`` (RFC 3339) has not passed, and what it holds (blobs,
      snapshots, ingests; ``containerd.io/gc.flat``: without their label references, a snapshot still keeps its
      parents); every image record's target blob and label references; every ingest with an expiry of its own that
      has not passed; every blob and snapshot labelled exactly ``containerd.io/gc.root``; every container's snapshot
      (when it names a snapshotter) and label references. References: a blob's labels; a snapshot's parent and labels;
      an ingest's expected blob. Labels: ``containerd.io/gc.ref.content`` (alone or followed by ``.`` or ``/``) names a
      blob, ``containerd.io/gc.ref.snapshot.<snapshotter>[/<name>]`` a snapshot.
1.7   adds the sandbox records' label references as roots.
2.0   (and 2.1) image records are nodes: roots unless their own ``containerd.io/gc.expire`` has passed, collected
      when nothing keeps them; ``containerd.io/gc.ref.image`` names an image; leases hold images (a flat lease: the
      image's target only).
2.2   containers are nodes (roots; their snapshot and labels are their references); back references
      ``containerd.io/gc.bref.container``, ``.content``, ``.image`` (each alone or followed by ``.`` or ``/``) and
      ``containerd.io/gc.bref.snapshot.<snapshotter>[/<name>]`` on a blob, a snapshot, a container or an expired image
      keep that object as long as the object they name is kept; every label key that starts with
      ``containerd.io/gc.root`` makes a blob or a snapshot a root.
2.3   conditional references: ``containerd.io/gc.cond.snapshot[.<snapshotter>][/<name>]`` on an image record or a blob,
      valued ``<condition>[,<condition>...]|<snapshot key>`` with ``usedat<DURATION`` or ``usedat>DURATION`` (any one
      condition suffices), keep that snapshot as long as the object is kept when the snapshot's
      ``containerd.io/gc.cond.value-usedat`` (RFC 3339) is younger (``<``) or older (``>``) than the duration.
References never leave their namespace.

Ingests: containerd writes an expiry 24 hours ahead on an ingest opened outside any lease, and none on one opened in a
lease, so an ingest whose lease is gone goes at the next collection. The content API does not show that expiry, so an
ingest record (``_inventory``) says nothing about it and the model decides: an ingest some lease record holds (or
held: ``after_removal``) was opened in a lease and has none; an ingest no lease holds may have one, and is kept (the
safe side: the model never predicts removing what containerd keeps; ``uncertain_ingests`` names them so that a plan
can say so). A record with ``expires_ns`` (None or ns since the epoch) states its expiry, as containerd's own test
tables do.

A node is a tuple: ("content", ns, digest), ("snapshot", ns, snapshotter, key), ("image", ns, name), ("ingest", ns,
ref), ("lease", ns, id) or ("container", ns, id); the mark works on (node, flat) pairs, as containerd's flat node types.
Resources of containerd's plugins (mounts, streams: ``containerd.io/gc.ref.<plugin label>``) are not in the API's
lists and reference nothing the model tracks; they are left out.
"""

from __future__ import annotations

import re

from ansible_collections.kubenode.gc.plugins.module_utils._durations import DurationError, parse_duration

REF_CONTENT = "containerd.io/gc.ref.content"
REF_SNAPSHOT = "containerd.io/gc.ref.snapshot."
REF_IMAGE = "containerd.io/gc.ref.image"
BREF_CONTAINER = "containerd.io/gc.bref.container"
BREF_CONTENT = "containerd.io/gc.bref.content"
BREF_IMAGE = "containerd.io/gc.bref.image"
BREF_SNAPSHOT = "containerd.io/gc.bref.snapshot."
COND_SNAPSHOT = "containerd.io/gc.cond.snapshot"
COND_VALUE_USEDAT = "containerd.io/gc.cond.value-usedat"
_GC_REF = "containerd.io/gc.ref."
_GC_BREF = "containerd.io/gc.bref."
GC_ROOT = "containerd.io/gc.root"
GC_EXPIRE = "containerd.io/gc.expire"
GC_FLAT = "containerd.io/gc.flat"

LINES = ("1.6", "1.7", "2.0", "2.2", "2.3")
NEWEST = LINES[-1]
# (major, minor) of the containerd releases whose collector each line is
_RELEASES = {(1, 6): "1.6", (1, 7): "1.7", (2, 0): "2.0", (2, 1): "2.0", (2, 2): "2.2", (2, 3): "2.3"}
_UNKNOWN = object()  # an ingest's own expiry, as the API shows it: not at all


def release_line(version):
    """The collector line of a containerd version string ("1.7.24~ds1", "v2.2.7"): ``(line, note)``; ``note`` is None,
    or one sentence saying which rules an unknown version gets (the newest line's; 1.6's for an older 1.x)."""
    m = re.match(r"^v?(\d+)\.(\d+)", str(version or ""))
    if m:
        key = (int(m.group(1)), int(m.group(2)))
        if key in _RELEASES:
            return _RELEASES[key], None
        if key < (1, 6):
            return "1.6", ("containerd %s is older than 1.6, the oldest release line whose garbage collector kubenode.gc models; "
                           "its predictions follow 1.6's rules." % version)
    return NEWEST, ("containerd %s is not a release line whose garbage collector kubenode.gc models (1.6 to %s); its predictions "
                    "follow the newest line's rules, %s's." % (version or "of unknown version", NEWEST, NEWEST))


def _since(line, first):
    return LINES.index(line) >= LINES.index(first)


# -- Go's formats --------------------------------------------------------------------------------------------------------

_RFC3339 = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{1,2}):([0-9]{2}):([0-9]{2})(?:[.,]([0-9]+))?(Z|[+-][0-9]{2}:[0-9]{2})\Z")


def _days_from_civil(y, m, d):
    y -= m <= 2
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    return era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719468


def _days_in(y, m):
    if m == 2:
        return 29 if y % 4 == 0 and (y % 100 != 0 or y % 400 == 0) else 28
    return 30 if m in (4, 6, 9, 11) else 31


def parse_rfc3339(text):
    """``time.Parse(time.RFC3339, text)`` as containerd does it -> ns since the epoch, or None where Go fails.

    Exactly Go's rules: upper-case ``T`` and ``Z``, a four-digit year, a one- or two-digit hour, fractional seconds after
    ``.`` or ``,`` (any number of digits, nanoseconds kept), fields in range (the day for its month), an offset up to
    24:60, nothing around it."""
    m = _RFC3339.match(text) if isinstance(text, str) else None
    if not m:
        return None
    y, mo, d, h, mi, s = (int(x) for x in m.groups()[:6])
    if not (1 <= mo <= 12 and 1 <= d <= _days_in(y, mo) and h < 24 and mi < 60 and s < 60):
        return None
    zone = m.group(8)
    offset = 0
    if zone != "Z":
        hours, minutes = int(zone[1:3]), int(zone[4:6])
        if hours > 24 or minutes > 60:
            return None
        offset = (hours * 60 + minutes) * 60 * (1 if zone[0] == "+" else -1)
    nanos = int((m.group(7) or "")[:9].ljust(9, "0"))
    return ((_days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + s) - offset) * 1000000000 + nanos


def expired(labels, now_ns):
    """True when ``containerd.io/gc.expire`` lies before ``now_ns``; False without one or when Go cannot parse it (as containerd)."""
    text = labels.get(GC_EXPIRE)
    expire = parse_rfc3339(text) if text is not None else None
    return expire is not None and now_ns > expire


def _named(key, prefix):
    """``prefix`` alone, or followed by ``.`` or ``/`` and any name (containerd's rule for content, image, container refs)."""
    return key == prefix or (key.startswith(prefix) and key[len(prefix)] in "./")


def _snapshotter(key, prefix):
    return key[len(prefix):].split("/", 1)[0]


def _go_duration(text):
    if text != text.strip():
        return None  # Go's ParseDuration takes no spaces
    try:
        return parse_duration(text)
    except DurationError:
        return None


def _conditions(key, value):
    """A ``containerd.io/gc.cond.snapshot*`` label: [(snapshotter, snapshot key, operator, duration ns)] it states (2.3)."""
    snapshotter = key[len(COND_SNAPSHOT):].lstrip("./").split("/", 1)[0]
    conds, sep, target = value.partition("|")
    if not sep:
        return []
    out = []
    for cond in conds.split(","):
        pos = next((i for i, ch in enumerate(cond) if ch in "!<>="), -1)
        if pos < 0:
            continue
        name, op, arg = cond[:pos], cond[pos], cond[pos + 1:]
        if arg[:1] == "=":
            op, arg = op + "=", arg[1:]
        if name != "usedat" or op not in ("<", ">"):  # usedat compares with < or > only; no other condition exists
            continue
        duration = _go_duration(arg)
        if duration is not None:
            out.append((snapshotter, target, op, duration))
    return out


def named_snapshotters(labels):
    """The snapshotters the snapshot-naming labels (gc.ref.snapshot., gc.bref.snapshot., gc.cond.snapshot) of an object name."""
    out = set()
    for key in labels:
        if key.startswith(COND_SNAPSHOT):
            out.add(key[len(COND_SNAPSHOT):].lstrip("./").split("/", 1)[0])
        elif key.startswith(REF_SNAPSHOT) or key.startswith(BREF_SNAPSHOT):
            out.add(_snapshotter(key, REF_SNAPSHOT if key.startswith(REF_SNAPSHOT) else BREF_SNAPSHOT))
    return out


def lease_resources(ns, lease):
    """The nodes a lease holds (its resources: content, snapshots/<snapshotter>, ingests, images), with their types."""
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


def _held_ingests(rec):
    return {rid for lease in rec["leases"] for kind, rid in lease["resources"] if kind == "ingests"}


def after_removal(inventory, nodes, line=NEWEST):
    """The inventory as containerd's next collection sees it once ``nodes`` are gone: leases, images and ingests of
    ``nodes`` removed; blobs and snapshots of ``nodes`` without the labels that made them roots (``root_keys``). The
    ingests a removed lease held stay, known to carry no expiry of their own (containerd writes none in a lease)."""
    nodes = set(nodes)
    if not nodes:
        return inventory
    out = {}
    for ns, rec in inventory.items():
        rec = dict(rec)
        gone_leases = [lease for lease in rec["leases"] if ("lease", ns, lease["id"]) in nodes]
        was_leased = {rid for lease in gone_leases for kind, rid in lease["resources"] if kind == "ingests"}
        rec["leases"] = [lease for lease in rec["leases"] if ("lease", ns, lease["id"]) not in nodes]
        rec["images"] = [img for img in rec["images"] if ("image", ns, img["name"]) not in nodes]
        rec["ingests"] = [dict(ing, expires_ns=None) if ing["ref"] in was_leased and "expires_ns" not in ing else ing
                          for ing in rec["ingests"] if ("ingest", ns, ing["ref"]) not in nodes]
        for field, kind in (("content", "content"), ("snapshots", "snapshot")):
            released = [key for key in rec[field] if (kind, ns) + (key if kind == "snapshot" else (key,)) in nodes]
            if released:
                rec[field] = dict(rec[field])
                for key in released:
                    info = rec[field][key]
                    rec[field][key] = dict(info, labels={k: v for k, v in info["labels"].items() if k not in root_keys(info["labels"], line)})
        out[ns] = rec
    return out


def root_keys(labels, line=NEWEST):
    """The label keys that make a blob or a snapshot a root: ``containerd.io/gc.root`` (from 2.2 every key starting so)."""
    if _since(line, "2.2"):
        return sorted(k for k in labels if k.startswith(GC_ROOT))
    return [GC_ROOT] if GC_ROOT in labels else []


def uncertain_ingests(inventory):
    """The ingests whose fate hangs on an expiry containerd's API does not show: held by no lease, no ``expires_ns``.
    The model keeps them; containerd removes those without an expiry of their own. [("ingest", ns, ref)]"""
    out = []
    for ns in sorted(inventory):
        held = _held_ingests(inventory[ns])
        out += [("ingest", ns, ing["ref"]) for ing in sorted(inventory[ns]["ingests"], key=lambda i: i["ref"])
                if "expires_ns" not in ing and ing["ref"] not in held]
    return out


class Collector:
    """containerd's collector of release line ``line`` over ``inventory`` at ``now_ns``.

    ``gc_roots``: False leaves out the roots that only a blob's or a snapshot's gc.root label makes (what storage_gc's
    ``release_gc_roots`` asks: what stays when no such label counts)."""

    def __init__(self, inventory, now_ns, line=NEWEST, gc_roots=True):
        if line not in LINES:
            raise ValueError("unknown containerd release line %r" % (line,))
        self.inventory = inventory
        self.now_ns = now_ns
        self.line = line
        self.gc_roots = gc_roots
        self.images = _since(line, "2.0")  # image records are nodes: expiry, gc.ref.image, leased, collected
        self.brefs = _since(line, "2.2")  # containers are nodes, back references, the gc.root prefix
        self.conds = _since(line, "2.3")  # conditional references
        self._index = {ns: ({i["name"]: i for i in rec["images"]}, {i["ref"]: i for i in rec["ingests"]},
                            {c["id"]: c for c in rec["containers"]}) for ns, rec in inventory.items()}
        self.back_refs = {}
        self._refs = {}  # (node, flat) -> its references: a node is reached from many (every container of an image)
        self.roots = self._scan_roots()

    # -- labels ---------------------------------------------------------------------------------------------------------

    def forward(self, ns, labels):
        """The nodes the reference labels (gc.ref.*) of an object name."""
        out = []
        for key, value in labels.items():
            if not key.startswith(_GC_REF):
                continue
            if _named(key, REF_CONTENT):
                out.append(("content", ns, value))
            elif key.startswith(REF_SNAPSHOT):
                out.append(("snapshot", ns, _snapshotter(key, REF_SNAPSHOT), value))
            elif self.images and _named(key, REF_IMAGE):
                out.append(("image", ns, value))
        return out

    def backward(self, ns, labels):
        """The nodes the back reference labels (gc.bref.*, 2.2+) of an object name: it is kept while they are."""
        out = []
        if not self.brefs:
            return out
        for key, value in labels.items():
            if not key.startswith(_GC_BREF):
                continue
            if _named(key, BREF_CONTAINER):
                out.append(("container", ns, value))
            elif _named(key, BREF_CONTENT):
                out.append(("content", ns, value))
            elif _named(key, BREF_IMAGE):
                out.append(("image", ns, value))
            elif key.startswith(BREF_SNAPSHOT):
                out.append(("snapshot", ns, _snapshotter(key, BREF_SNAPSHOT), value))
        return out

    def root_keys(self, labels):
        return root_keys(labels, self.line)

    def _bref(self, ns, labels, holder):
        for target in self.backward(ns, labels):
            self.back_refs.setdefault(target, []).append(holder)

    def _root_count(self, labels):
        """How many times scanRoots sends a blob or snapshot as a root for its labels (from 2.2 once per gc.root* key)."""
        if not self.gc_roots:
            return 0
        if self.brefs:
            return sum(1 for k in labels if k.startswith(GC_ROOT))
        return 1 if GC_ROOT in labels else 0

    # -- scanRoots -----------------------------------------------------------------------------------------------------

    def lease_held(self, ns, lease):
        """What a lease keeps as roots: [(node, flat)] (a flat lease holds blobs, snapshots and images flat)."""
        flat = GC_FLAT in lease["labels"]
        return [(n, flat and n[0] != "ingest") for n in lease_resources(ns, lease) if n[0] != "image" or self.images]

    def _scan_roots(self):
        roots = []
        conditional = {}  # snapshot node -> ([(holder, op, duration)], [usedat ns])
        for ns in sorted(self.inventory):
            rec = self.inventory[ns]
            for lease in sorted(rec["leases"], key=lambda item: item["id"]):
                if expired(lease["labels"], self.now_ns):
                    continue
                roots.append((("lease", ns, lease["id"]), False))
                roots += self.lease_held(ns, lease)
            for img in sorted(rec["images"], key=lambda item: item["name"]):
                labels = img.get("labels") or {}
                node = ("image", ns, img["name"])
                if not self.images:  # 1.x: the record's target and labels are roots themselves
                    roots += self._image_refs(ns, img)
                    continue
                if not expired(labels, self.now_ns):
                    roots.append((node, False))
                else:
                    self._bref(ns, labels, node)  # an expired image stays while what it back-references stays
                if self.conds:
                    self._conditional(conditional, ns, labels, node)
            held = _held_ingests(rec)
            for ing in sorted(rec["ingests"], key=lambda item: item["ref"]):
                expires = self._ingest_expiry(ing, held)
                if expires is not None and expires >= self.now_ns:
                    roots.append((("ingest", ns, ing["ref"]), False))
            for digest in sorted(rec["content"]):
                node = ("content", ns, digest)
                labels = rec["content"][digest]["labels"]
                self._bref(ns, labels, node)
                roots += [(node, False)] * self._root_count(labels)
                if self.conds:
                    self._conditional(conditional, ns, labels, node)
            for c in sorted(rec["containers"], key=lambda item: item["id"]):
                if self.brefs:
                    roots.append((("container", ns, c["id"]), False))
                    self._bref(ns, c["labels"], ("container", ns, c["id"]))
                else:
                    roots += [(n, False) for n in self._container_refs(ns, c)]
            for ref in sorted(rec["snapshots"]):
                node = ("snapshot", ns) + ref
                labels = rec["snapshots"][ref]["labels"]
                self._bref(ns, labels, node)
                roots += [(node, False)] * self._root_count(labels)
                if self.conds:
                    values = [parse_rfc3339(v) for k, v in labels.items() if k.startswith(COND_VALUE_USEDAT)]
                    conditional.setdefault(node, ([], []))[1].extend(v for v in values if v is not None)
            if self.line != "1.6":  # the sandbox store came with 1.7
                for sb in sorted(rec.get("sandboxes", ()), key=lambda item: item["id"]):
                    roots += [(n, False) for n in self.forward(ns, sb["labels"])]
        for snapshot in sorted(conditional):
            holders, values = conditional[snapshot]
            for holder, op, duration in holders:
                for used in values:
                    age = self.now_ns - used
                    if (age < duration) if op == "<" else (age > duration):
                        self.back_refs.setdefault(holder, []).append(snapshot)
        return roots

    def _conditional(self, conditional, ns, labels, holder):
        for key, value in labels.items():
            if key.startswith(COND_SNAPSHOT):
                for snapshotter, target, op, duration in _conditions(key, value):
                    conditional.setdefault(("snapshot", ns, snapshotter, target), ([], []))[0].append((holder, op, duration))

    def _ingest_expiry(self, ing, held):
        """An ingest's own expiry (ns) or None; when the record does not state it: none when a lease holds it (opened
        in a lease), else one that has not passed (the safe side: kept, as containerd keeps an ingest with one)."""
        expires = ing.get("expires_ns", _UNKNOWN)
        if expires is _UNKNOWN:
            return None if ing["ref"] in held else self.now_ns
        return expires

    # -- references ----------------------------------------------------------------------------------------------------

    def _image_refs(self, ns, img, flat=False):
        out = [(("content", ns, img["target"]), flat)] if img["target"] else []
        return out if flat else out + [(n, False) for n in self.forward(ns, img.get("labels") or {})]

    def _container_refs(self, ns, c):
        out = [("snapshot", ns, c["snapshotter"], c["snapshot_key"])] if c["snapshotter"] else []
        return out + self.forward(ns, c["labels"])

    def references(self, node, flat=False):
        """The (node, flat) pairs ``node`` references: its back references first (2.2+, never from a flat node), then
        what the object names; nothing more for an object that does not exist (a dead edge)."""
        cached = self._refs.get((node, flat))
        if cached is None:
            cached = self._refs[(node, flat)] = self._references(node, flat)
        return cached

    def _references(self, node, flat):
        out = [] if flat else [(n, False) for n in self.back_refs.get(node, ())]
        kind, ns = node[0], node[1]
        if ns not in self.inventory:
            return out
        rec = self.inventory[ns]
        images, ingests, containers = self._index[ns]
        if kind == "content":
            info = rec["content"].get(node[2])
            if info is not None and not flat:
                out += [(n, False) for n in self.forward(ns, info["labels"])]
        elif kind == "snapshot":
            snap = rec["snapshots"].get(node[2:])
            if snap is not None:
                if snap["parent"]:
                    out.append((("snapshot", ns, node[2], snap["parent"]), flat))
                if not flat:
                    out += [(n, False) for n in self.forward(ns, snap["labels"])]
        elif kind == "image":  # on 1.x no image node is marked: this answers what a record keeps, for attribution
            img = images.get(node[2])
            if img is not None:
                out += self._image_refs(ns, img, flat)
        elif kind == "ingest":
            ing = ingests.get(node[2])
            if ing is not None and ing.get("expected"):
                out.append((("content", ns, ing["expected"]), False))
        elif kind == "container":  # before 2.2 no container node is marked: likewise, for attribution
            c = containers.get(node[2])
            if c is not None:
                out += [(n, False) for n in self._container_refs(ns, c)]
        return out

    def reach(self, start, seen=None):
        """Every node reachable from ``start`` ([(node, flat)] or [node]), flat marks stripped (containerd's tricolor mark).

        ``seen``: a set of (node, flat) pairs that earlier calls reached, shared by the calls and grown by each: what it
        holds is neither walked nor returned again (an attribution that claims every node a call returns, in order, gets
        the same bytes while each node is walked once in all)."""
        todo = [s if len(s) == 2 and isinstance(s[1], bool) else (s, False) for s in start]
        if seen is None:
            seen = set()
        todo = [item for item in dict.fromkeys(todo) if item not in seen]
        seen.update(todo)
        out = set()
        while todo:
            item = todo.pop()
            out.add(item[0])
            for ref in self.references(*item):
                if ref not in seen:
                    seen.add(ref)
                    todo.append(ref)
        return out

    def marked(self):
        """Every node the mark phase reaches."""
        return self.reach(self.roots)

    def all(self):
        """Every object a collection may remove (scanAll): leases, snapshots, ingests, blobs and (2.0+) images."""
        out = []
        for ns in sorted(self.inventory):
            rec = self.inventory[ns]
            out += [("lease", ns, lease["id"]) for lease in sorted(rec["leases"], key=lambda item: item["id"])]
            out += [("snapshot", ns) + ref for ref in sorted(rec["snapshots"])]
            out += [("ingest", ns, ing["ref"]) for ing in sorted(rec["ingests"], key=lambda item: item["ref"])]
            out += [("content", ns, d) for d in sorted(rec["content"])]
            if self.images:
                out += [("image", ns, img["name"]) for img in sorted(rec["images"], key=lambda item: item["name"])]
        return out

    def collected(self):
        """The objects the collection removes: every one the mark does not reach."""
        kept = self.marked()
        return [n for n in self.all() if n not in kept]


def collected(inventory, now_ns, line=NEWEST, removed=frozenset()):
    """What containerd's next collection removes once the objects of ``removed`` are gone (see ``after_removal``)."""
    return Collector(after_removal(inventory, removed, line), now_ns, line).collected()


def marked(inventory, now_ns, line=NEWEST, removed=frozenset(), gc_roots=True):
    """What that collection keeps (``gc_roots`` False: as if no gc.root label counted)."""
    return Collector(after_removal(inventory, removed, line), now_ns, line, gc_roots=gc_roots).marked()
