# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The pure attribution and storage_gc plan on inventories shaped as containerd's GC sees them."""

import pytest

from ansible_collections.kubenode.gc.plugins.module_utils.cri._image_ref import keep_matcher
from ansible_collections.kubenode.gc.plugins.module_utils.storage import _storage_policy as P

SN = "overlayfs"
NOW = 1_800_000_000 * 10**9


def ns(images=(), content=None, snapshots=None, leases=(), containers=(), ingests=(), sandboxes=()):
    return {"images": [{"name": n, "target": t, "labels": {}} for n, t in images], "content": content or {}, "snapshots": snapshots or {},
            "leases": list(leases), "containers": list(containers), "ingests": list(ingests), "sandboxes": list(sandboxes)}


def blob(size, **labels):
    return {"size": size, "labels": labels, "created_ns": NOW - 600 * 10**9}


def snap(size, parent="", **labels):
    return {"size": size, "parent": parent, "kind": 3, "labels": labels, "created_ns": NOW - 60 * 10**9}


def image_ns(prefix, layer_size, snap_size, shared=None):
    """One image: manifest -> config (gc.ref.snapshot to its top snapshot) and a layer; two snapshots."""
    content = {
        prefix + "manifest": blob(100, **{"containerd.io/gc.ref.content.config": prefix + "config", "containerd.io/gc.ref.content.l.0": prefix + "layer"}),
        prefix + "config": blob(10, **{"containerd.io/gc.ref.snapshot.overlayfs": prefix + "top"}),
        prefix + "layer": blob(layer_size),
    }
    if shared:
        content[prefix + "manifest"]["labels"]["containerd.io/gc.ref.content.l.1"] = shared
        content[shared] = blob(1000)
    snapshots = {(SN, prefix + "base"): snap(snap_size), (SN, prefix + "top"): snap(snap_size, parent=prefix + "base")}
    return content, snapshots


def inventory():
    k_content, k_snaps = image_ns("k-", 500, 700, shared="shared")
    m_content, m_snaps = image_ns("m-", 300, 400, shared="shared")
    m_content["leased-blob"] = blob(50)
    m_snaps[(SN, "rooted")] = snap(60, **{"containerd.io/gc.root": "x"})
    m_snaps[(SN, "rooted-child")] = snap(7, parent="rooted")
    k_snaps[(SN, "ctr-rw")] = snap(None, parent="k-top")
    return {
        "k8s.io": ns(images=[("app:1", "k-manifest"), ("sha256:kid", "k-manifest")], content=k_content, snapshots=k_snaps,
                     containers=[{"id": "c1", "image": "app:1", "snapshotter": SN, "snapshot_key": "ctr-rw", "labels": {}}]),
        "moby": ns(images=[("busy:1", "m-manifest")], content=m_content, snapshots=m_snaps,
                   leases=[{"id": "old", "created_ns": NOW - 3600 * 10**9, "labels": {"containerd.io/gc.expire": "2020-01-01T00:00:00Z"},
                            "resources": [("content", "leased-blob"), ("ingests", "ing-1")]}],
                   ingests=[{"ref": "ing-1", "offset": 30, "total": 90, "expected": "", "started_ns": NOW - 7200 * 10**9,
                             "updated_ns": NOW - 7000 * 10**9}]),
    }


