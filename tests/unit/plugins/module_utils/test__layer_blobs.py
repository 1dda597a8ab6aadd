# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The compressed layer blobs of unpacked images: which images are unpacked, which references go, which blobs containerd's
collection then frees; the disk_usage category and storage_gc's layer_blob steps, on inventories labelled as containerd's
pull and unpacker label them (1.6, 1.7 and 2.x alike)."""

import json

import pytest

from ansible_collections.kubenode.gc.plugins.module_utils.storage import _layer_blobs as L
from ansible_collections.kubenode.gc.plugins.module_utils.storage import _storage_policy as P

NOW = 1_800_000_000 * 10**9
SN = "overlayfs"
K8S = "k8s.io"
LAYER = "containerd.io/gc.ref.content.l."
CONFIG = "containerd.io/gc.ref.content.config"


def blob(size, **labels):
    return {"size": size, "labels": dict(labels), "created_ns": NOW - 600 * 10**9}


def snap(parent="", kind=3, size=1000):
    return {"size": size, "parent": parent, "kind": kind, "labels": {}, "created_ns": NOW}


def ns(images=(), content=None, snapshots=None, leases=(), containers=()):
    return {"images": [{"name": n, "target": t, "labels": {}} for n, t in images], "content": dict(content or {}),
            "snapshots": dict(snapshots or {}), "leases": list(leases), "containers": list(containers), "ingests": [], "sandboxes": []}


def pulled(rec, name, layers, unpacked_in=(SN,), sizes=None, manifest=None):
    """Add an image as a CRI pull leaves it: manifest -> config and layers (gc.ref.content.*), each layer a snapshot
    (chain ids), the config labelled gc.ref.snapshot.<s> with the top chain id for each snapshotter it was unpacked in.
    Layers given as digests; a layer shared with another image is simply named again. Returns the manifest digest."""
    manifest = manifest or "m-" + name
    config = "c-" + name
    labels = {CONFIG: config}
    chain = ""
    for n, layer in enumerate(layers):
        labels["%s%d" % (LAYER, n)] = layer
        rec["content"].setdefault(layer, blob((sizes or {}).get(layer, 1000 + n)))
        parent, chain = chain, (chain + "+" if chain else "ch:") + layer
        for s in unpacked_in:
            rec["snapshots"].setdefault((s, chain), snap(parent))
    rec["content"][manifest] = blob(500, **labels)
    rec["content"][config] = blob(50, **{"containerd.io/gc.ref.snapshot." + s: chain for s in unpacked_in})
    rec["images"] += [{"name": name, "target": manifest, "labels": {}}, {"name": "sha256:" + config, "target": manifest, "labels": {}}]
    return manifest


def node(**namespaces):
    inv = {K8S: ns()}
    inv.update(namespaces)
    return inv


def test_the_cris_snapshotters_come_from_its_status_or_its_image_filesystem():
    handlers = {"runc": {"snapshotter": ""}, "kata": {"snapshotter": "devmapper"}}
    v1 = {"config": json.dumps({"containerd": {"snapshotter": "overlayfs", "runtimes": handlers}})}
    assert L.cri_snapshotters(v1, ["/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs"]) == (["devmapper", "overlayfs"], "status")
    # containerd 2.x: no snapshotter in its CRI Status; its image filesystems are its snapshotters' roots, every one counts
    v2 = {"config": json.dumps({"containerd": {"runtimes": {"runc": {"snapshotter": ""}}}})}
    assert L.cri_snapshotters(v2, ["/var/lib/containerd/io.containerd.snapshotter.v1.native/"]) == (["native"], "imagefs")
    assert L.cri_snapshotters(v2, ["/d/io.containerd.snapshotter.v1.native", "/d/io.containerd.snapshotter.v1.overlayfs"]) == (
        ["native", "overlayfs"], "imagefs")
    assert L.cri_snapshotters({"config": "not json"}, ["/srv/images"]) == ([], None)
    assert L.cri_snapshotters({}, []) == ([], None)


def test_an_unpacked_images_layer_blobs_go_with_its_layer_references_only():
    inv = node()
    m = pulled(inv[K8S], "app:1", ["l-a", "l-b"], sizes={"l-a": 3000, "l-b": 7000})
    d = L.discard(inv, [SN], NOW)
    assert d.labels == {m: [LAYER + "0", LAYER + "1"]}
    assert d.blobs == {"l-a": ["app:1"], "l-b": ["app:1"]}
    # the manifest, config and snapshots stay: only the layer references are gone from the inventory as it will be
    assert d.inventory[K8S]["content"][m]["labels"] == {CONFIG: "c-app:1"}
    assert inv[K8S]["content"][m]["labels"][LAYER + "0"] == "l-a"  # the input is left as it was

    cats = P.attribute(inv, 10**6, [], [], NOW, snapshotters=[SN])
    assert cats["unpacked_layer_blobs"]["bytes"] == 10000
    assert cats["unpacked_layer_blobs"]["objects"][0] == {"namespace": K8S, "id": "l-b", "bytes": 7000, "images": ["app:1"]}
    assert cats["k8s_images"]["bytes"] == 500 + 50 + 2 * 1000  # manifest, config and the two snapshots
    assert sum(c["bytes"] for c in cats.values()) == 10**6
    # without the CRI's snapshotter nothing counts as unpacked
    assert P.attribute(inv, 10**6, [], [], NOW)["unpacked_layer_blobs"]["bytes"] == 0


@pytest.mark.parametrize("case", ["no_label", "other_snapshotter", "missing_parent", "active", "shallow", "no_config", "handler"])
def test_an_image_not_unpacked_in_every_cri_snapshotter_keeps_its_blobs(case):
    inv = node()
    snapshotters = [SN]
    m = pulled(inv[K8S], "app:1", ["l-a", "l-b"], unpacked_in=("native",) if case == "other_snapshotter" else (SN,))
    rec = inv[K8S]
    if case == "no_label":  # fetched, never unpacked (ctr content fetch, an import with --no-unpack)
        rec["content"]["c-app:1"]["labels"] = {}
    elif case == "missing_parent":
        del rec["snapshots"][(SN, "ch:l-a")]
    elif case == "active":
        rec["snapshots"][(SN, "ch:l-a+l-b")]["kind"] = 2
    elif case == "shallow":  # a label naming a chain shorter than the manifest's layers
        rec["content"]["c-app:1"]["labels"]["containerd.io/gc.ref.snapshot." + SN] = "ch:l-a"
    elif case == "no_config":
        del rec["content"]["c-app:1"]
    elif case == "handler":  # a runtime handler's snapshotter the image was never unpacked in
        snapshotters = [SN, "devmapper"]
    assert L.candidates(inv, snapshotters) == {}
    d = L.discard(inv, snapshotters, NOW)
    assert d.labels == {} and d.blobs == {} and d.inventory is inv
    assert rec["content"][m]["labels"][LAYER + "1"] == "l-b"


class _CountingSnapshots(dict):
    """The snapshots of a namespace, counting each key's lookups."""

    def __init__(self, *args):
        super().__init__(*args)
        self.asked = {}

    def get(self, key, default=None):
        self.asked[key] = self.asked.get(key, 0) + 1
        return super().get(key, default)


