# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The model of containerd's garbage collector, rule by rule and line by line (metadata/gc.go in 1.x, core/metadata/gc.go
in 2.x). containerd's own test tables for each line are in test__containerd_collector_upstream.py."""

import pytest

from ansible_collections.kubenode.gc.plugins.module_utils.containerd import _containerd_collector as G
from tests.unit.plugins.module_utils.test__storage_policy import NOW, SN, blob, ns, snap

PAST = "2020-01-01T00:00:00Z"
FUTURE = "2100-01-01T00:00:00Z"
SECOND = 10**9
HOUR = 3600 * SECOND


def rfc3339(ns_since_epoch):
    """Go's time.RFC3339 text of a time (whole seconds, UTC)."""
    import time

    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ns_since_epoch // SECOND))


def chain(**top_labels):
    """base <- top snapshots, and one blob."""
    return {(SN, "base"): snap(1), (SN, "top"): snap(1, parent="base", **top_labels)}


def gone(inv, line="2.3", removed=frozenset()):
    return {n[-1] for n in G.collected({"x": inv}, NOW, line, {("image", "x", i) for i in removed})}


def test_nothing_referenced_goes():
    assert gone(ns(content={"b": blob(1)}, snapshots=chain())) == {"b", "base", "top"}


@pytest.mark.parametrize("line", G.LINES)
def test_gc_root_keeps_a_snapshot_with_its_parents_and_a_blob_with_its_references(line):
    inv = ns(content={"b": blob(1, **{G.GC_ROOT: "x", "containerd.io/gc.ref.snapshot.overlayfs/l": "top"}), "c": blob(1)},
             snapshots=chain())
    assert gone(inv, line) == {"c"}


@pytest.mark.parametrize("label", ["containerd.io/gc.ref.content", "containerd.io/gc.ref.content.l.0", "containerd.io/gc.ref.content/m"])
def test_content_label_naming(label):
    inv = ns(content={"b": blob(1, **{G.GC_ROOT: "x", label: "c"}), "c": blob(1)})
    assert gone(inv) == set()
    inv = ns(content={"b": blob(1, **{G.GC_ROOT: "x", "containerd.io/gc.ref.contentX": "c"}), "c": blob(1)})
    assert gone(inv) == {"c"}


@pytest.mark.parametrize("line", G.LINES)
def test_an_image_records_own_labels_keep_a_chain(line):
    inv = ns(images=[("img", "m")], content={"m": blob(1)}, snapshots=chain())
    inv["images"][0]["labels"] = {"containerd.io/gc.ref.snapshot.overlayfs": "top"}
    assert gone(inv, line) == set()
    assert gone(inv, line, removed={"img"}) == {"m", "base", "top"}


@pytest.mark.parametrize("line", G.LINES)
def test_image_expiry_and_image_references_from_2_0(line):
    inv = ns(images=[("a", "m"), ("b", "n")], content={"m": blob(1), "n": blob(1)})
    inv["images"][0]["labels"] = {G.GC_EXPIRE: PAST}
    assert gone(inv, line) == ({"a", "m"} if line >= "2.0" else set())
    inv["images"][1]["labels"] = {"containerd.io/gc.ref.image": "a"}
    assert gone(inv, line) == set()


def test_leases_expire_and_flat_leases_hold_only_what_they_name():
    held = {"id": "l", "created_ns": NOW, "labels": {}, "resources": [("content", "b"), ("snapshots/overlayfs", "top")]}
    content = {"b": blob(1, **{"containerd.io/gc.ref.content": "c"}), "c": blob(1)}
    assert gone(ns(content=dict(content), snapshots=chain(), leases=[held])) == set()
    flat = dict(held, labels={G.GC_FLAT: "1"})
    # flat: the blob's references are not followed, a snapshot's parent is
    assert gone(ns(content=dict(content), snapshots=chain(), leases=[flat])) == {"c"}
    old = dict(held, labels={G.GC_EXPIRE: PAST})
    assert gone(ns(content=dict(content), snapshots=chain(), leases=[old])) == {"l", "b", "c", "base", "top"}
    young = dict(held, labels={G.GC_EXPIRE: FUTURE})
    assert gone(ns(content=dict(content), snapshots=chain(), leases=[young])) == set()


@pytest.mark.parametrize("line", G.LINES)
def test_containers_and_sandboxes(line):
    c = {"id": "c", "image": "", "snapshotter": SN, "snapshot_key": "top", "labels": {}}
    assert gone(ns(snapshots=chain(), containers=[c]), line) == set()
    # no snapshotter: containerd follows no snapshot
    assert gone(ns(snapshots=chain(), containers=[dict(c, snapshotter="")]), line) == {"base", "top"}
    sb = {"id": "s", "labels": {"containerd.io/gc.ref.snapshot.overlayfs": "top"}}
    # the sandbox store came with 1.7
    assert gone(ns(snapshots=chain(), sandboxes=[sb]), line) == ({"base", "top"} if line == "1.6" else set())


# -- ingests: an expiry of their own, or their lease -------------------------------------------------------------------