def test_attribution_is_disjoint_and_complete():
    inv = inventory()
    writable = [{"namespace": "pods", "id": "c1", "name": "app", "bytes": 11}]
    logs = [{"namespace": "pods", "name": "p", "id": "pods_p_uid", "bytes": 13}]
    cats = P.attribute(inv, 100000, writable, logs, NOW)
    assert list(cats) == list(P.CATEGORIES)
    # the blob shared by both namespaces counts once, in k8s_images
    assert cats["k8s_images"]["bytes"] == 100 + 10 + 500 + 1000 + 700 * 2
    assert cats["k8s_images"]["objects"] == [{"namespace": "k8s.io", "name": "app:1", "id": "k-manifest", "bytes": 3010}]
    assert cats["other_namespace_images"]["bytes"] == 100 + 10 + 300 + 400 * 2
    assert cats["writable_layers"]["bytes"] == 11 and cats["container_logs"]["bytes"] == 13
    assert cats["stale_ingests"]["objects"][0]["bytes"] == 30 and cats["stale_ingests"]["objects"][0]["idle_seconds"] == 7000
    assert cats["leased"]["objects"][0]["bytes"] == 50 and cats["leased"]["objects"][0]["expired"] is True
    # the gc.root snapshot (with its age), then what nothing references: the child of the rooted one
    rest = {o["id"]: o for o in cats["unreferenced_snapshots"]["objects"]}
    assert set(rest) == {"rooted", "rooted-child"} and cats["unreferenced_snapshots"]["bytes"] == 67
    assert rest["rooted"]["gc_root"] is True and rest["rooted"]["age_seconds"] == 60 and rest["rooted"]["kind"] == "snapshot"
    assert rest["rooted-child"]["gc_root"] is False
    assert sum(c["bytes"] for c in cats.values()) == 100000


def test_usage_is_asked_for_all_but_the_cris_writable_layers():
    wanted = P.needs_usage(inventory(), cri_containers={"c1"})
    assert ("k8s.io", SN, "ctr-rw") not in wanted and ("moby", SN, "rooted") in wanted
    assert ("k8s.io", SN, "ctr-rw") in P.needs_usage(inventory())


def test_a_k8s_io_container_outside_the_cri_is_measured_as_a_writable_layer():
    inv = inventory()
    cats = P.attribute(inv, 100000, [], None, NOW)  # the CRI reports no container c1: ctr made it
    assert cats["writable_layers"]["objects"] == [{"namespace": "k8s.io", "id": "c1", "name": "app:1", "bytes": 0}]
    inv["k8s.io"]["snapshots"][(SN, "ctr-rw")]["size"] = 4000
    assert P.attribute(inv, 100000, [], None, NOW)["writable_layers"]["bytes"] == 4000


def test_plan_removes_roots_and_predicts_the_collection():
    inv = inventory()
    steps = P.plan(inv, ["moby"], None, 3600 * 10**9, None, NOW)
    assert [(s["kind"], s["id"]) for s in steps] == [
        ("ingest", "ing-1"), ("lease", "old"), ("image", "busy:1"),
        ("content", "leased-blob"), ("content", "m-config"), ("content", "m-layer"), ("content", "m-manifest"), ("content", "shared"),
        ("snapshot", "m-base"), ("snapshot", "m-top"), ("snapshot", "rooted-child")]
    by_id = {s["id"]: s for s in steps}
    # the blob k8s.io still holds frees nothing; the plan's bytes add up to what goes
    assert by_id["shared"]["bytes"] == 0 and by_id["m-layer"]["bytes"] == 300 and by_id["rooted-child"]["bytes"] == 7
    assert sum(s["bytes"] for s in steps) == 30 + 50 + 100 + 10 + 300 + 400 * 2 + 7
    kept = P.plan(inv, ["moby"], keep_matcher(["busy:*"]), 3600 * 10**9, None, NOW)
    assert ("image", "busy:1") not in [(s["kind"], s["id"]) for s in kept] and "m-top" not in [s["id"] for s in kept]
    young = P.plan(inv, [], None, 8000 * 10**9, None, NOW)
    # the ingest the lease held goes with it (not idle long enough to be aborted: containerd's collection removes it)
    assert [s["kind"] for s in young] == ["lease", "content", "snapshot", "ingest"]


def test_image_used_by_a_container_of_its_namespace_stays():
    inv = inventory()
    inv["moby"]["containers"].append({"id": "d1", "image": "busy:1", "snapshotter": SN, "snapshot_key": "", "labels": {}})
    assert "image" not in [s["kind"] for s in P.plan(inv, ["moby"], None, 0, None, NOW)]


def test_lease_max_age_takes_unexpired_leases():
    inv = inventory()
    inv["moby"]["leases"][0]["labels"] = {}
    assert "lease" not in [s["kind"] for s in P.plan(inv, [], None, 10**18, None, NOW)]
    assert "lease" in [s["kind"] for s in P.plan(inv, [], None, 10**18, 60 * 10**9, NOW)]


