# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""PURE attribution of a containerd image filesystem to categories, and storage_gc's plan (no I/O, no clock).

The input is an inventory of containerd's metadata, as ``_containerd._inventory`` reads it::

    {namespace: {"images": [{"name", "target", "labels"}],
                 "content": {digest: {"size", "labels", "created_ns"}},
                 "ingests": [{"ref", "offset", "total", "expected", "started_ns", "updated_ns"}],
                 "snapshots": {(snapshotter, key): {"parent", "kind", "labels", "created_ns", "size"}},
                 "leases": [{"id", "created_ns", "labels", "resources": [(type, id)]}],
                 "containers": [{"id", "image", "snapshotter", "snapshot_key", "labels"}],
                 "sandboxes": [{"id", "labels"}]}}

What references what is _containerd_collector's model of containerd's own garbage collector (one
source for both modules). Every byte is counted once, in the first category that claims it, in this
order: unpacked_layer_blobs (the compressed layer blobs of k8s.io's unpacked images that containerd's
collection frees once their manifests' layer references are gone: _layer_blobs), k8s_images,
other_namespace_images, writable_layers, leased, unreferenced_snapshots (first the objects a
``containerd.io/gc.root`` label keeps, then those nothing references). A blob is one file in
the shared content store, so a blob held in k8s.io and in another namespace counts in k8s_images;
snapshots are per namespace on disk; an ingest is per namespace on disk.

storage_gc's plan removes roots and references only (stale ingests, expired or old leases, images of the
listed namespaces and, when asked, the gc.root labels nothing else backs and the layer references of
unpacked images); the blobs and snapshots it lists after them are the collector's prediction of what
containerd's own collection then frees.
"""

from __future__ import annotations

from ansible_collections.kubenode.gc.plugins.module_utils.containerd import _containerd_collector as gc
from ansible_collections.kubenode.gc.plugins.module_utils.storage import _layer_blobs

CRI_NAMESPACE = "k8s.io"
CATEGORIES = ("k8s_images", "unpacked_layer_blobs", "other_namespace_images", "writable_layers", "container_logs", "stale_ingests", "leased",
              "unreferenced_snapshots", "unaccounted")
NODEFS_CATEGORIES = ("pod_volumes", "container_logs", "unaccounted")
LEASE_EXPIRE = gc.GC_EXPIRE
GC_ROOT = gc.GC_ROOT
parse_rfc3339 = gc.parse_rfc3339
OBJECTS_SHOWN = 10  # the largest objects listed per category
# the kinds of storage_gc's plan, in the order they come: the roots the module removes, then the labels it removes
# (gc.root labels, then the layer references of unpacked images, each step a layer blob the collection then frees),
# then what containerd's collection frees (predicted)
ROOT_KINDS = ("ingest", "lease", "image")
RELEASE_KIND = "gc_root"
LAYER_KIND = "layer_blob"
COLLECTED_KINDS = ("content", "snapshot")
PLAN_KINDS = ROOT_KINDS + (RELEASE_KIND, LAYER_KIND) + COLLECTED_KINDS
# the key marking a plan step as containerd's collection's (not the module's); internal, not in the module's result
COLLECTED = "collected"


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
    return gc.expired(lease["labels"], now_ns)


class _Claims:
    """Bytes claimed so far: each blob (by digest, one file for every namespace) and snapshot (per namespace) counts once."""

    def __init__(self, inventory):
        self.inventory = inventory
        self.content = set()
        self.snapshots = set()

    def take(self, nodes):
        total = 0
        for node in sorted(nodes):
            if node[0] == "content":
                info = self.inventory[node[1]]["content"].get(node[2])
                if info is not None and node[2] not in self.content:
                    self.content.add(node[2])
                    total += info["size"]
            elif node[0] == "snapshot":
                snap = self.inventory[node[1]]["snapshots"].get(node[2:])
                if snap is not None and node[1:] not in self.snapshots:
                    self.snapshots.add(node[1:])
                    total += snap.get("size") or 0
        return total

    def claimed(self, node):
        return node[2] in self.content if node[0] == "content" else node[1:] in self.snapshots


def summarise(items):
    """A category as returned: {"bytes": the sum, "objects": the OBJECTS_SHOWN largest, largest first}."""
    items = sorted(items, key=lambda o: (-o["bytes"], o.get("namespace") or "", o.get("id") or o.get("name") or ""))
    return {"bytes": sum(o["bytes"] for o in items), "objects": items[:OBJECTS_SHOWN]}


def needs_usage(inventory, cri_containers=()):
    """The snapshots whose size attribution needs (snapshots.Usage): every one but the active snapshots of the
    k8s.io containers in ``cri_containers`` (ids), whose writable layers the CRI's ListContainerStats measures.
    [(namespace, snapshotter, key)]"""
    skip = set()
    for c in inventory.get(CRI_NAMESPACE, {}).get("containers", ()):
        if c["id"] in cri_containers and c["snapshot_key"]:
            skip.add((CRI_NAMESPACE, c["snapshotter"], c["snapshot_key"]))
    out = []
    for namespace in sorted(inventory):
        for ref in sorted(inventory[namespace]["snapshots"]):
            if (namespace,) + ref not in skip:
                out.append((namespace,) + ref)
    return out


def _namespaces(inventory):
    """k8s.io first (its images claim shared blobs), then the others by name."""
    return [n for n in [CRI_NAMESPACE] + sorted(n for n in inventory if n != CRI_NAMESPACE) if n in inventory]


def _age(now_ns, then_ns):
    """Whole seconds since ``then_ns`` (as reported), or None when containerd gave no time."""
    return max(0, (now_ns - then_ns) // 1000000000) if then_ns else None


def _older(now_ns, then_ns, max_age_ns):
    """Whether more than ``max_age_ns`` passed since ``then_ns``, to the nanosecond (False without a limit or a time)."""
    return max_age_ns is not None and bool(then_ns) and now_ns - then_ns > max_age_ns


def objects(inventory, now_ns, line=gc.NEWEST, cri_containers=(), snapshotters=()):
    """Every object of the containerd categories, each with the bytes it alone holds, in claim order:
    {category: [object]}. Image objects carry ``names`` (every record) and ``in_use`` (a container of its
    namespace was created from one of them). The k8s.io containers of ``cri_containers`` (ids) are claimed but
    not listed: the CRI's stats measure their writable layers. ``line``: the collector's release line.
    ``snapshotters``: those the CRI unpacks into (_layer_blobs.cri_snapshotters); none, and no blob is an unpacked
    image's layer blob."""
    claims = _Claims(inventory)
    model = gc.Collector(inventory, now_ns, line)
    # what an earlier reach walked is claimed already: each later reach walks only what is new (the bytes are the same)
    walked = set()
    out = {"k8s_images": [], "unpacked_layer_blobs": [], "other_namespace_images": [], "writable_layers": [], "stale_ingests": [],
           "leased": [], "unreferenced_snapshots": []}
    discard = _layer_blobs.discard(inventory, snapshotters, now_ns, line)
    for digest, images in sorted(discard.blobs.items()):
        size = claims.take([("content", CRI_NAMESPACE, digest)])
        out["unpacked_layer_blobs"].append({"namespace": CRI_NAMESPACE, "id": digest, "bytes": size, "images": images})
    namespaces = _namespaces(inventory)
    for namespace in namespaces:
        ns = inventory[namespace]
        used = {c["image"] for c in ns["containers"]}
        category = "k8s_images" if namespace == CRI_NAMESPACE else "other_namespace_images"
        for shown, names, target in image_groups(ns):
            size = claims.take(model.reach([("image", namespace, n) for n in names], walked))
            out[category].append({"namespace": namespace, "name": shown, "id": target, "bytes": size, "names": names,
                                  "in_use": bool(used & set(names))})
    for namespace in namespaces:
        ns = inventory[namespace]
        for c in ns["containers"]:
            size = claims.take(model.reach([("container", namespace, c["id"])], walked))
            if not (namespace == CRI_NAMESPACE and c["id"] in cri_containers):
                out["writable_layers"].append({"namespace": namespace, "id": c["id"], "name": c["image"], "bytes": size})
        for sb in ns.get("sandboxes", ()):
            size = claims.take(model.reach(model.forward(namespace, sb["labels"]), walked))
            if size:
                out["writable_layers"].append({"namespace": namespace, "id": sb["id"], "name": None, "bytes": size})
    for namespace in namespaces:
        for ing in inventory[namespace]["ingests"]:
            out["stale_ingests"].append({"namespace": namespace, "id": ing["ref"], "bytes": ing["offset"], "total_bytes": ing["total"],
                                         "age_seconds": _age(now_ns, ing["started_ns"]), "idle_seconds": _age(now_ns, ing["updated_ns"])})
    for namespace in namespaces:
        ns = inventory[namespace]
        for lease in sorted(ns["leases"], key=lambda item: item["id"]):
            out["leased"].append({"namespace": namespace, "id": lease["id"], "bytes": claims.take(model.reach(model.lease_held(namespace, lease), walked)),
                                  "expires": lease["labels"].get(LEASE_EXPIRE), "expired": expired(lease, now_ns),
                                  "age_seconds": _age(now_ns, lease["created_ns"])})
    rest = out["unreferenced_snapshots"]
    for gc_root in (True, False):
        for namespace in namespaces:
            for node in _stored(inventory, namespace):
                info = _info(inventory, node)
                if claims.claimed(node) or (gc_root and not model.root_keys(info["labels"])):
                    continue
                size = claims.take(model.reach([node], walked) if gc_root else [node])
                item = {"namespace": namespace, "kind": node[0], "id": node[-1], "bytes": size, "gc_root": gc_root,
                        "age_seconds": _age(now_ns, info.get("created_ns"))}
                if node[0] == "snapshot":
                    item["snapshotter"] = node[2]
                rest.append(item)
    return out