def ingest(ref, expected="b", **kw):
    return dict({"ref": ref, "offset": 1, "total": 2, "expected": expected, "started_ns": NOW - SECOND, "updated_ns": NOW}, **kw)


@pytest.mark.parametrize("line", G.LINES)
def test_an_ingest_outside_a_lease_is_kept_only_with_an_expiry_of_its_own(line):
    assert gone(ns(content={"b": blob(1)}, ingests=[ingest("r", expires_ns=NOW + HOUR)]), line) == set()
    assert gone(ns(content={"b": blob(1)}, ingests=[ingest("r", expires_ns=NOW - 1)]), line) == {"b", "r"}
    # opened in a lease, which is gone: no expiry of its own
    assert gone(ns(content={"b": blob(1)}, ingests=[ingest("r", expires_ns=None)]), line) == {"b", "r"}


def test_an_ingest_whose_expiry_the_api_does_not_show():
    lease = {"id": "pull", "created_ns": NOW, "labels": {G.GC_EXPIRE: PAST}, "resources": [("ingests", "r")]}
    # a lease held it (an expired one, still listed): it was opened in a lease and carries no expiry, it goes
    assert gone(ns(content={"b": blob(1)}, ingests=[ingest("r")], leases=[lease])) == {"b", "r", "pull"}
    # no lease holds it: it may carry one; the model keeps it (containerd keeps it if it does) and names it
    inv = ns(content={"b": blob(1)}, ingests=[ingest("r")])
    assert gone(inv) == set() and G.uncertain_ingests({"x": inv}) == [("ingest", "x", "r")]
    # the lease the plan removes: its ingests go with it at the collection
    live = dict(lease, labels={})
    inv = ns(content={"b": blob(1)}, ingests=[ingest("r")], leases=[live])
    assert {n[-1] for n in G.collected({"x": inv}, NOW, "2.3", {("lease", "x", "pull")})} == {"b", "r"}
    assert G.uncertain_ingests({"x": inv}) == []


# -- 2.2: back references and the gc.root prefix -----------------------------------------------------------------------


@pytest.mark.parametrize("line", G.LINES)
def test_back_references_keep_an_object_while_what_it_names_is_kept(line):
    kept = line >= "2.2"
    c = {"id": "ctr", "image": "", "snapshotter": "", "snapshot_key": "", "labels": {}}
    content = {"m": blob(1), "to-image": blob(1, **{"containerd.io/gc.bref.image": "img"}),
               "to-ctr": blob(1, **{"containerd.io/gc.bref.container.x": "ctr"}), "to-blob": blob(1, **{"containerd.io/gc.bref.content/y": "m"})}
    inv = ns(images=[("img", "m")], content=content,
             snapshots=chain(**{"containerd.io/gc.bref.snapshot.overlayfs/z": "other"}),
             containers=[c])
    inv["snapshots"][(SN, "other")] = snap(1, **{G.GC_ROOT: "t"})
    assert gone(inv, line) == (set() if kept else {"to-image", "to-ctr", "to-blob", "base", "top"})
    # the image record goes: what only it kept, and what back-referenced it or its target
    assert gone(inv, line, removed={"img"}) == {"m", "to-image", "to-blob"} | (set() if kept else {"to-ctr", "base", "top"})
    # a back reference does not name a blob by any other key
    inv["content"]["to-image"]["labels"] = {"containerd.io/gc.bref.imageX": "img"}
    assert "to-image" in gone(inv, line)


def test_an_expired_image_back_referencing_a_kept_one_is_kept_from_2_2():
    """What containerd 2.3's transfer service writes for the extra names of an image pulled under several names."""
    inv = ns(images=[("main", "m"), ("alias", "m")], content={"m": blob(1)})
    inv["images"][1]["labels"] = {G.GC_EXPIRE: PAST, "containerd.io/gc.bref.image": "main"}
    assert gone(inv, "2.0") == {"alias"} and gone(inv, "2.2") == set() and gone(inv, "2.3") == set()
    assert gone(inv, "2.3", removed={"main"}) == {"alias", "m"}


@pytest.mark.parametrize("line", G.LINES)
def test_every_label_key_starting_with_gc_root_makes_a_root_from_2_2(line):
    inv = ns(content={"b": blob(1, **{"containerd.io/gc.root.by-tool": "x"})}, snapshots={(SN, "s"): snap(1, **{"containerd.io/gc.rootless": ""})})
    assert gone(inv, line) == (set() if line >= "2.2" else {"b", "s"})
    labels = {G.GC_ROOT: "a", "containerd.io/gc.root.x": "b", "containerd.io/gc.ref.content": "c"}
    assert G.root_keys(labels, line) == ([G.GC_ROOT, "containerd.io/gc.root.x"] if line >= "2.2" else [G.GC_ROOT])
    # released (storage_gc's release_gc_roots): every such key goes, and the object with it
    removed = {("content", "x", "b"), ("snapshot", "x", SN, "s")}
    assert {n[-1] for n in G.collected({"x": inv}, NOW, line, removed)} == {"b", "s"}


