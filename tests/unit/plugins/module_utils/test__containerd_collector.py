# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The model of containerd's garbage collector, rule by rule (metadata/gc.go in 1.x, core/metadata/gc.go in 2.x)."""

import pytest

from ansible_collections.kubenode.gc.plugins.module_utils.containerd import _containerd_collector as G
from tests.unit.plugins.module_utils.test__storage_policy import NOW, SN, blob, ns, snap

PAST = "2020-01-01T00:00:00Z"
FUTURE = "2100-01-01T00:00:00Z"


def chain(**top_labels):
    """base <- top snapshots, and one blob."""
    return {(SN, "base"): snap(1), (SN, "top"): snap(1, parent="base", **top_labels)}


def gone(inv, major=2, skip=frozenset()):
    return {n[-1] for n in G.collected({"x": inv}, NOW, major, {("image", "x", i) for i in skip})}


def test_nothing_referenced_goes():
    assert gone(ns(content={"b": blob(1)}, snapshots=chain())) == {"b", "base", "top"}


@pytest.mark.parametrize("major", [1, 2])
def test_gc_root_keeps_a_snapshot_with_its_parents_and_a_blob_with_its_references(major):
    inv = ns(content={"b": blob(1, **{G.GC_ROOT: "x", "containerd.io/gc.ref.snapshot.overlayfs/l": "top"}), "c": blob(1)},
             snapshots=chain())
    assert gone(inv, major) == {"c"}


@pytest.mark.parametrize("label", ["containerd.io/gc.ref.content", "containerd.io/gc.ref.content.l.0", "containerd.io/gc.ref.content/m"])
def test_content_label_naming(label):
    inv = ns(content={"b": blob(1, **{G.GC_ROOT: "x", label: "c"}), "c": blob(1)})
    assert gone(inv) == set()
    inv = ns(content={"b": blob(1, **{G.GC_ROOT: "x", "containerd.io/gc.ref.contentX": "c"}), "c": blob(1)})
    assert gone(inv) == {"c"}


@pytest.mark.parametrize("major", [1, 2])
def test_an_image_records_own_labels_keep_a_chain(major):
    inv = ns(images=[("img", "m")], content={"m": blob(1)}, snapshots=chain())
    inv["images"][0]["labels"] = {"containerd.io/gc.ref.snapshot.overlayfs": "top"}
    assert gone(inv, major) == set()
    assert gone(inv, major, skip={"img"}) == ({"m", "base", "top"} | ({"img"} if major >= 2 else set())) - {"img"}


def test_image_expiry_and_image_references_are_2x_only():
    inv = ns(images=[("a", "m"), ("b", "n")], content={"m": blob(1), "n": blob(1)})
    inv["images"][0]["labels"] = {G.GC_EXPIRE: PAST}
    assert gone(inv, 2) == {"a", "m"} and gone(inv, 1) == set()
    inv["images"][1]["labels"] = {"containerd.io/gc.ref.image": "a"}
    assert gone(inv, 2) == set()


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


def test_containers_and_sandboxes():
    c = {"id": "c", "image": "", "snapshotter": SN, "snapshot_key": "top", "labels": {}}
    assert gone(ns(snapshots=chain(), containers=[c])) == set()
    # no snapshotter: containerd follows no snapshot
    assert gone(ns(snapshots=chain(), containers=[dict(c, snapshotter="")])) == {"base", "top"}
    sb = {"id": "s", "labels": {"containerd.io/gc.ref.snapshot.overlayfs": "top"}}
    assert gone(ns(snapshots=chain(), sandboxes=[sb])) == set()


def test_ingests_unleased_are_roots_for_a_day_and_keep_their_expected_blob():
    ing = {"ref": "r", "offset": 1, "total": 2, "expected": "b", "started_ns": NOW - 10**9, "updated_ns": NOW}
    assert gone(ns(content={"b": blob(1)}, ingests=[ing])) == set()
    stale = dict(ing, started_ns=NOW - G.UNLEASED_INGEST_TTL_NS - 1)
    assert gone(ns(content={"b": blob(1)}, ingests=[stale])) == {"b", "r"}


def test_major_and_rfc3339():
    assert G.major("1.7.24") == 1 and G.major("v2.1.4") == 2 and G.major("") == 2
    assert G.expired({G.GC_EXPIRE: "not a time"}, NOW) is False