def _stored(inventory, namespace):
    """The blob and snapshot nodes of a namespace."""
    ns = inventory[namespace]
    return [("content", namespace, d) for d in sorted(ns["content"])] + [("snapshot", namespace) + ref for ref in sorted(ns["snapshots"])]


def _info(inventory, node):
    ns = inventory[node[1]]
    return ns["content"][node[2]] if node[0] == "content" else ns["snapshots"][node[2:]]


# keys of objects() that only the plan needs
_INTERNAL = ("names", "in_use")


def attribute(inventory, used_bytes, writable, logs, now_ns, line=gc.NEWEST, snapshotters=()):
    """The image filesystem's categories.

    ``writable``: [{"namespace", "id", "name", "bytes"}] of the CRI's containers (ListContainerStats), whose k8s.io
    containers are not measured again; ``logs``: [{"namespace", "name", "id", "bytes"}] per pod, or None when the logs
    are on another filesystem; ``snapshotters``: those the CRI unpacks images into. Returns {category: {"bytes",
    "objects"}}; ``unaccounted`` has no objects."""
    cats = objects(inventory, now_ns, line, cri_containers={w["id"] for w in writable}, snapshotters=snapshotters)
    cats["writable_layers"] += [dict(w) for w in writable]
    cats["container_logs"] = list(logs or [])
    result = {}
    for name in CATEGORIES[:-1]:
        result[name] = summarise([{k: v for k, v in o.items() if k not in _INTERNAL} for o in cats[name]])
    result["unaccounted"] = {"bytes": used_bytes - sum(c["bytes"] for c in result.values()), "objects": []}
    return result