def test_images_sharing_lower_layers_walk_each_snapshot_once_and_get_the_depths_of_whole_walks():
    inv = node()
    rec = inv[K8S]
    base = ["l-%d" % n for n in range(9)]
    for n in range(30):  # thirty images on one nine-layer base, each with a top layer of its own
        pulled(rec, "app-%d:1" % n, base + ["top-%d" % n])
    pulled(rec, "short:1", base[:4])
    pulled(rec, "broken:1", base + ["gone"])
    del rec["snapshots"][(SN, "ch:" + "+".join(base + ["gone"]))]  # its top snapshot is absent: not unpacked
    pulled(rec, "loop:1", ["x-1", "x-2"])
    rec["snapshots"][(SN, "ch:x-1")]["parent"] = "ch:x-1+x-2"  # a chain that loops: not unpacked
    whole = {m: L.unpacked(rec, m, [SN]) for m in rec["content"] if m.startswith("m-")}  # each walk on its own
    rec["snapshots"] = _CountingSnapshots(rec["snapshots"])
    memo = {}
    assert {m: L.unpacked(rec, m, [SN], memo) for m in sorted(whole)} == whole
    assert whole["m-app-0:1"] and whole["m-short:1"] and not whole["m-broken:1"] and not whole["m-loop:1"]
    assert max(rec["snapshots"].asked.values()) == 1
    assert memo[(SN, "ch:" + "+".join(base))] == 9 and memo[(SN, "ch:" + "+".join(base + ["top-7"]))] == 10
    rec["snapshots"] = dict(rec["snapshots"])
    assert sorted(L.candidates(inv, [SN])) == sorted(m for m, ok in whole.items() if ok)