# -- 2.3: conditional references ---------------------------------------------------------------------------------------


def used(hours_ago):
    return {G.COND_VALUE_USEDAT: rfc3339(NOW - int(hours_ago * HOUR))}


@pytest.mark.parametrize("value, used_hours_ago, kept", [
    ("usedat<2h|top", 1, True),
    ("usedat<2h|top", 3, False),
    ("usedat>2h|top", 3, True),
    ("usedat>2h|top", 1, False),
    ("usedat<=2h|top", 1, False),  # usedat compares with < or > only
    ("usedat=2h|top", 1, False),
    ("usedat!=2h|top", 1, False),
    ("usedat<1h,usedat<3h|top", 2, True),  # any condition
    ("usedat<2h", 1, False),  # no key
    ("usedat< 2h|top", 1, False),  # Go's ParseDuration takes no spaces
    ("other<2h|top", 1, False),  # no such condition
    ("usedat<2h|base", 1, False),  # the value is the snapshot's own: base has none
])
def test_conditional_references(value, used_hours_ago, kept):
    inv = ns(images=[("img", "m")], content={"m": blob(1)}, snapshots=chain(**used(used_hours_ago)))
    inv["images"][0]["labels"] = {"containerd.io/gc.cond.snapshot.overlayfs": value}
    assert gone(inv, "2.3") == (set() if kept else {"base", "top"})
    assert gone(inv, "2.2") == {"base", "top"}


def test_conditional_references_from_blobs_and_their_naming():
    # the snapshotter: after the prefix, leading dots and slashes dropped, up to the next slash
    for key in ("containerd.io/gc.cond.snapshot.overlayfs", "containerd.io/gc.cond.snapshot/overlayfs/name", "containerd.io/gc.cond.snapshotoverlayfs"):
        inv = ns(content={"b": blob(1, **{G.GC_ROOT: "x", key: "usedat<2h|top"})}, snapshots=chain(**used(1)))
        assert gone(inv, "2.3") == set(), key
    inv = ns(content={"b": blob(1, **{G.GC_ROOT: "x", "containerd.io/gc.cond.snapshot.native": "usedat<2h|top"})}, snapshots=chain(**used(1)))
    assert gone(inv, "2.3") == {"base", "top"}
    # a held blob's condition keeps the snapshot only while the blob is kept
    inv = ns(content={"b": blob(1, **{"containerd.io/gc.cond.snapshot.overlayfs": "usedat<2h|top"})}, snapshots=chain(**used(1)))
    assert gone(inv, "2.3") == {"b", "base", "top"}


# -- versions and Go's formats -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("version, line, noted", [
    ("1.6.20~ds1", "1.6", False), ("v1.7.24", "1.7", False), ("2.0.0", "2.0", False), ("2.1.9+unknown", "2.0", False),
    ("v2.2.7", "2.2", False), ("v2.3.4", "2.3", False), ("v2.4.0", "2.3", True), ("3.0.0", "2.3", True), ("", "2.3", True),
    ("devel", "2.3", True), ("1.5.18", "1.6", True),
])
def test_release_line(version, line, noted):
    got, note = G.release_line(version)
    assert got == line and (note is not None) == noted
    if noted:
        assert line in note


@pytest.mark.parametrize("text, expected", [
    ("2026-01-01T00:00:00Z", 1767225600 * SECOND),
    ("2026-01-01T01:00:00.5+01:00", 1767225600 * SECOND + 500000000),
    ("2026-01-01T00:00:00,25Z", 1767225600 * SECOND + 250000000),
    ("2026-01-01T00:00:00.1234567891Z", 1767225600 * SECOND + 123456789),
    ("2026-01-01T1:00:00Z", 1767225600 * SECOND + 3600 * SECOND),  # Go's hour takes one digit
    ("2024-02-29T00:00:00Z", 1709164800 * SECOND),
    ("2023-02-29T00:00:00Z", None),  # day out of range
    ("2026-01-01t00:00:00Z", None), ("2026-01-01T00:00:00z", None), (" 2026-01-01T00:00:00Z", None), ("2026-01-01T00:00:00Z ", None),
    ("2026-01-01T24:00:00Z", None), ("2026-01-01T00:00:60Z", None), ("2026-13-01T00:00:00Z", None), ("2026-01-01T00:00:00+25:00", None),
    ("2026-01-01T00:00:00.Z", None), ("2026-01-01", None), ("tomorrow", None), ("2026-01-01T00:00:00", None),
])
def test_rfc3339_as_go_parses_it(text, expected):
    assert G.parse_rfc3339(text) == expected
    # what Go cannot parse never expires (a lease, an image)
    assert G.expired({G.GC_EXPIRE: text}, 2**62) is (expected is not None)


def test_the_client_spells_the_lease_expiry_label_as_the_collector_model():
    from ansible_collections.kubenode.gc.plugins.module_utils.containerd import _client  # pylint: disable=import-outside-toplevel

    assert _client.LEASE_EXPIRE == G.GC_EXPIRE
