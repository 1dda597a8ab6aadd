# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""PURE the compressed layer blobs of unpacked images, and the references whose removal frees them (no I/O, no clock).

What containerd does: a pull labels each manifest with one ``containerd.io/gc.ref.content.l.<n>`` per layer blob (and
``...config`` for its config); its unpacker applies every layer into a snapshot of the snapshotter it unpacks into, then,
last, labels the config ``containerd.io/gc.ref.snapshot.<snapshotter>`` with the chain ID of the top layer, which keeps
the whole snapshot chain for as long as the image is kept. With ``discard_unpacked_layers`` set, containerd's CRI pulls
with ``ChildGCLabelsFilterLayers`` (1.6, 1.7, 2.x alike): the manifest gets no ``l.<n>`` label, so nothing references
the layer blobs and containerd's garbage collector frees them; the manifest, the config and the snapshots stay.

Here the same, after the pull: the manifests' ``l.<n>`` labels are the references to remove.

An image of ``k8s.io`` is unpacked when every manifest its target reaches (itself, or those its index names, through
nested indexes) that names layers names its config, and that config carries ``containerd.io/gc.ref.snapshot.<s>``,
for every snapshotter ``s`` the CRI unpacks into, naming a committed snapshot of ``k8s.io`` in ``s`` whose chain of
parents, every one present and committed, is at least as deep as the manifest's layers. That label is what the unpacker
writes once every layer is in, and what keeps the chain while the image is kept; ``containerd.io/uncompressed`` is
not used, as the unpacker skips it for a layer whose snapshot already existed. A blob on the way that is absent, a
manifest without its config, or a config unpacked in another snapshotter only: the image is not unpacked.

