# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The differential test of storage_gc's collector model: on containerd 1.6, 1.7 and 2.x, with objects of every label kind,
what the check-mode plan predicts containerd's collection frees is, object by object, what it really freed."""

from tests.integration import storage_objects as so

ACTIONS = ("ingest", "lease", "image", "gc_root")
COLLECTED = ("content", "snapshot", "lease", "ingest", "image")


def run(ansible, runtime, check=False, **args):
    args = dict(dict(namespaces=["gc-drop"], ingest_max_age="1000h"), **args)
    res = ansible.module("kubenode.gc.storage_gc", dict(args, cri_endpoint=runtime.endpoint), check=check,
                         task_env={"KUBENODE_GC_LOCK_DIR": runtime.workdir})
    assert not res.get("failed"), res.get("msg")
    return res


def predicted(plan):
    """(what the module removes itself, what the plan says containerd's collection then frees)"""
    removed = so.plan_objects(plan, ACTIONS)
    return removed, so.plan_objects([s for s in plan if s["kind"] not in ACTIONS], COLLECTED)


def snap(namespace, key, snapshotter="overlayfs"):
    return ("snapshot", namespace, "%s/%s" % (snapshotter, key))


def round_trip(ansible, runtime, **args):
    """A check-mode plan, then the real run: (plan, objects the module removed, predicted collection, real collection, after)."""
    before = so.listing(runtime, so.namespaces(runtime))
    plan = run(ansible, runtime, check=True, **args)["plan"]
    assert so.listing(runtime, so.namespaces(runtime)) == before  # check mode changes nothing
    res = run(ansible, runtime, **args)
    assert res["plan"] == plan
    after = so.listing(runtime, so.namespaces(runtime))
    removed, collection = predicted(plan)
    # a gc_root step removes a label, not the object: the collection frees it
    really = before - after - {r for r in removed if r[0] not in ("content", "snapshot")}
    return plan, removed, collection, really, after


def test_plan_predicts_containerds_collection(ansible, runtime):
    if runtime.kind in ("cri-o", "docker"):
        return  # containerd's collector; storage_gc says supported: false on cri-o, and removes Docker's objects (test_storage_gc)
    names = so.create_gc_fixtures(runtime)
    t, d = "gc-tools", "gc-drop"
    before = so.listing(runtime, so.namespaces(runtime))
    # containerd honours the flat lease: the blob it names stays, the blob that one's label names went
    assert ("content", t, names["flat_kept"]) in before and ("content", t, names["flat_dropped"]) not in before
    assert {snap(t, k) for k in names["flat_chain"]} <= before
    # nothing to remove: the model keeps every object containerd kept
    assert run(ansible, runtime, check=True, namespaces=[])["plan"] == []

    # default options: the image of gc-drop goes, and what only its record kept; every gc.root stays
    plan, removed, collection, really, after = round_trip(ansible, runtime)
    assert removed == {("image", d, "docker.io/library/gc-drop:1")}
    assert collection == really, "predicted only: %s; collected only: %s" % (sorted(collection - really), sorted(really - collection))
    assert {snap(d, k) for k in names["drop_chain"]} | {("content", d, names["drop_blob"])} <= really
    survivors = {snap(t, "tool-rw"), snap(t, "native-rw", "native"), ("content", t, names["root_blob"]), ("content", t, names["container_blob"]),
                 ("content", t, names["flat_kept"]), ("image", t, "docker.io/library/gc-kept:1"), ("content", t, names["plain_held"]),
                 ("content", t, names["plain_referenced"])}
    survivors |= {snap(t, k) for k in names["image_chain"] + names["blob_chain"] + names["flat_chain"]}
    assert survivors <= after

    # release_gc_roots: the gc.root objects nothing else references go, with what only they kept; the labelled chains stay
    plan, removed, collection, really, after = round_trip(ansible, runtime, release_gc_roots=True)
    assert removed == {snap(t, "tool-rw"), snap(t, "native-rw", "native"), ("content", t, names["root_blob"])}
    assert collection == really, "predicted only: %s; collected only: %s" % (sorted(collection - really), sorted(really - collection))
    assert removed | {snap(t, k) for k in names["blob_chain"]} <= really
    assert survivors - removed - {snap(t, k) for k in names["blob_chain"]} <= after
    # and nothing is left for a second run
    assert run(ansible, runtime, check=True, release_gc_roots=True)["plan"] == []

    # lease_max_age: both leases go, and with them what only they kept (the flat one's blob and chain, the plain one's two blobs)
    plan, removed, collection, really, after = round_trip(ansible, runtime, lease_max_age="1s")
    assert removed == {("lease", t, "flat-lease"), ("lease", t, "plain-lease")}
    assert collection == really, "predicted only: %s; collected only: %s" % (sorted(collection - really), sorted(really - collection))
    assert {("content", t, names[k]) for k in ("flat_kept", "plain_held", "plain_referenced")} | {snap(t, k) for k in names["flat_chain"]} <= really
    assert {("image", t, "docker.io/library/gc-kept:1"), ("content", t, names["container_blob"])} | {snap(t, k) for k in names["image_chain"]} <= after