@pytest.mark.parametrize("text, expected", [
    ("2026-01-01T00:00:00Z", 1767225600 * 10**9),
    ("2026-01-01T01:00:00.5+01:00", 1767225600 * 10**9 + 500000000),
    ("tomorrow", None),
])
def test_parse_rfc3339(text, expected):
    assert P.parse_rfc3339(text) == expected


def test_gc_root_objects_stay_unless_released():
    inv = inventory()
    assert "rooted" not in [s["id"] for s in P.plan(inv, ["moby"], None, 0, None, NOW)]
    steps = P.plan(inv, ["moby"], None, 0, None, NOW, release_gc_roots=True)
    assert [(s["kind"], s["id"], s.get("snapshotter")) for s in steps if s["id"] == "rooted"] == [("gc_root", "rooted", SN), ("snapshot", "rooted", SN)]
    # a gc.root object something else still references keeps its label
    inv["moby"]["containers"].append({"id": "d1", "image": "", "snapshotter": SN, "snapshot_key": "rooted-child", "labels": {}})
    assert "rooted" not in [s["id"] for s in P.plan(inv, ["moby"], None, 0, None, NOW, release_gc_roots=True)]


def test_a_live_sandboxs_lease_is_never_planned():
    inv = inventory()
    inv["k8s.io"]["leases"].append({"id": "sandbox-1", "created_ns": NOW - 10**12, "labels": {}, "resources": []})
    steps = P.plan(inv, [], None, 10**18, 1, NOW, sandboxes=["sandbox-1"])
    assert "sandbox-1" not in [s["id"] for s in steps]
    assert "sandbox-1" in [s["id"] for s in P.plan(inv, [], None, 10**18, 1, NOW)]


def test_an_unleased_ingest_is_kept_and_the_plan_says_why():
    inv = inventory()
    inv["moby"]["leases"] = []  # ing-1 is held by no lease: whether it has an expiry of its own is not in the API
    steps = P.plan(inv, [], None, 8000 * 10**9, None, NOW)
    assert "ing-1" not in [s["id"] for s in steps]
    (note,) = P.notes(inv, steps)
    assert "ing-1 in namespace moby" in note and "expiry" in note and "aborted pull" in note
    # aborted by the plan (idle longer than ingest_max_age): nothing to say
    steps = P.plan(inv, [], None, 3600 * 10**9, None, NOW)
    assert [s["kind"] for s in steps if s["id"] == "ing-1"] == ["ingest"] and P.notes(inv, steps) == []


@pytest.mark.parametrize("line, kept", [("2.0", False), ("2.2", True), ("2.3", True)])
def test_the_plan_follows_the_release_line(line, kept):
    """containerd 2.3's transfer service stores an extra name of a pulled image expired and back-referencing the first."""
    inv = inventory()
    inv["moby"]["images"].append({"name": "busy:alias", "target": "m-manifest",
                                  "labels": {"containerd.io/gc.bref.image": "busy:1", "containerd.io/gc.expire": "2020-01-01T00:00:00Z"}})
    planned = [(s["kind"], s["id"]) for s in P.plan(inv, [], None, 10**18, None, NOW, line=line)]
    assert (("image", "busy:alias") not in planned) is kept
    # the images of moby go: both names are the module's, and the collection frees the rest
    steps = P.plan(inv, ["moby"], None, 10**18, None, NOW, line=line)
    images = [s for s in steps if s["kind"] == "image"]
    assert [s["id"] for s in images] == ["busy:1", "busy:alias"] and not [s for s in images if s.get(P.COLLECTED)]


@pytest.mark.parametrize("idle_ms, planned", [(1500, True), (1001, True), (1000, False), (500, False)])
def test_ingest_and_lease_ages_are_compared_to_the_nanosecond(idle_ms, planned):
    """ingest_max_age 1s: an ingest idle 1.5 s is older than that (whole seconds would have made it 1 s, not older, and
    kept it up to a second longer than the user asked); likewise a lease's age against lease_max_age."""
    then = NOW - idle_ms * 10**6
    inv = {"moby": ns(ingests=[{"ref": "ing", "offset": 1, "total": 2, "expected": "", "started_ns": then, "updated_ns": then}],
                      leases=[{"id": "l", "created_ns": then, "labels": {}, "resources": []}])}
    kinds = [s["kind"] for s in P.plan(inv, [], None, 10**9, 10**9, NOW)]
    assert ("ingest" in kinds, "lease" in kinds) == (planned, planned)