A manifest's labels are removed only when every image of ``k8s.io`` that reaches it is unpacked, and only those that
name a blob that then goes: containerd's collector model (_containerd_collector) says which blobs nothing else keeps
once those labels are gone (a blob another image, namespace, lease, container or label still references stays, with
the label to it). Only blobs that exist count: after a pull again, the labels name blobs that stay absent.
"""

from __future__ import annotations

import json
import os

from ansible_collections.kubenode.gc.plugins.module_utils.containerd import _containerd_collector as gc

CRI_NAMESPACE = "k8s.io"
REF_LAYER = "containerd.io/gc.ref.content.l."
REF_CONFIG = "containerd.io/gc.ref.content.config"
REF_SNAPSHOT = gc.REF_SNAPSHOT
COMMITTED = 3  # containerd's snapshots.Kind COMMITTED
SNAPSHOTTER_ROOT_PREFIX = "io.containerd.snapshotter.v1."
# the warning when cri_snapshotters() cannot tell: the endpoint, then what the module does not do
NO_SNAPSHOTTER = ("containerd at %s does not say which snapshotter its CRI unpacks images into (neither its CRI Status nor its image "
                  "filesystem names one), so no image counts as unpacked: %s.")


def cri_snapshotters(status_info, imagefs_mountpoints):
    """The snapshotters containerd's CRI unpacks images into, sorted, and where the default one was read.

    The default one: ``containerd.snapshotter`` of the verbose CRI Status info's config (containerd 1.x), else the names
    of the image filesystems the CRI reports (``imagefs_mountpoints``, ``<root>/io.containerd.snapshotter.v1.<name>``:
    2.x reports each of its snapshotters' roots there, in no fixed order, so every one counts); plus the
    ``snapshotter`` of every runtime handler the config names (1.7, 2.x), which the CRI unpacks into for the pods of
    that handler. ([], None) when the default one cannot be told."""
    config = _json((status_info or {}).get("config"))
    containerd = config.get("containerd") if isinstance(config.get("containerd"), dict) else {}
    default, source = containerd.get("snapshotter"), "status"
    names = {default} if isinstance(default, str) and default else set()
    if not names:
        source = "imagefs"
        for mountpoint in imagefs_mountpoints or ():
            base = os.path.basename(os.path.normpath(mountpoint or ""))
            if base.startswith(SNAPSHOTTER_ROOT_PREFIX) and base[len(SNAPSHOTTER_ROOT_PREFIX):]:
                names.add(base[len(SNAPSHOTTER_ROOT_PREFIX):])
    if not names:
        return [], None
    handlers = list((containerd.get("runtimes") or {}).values()) if isinstance(containerd.get("runtimes"), dict) else []
    handlers += [containerd.get(k) for k in ("defaultRuntime", "untrustedWorkloadRuntime")]
    for handler in handlers:
        if isinstance(handler, dict) and isinstance(handler.get("snapshotter"), str) and handler["snapshotter"]:
            names.add(handler["snapshotter"])
    return sorted(names), source


def _json(raw):
    try:
        data = json.loads(raw) if raw else None
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def layer_labels(labels):
    """{label key: digest} of a manifest's layer references."""
    return {k: v for k, v in labels.items() if k.startswith(REF_LAYER) and v}


def _is_manifest(labels):
    return REF_CONFIG in labels or any(k.startswith(REF_LAYER) for k in labels)


def _children(labels):
    """The blobs an index names (its manifests and nested indexes), not configs or layers."""
    return [v for k, v in sorted(labels.items()) if v and k != REF_CONFIG and not k.startswith(REF_LAYER)
            and (k == gc.REF_CONTENT or k[len(gc.REF_CONTENT):len(gc.REF_CONTENT) + 1] in (".", "/") and k.startswith(gc.REF_CONTENT))]


def manifests(content, target):
    """The manifests an image's target reaches (itself, or those its index names, through nested indexes), or None when
    a blob on the way is absent."""
    out, todo, seen = [], [target], set()
    while todo:
        digest = todo.pop()
        if digest in seen:
            continue
        seen.add(digest)
        info = content.get(digest)
        if info is None:
            return None
        if _is_manifest(info["labels"]):
            out.append(digest)
        else:
            todo += _children(info["labels"])
    return sorted(out)


def _needed(layers):
    """How deep a manifest's snapshot chain must be: one snapshot per layer it names."""
    indexes = [int(k[len(REF_LAYER):]) + 1 for k in layers if k[len(REF_LAYER):].isdigit()]
    return max([len(layers)] + indexes)


def _depth(snapshots, snapshotter, key, memo):
    """How many committed snapshots the chain from ``key`` down holds, or None when one is absent or not committed (or
    the chain loops). ``memo`` ({(snapshotter, key): depth}) keeps every chain's depth on the way, so images sharing
    their lower layers walk them once."""
    path, seen = [], set()
    while key and (snapshotter, key) not in memo:
        snap = None if key in seen else snapshots.get((snapshotter, key))
        if snap is None or snap.get("kind") != COMMITTED:
            base = None
            break
        seen.add(key)
        path.append(key)
        key = snap["parent"]
    else:
        base = memo[(snapshotter, key)] if key else 0
    for i, walked in enumerate(path):
        memo[(snapshotter, walked)] = None if base is None else base + len(path) - i
    return memo[(snapshotter, path[0])] if path else base


def unpacked(ns, manifest, snapshotters, memo=None):
    """True when the manifest's config names, for every snapshotter of ``snapshotters``, a snapshot chain of ``ns`` deep
    enough for its layers (see the module's docstring); a manifest without layers is unpacked. ``memo``: the chains'
    depths known so far (see ``_depth``)."""
    labels = ns["content"][manifest]["labels"]
    layers = layer_labels(labels)
    if not layers:
        return True
    config = ns["content"].get(labels.get(REF_CONFIG) or "")
    if config is None or not snapshotters:
        return False
    memo = {} if memo is None else memo
    for snapshotter in snapshotters:
        depth = _depth(ns["snapshots"], snapshotter, config["labels"].get(REF_SNAPSHOT + snapshotter) or "", memo)
        if depth is None or depth < _needed(layers):
            return False
    return True


def _groups(ns):
    """k8s.io's images grouped by target: [(shown name, [names], target)]; the name shown is the first that is not an id."""
    groups = {}
    for img in sorted(ns["images"], key=lambda i: i["name"]):
        groups.setdefault(img["target"], []).append(img["name"])
    return sorted((next((n for n in names if not n.startswith("sha256:")), names[0]), names, target) for target, names in groups.items())


def candidates(inventory, snapshotters):
    """{manifest digest: [shown names of the images reaching it]} of the k8s.io manifests whose layer labels may go: every
    image that reaches the manifest is unpacked (all its manifests), and the manifest names at least one layer blob that
    exists."""
    ns = inventory.get(CRI_NAMESPACE)
    if ns is None:
        return {}
    reached, blocked, depths = {}, set(), {}
    for shown, _names, target in _groups(ns):
        found = manifests(ns["content"], target)
        ok = found is not None and all(unpacked(ns, m, snapshotters, depths) for m in found)
        for m in found or ():
            reached.setdefault(m, []).append(shown)
            if not ok:
                blocked.add(m)
    out = {}
    for m, shown in reached.items():
        if m not in blocked and any(d in ns["content"] for d in layer_labels(ns["content"][m]["labels"]).values()):
            out[m] = sorted(shown)
    return out


def _without(inventory, drops):
    """The inventory with the labels ``drops`` ({manifest: [keys]}) removed from k8s.io's manifests (a shallow copy)."""
    ns = dict(inventory[CRI_NAMESPACE])
    content = dict(ns["content"])
    for manifest, keys in drops.items():
        info = dict(content[manifest])
        info["labels"] = {k: v for k, v in info["labels"].items() if k not in keys}
        content[manifest] = info
    ns["content"] = content
    return dict(inventory, **{CRI_NAMESPACE: ns})


class Discard:
    """What discarding the layer blobs of unpacked images does: ``labels`` ({manifest: [label keys]}) to remove;
    ``blobs`` ({digest: sorted shown names of the images whose manifests name it}) that containerd's collection then
    frees; ``inventory``: the inventory as it is once those labels are gone."""

    def __init__(self, labels, blobs, inventory):
        self.labels = labels
        self.blobs = blobs
        self.inventory = inventory


def discard(inventory, snapshotters, now_ns, line=gc.NEWEST, removed=frozenset()):
    """The Discard of the layer blobs of the unpacked images of ``k8s.io`` (see the module's docstring), once the roots
    ``removed`` (nodes, as _containerd_collector's ``skip``) are gone too.

    A blob counts when containerd's collection would then remove every record of it, in every namespace (the blob is one
    file for them all); the labels removed are only those naming such a blob."""
    found = candidates(inventory, snapshotters)
    if not found:
        return Discard({}, {}, inventory)
    content = inventory[CRI_NAMESPACE]["content"]
    named = {}  # digest -> [(manifest, key)]
    for m in sorted(found):
        for key, digest in sorted(layer_labels(content[m]["labels"]).items()):
            if digest in content:
                named.setdefault(digest, []).append((m, key))
    after = _without(inventory, _by_manifest(p for pairs in named.values() for p in pairs))
    kept = gc.marked(after, now_ns, line, removed)
    holders = {}
    for namespace, rec in inventory.items():
        for digest in rec["content"]:
            if digest in named:
                holders.setdefault(digest, []).append(("content", namespace, digest))
    freed = sorted(d for d in named if not any(h in kept for h in holders[d]))
    labels = _by_manifest(p for d in freed for p in named[d])
    blobs = {d: sorted({name for m, _key in named[d] for name in found[m]}) for d in freed}
    return Discard(labels, blobs, _without(inventory, labels) if labels else inventory)


def _by_manifest(pairs):
    out = {}
    for manifest, key in pairs:
        out.setdefault(manifest, []).append(key)
    return {m: sorted(set(keys)) for m, keys in out.items()}
