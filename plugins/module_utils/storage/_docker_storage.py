# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""PURE attribution of a Docker Engine's data root to categories, and storage_gc's plan on Docker (no I/O, no clock).

The input is the engine's ``GET /system/df`` (``LayersSize``, ``Images``, ``Containers`` with ``SizeRw``, ``Volumes`` with
``UsageData``, ``BuildCache``), as the Engine API gives it, plus the bytes of each container's log files in the data root
(json-file logs; read by the caller). Every byte counts once:

- ``k8s_images``: every image of the engine (the CRI lists them all), their layers once (``LayersSize``; an image object
  carries the bytes only it holds, ``Size - SharedSize``, and ``shared_bytes``);
- ``writable_layers``: the writable layers (``SizeRw``) of the containers the kubelet created through cri-dockerd (pod
  containers and sandboxes: their ``io.kubernetes.*`` labels);
- ``non_k8s_containers``: the writable layers of every other container (``docker run``, compose, CI), with the container's
  name, image and state;
- ``container_logs``: the containers' log files in the data root (``containers/<id>/<id>-json.log*``, Docker's json-file
  logs, to which the CRI's log paths link), per container;
- ``volumes``: the engine's local volumes (``UsageData.Size``), each with whether a container uses it (``RefCount``) and
  whether it is anonymous;
- ``build_cache``: BuildKit's cache records that no image shares (``Shared`` false: a record an image shares is that
  image's layer, counted in ``k8s_images``), as ``docker system df`` counts them;
- ``unaccounted``: the data root filesystem's used bytes minus all of the above (the engine's own metadata, its
  containerd, files of other programs on that filesystem).

storage_gc's plan on Docker: ``build_cache`` records not used for longer than a maximum age and not in use, children
before their parents (BuildKit removes a record only once no other record holds it), and, when asked, anonymous
``volume`` s no container references. Named volumes are never planned.
"""

from __future__ import annotations

import re

from ansible_collections.kubenode.gc.plugins.module_utils.storage._storage_policy import OBJECTS_SHOWN, parse_rfc3339

CATEGORIES = ("k8s_images", "writable_layers", "non_k8s_containers", "container_logs", "volumes", "build_cache", "unaccounted")
KUBERNETES_LABEL_PREFIX = "io.kubernetes."
# Docker 23+ labels every volume created without a name; 20.10 names it with 64 random hex digits and no label
ANONYMOUS_LABEL = "com.docker.volume.anonymous"
ANONYMOUS_NAME = re.compile(r"^[0-9a-f]{64}$")
STATES = {"running": "running", "paused": "running", "restarting": "running", "created": "created", "exited": "exited", "dead": "exited",
          "removing": "unknown"}


def is_kubernetes(labels):
    return any(key.startswith(KUBERNETES_LABEL_PREFIX) for key in (labels or {}))


def anonymous(volume):
    """Whether a volume was created without a name: Docker 23+'s label, else (20.10) a name of 64 hex digits."""
    labels = volume.get("Labels") or {}
    return ANONYMOUS_LABEL in labels or bool(ANONYMOUS_NAME.match(volume.get("Name") or ""))


def _name(c):
    names = c.get("Names") or []
    return (names[0] if names else "").lstrip("/") or (c.get("Id") or "")[:12]


def _size(value):
    """A size of the Engine API (-1 when not computed) as bytes, never negative."""
    try:
        return max(0, int(value or 0))
    except (TypeError, ValueError):
        return 0


def _top(items, total=None):
    """A category: {"bytes": ``total`` (default: the items' sum), "objects": the OBJECTS_SHOWN largest, largest first}."""
    items = sorted(items, key=lambda o: (-o["bytes"], o.get("name") or "", o.get("id") or ""))
    return {"bytes": sum(o["bytes"] for o in items) if total is None else total, "objects": items[:OBJECTS_SHOWN]}


