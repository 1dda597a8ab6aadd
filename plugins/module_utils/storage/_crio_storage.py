# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""cri-o's containers/storage as its own JSON files show it, read only, and its attribution (pure).

containers/storage keeps its metadata in ``<root>/overlay-images/images.json``,
``<root>/overlay-layers/layers.json`` (and ``volatile-layers.json``) and
``<root>/overlay-containers/containers.json`` (and ``volatile-containers.json``), where root is the
graphroot, or the imagestore for images and their layers when the image filesystem is split. The
roots are the parents of the mountpoints cri-o reports in ImageFsInfo. Nothing is locked or written:
a file rewritten while it is read is read again once, then reported as not readable.
"""

from __future__ import annotations

import json
import os

from ansible_collections.kubenode.gc.plugins.module_utils.storage import _storage_policy

FILES = {
    "images": ("overlay-images/images.json",),
    "layers": ("overlay-layers/layers.json", "overlay-layers/volatile-layers.json"),
    "containers": ("overlay-containers/containers.json", "overlay-containers/volatile-containers.json"),
}
MAX_FILE_BYTES = 256 * 1024 * 1024


def roots(mountpoints):
    """The storage roots behind ImageFsInfo mountpoints (``<root>/overlay-images`` -> ``<root>``), deduplicated, in order."""
    out = []
    for mountpoint in mountpoints:
        root = os.path.dirname(mountpoint.rstrip("/")) if os.path.basename(mountpoint.rstrip("/")).startswith("overlay-") else mountpoint
        if root not in out:
            out.append(root)
    return out


def _load(path):
    for _attempt in range(2):
        try:
            if os.path.getsize(path) > MAX_FILE_BYTES:
                return None
            with open(path, "rb") as f:
                data = json.loads(f.read().decode("utf-8"))
            return data if isinstance(data, list) else []
        except FileNotFoundError:
            return []
        except (OSError, ValueError):
            continue
    return None


def read(storage_roots):
    """{"images": [...], "layers": {id: record}, "containers": [...], "unreadable": [paths]} over every root."""
    out = {"images": [], "layers": {}, "containers": [], "unreadable": []}
    for root in storage_roots:
        for kind, names in FILES.items():
            for name in names:
                path = os.path.join(root, name)
                records = _load(path)
                if records is None:
                    out["unreadable"].append(path)
                    continue
                for rec in records:
                    if not isinstance(rec, dict) or not rec.get("id"):
                        continue
                    if kind == "layers":
                        out["layers"].setdefault(rec["id"], rec)
                    else:
                        out[kind].append(rec)
    return out


def _chain(layers, top):
    seen = []
    while top and top in layers and top not in seen:
        seen.append(top)
        top = layers[top].get("parent")
    return seen


# containers/storage keeps a pulled layer unpacked only (its diff, and the tar-split that rebuilds its tar stream), never
# the compressed blob the registry served: cri-o has no second copy of an image to free
def no_compressed_layers():
    """cri-o's unpacked_layer_blobs: nothing."""
    return {"bytes": 0, "objects": []}


def attribute(storage, used_bytes, writable, logs):
    """The categories cri-o lets the module see: k8s_images (layers, uncompressed ``diff-size``, plus each image's own
    data such as manifest and config), writable_layers (the CRI's), container_logs, unreferenced_snapshots (layers
    no image or container reaches) and unaccounted; unpacked_layer_blobs is 0 (no_compressed_layers); the others are None."""
    layers = storage["layers"]
    claimed = set()
    images = []
    for img in sorted(storage["images"], key=lambda i: ((i.get("names") or [i["id"]])[0])):
        size = 0
        tops = [img.get("layer")] + list(img.get("mapped-top-layers") or [])
        for top in tops:
            for lid in _chain(layers, top):
                if lid not in claimed:
                    claimed.add(lid)
                    size += int(layers[lid].get("diff-size") or 0)
        size += sum(int(v or 0) for v in (img.get("big-data-sizes") or {}).values())
        images.append({"namespace": None, "name": (img.get("names") or [img["id"]])[0], "id": img["id"], "bytes": size})
    for c in storage["containers"]:
        claimed.update(_chain(layers, c.get("layer")))
    unreferenced = [{"namespace": None, "id": lid, "bytes": int(rec.get("diff-size") or 0)} for lid, rec in sorted(layers.items()) if lid not in claimed]
    cats = {"k8s_images": images, "writable_layers": writable, "container_logs": logs or [], "unreferenced_snapshots": unreferenced}
    result = {}
    for name in _storage_policy.CATEGORIES:
        if name in cats:
            result[name] = _storage_policy.summarise(cats[name])
        elif name == "unpacked_layer_blobs":
            result[name] = no_compressed_layers()
        else:
            result[name] = None
    result["unaccounted"] = {"bytes": used_bytes - sum(c["bytes"] for c in result.values() if c), "objects": []}
    return result
