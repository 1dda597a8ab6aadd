# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The differential test of storage_gc's collector model: on every containerd line (1.6, 1.7, 2.1, 2.2, 2.3), with
objects of every label kind (those of later lines too, plain labels where a line does not follow them) and, on 2.x, an
image pulled under two names through the transfer service from the harness's registry, what the check-mode plan
predicts containerd's collection frees is, object by object, what it really freed."""

import pytest

from ansible_collections.kubenode.gc.plugins.module_utils.containerd._containerd_collector import release_line
from tests.integration import storage_objects as so

pytestmark = pytest.mark.runtimes("every")

ACTIONS = ("ingest", "lease", "image", "gc_root")
COLLECTED = ("content", "snapshot", "lease", "ingest", "image")


def run(ansible, runtime, check=False, **args):
    args = dict(dict(namespaces=["gc-drop"], ingest_max_age="1000h"), **args)
    res = ansible.module("kubenode.gc.storage_gc", dict(args, cri_endpoint=runtime.endpoint), check=check,
                         task_env={"KUBENODE_GC_LOCK_DIR": runtime.workdir})
    assert not res.get("failed"), res.get("msg")
    return res


def predicted(plan):
    """(what the module removes itself, what the plan says containerd's collection then frees).

    The plan lists the module's steps first, then the collection's, whose kinds overlap: here the module aborts no ingest
    (ingest_max_age 1000h) and deletes images of gc-drop only, so an ingest, or an image of another namespace (an
    expired record), is the collection's; a lease is the module's (an expired one is planned as one)."""
    def own(step):
        return step["kind"] in ("lease", "gc_root") or (step["kind"] == "image" and step["namespace"] == "gc-drop")

    return so.plan_objects([s for s in plan if own(s)], ACTIONS), so.plan_objects([s for s in plan if not own(s)], COLLECTED)


def snap(namespace, key, snapshotter="overlayfs"):
    return ("snapshot", namespace, "%s/%s" % (snapshotter, key))


def round_trip(ansible, runtime, **args):
    """A check-mode plan, then the real run: (plan, objects the module removed, predicted collection, real collection, after)."""
    before = so.listing(runtime, so.namespaces(runtime))
    checked = run(ansible, runtime, check=True, **args)
    plan = checked["plan"]
    assert so.listing(runtime, so.namespaces(runtime)) == before  # check mode changes nothing
    res = run(ansible, runtime, **args)
    assert res["plan"] == plan
    after = so.listing(runtime, so.namespaces(runtime))
    removed, collection = predicted(plan)
    # a gc_root step removes a label, not the object: the collection frees it
    really = before - after - {r for r in removed if r[0] not in ("content", "snapshot")}
    assert collection == really, "predicted only: %s; collected only: %s" % (sorted(collection - really), sorted(really - collection))
    assert not [w for w in res.get("warnings", []) if "kept" in w and "plan expected" in w]
    return plan, removed, collection, really, after