def nodefs_categories(used_bytes, volumes, logs):
    """The kubelet root filesystem's categories (pod_volumes, container_logs, unaccounted)."""
    result = {"pod_volumes": summarise(volumes), "container_logs": summarise(logs or [])}
    result["unaccounted"] = {"bytes": used_bytes - result["pod_volumes"]["bytes"] - result["container_logs"]["bytes"], "objects": []}
    return result


def plan(inventory, namespaces, keep, ingest_max_age_ns, lease_max_age_ns, now_ns, sandboxes=(), line=gc.NEWEST, release_gc_roots=False,
         discard_snapshotters=None):
    """storage_gc's plan: [{kind, namespace, id, bytes}] (plus ``snapshotter`` for snapshots), in this order:

    - the roots the module removes: ``ingest`` (idle longer than ``ingest_max_age_ns``, in each namespace on its own),
      ``lease`` (expired, or created longer ago than ``lease_max_age_ns`` when set; never the k8s.io lease of a live
      pod sandbox of ``sandboxes``: containerd 2.x holds a pod's image volumes through a lease named after it) and
      ``image`` (every name of the images of ``namespaces`` but k8s.io, except those ``keep`` matches, a predicate on
      {"id", "repo_tags", "repo_digests"}, and those a container of their namespace was created from);
    - with ``release_gc_roots``, ``gc_root``: the blobs and snapshots whose containerd.io/gc.root label is the only
      thing that would keep them once those roots are gone (the module removes the label);
    - with ``discard_snapshotters`` (the snapshotters the CRI unpacks into, _layer_blobs.cri_snapshotters), ``layer_blob``:
      each compressed layer blob of k8s.io's unpacked images that containerd's collection frees once the manifests'
      layer references naming it are gone, with ``images`` (the names of the images whose manifests name it) and
      ``labels`` ([(manifest digest, label key)], the references the module removes);
    - ``content``, ``snapshot`` (and, on 2.x, expired ``image`` records, ``lease`` and ``ingest`` the collector removes
      by itself): what containerd's collection then frees, as the collector model of release line ``line`` predicts it.

    ``bytes`` is what the object itself takes on disk: an ingest's written bytes, a snapshot's usage, a blob's size
    (on its last record: a blob is one file for every namespace); 0 for the records and labels, whose bytes are in
    what the collection frees. So the plan's bytes add up to what the run frees."""
    steps = []
    for namespace in sorted(inventory):
        for ing in inventory[namespace]["ingests"]:
            if _older(now_ns, ing["updated_ns"], ingest_max_age_ns):
                steps.append({"kind": "ingest", "namespace": namespace, "id": ing["ref"], "bytes": ing["offset"]})
    live = {(CRI_NAMESPACE, s) for s in sandboxes}
    for namespace in sorted(inventory):
        for lease in sorted(inventory[namespace]["leases"], key=lambda item: item["id"]):
            if (namespace, lease["id"]) in live:
                continue
            if expired(lease, now_ns) or _older(now_ns, lease["created_ns"], lease_max_age_ns):
                steps.append({"kind": "lease", "namespace": namespace, "id": lease["id"], "bytes": 0})
    wanted = set(namespaces) - {CRI_NAMESPACE}
    for namespace in sorted(wanted & set(inventory)):
        ns = inventory[namespace]
        used = {c["image"] for c in ns["containers"]}
        for _shown, names, target in image_groups(ns):
            if used & set(names):
                continue
            record = {"id": target, "repo_tags": [n for n in names if not n.startswith("sha256:")], "repo_digests": []}
            if keep is not None and keep(record):
                continue
            steps += [{"kind": "image", "namespace": namespace, "id": name, "bytes": 0} for name in names]
    removed = {(s["kind"], s["namespace"], s["id"]) for s in steps}
    if release_gc_roots:
        backed = gc.marked(inventory, now_ns, line, removed, gc_roots=False)
        for namespace in sorted(inventory):
            for node in _stored(inventory, namespace):
                if gc.root_keys(_info(inventory, node)["labels"], line) and node not in backed:
                    steps.append(_step(RELEASE_KIND, node, 0))
                    removed.add(node)
    if discard_snapshotters is None:
        return steps + collection(inventory, now_ns, line, removed)
    discard = _layer_blobs.discard(inventory, discard_snapshotters, now_ns, line, removed)
    labels = {}
    for manifest, keys in discard.labels.items():
        for key in keys:
            labels.setdefault(inventory[CRI_NAMESPACE]["content"][manifest]["labels"][key], []).append((manifest, key))
    layers, rest = [], []
    for step in collection(discard.inventory, now_ns, line, removed):
        if step["kind"] == "content" and step["namespace"] == CRI_NAMESPACE and step["id"] in discard.blobs:
            layers.append(dict(step, kind=LAYER_KIND, images=discard.blobs[step["id"]], labels=sorted(labels[step["id"]])))
        else:
            rest.append(step)
    return steps + layers + rest