def attribute(df, used_bytes, logs, pod_logs=()):
    """The data root filesystem's categories.

    ``df``: ``GET /system/df``; ``logs``: {container id: bytes of its log files in the data root}; ``pod_logs``: the
    kubelet's pod log directories on this filesystem ({"namespace", "name", "id", "bytes"}: files there that are not
    links into the data root). Returns {category: {"bytes", "objects"}} in CATEGORIES order; ``unaccounted`` has no
    objects."""
    images = []
    for img in df.get("Images") or []:
        size, shared = _size(img.get("Size")), _size(img.get("SharedSize"))
        tags = [t for t in img.get("RepoTags") or [] if t != "<none>:<none>"]
        images.append({"name": tags[0] if tags else None, "id": img.get("Id"), "bytes": max(0, size - shared), "shared_bytes": shared,
                       "containers": _size(img.get("Containers"))})
    layers = df.get("LayersSize")
    k8s, other, logged = [], [], []
    for c in df.get("Containers") or []:
        labels = c.get("Labels") or {}
        item = {"id": c.get("Id"), "name": _name(c), "bytes": _size(c.get("SizeRw"))}
        if is_kubernetes(labels):
            item["namespace"] = labels.get("io.kubernetes.pod.namespace")
            item["pod"] = labels.get("io.kubernetes.pod.name")
            k8s.append(item)
        else:
            item.update(image=c.get("Image"), state=STATES.get((c.get("State") or "").lower(), "unknown"))
            other.append(item)
        if c.get("Id") in logs:
            logged.append({"id": c.get("Id"), "name": _name(c), "namespace": labels.get("io.kubernetes.pod.namespace"),
                           "kubernetes": is_kubernetes(labels), "bytes": logs[c.get("Id")]})
    volumes = []
    for v in df.get("Volumes") or []:
        usage = v.get("UsageData") or {}
        volumes.append({"name": v.get("Name"), "bytes": _size(usage.get("Size")), "in_use": _size(usage.get("RefCount")) > 0,
                        "anonymous": anonymous(v), "driver": v.get("Driver")})
    cache = [{"id": r.get("ID"), "type": r.get("Type"), "bytes": _size(r.get("Size")), "in_use": bool(r.get("InUse")),
              "last_used": r.get("LastUsedAt")} for r in df.get("BuildCache") or [] if not r.get("Shared")]
    result = {
        "k8s_images": _top(images, total=_size(layers) if layers is not None else None),
        "writable_layers": _top(k8s),
        "non_k8s_containers": _top(other),
        "container_logs": _top(logged + [dict(p, kubernetes=True) for p in pod_logs if p.get("bytes")]),
        "volumes": _top(volumes),
        "build_cache": _top(cache),
    }
    result["unaccounted"] = {"bytes": used_bytes - sum(c["bytes"] for c in result.values()), "objects": []}
    return result


def _children_first(records):
    """Build cache records ordered so that each comes before its parents (BuildKit keeps a parent while a child holds it)."""
    by_id = {r["ID"]: r for r in records}
    depth = {}

    def level(rid, seen=()):
        if rid in depth:
            return depth[rid]
        parent = by_id.get(rid, {}).get("Parent") or ""
        parents = [parent] if parent else list(by_id.get(rid, {}).get("Parents") or [])
        value = 1 + max([level(p, seen + (rid,)) for p in parents if p in by_id and p not in seen] or [0])
        depth[rid] = value
        return value

    return sorted(records, key=lambda r: (-level(r["ID"]), r["ID"]))


def plan(df, now_ns, build_cache_max_age_ns=None, remove_unused_volumes=False):
    """storage_gc's plan on Docker: [{kind, id, bytes}], build cache records first (children before parents), then volumes.

    - ``build_cache``: records last used longer than ``build_cache_max_age_ns`` ago (None: none), not in use, and held
      by no record that stays (a record whose child stays is kept too); ``bytes`` the record's size when no image shares
      it, else 0 (its bytes are that image's layer and stay with it);
    - ``volume`` (with ``remove_unused_volumes``): anonymous volumes (see anonymous()) no container references
      (``RefCount`` 0), of the ``local`` driver; ``bytes`` their usage. Named volumes never."""
    steps = []
    if build_cache_max_age_ns is not None:
        records = list(df.get("BuildCache") or [])
        old = {}
        for r in records:
            last = parse_rfc3339(r.get("LastUsedAt") or r.get("CreatedAt") or "")
            if last is not None and now_ns - last > build_cache_max_age_ns and not r.get("InUse"):
                old[r["ID"]] = r
        # a record some staying record holds as its parent stays too (repeated: the holder may itself stay)
        changed = True
        while changed:
            changed = False
            for r in records:
                if r["ID"] in old:
                    continue
                for parent in ([r.get("Parent")] if r.get("Parent") else []) + list(r.get("Parents") or []):
                    if parent in old:
                        del old[parent]
                        changed = True
        for r in _children_first(list(old.values())):
            steps.append({"kind": "build_cache", "id": r["ID"], "bytes": 0 if r.get("Shared") else _size(r.get("Size"))})
    if remove_unused_volumes:
        for v in sorted(df.get("Volumes") or [], key=lambda v: v.get("Name") or ""):
            usage = v.get("UsageData") or {}
            if anonymous(v) and (v.get("Driver") or "local") == "local" and _size(usage.get("RefCount")) == 0 and usage.get("RefCount") is not None:
                steps.append({"kind": "volume", "id": v["Name"], "bytes": _size(usage.get("Size"))})
    return steps