def test_plan_predicts_containerds_collection(ansible, runtime):
    if runtime.kind in ("cri-o", "docker"):
        return  # containerd's collector; storage_gc says supported: false on cri-o, and removes Docker's objects (test_storage_gc)
    line = release_line(runtime.version)[0]
    brefs, conds = line >= "2.2", line >= "2.3"
    names = so.create_gc_fixtures(runtime, line)
    t, d = "gc-tools", "gc-drop"
    before = so.listing(runtime, so.namespaces(runtime))
    # containerd honours the flat lease: the blob it names stays, the blob that one's label names went
    assert ("content", t, names["flat_kept"]) in before and ("content", t, names["flat_dropped"]) not in before
    assert {snap(t, k) for k in names["flat_chain"]} <= before
    # a snapshot with a gc.root.* key only is a root from 2.2; the objects plain-lease holds are all there
    assert (snap(t, names["prefix_snapshot"]) in before) is brefs
    held = ({("content", t, names[k]) for k in ("bref_image", "bref_blob", "prefix_held")} | {snap(t, names["bref_snapshot"])}
            | {snap(t, k) for c in ("bref_container_chain", "cond_kept_chain", "cond_old_chain", "cond_stale_chain") for k in names[c]}
            | {("ingest", t, names["leased_ingest"]), ("ingest", t, names["unleased_ingest"]), ("image", t, names["alias"])})
    assert held <= before, sorted(held - before)
    pulled = set()
    if line >= "2.0":  # the transfer service
        pulled = {("image", t, n) for n in names["pulled"]} | {("image", d, n) for n in names["drop_pulled"]}
        assert pulled <= before
        # 2.3's transfer service labels the extra name: back to the first, expired (the image stays only through that)
        alias_labels = so.ctr_ok(runtime, t, "images", "ls", "name==" + names["pulled"][1])
        assert ("containerd.io/gc.bref.image=" + names["pulled"][0] in alias_labels) is conds, alias_labels
    # nothing to remove: the model keeps every object containerd kept, and says where the API hides what decides
    checked = run(ansible, runtime, check=True, namespaces=[])
    assert checked["plan"] == []
    assert [w for w in checked["warnings"] if names["unleased_ingest"] in w and "expiry" in w]

    # default options: the images of gc-drop go (both names of the pulled one), and what only their records kept
    plan, removed, collection, really, after = round_trip(ansible, runtime)
    assert removed == {("image", d, "docker.io/library/gc-drop:1")} | {p for p in pulled if p[1] == d}
    assert {snap(d, k) for k in names["drop_chain"]} | {("content", d, names["drop_blob"])} <= really
    survivors = {snap(t, "tool-rw"), snap(t, "native-rw", "native"), ("content", t, names["root_blob"]), ("content", t, names["container_blob"]),
                 ("content", t, names["flat_kept"]), ("image", t, "docker.io/library/gc-kept:1"), ("content", t, names["plain_held"]),
                 ("content", t, names["plain_referenced"]), ("content", t, names["prefix_both"])}
    survivors |= {snap(t, k) for k in names["image_chain"] + names["blob_chain"] + names["flat_chain"]}
    survivors |= held | {p for p in pulled if p[1] == t}
    assert survivors <= after, sorted(survivors - after)

    # release_gc_roots: the gc.root objects nothing else references go (every gc.root key: 2.2 follows the prefix), with
    # what only they kept; the labelled chains stay
    plan, removed, collection, really, after = round_trip(ansible, runtime, release_gc_roots=True)
    released = {snap(t, "tool-rw"), snap(t, "native-rw", "native"), ("content", t, names["root_blob"]), ("content", t, names["prefix_both"])}
    released |= {snap(t, names["prefix_snapshot"])} if brefs else set()
    assert removed == released
    assert removed | {snap(t, k) for k in names["blob_chain"]} <= really
    survivors -= released | {snap(t, k) for k in names["blob_chain"]}
    assert survivors <= after, sorted(survivors - after)
    # and nothing is left for a second run
    assert run(ansible, runtime, check=True, release_gc_roots=True)["plan"] == []

    # lease_max_age: both leases go, and with them what only they kept: the flat one's blob and chain, the plain one's
    # two blobs, the ingest opened in it; what the line's back references, gc.root prefix and conditions keep stays
    plan, removed, collection, really, after = round_trip(ansible, runtime, lease_max_age="1s")
    assert removed == {("lease", t, "flat-lease"), ("lease", t, "plain-lease")}
    gone = {("content", t, names[k]) for k in ("flat_kept", "plain_held", "plain_referenced")} | {snap(t, k) for k in names["flat_chain"]}
    gone |= {("ingest", t, names["leased_ingest"])} | {snap(t, k) for k in names["cond_old_chain"]}
    by_bref = {("content", t, names["bref_image"]), ("content", t, names["bref_blob"]), snap(t, names["bref_snapshot"])}
    by_bref |= {snap(t, k) for k in names["bref_container_chain"]}
    by_prefix = {("content", t, names["prefix_held"])}
    by_cond = {snap(t, k) for k in names["cond_kept_chain"] + names["cond_stale_chain"]}
    alias = {("image", t, names["alias"])}  # 1.x keeps every image record; 2.0 and 2.1 collect an expired one
    kept = {("image", t, "docker.io/library/gc-kept:1"), ("content", t, names["container_blob"]), ("ingest", t, names["unleased_ingest"])}
    kept |= {snap(t, k) for k in names["image_chain"]} | {p for p in pulled if p[1] == t}
    kept |= (by_bref | by_prefix if brefs else set()) | (by_cond if conds else set()) | (alias if line < "2.0" or brefs else set())
    gone |= (set() if brefs else by_bref | by_prefix) | (set() if conds else by_cond) | (set() if line < "2.0" or brefs else alias)
    assert gone <= really, sorted(gone - really)
    assert kept <= after, sorted(kept - after)