def notes(inventory, steps):
    """What a plan of ``steps`` assumes where containerd's API does not show what its collector decides on: [sentence].

    An ingest no lease holds is kept by containerd only when it carries an expiry of its own, which the content API does
    not show; the plan keeps those it does not abort itself (the safe side), and says so."""
    planned = {(s["kind"], s["namespace"], s["id"]) for s in steps}
    ingests = [n for n in gc.uncertain_ingests(inventory) if n not in planned]
    if not ingests:
        return []
    shown = ", ".join("%s in namespace %s" % (n[2], n[1]) for n in ingests[:OBJECTS_SHOWN])
    more = " and %d more" % (len(ingests) - OBJECTS_SHOWN) if len(ingests) > OBJECTS_SHOWN else ""
    return ["No lease holds the ingest%s %s%s, and containerd's API does not show whether %s an expiry of its own: the plan "
            "keeps %s, as containerd does until that expiry; containerd's next garbage collection removes one without "
            "(its lease deleted before this run, as after an aborted pull)." % (
                "s" if len(ingests) > 1 else "", shown, more, "they carry" if len(ingests) > 1 else "it carries",
                "them" if len(ingests) > 1 else "it")]


def _step(kind, node, size):
    step = {"kind": kind, "namespace": node[1], "id": node[-1], "bytes": size}
    if node[0] == "snapshot":
        step["snapshotter"] = node[2]
    return step