def test_a_blob_shared_with_an_image_not_unpacked_stays_with_the_reference_to_it():
    inv = node()
    m = pulled(inv[K8S], "app:1", ["l-base", "l-app"])
    pulled(inv[K8S], "fetched:1", ["l-base", "l-other"], unpacked_in=())  # fetched without unpack
    d = L.discard(inv, [SN], NOW)
    assert d.blobs == {"l-app": ["app:1"]} and d.labels == {m: [LAYER + "1"]}
    plan = P.plan(inv, [], None, None, None, NOW, discard_snapshotters=[SN])
    assert [(s["kind"], s["id"], s["bytes"]) for s in plan] == [("layer_blob", "l-app", 1001)]
    assert plan[0]["labels"] == [(m, LAYER + "1")] and plan[0]["images"] == ["app:1"]


def test_a_blob_two_unpacked_images_share_goes_once_with_both_references():
    inv = node()
    m1 = pulled(inv[K8S], "app:1", ["l-base", "l-1"])
    m2 = pulled(inv[K8S], "app:2", ["l-base", "l-2"])
    d = L.discard(inv, [SN], NOW)
    assert d.blobs == {"l-base": ["app:1", "app:2"], "l-1": ["app:1"], "l-2": ["app:2"]}
    plan = P.plan(inv, [], None, None, None, NOW, discard_snapshotters=[SN])
    base = next(s for s in plan if s["id"] == "l-base")
    assert base["labels"] == [(m1, LAYER + "0"), (m2, LAYER + "0")] and base["bytes"] == 1000
    assert sum(s["bytes"] for s in plan) == 1000 + 1001 + 1001


def test_an_index_is_unpacked_when_every_manifest_it_names_is():
    inv = node()
    rec = inv[K8S]
    amd = pulled(rec, "amd", ["l-amd"], manifest="m-amd")
    arm = pulled(rec, "arm", ["l-arm"], manifest="m-arm")
    rec["images"] = [{"name": "multi:1", "target": "index", "labels": {}}]
    rec["content"]["index"] = blob(300, **{"containerd.io/gc.ref.content.m.0": amd, "containerd.io/gc.ref.content.m.1": arm})
    assert L.discard(inv, [SN], NOW).blobs == {"l-amd": ["multi:1"], "l-arm": ["multi:1"]}
    # the arm manifest's config was fetched but never unpacked (another platform): the whole image keeps its blobs
    rec["content"]["c-arm"]["labels"] = {}
    assert L.discard(inv, [SN], NOW).blobs == {}
    # a manifest the index names that is absent: the image is not complete, nothing goes
    rec["content"]["c-arm"]["labels"] = {"containerd.io/gc.ref.snapshot." + SN: "ch:l-arm"}
    del rec["content"][arm]
    assert L.manifests(rec["content"], "index") is None and L.discard(inv, [SN], NOW).blobs == {}


def test_a_manifest_an_image_not_unpacked_reaches_keeps_its_references():
    """The same manifest as an image of its own (unpacked) and inside an index whose other manifest is not unpacked."""
    inv = node()
    rec = inv[K8S]
    amd = pulled(rec, "amd:1", ["l-amd"], manifest="m-amd")
    arm = pulled(rec, "arm", ["l-arm"], manifest="m-arm")
    rec["content"]["c-arm"]["labels"] = {}
    rec["images"] = [i for i in rec["images"] if i["name"] != "arm"]
    rec["images"].append({"name": "multi:1", "target": "index", "labels": {}})
    rec["content"]["index"] = blob(300, **{"containerd.io/gc.ref.content.m.0": amd, "containerd.io/gc.ref.content.m.1": arm})
    assert L.candidates(inv, [SN]) == {}
    assert L.discard(inv, [SN], NOW).blobs == {}


