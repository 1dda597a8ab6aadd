# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""containerd's own garbage collector tests, as tables, against the model of each release line.

Transcribed from the tests of containerd's collector at one tag per line (``metadata/gc_test.go`` and
``metadata/db_test.go`` in 1.x, ``core/metadata/gc_test.go`` and ``core/metadata/db_test.go`` in 2.x): TestGCRoots (the
roots scanRoots sends, a multiset), TestGCRefs (what references() sends for each node, a multiset), TestGCRemove (the
objects scanAll lists), TestCollectibleResources and TestMetadataCollector (what a whole collection leaves). Each table
names its file, tag and test; a table shared by several tags says so, and a later tag's table is written as the earlier
one plus upstream's own diff.

Conventions: ``add_*`` are upstream's alterFuncs (bolt buckets) as inventory records; a digest is the string
``dgst(i)``; the scan runs at ``NOW``; the tables were built one second before (``BUILT``, upstream's time.Now() when the
alterFuncs ran). Upstream's node types map to (node, flat) pairs: ResourceContent -> ("content", ns, digest),
resourceContentFlat -> the same with flat True, "overlay/sn1" -> ("snapshot", ns, "overlay", "sn1").

Not expressible (left out, and why):
- TestCollectibleResources (1.7 onwards) and TestMetadataCollector (1.7 onwards) register a test collector: a plugin's
  resources (type 0x10) that the plugin itself lists as all, active, leased and, from 2.2, back-referencing images and
  containers. containerd's API lists no plugin resource (mounts, streams), so the model has none: its nodes, and the
  references to them (``containerd.io/gc.ref.test`` labels; the plugin's back references), are left out of those
  tables, every other node and reference of them is checked.
- TestGCRemove's removals (remove() deleting bolt buckets) are containerd's storage, not its collector; only its
  scanAll lists are checked.
- TestResourceMax (the flat types' bits) has no counterpart: flat is a flag of the mark here.
"""

import pytest

from ansible_collections.kubenode.gc.plugins.module_utils.containerd import _containerd_collector as G

SECOND = 10**9
HOUR = 3600 * SECOND
NOW = 1_800_000_000 * SECOND
BUILT = NOW - SECOND

REF_CONTENT = G.REF_CONTENT
REF_SNAP = G.REF_SNAPSHOT
REF_IMAGE = G.REF_IMAGE
BREF_CONTAINER = G.BREF_CONTAINER
BREF_CONTENT = G.BREF_CONTENT
BREF_IMAGE = G.BREF_IMAGE
BREF_SNAP = G.BREF_SNAPSHOT
COND_SNAP = G.COND_SNAPSHOT
COND_USED = G.COND_VALUE_USEDAT
GC_ROOT = G.GC_ROOT
GC_EXPIRE = G.GC_EXPIRE
GC_FLAT = G.GC_FLAT


def rfc3339(ns_since_epoch):
    """time.Format(time.RFC3339): whole seconds."""
    import time

    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ns_since_epoch // SECOND))


def now_text(offset=0):
    """upstream's time.Now().Add(offset).Format(time.RFC3339), when the table was built"""
    return rfc3339(BUILT + offset)


def dgst(i):
    return "dgst(%d)" % i


# -- upstream's alterFuncs, on an inventory ------------------------------------------------------------------------------


def _ns(inv, ns):
    return inv.setdefault(ns, {"images": [], "content": {}, "ingests": [], "snapshots": {}, "leases": [], "containers": [], "sandboxes": []})


def _lease(inv, ns, lid):
    rec = _ns(inv, ns)
    found = next((lease for lease in rec["leases"] if lease["id"] == lid), None)
    if found is None:
        found = {"id": lid, "created_ns": BUILT, "labels": {}, "resources": []}
        rec["leases"].append(found)
    return found


def add_image(ns, name, digest, labels):
    return lambda inv: _ns(inv, ns)["images"].append({"name": name, "target": digest, "labels": dict(labels or {})})


def add_container(ns, cid, snapshotter, key, labels):
    return lambda inv: _ns(inv, ns)["containers"].append({"id": cid, "image": "", "snapshotter": snapshotter, "snapshot_key": key,
                                                          "labels": dict(labels or {})})


def add_content(ns, digest, labels):
    return lambda inv: _ns(inv, ns)["content"].__setitem__(digest, {"size": 1, "labels": dict(labels or {}), "created_ns": BUILT})


def add_ingest(ns, ref, expected, expires_ns):
    """``expires_ns``: upstream's expires argument (nil: the ingest has no expiry of its own)."""
    return lambda inv: _ns(inv, ns)["ingests"].append({"ref": ref, "offset": 0, "total": 0, "expected": expected, "started_ns": BUILT,
                                                       "updated_ns": BUILT, "expires_ns": expires_ns})


def add_snapshot(ns, snapshotter, name, parent, labels):
    record = {"parent": parent, "kind": 3, "labels": dict(labels or {}), "created_ns": BUILT, "size": 1}
    return lambda inv: _ns(inv, ns)["snapshots"].__setitem__((snapshotter, name), record)


def add_lease(ns, lid, labels):
    return lambda inv: _lease(inv, ns, lid)["labels"].update(labels or {})


def add_lease_snapshot(ns, lid, snapshotter, name):
    return lambda inv: _lease(inv, ns, lid)["resources"].append(("snapshots/" + snapshotter, name))


def add_lease_content(ns, lid, digest):
    return lambda inv: _lease(inv, ns, lid)["resources"].append(("content", digest))


def add_lease_ingest(ns, lid, ref):
    return lambda inv: _lease(inv, ns, lid)["resources"].append(("ingests", ref))


def add_lease_image(ns, lid, image):
    return lambda inv: _lease(inv, ns, lid)["resources"].append(("images", image))


def add_sandbox(ns, sid, labels):
    return lambda inv: _ns(inv, ns)["sandboxes"].append({"id": sid, "labels": dict(labels or {})})


def labelmap(*kv):
    return dict(zip(kv[::2], kv[1::2]))


def time_in(offset):
    """upstream's timeIn(d): an ingest's expiry d after the table was built"""
    return BUILT + offset


def build(alters):
    inv = {}
    for alter in alters:
        alter(inv)
    return inv


# -- upstream's gc.Node, as (node, flat) ------------------------------------------------------------------------------


def content(ns, digest, flat=False):
    return (("content", ns, digest), flat)


def snapshot(ns, key, flat=False):
    snapshotter, name = key.split("/", 1)
    return (("snapshot", ns, snapshotter, name), flat)


def image(ns, name, flat=False):
    return (("image", ns, name), flat)


def container(ns, cid):
    return (("container", ns, cid), False)


def lease(ns, lid):
    return (("lease", ns, lid), False)


def ingest(ns, ref):
    return (("ingest", ns, ref), False)


def nodes_of(pairs):
    return sorted(n for n, _flat in pairs)


# ==================================================================================================== TestGCRoots

# metadata/gc_test.go TestGCRoots at v1.6.20
GC_ROOTS_ALTERS_16 = [
    add_image("ns1", "image1", dgst(1), None),
    add_image("ns1", "image2", dgst(2), labelmap(REF_SNAP + "overlay", "sn2")),
    add_image("ns2", "image3", dgst(10), labelmap(REF_CONTENT, dgst(11))),
    add_container("ns1", "container1", "overlay", "sn4", None),
    add_container("ns1", "container2", "overlay", "sn5", labelmap(REF_SNAP + "overlay", "sn6")),
    add_container("ns1", "container3", "overlay", "sn7", labelmap(
        REF_SNAP + "overlay/anything-1", "sn8",
        REF_SNAP + "overlay/anything-2", "sn9",
        REF_CONTENT, dgst(7))),
    add_container("ns1", "container4", "", "", labelmap(
        REF_CONTENT + ".0", dgst(8),
        REF_CONTENT + ".1", dgst(9))),
    add_content("ns1", dgst(1), None),
    add_content("ns1", dgst(2), None),
    add_content("ns1", dgst(3), None),
    add_content("ns2", dgst(1), None),
    add_content("ns2", dgst(2), labelmap(GC_ROOT, "always")),
    add_content("ns2", dgst(8), None),
    add_content("ns2", dgst(9), None),
    add_ingest("ns1", "ingest-1", "", None),  # will be seen as expired
    add_ingest("ns1", "ingest-2", "", time_in(0)),  # expired
    add_ingest("ns1", "ingest-3", "", time_in(HOUR)),
    add_ingest("ns2", "ingest-4", "", None),
    add_ingest("ns2", "ingest-5", dgst(8), None),
    add_ingest("ns2", "ingest-6", "", None),  # added to expired lease
    add_ingest("ns2", "ingest-7", dgst(9), None),  # added to expired lease
    add_snapshot("ns1", "overlay", "sn1", "", None),
    add_snapshot("ns1", "overlay", "sn2", "", None),
    add_snapshot("ns1", "overlay", "sn3", "", labelmap(GC_ROOT, "always")),
    add_snapshot("ns1", "overlay", "sn4", "", None),
    add_snapshot("ns1", "overlay", "sn5", "", None),
    add_snapshot("ns1", "overlay", "sn6", "", None),
    add_snapshot("ns1", "overlay", "sn7", "", None),
    add_snapshot("ns1", "overlay", "sn8", "", None),
    add_snapshot("ns1", "overlay", "sn9", "", None),
    add_lease_snapshot("ns2", "l1", "overlay", "sn5"),
    add_lease_snapshot("ns2", "l2", "overlay", "sn6"),
    add_lease_content("ns2", "l1", dgst(4)),
    add_lease_content("ns2", "l2", dgst(5)),
    add_lease("ns2", "l3", labelmap(GC_EXPIRE, now_text(HOUR))),
    add_lease_content("ns2", "l3", dgst(6)),
    add_lease_snapshot("ns2", "l3", "overlay", "sn7"),
    add_lease_ingest("ns2", "l3", "ingest-4"),
    add_lease_ingest("ns2", "l3", "ingest-5"),
    add_lease("ns2", "l4", labelmap(GC_EXPIRE, now_text())),
    add_lease_content("ns2", "l4", dgst(7)),
    add_lease_snapshot("ns2", "l4", "overlay", "sn8"),
    add_lease_ingest("ns2", "l4", "ingest-6"),
    add_lease_ingest("ns2", "l4", "ingest-7"),

    add_lease("ns3", "l1", labelmap(GC_FLAT, now_text(HOUR))),
    add_lease_content("ns3", "l1", dgst(1)),
    add_lease_snapshot("ns3", "l1", "overlay", "sn1"),
    add_lease_ingest("ns3", "l1", "ingest-1"),
]
GC_ROOTS_EXPECTED_16 = [
    content("ns1", dgst(1)),
    content("ns1", dgst(2)),
    content("ns1", dgst(7)),
    content("ns1", dgst(8)),
    content("ns1", dgst(9)),
    content("ns2", dgst(2)),
    content("ns2", dgst(4)),
    content("ns2", dgst(5)),
    content("ns2", dgst(6)),
    content("ns2", dgst(10)),
    content("ns2", dgst(11)),
    snapshot("ns1", "overlay/sn2"),
    snapshot("ns1", "overlay/sn3"),
    snapshot("ns1", "overlay/sn4"),
    snapshot("ns1", "overlay/sn5"),
    snapshot("ns1", "overlay/sn6"),
    snapshot("ns1", "overlay/sn7"),
    snapshot("ns1", "overlay/sn8"),
    snapshot("ns1", "overlay/sn9"),
    snapshot("ns2", "overlay/sn5"),
    snapshot("ns2", "overlay/sn6"),
    snapshot("ns2", "overlay/sn7"),
    lease("ns2", "l1"),
    lease("ns2", "l2"),
    lease("ns2", "l3"),
    ingest("ns1", "ingest-3"),
    ingest("ns2", "ingest-4"),
    ingest("ns2", "ingest-5"),
    lease("ns3", "l1"),
    ingest("ns3", "ingest-1"),
    content("ns3", dgst(1), flat=True),
    snapshot("ns3", "overlay/sn1", flat=True),
]

# metadata/gc_test.go TestGCRoots at v1.7.24: v1.6.20's, plus two sandbox records
GC_ROOTS_ALTERS_17 = GC_ROOTS_ALTERS_16 + [
    add_sandbox("ns3", "sandbox1", None),
    add_sandbox("ns4", "sandbox1", labelmap(REF_SNAP + "overlay", "sn1")),
]
GC_ROOTS_EXPECTED_17 = GC_ROOTS_EXPECTED_16 + [snapshot("ns4", "overlay/sn1")]

# core/metadata/gc_test.go TestGCRoots at v2.1.9 (the same file at v2.0.0 and v2.0.11): image3 also references image4,
# images 4 and 5 expire now, leases hold images
GC_ROOTS_ALTERS_20 = [a for a in GC_ROOTS_ALTERS_17 if a not in (GC_ROOTS_ALTERS_16[2],)] + [
    add_image("ns2", "image3", dgst(10), labelmap(
        REF_CONTENT, dgst(11),
        REF_IMAGE, "image4",
    )),
    add_image("ns2", "image4", dgst(12), labelmap(GC_EXPIRE, now_text())),
    add_image("ns2", "image5", dgst(13), labelmap(GC_EXPIRE, now_text())),
    add_lease_image("ns2", "l3", "image5"),
    add_lease_image("ns2", "l4", "image4"),
    add_lease_image("ns3", "l1", "image1"),
]
GC_ROOTS_EXPECTED_20 = [
    content("ns1", dgst(7)),
    content("ns1", dgst(8)),
    content("ns1", dgst(9)),
    content("ns2", dgst(2)),
    content("ns2", dgst(4)),
    content("ns2", dgst(5)),
    content("ns2", dgst(6)),
    snapshot("ns1", "overlay/sn3"),
    snapshot("ns1", "overlay/sn4"),
    snapshot("ns1", "overlay/sn5"),
    snapshot("ns1", "overlay/sn6"),
    snapshot("ns1", "overlay/sn7"),
    snapshot("ns1", "overlay/sn8"),
    snapshot("ns1", "overlay/sn9"),
    snapshot("ns2", "overlay/sn5"),
    snapshot("ns2", "overlay/sn6"),
    snapshot("ns2", "overlay/sn7"),
    snapshot("ns4", "overlay/sn1"),
    image("ns1", "image1"),
    image("ns1", "image2"),
    image("ns2", "image3"),
    image("ns2", "image5"),
    lease("ns2", "l1"),
    lease("ns2", "l2"),
    lease("ns2", "l3"),
    ingest("ns1", "ingest-3"),
    ingest("ns2", "ingest-4"),
    ingest("ns2", "ingest-5"),
    lease("ns3", "l1"),
    ingest("ns3", "ingest-1"),
    content("ns3", dgst(1), flat=True),
    snapshot("ns3", "overlay/sn1", flat=True),
    image("ns3", "image1", flat=True),
]

# core/metadata/gc_test.go TestGCRoots at v2.2.7 (the same test at v2.3.4): the same records; containers are roots
GC_ROOTS_ALTERS_22 = GC_ROOTS_ALTERS_20
GC_ROOTS_EXPECTED_22 = [
    content("ns2", dgst(2)),
    content("ns2", dgst(4)),
    content("ns2", dgst(5)),
    content("ns2", dgst(6)),
    snapshot("ns1", "overlay/sn3"),
    snapshot("ns2", "overlay/sn5"),
    snapshot("ns2", "overlay/sn6"),
    snapshot("ns2", "overlay/sn7"),
    snapshot("ns4", "overlay/sn1"),
    container("ns1", "container1"),
    container("ns1", "container2"),
    container("ns1", "container3"),
    container("ns1", "container4"),
    image("ns1", "image1"),
    image("ns1", "image2"),
    image("ns2", "image3"),
    image("ns2", "image5"),
    lease("ns2", "l1"),
    lease("ns2", "l2"),
    lease("ns2", "l3"),
    ingest("ns1", "ingest-3"),
    ingest("ns2", "ingest-4"),
    ingest("ns2", "ingest-5"),
    lease("ns3", "l1"),
    ingest("ns3", "ingest-1"),
    content("ns3", dgst(1), flat=True),
    snapshot("ns3", "overlay/sn1", flat=True),
    image("ns3", "image1", flat=True),
]

GC_ROOTS = {
    "1.6": (GC_ROOTS_ALTERS_16, GC_ROOTS_EXPECTED_16),
    "1.7": (GC_ROOTS_ALTERS_17, GC_ROOTS_EXPECTED_17),
    "2.0": (GC_ROOTS_ALTERS_20, GC_ROOTS_EXPECTED_20),
    "2.2": (GC_ROOTS_ALTERS_22, GC_ROOTS_EXPECTED_22),
    "2.3": (GC_ROOTS_ALTERS_22, GC_ROOTS_EXPECTED_22),
}


@pytest.mark.parametrize("line", G.LINES)
def test_gc_roots(line):
    alters, expected = GC_ROOTS[line]
    model = G.Collector(build(alters), NOW, line)
    assert sorted(model.roots) == sorted(expected)


# ==================================================================================================== TestGCRefs

# metadata/gc_test.go TestGCRefs at v1.6.20 (the same records and references at v1.7.24)
GC_REFS_ALTERS_16 = [
    add_content("ns1", dgst(1), None),
    add_content("ns1", dgst(2), None),
    add_content("ns1", dgst(3), None),
    add_content("ns1", dgst(4), labelmap(REF_CONTENT, dgst(1))),
    add_content("ns1", dgst(5), labelmap(REF_CONTENT + ".anything-1", dgst(2), REF_CONTENT + ".anything-2", dgst(3))),
    add_content("ns1", dgst(6), labelmap(REF_CONTENT + "bad", dgst(1))),
    add_content("ns1", dgst(7), labelmap(REF_CONTENT + "/anything-1", dgst(2), REF_CONTENT + "/anything-2", dgst(3))),
    add_content("ns2", dgst(1), None),
    add_content("ns2", dgst(2), None),
    add_ingest("ns1", "ingest-1", "", None),
    add_ingest("ns2", "ingest-2", dgst(8), None),
    add_snapshot("ns1", "overlay", "sn1", "", None),
    add_snapshot("ns1", "overlay", "sn2", "sn1", None),
    add_snapshot("ns1", "overlay", "sn3", "sn2", None),
    add_snapshot("ns1", "overlay", "sn4", "", labelmap(REF_SNAP + "btrfs", "sn1", REF_SNAP + "overlay", "sn1")),
    add_snapshot("ns1", "overlay", "sn5", "", labelmap(REF_SNAP + "overlay/anything-1", "sn1", REF_SNAP + "overlay/anything-2", "sn2")),
    add_snapshot("ns1", "btrfs", "sn1", "", None),
    add_snapshot("ns2", "overlay", "sn1", "", None),
    add_snapshot("ns2", "overlay", "sn2", "sn1", None),
    add_snapshot("ns2", "overlay", "sn3", "", labelmap(
        REF_CONTENT, dgst(1),
        REF_CONTENT + ".keep-me", dgst(6))),

    # Test flat references don't follow label references
    add_content("ns3", dgst(1), None),
    add_content("ns3", dgst(2), labelmap(REF_CONTENT + ".0", dgst(1))),

    add_snapshot("ns3", "overlay", "sn1", "", None),
    add_snapshot("ns3", "overlay", "sn2", "sn1", None),
    add_snapshot("ns3", "overlay", "sn3", "", labelmap(REF_SNAP + "btrfs", "sn1", REF_SNAP + "overlay", "sn1")),
]
GC_REFS_16 = {
    content("ns1", dgst(1)): [],
    content("ns1", dgst(2)): [],
    content("ns1", dgst(3)): [],
    content("ns1", dgst(4)): [
        content("ns1", dgst(1)),
    ],
    content("ns1", dgst(5)): [
        content("ns1", dgst(2)),
        content("ns1", dgst(3)),
    ],
    content("ns1", dgst(6)): [],
    content("ns1", dgst(7)): [
        content("ns1", dgst(2)),
        content("ns1", dgst(3)),
    ],
    content("ns2", dgst(1)): [],
    content("ns2", dgst(2)): [],
    snapshot("ns1", "overlay/sn1"): [],
    snapshot("ns1", "overlay/sn2"): [
        snapshot("ns1", "overlay/sn1"),
    ],
    snapshot("ns1", "overlay/sn3"): [
        snapshot("ns1", "overlay/sn2"),
    ],
    snapshot("ns1", "overlay/sn4"): [
        snapshot("ns1", "btrfs/sn1"),
        snapshot("ns1", "overlay/sn1"),
    ],
    snapshot("ns1", "overlay/sn5"): [
        snapshot("ns1", "overlay/sn1"),
        snapshot("ns1", "overlay/sn2"),
    ],
    snapshot("ns1", "btrfs/sn1"): [],
    snapshot("ns2", "overlay/sn1"): [],
    snapshot("ns2", "overlay/sn2"): [
        snapshot("ns2", "overlay/sn1"),
    ],
    snapshot("ns2", "overlay/sn3"): [
        content("ns2", dgst(1)),
        content("ns2", dgst(6)),
    ],
    ingest("ns1", "ingest-1"): [],
    ingest("ns2", "ingest-2"): [
        content("ns2", dgst(8)),
    ],
    snapshot("ns3", "overlay/sn2", flat=True): [
        snapshot("ns3", "overlay/sn1", flat=True),
    ],
    snapshot("ns3", "overlay/sn2"): [
        snapshot("ns3", "overlay/sn1"),
    ],
    snapshot("ns3", "overlay/sn1", flat=True): [],
    snapshot("ns3", "overlay/sn3", flat=True): [],
    snapshot("ns3", "overlay/sn3"): [
        snapshot("ns3", "btrfs/sn1"),
        snapshot("ns3", "overlay/sn1"),
    ],
}

# core/metadata/gc_test.go TestGCRefs at v2.1.9 (the same file at v2.0.0 and v2.0.11): v1.6.20's, plus two images
GC_REFS_ALTERS_20 = GC_REFS_ALTERS_16 + [
    add_image("ns1", "image1", dgst(3), None),
    add_image("ns1", "image2", dgst(4), labelmap(
        REF_IMAGE + ".anything", "image1",
        REF_CONTENT + ".anotherimage", dgst(5))),
]
GC_REFS_20 = dict(GC_REFS_16, **{})
GC_REFS_20.update({
    image("ns1", "image1"): [
        content("ns1", dgst(3)),
    ],
    image("ns1", "image2"): [
        content("ns1", dgst(4)),
        content("ns1", dgst(5)),
        image("ns1", "image1"),
    ],
    image("ns1", "image1", flat=True): [
        content("ns1", dgst(3), flat=True),
    ],
    image("ns1", "image2", flat=True): [
        content("ns1", dgst(4), flat=True),
    ],
})

# core/metadata/gc_test.go TestGCRefs at v2.2.7: v2.1.9's, dgst(7) back-references container3, four containers, and
# back references
GC_REFS_ALTERS_22 = [a for a in GC_REFS_ALTERS_20 if a is not GC_REFS_ALTERS_16[6]] + [
    add_content("ns1", dgst(7), labelmap(
        REF_CONTENT + "/anything-1", dgst(2),
        REF_CONTENT + "/anything-2", dgst(3),
        BREF_CONTAINER, "container3")),
    add_container("ns1", "container1", "overlay", "sn4", None),
    add_container("ns1", "container2", "overlay", "sn5", labelmap(REF_SNAP + "overlay", "sn6")),
    add_container("ns1", "container3", "overlay", "sn7", labelmap(
        REF_SNAP + "overlay/anything-1", "sn8",
        REF_SNAP + "overlay/anything-2", "sn9",
        REF_CONTENT, dgst(7))),
    add_container("ns1", "container4", "", "", labelmap(
        REF_CONTENT + ".0", dgst(8),
        REF_CONTENT + ".1", dgst(9))),

    # Back references
    add_content("ns1", dgst(10), labelmap(
        BREF_CONTAINER, "container1",
        BREF_CONTENT, dgst(5),
        BREF_IMAGE, "image2",
        BREF_SNAP + "btrfs", "sn1")),
    add_content("ns3", dgst(10), labelmap(BREF_CONTAINER, "container1")),
    add_image("ns1", "image3", dgst(10), labelmap(
        BREF_IMAGE, "image2",
        GC_EXPIRE, now_text(HOUR))),  # If not expired, reference is irrelevant as it is already a root
    add_image("ns1", "image4", dgst(10), labelmap(
        BREF_IMAGE, "image2",
        GC_EXPIRE, now_text(-HOUR))),
]
GC_REFS_22 = dict(GC_REFS_20)
GC_REFS_22.update({
    content("ns1", dgst(5)): [
        content("ns1", dgst(10)),
        content("ns1", dgst(2)),
        content("ns1", dgst(3)),
    ],
    snapshot("ns1", "btrfs/sn1"): [
        content("ns1", dgst(10)),
    ],
    container("ns1", "container1"): [
        content("ns1", dgst(10)),
        snapshot("ns1", "overlay/sn4"),
    ],
    container("ns1", "container2"): [
        snapshot("ns1", "overlay/sn5"),
        snapshot("ns1", "overlay/sn6"),
    ],
    container("ns1", "container3"): [
        content("ns1", dgst(7)),
        content("ns1", dgst(7)),  # Referenced by label and backreference
        snapshot("ns1", "overlay/sn7"),
        snapshot("ns1", "overlay/sn8"),
        snapshot("ns1", "overlay/sn9"),
    ],
    container("ns1", "container4"): [
        content("ns1", dgst(8)),
        content("ns1", dgst(9)),
    ],
    image("ns1", "image2"): [
        content("ns1", dgst(10)),
        content("ns1", dgst(4)),
        content("ns1", dgst(5)),
        image("ns1", "image1"),
        image("ns1", "image4"),
    ],
})

# core/metadata/gc_test.go TestGCRefs at v2.3.4: v2.2.7's, plus conditional references
GC_REFS_ALTERS_23 = GC_REFS_ALTERS_22 + [
    # Conditional References
    add_content("ns3", dgst(20), labelmap(COND_SNAP + ".overlay", "usedat<2h|sn6")),
    add_content("ns3", dgst(21), labelmap(COND_SNAP + ".overlay", "usedat<2h|sn7")),
    add_image("ns1", "image5", dgst(30), labelmap(COND_SNAP + ".overlay", "usedat<2h|sn10")),
    add_snapshot("ns3", "overlay", "sn4", "", None),
    add_snapshot("ns3", "overlay", "sn5", "", None),
    add_snapshot("ns3", "overlay", "sn6", "sn4", labelmap(COND_USED, now_text(-HOUR))),
    add_snapshot("ns3", "overlay", "sn7", "sn5", labelmap(COND_USED, now_text(-3 * HOUR))),
    add_snapshot("ns1", "overlay", "sn10", "", labelmap(COND_USED, now_text(-HOUR // 2))),
]
GC_REFS_23 = dict(GC_REFS_22)
GC_REFS_23.update({
    image("ns1", "image5"): [
        content("ns1", dgst(30)),
        snapshot("ns1", "overlay/sn10"),
    ],
    container("ns3", "container1"): [
        content("ns3", dgst(10)),
    ],
    content("ns3", dgst(20)): [
        snapshot("ns3", "overlay/sn6"),
    ],
    content("ns3", dgst(21)): [],
})

GC_REFS = {
    "1.6": (GC_REFS_ALTERS_16, GC_REFS_16),
    "1.7": (GC_REFS_ALTERS_16, GC_REFS_16),
    "2.0": (GC_REFS_ALTERS_20, GC_REFS_20),
    "2.2": (GC_REFS_ALTERS_22, GC_REFS_22),
    "2.3": (GC_REFS_ALTERS_23, GC_REFS_23),
}


@pytest.mark.parametrize("line", G.LINES)
def test_gc_refs(line):
    alters, refs = GC_REFS[line]
    model = G.Collector(build(alters), NOW, line)
    for (node, flat), expected in refs.items():
        assert sorted(model.references(node, flat)) == sorted(expected), (node, flat)


# ==================================================================================================== TestGCRemove (scanAll)

# metadata/gc_test.go TestGCRemove at v1.6.20 (and v1.7.24): the records, and the objects scanAll lists
GC_REMOVE_ALTERS = [
    add_image("ns1", "image1", dgst(1), None),
    add_image("ns1", "image2", dgst(2), labelmap(REF_SNAP + "overlay", "sn2")),
    add_container("ns1", "container1", "overlay", "sn4", None),
    add_content("ns1", dgst(1), None),
    add_content("ns1", dgst(2), None),
    add_content("ns1", dgst(3), None),
    add_content("ns2", dgst(1), None),
    add_content("ns2", dgst(2), labelmap(GC_ROOT, "always")),
    add_ingest("ns1", "ingest-1", "", None),
    add_ingest("ns2", "ingest-2", "", time_in(0)),
    add_snapshot("ns1", "overlay", "sn1", "", None),
    add_snapshot("ns1", "overlay", "sn2", "", None),
    add_snapshot("ns1", "overlay", "sn3", "", labelmap(GC_ROOT, "always")),
    add_snapshot("ns1", "overlay", "sn4", "", None),
    add_snapshot("ns2", "overlay", "sn1", "", None),
    add_lease("ns1", "l1", labelmap(GC_EXPIRE, now_text(HOUR))),
    add_lease("ns2", "l2", labelmap(GC_EXPIRE, now_text())),
]
GC_REMOVE_ALL_1X = [
    content("ns1", dgst(1)),
    content("ns1", dgst(2)),
    content("ns1", dgst(3)),
    content("ns2", dgst(1)),
    content("ns2", dgst(2)),
    snapshot("ns1", "overlay/sn1"),
    snapshot("ns1", "overlay/sn2"),
    snapshot("ns1", "overlay/sn3"),
    snapshot("ns1", "overlay/sn4"),
    snapshot("ns2", "overlay/sn1"),
    lease("ns1", "l1"),
    lease("ns2", "l2"),
    ingest("ns1", "ingest-1"),
    ingest("ns2", "ingest-2"),
]
# core/metadata/gc_test.go TestGCRemove at v2.1.9, v2.2.7 and v2.3.4: the same, and the image records
GC_REMOVE_ALL_2X = GC_REMOVE_ALL_1X + [
    image("ns1", "image1"),
    image("ns1", "image2"),
]


@pytest.mark.parametrize("line", G.LINES)
def test_gc_remove_scan_all(line):
    model = G.Collector(build(GC_REMOVE_ALTERS), NOW, line)
    assert sorted(model.all()) == nodes_of(GC_REMOVE_ALL_2X if line >= "2.0" else GC_REMOVE_ALL_1X)


# ==================================================================================================== TestCollectibleResources

# metadata/gc_test.go TestCollectibleResources at v1.7.24 (none at v1.6.20), without the test collector's resources
# (type 0x10: test1..test4) and the reference to one (dgst(2)'s containerd.io/gc.ref.test label names test2)
COLLECTIBLE_ALTERS_17 = [
    add_content("ns1", dgst(1), None),
    add_image("ns1", "image1", dgst(1), None),
    add_content("ns1", dgst(2), {"containerd.io/gc.ref.test": "test2"}),
    add_image("ns1", "image2", dgst(2), None),
    add_lease("ns1", "lease1", labelmap(GC_EXPIRE, now_text(HOUR))),
    add_lease("ns1", "lease2", labelmap(GC_EXPIRE, now_text(-HOUR))),
]
COLLECTIBLE_17 = {
    "refs": {
        content("ns1", dgst(1)): [],
        content("ns1", dgst(2)): [],  # upstream: test2, a plugin's resource
    },
    "all": [content("ns1", dgst(1)), content("ns1", dgst(2)), lease("ns1", "lease1"), lease("ns1", "lease2")],
    "roots": [content("ns1", dgst(1)), content("ns1", dgst(2)), lease("ns1", "lease1")],  # upstream also: test1, test3
}
# core/metadata/gc_test.go TestCollectibleResources at v2.1.9: image records are nodes
COLLECTIBLE_20 = {
    "refs": COLLECTIBLE_17["refs"],
    "all": COLLECTIBLE_17["all"] + [image("ns1", "image1"), image("ns1", "image2")],
    "roots": [image("ns1", "image1"), image("ns1", "image2"), lease("ns1", "lease1")],
}
# core/metadata/gc_test.go TestCollectibleResources at v2.2.7 (the same at v2.3.4): a container; the test collector's
# back references from image2 and container1 to test5 are a plugin's, left out
COLLECTIBLE_ALTERS_22 = COLLECTIBLE_ALTERS_17 + [add_container("ns1", "container1", "testsn", "sn1", None)]
COLLECTIBLE_22 = {
    "refs": dict(COLLECTIBLE_17["refs"], **{}),
    "all": COLLECTIBLE_20["all"],
    "roots": [container("ns1", "container1")] + COLLECTIBLE_20["roots"],
}
COLLECTIBLE_22["refs"].update({
    image("ns1", "image1"): [content("ns1", dgst(1))],
    image("ns1", "image2"): [content("ns1", dgst(2))],  # upstream also: test5
    container("ns1", "container1"): [snapshot("ns1", "testsn/sn1")],  # upstream also: test5
})
COLLECTIBLE = {
    "1.7": (COLLECTIBLE_ALTERS_17, COLLECTIBLE_17),
    "2.0": (COLLECTIBLE_ALTERS_17, COLLECTIBLE_20),
    "2.2": (COLLECTIBLE_ALTERS_22, COLLECTIBLE_22),
    "2.3": (COLLECTIBLE_ALTERS_22, COLLECTIBLE_22),
}


@pytest.mark.parametrize("line", sorted(COLLECTIBLE))
def test_collectible_resources(line):
    alters, table = COLLECTIBLE[line]
    model = G.Collector(build(alters), NOW, line)
    assert sorted(model.roots) == sorted(table["roots"])
    for (node, flat), expected in table["refs"].items():
        assert sorted(model.references(node, flat)) == sorted(expected), node
    assert sorted(model.all()) == nodes_of(table["all"])


# ==================================================================================================== TestMetadataCollector

# metadata/db_test.go TestMetadataCollector at v1.6.20: objects made through containerd's stores in namespace "test"
# (blobs committed from ingests, snapshots of "native" committed from active ones, a container, an image, leases), one
# collection, then what scanAll still lists. An object is (record, removed).


def blob(i, removed, *labels):
    return add_content("test", dgst(i), labelmap(*labels)), removed, content("test", dgst(i))


def new_snapshot(key, parent, removed, *labels):
    return add_snapshot("test", "native", key, parent, labelmap(*labels)), removed, snapshot("test", "native/" + key)


def a_container(cid, key):
    return add_container("test", cid, "native", key, None), None, None


def an_image(name, digest):
    return add_image("test", name, digest, None), False, image("test", name)


def a_lease(lid, resources, removed, *labels):
    def alter(inv):
        add_lease("test", lid, labelmap(*labels))(inv)
        for rid, rtype in resources:
            _lease(inv, "test", lid)["resources"].append((rtype, rid))
    return alter, removed, lease("test", lid)


METADATA_OBJECTS_16 = [
    blob(1, True),
    blob(2, False),
    blob(3, True),
    blob(4, False, "containerd.io/gc.root", "2026-11-26 08:00:00.000000001 +0000 UTC m=+0.000000001"),
    new_snapshot("1", "", False),
    new_snapshot("2", "1", False),
    new_snapshot("3", "2", False),
    new_snapshot("4", "3", False),
    new_snapshot("5", "3", True),
    a_container("1", "4"),
    an_image("image-1", dgst(2)),

    # Test lease preservation
    blob(5, False, "containerd.io/gc.ref.content.0", dgst(6)),
    blob(6, False),
    blob(7, False),
    new_snapshot("6", "", False, "containerd.io/gc.ref.content.0", dgst(7)),
    a_lease("lease-1", [(dgst(5), "content"), ("6", "snapshots/native")], False),

    # Test flat lease
    blob(8, False, "containerd.io/gc.ref.content.0", dgst(9)),
    blob(9, True),
    blob(10, True),
    new_snapshot("7", "", False, "containerd.io/gc.ref.content.0", dgst(10)),
    new_snapshot("8", "7", False),
    new_snapshot("9", "8", False),
    a_lease("lease-2", [(dgst(8), "content"), ("9", "snapshots/native")], False, "containerd.io/gc.flat", "2026-11-26 08:00:00 +0000 UTC"),
]
# metadata/db_test.go TestMetadataCollector at v1.7.24 (the same test at v2.1.9, v2.2.7 and v2.3.4): plus the test
# collector's blobs and lease; its resources (test1..test4 in namespaces test and random) are a plugin's, left out
METADATA_OBJECTS_17 = METADATA_OBJECTS_16 + [
    # Test Collectible Resource
    blob(11, False, "containerd.io/gc.ref.test", "test1"),
    blob(12, True, "containerd.io/gc.ref.test", "test2"),
    a_lease("lease-3", [(dgst(11), "content")], False),
]


@pytest.mark.parametrize("line", G.LINES)
def test_metadata_collector(line):
    objects = METADATA_OBJECTS_16 if line == "1.6" else METADATA_OBJECTS_17
    model = G.Collector(build([alter for alter, _removed, _node in objects]), NOW, line)
    # 1.x: an image record is no collectible node (upstream's create() returns none for it); 2.x: it stays
    remaining = [node for _alter, removed, node in objects if removed is False and (node[0][0] != "image" or line >= "2.0")]
    collected = set(model.collected())
    assert sorted(n for n in model.all() if n not in collected) == nodes_of(remaining)