def shared_inventory():
    """Images that share what they hold: one chain of snapshots and a set of layer blobs reached by many images (some
    through a flat lease first), containers on their tops, a sandbox, leases and a gc.root chain over the images' own."""
    content, snaps, images, containers = {}, {}, [], []
    for n in range(12):
        content["layer-%d" % n] = blob(1000 + n)
        snaps[(SN, "s%d" % n)] = snap(100 + n, parent="s%d" % (n - 1) if n else "")
    for i in range(40):
        depth = i % 12
        layers = {"containerd.io/gc.ref.content.l.%d" % n: "layer-%d" % n for n in range(depth + 1)}
        content["config-%d" % i] = blob(10 + i, **{"containerd.io/gc.ref.snapshot.overlayfs": "top-%d" % i})
        content["manifest-%d" % i] = blob(100 + i, **dict(layers, **{"containerd.io/gc.ref.content.config": "config-%d" % i}))
        snaps[(SN, "top-%d" % i)] = snap(50 + i, parent="s%d" % depth)
        images.append(("app-%d:1" % i, "manifest-%d" % i))
        if i % 3 == 0:
            images.append(("sha256:id-%d" % i, "manifest-%d" % i))
        if i % 5 == 0:
            snaps[(SN, "rw-%d" % i)] = snap(7 + i, parent="top-%d" % i)
            containers.append({"id": "c%d" % i, "image": "app-%d:1" % i, "snapshotter": SN, "snapshot_key": "rw-%d" % i, "labels": {}})
    content["sandbox-spec"] = blob(3, **{"containerd.io/gc.ref.content.l.0": "layer-0"})
    snaps[(SN, "rooted")] = snap(60, parent="s3", **{"containerd.io/gc.root": "x"})
    snaps[(SN, "rooted-child")] = snap(9, parent="rooted")
    content["leased"] = blob(70, **{"containerd.io/gc.ref.content.l.0": "layer-11"})
    leases = [{"id": "flat", "created_ns": NOW - 60 * 10**9, "labels": {"containerd.io/gc.flat": "x"},
               "resources": [("content", "manifest-39"), ("snapshots/overlayfs", "s11")]},
              {"id": "deep", "created_ns": NOW - 60 * 10**9, "labels": {}, "resources": [("content", "leased"), ("snapshots/overlayfs", "top-7")]}]
    m_content, m_snaps = image_ns("m-", 300, 400, shared="layer-4")
    return {
        "k8s.io": ns(images=images, content=content, snapshots=snaps, containers=containers, leases=leases,
                     sandboxes=[{"id": "sb", "labels": {"containerd.io/gc.ref.content.spec": "sandbox-spec"}}]),
        "moby": ns(images=[("busy:1", "m-manifest")], content=m_content, snapshots=m_snaps),
    }


@pytest.mark.parametrize("line", ["1.6", "1.7", "2.0", "2.2"])
def test_each_reach_walks_only_what_no_earlier_one_did_and_the_bytes_are_those_of_whole_reaches(monkeypatch, line):
    inv = shared_inventory()
    reach, references = P.gc.Collector.reach, P.gc.Collector.references
    walked = []

    def counted(self, node, flat=False):
        walked.append((node, flat))
        return references(self, node, flat)

    monkeypatch.setattr(P.gc.Collector, "references", counted)
    pruned = P.objects(inv, NOW, line, cri_containers={"c5"})
    assert len(walked) == len(set(walked))  # every (node, flat) walked once in all
    once = len(walked)
    del walked[:]
    # each reach whole, as containerd's mark sees it from that root: the same bytes, object by object
    monkeypatch.setattr(P.gc.Collector, "reach", lambda self, start, seen=None: reach(self, start))
    assert P.objects(inv, NOW, line, cri_containers={"c5"}) == pruned
    assert len(walked) > 2 * once
    assert pruned["k8s_images"][0]["bytes"] > 0 and sum(o["bytes"] for cat in pruned.values() for o in cat) > 0