def collection(inventory, now_ns, line, removed):
    """What containerd's collection frees once the roots ``removed`` (nodes) are gone: plan steps marked ``COLLECTED``, blobs first."""
    going = gc.collected(inventory, now_ns, line, removed)
    gone = set(going)
    holders = {}
    for namespace in inventory:
        for digest in inventory[namespace]["content"]:
            holders.setdefault(digest, []).append(("content", namespace, digest))
    order = {kind: n for n, kind in enumerate(COLLECTED_KINDS + ROOT_KINDS)}
    offsets = {(namespace, i["ref"]): i["offset"] for namespace in inventory for i in inventory[namespace]["ingests"]}
    steps = []
    for node in sorted(going, key=lambda n: (order[n[0]], n[1:])):
        if node[0] == "content":
            last = all(h in gone for h in holders[node[2]]) and max(holders[node[2]]) == node
            size = inventory[node[1]]["content"][node[2]]["size"] if last else 0
        elif node[0] == "snapshot":
            size = inventory[node[1]]["snapshots"][node[2:]].get("size") or 0
        elif node[0] == "ingest":
            size = offsets.get(node[1:], 0)
        else:
            size = 0
        steps.append(dict(_step(node[0], node, size), **{COLLECTED: True}))
    return steps


def present(inventory):
    """The plan keys (kind, namespace, snapshotter, id) of the blobs, snapshots, leases, ingests and images listed."""
    out = set()
    for namespace, ns in inventory.items():
        out.update(("content", namespace, None, d) for d in ns["content"])
        out.update(("snapshot", namespace, s, k) for s, k in ns["snapshots"])
        out.update(("lease", namespace, None, lease["id"]) for lease in ns["leases"])
        out.update(("ingest", namespace, None, i["ref"]) for i in ns["ingests"])
        out.update(("image", namespace, None, i["name"]) for i in ns["images"])
    return out