def test_blobs_something_else_keeps_stay():
    inv = node(moby=ns(images=[("busy:1", "m-busy")]))
    rec = inv[K8S]
    pulled(rec, "app:1", ["l-shared", "l-leased", "l-labelled", "l-free"])
    # the same blob held in another namespace (one file for both): the moby image keeps it
    inv["moby"]["content"]["m-busy"] = blob(400, **{CONFIG: "c-busy", LAYER + "0": "l-shared"})
    inv["moby"]["content"]["c-busy"] = blob(40)
    inv["moby"]["content"]["l-shared"] = blob(1000)
    rec["leases"].append({"id": "pull", "created_ns": NOW, "labels": {}, "resources": [("content", "l-leased")]})
    rec["containers"].append({"id": "c", "image": "app:1", "snapshotter": "", "snapshot_key": "",
                              "labels": {"containerd.io/gc.ref.content.x": "l-labelled"}})
    d = L.discard(inv, [SN], NOW)
    assert d.blobs == {"l-free": ["app:1"]} and d.labels == {"m-app:1": [LAYER + "3"]}
    # once the moby image goes in the same run, the shared blob goes too
    plan = P.plan(inv, ["moby"], None, None, None, NOW, discard_snapshotters=[SN])
    layers = {s["id"]: s["bytes"] for s in plan if s["kind"] == "layer_blob"}
    assert layers == {"l-free": 1003, "l-shared": 0}
    # the shared blob's bytes are on its last record (moby's), once
    assert [s["bytes"] for s in plan if s["kind"] == "content" and s["id"] == "l-shared"] == [1000]


def test_references_to_absent_blobs_are_nothing_to_do():
    """After a pull again containerd puts the references back, naming blobs that stay absent."""
    inv = node()
    m = pulled(inv[K8S], "app:1", ["l-a"])
    del inv[K8S]["content"]["l-a"]
    assert inv[K8S]["content"][m]["labels"][LAYER + "0"] == "l-a"
    assert L.candidates(inv, [SN]) == {} and L.discard(inv, [SN], NOW).labels == {}
    assert P.plan(inv, [], None, None, None, NOW, discard_snapshotters=[SN]) == []


def test_other_namespaces_images_are_never_touched():
    inv = node(default=ns())
    pulled(inv["default"], "ctr:1", ["l-a"])
    assert L.discard(inv, [SN], NOW).blobs == {}
    assert P.attribute(inv, 10**6, [], [], NOW, snapshotters=[SN])["unpacked_layer_blobs"]["bytes"] == 0


def test_the_plan_keeps_its_other_steps_and_adds_up():
    from tests.unit.plugins.module_utils.test__storage_policy import inventory

    inv = inventory()
    plain = P.plan(inv, ["moby"], None, 1, None, NOW)
    both = P.plan(inv, ["moby"], None, 1, None, NOW, discard_snapshotters=[SN])
    # k-layer is unpacked (its config names k-top, whose chain is two snapshots deep); "shared" goes with moby's image
    assert [(s["kind"], s["id"]) for s in both if s["kind"] == "layer_blob"] == [("layer_blob", "k-layer"), ("layer_blob", "shared")]
    # the same other steps; the blob shared with moby's image now goes from both namespaces, its bytes on moby's record
    assert [dict(s, bytes=None) for s in both if s["kind"] != "layer_blob"] == [dict(s, bytes=None) for s in plain]
    assert [s["bytes"] for s in both if s["id"] == "shared"] == [0, 1000]
    assert sum(s["bytes"] for s in both) == sum(s["bytes"] for s in plain) + 500 + 1000
    assert [s["kind"] for s in both].index("layer_blob") > [s["kind"] for s in both].index("image")
