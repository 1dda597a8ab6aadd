# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""The audit report's listed images (kubenode_gc_remove_images, node_audit's listed plan): per node where each listed image
is and which pods use it, the finding ``listed_image_present``, and the fleet-wide view. Pure."""

from __future__ import annotations

from collections.abc import Mapping

from ansible_collections.kubenode.gc.plugins.module_utils.cri._image_ref import display_ref
from ansible_collections.kubenode.gc.plugins.module_utils.gc._image_gc import LISTED_RULES
from ansible_collections.kubenode.gc.plugins.plugin_utils._fleet import as_int

UNUSED = "unused"  # no container uses it: the cleanup removes it
SHOWN = 10  # images named in one finding before "and N more"


def _pods(containers):
    return [{"namespace": c.get("pod_namespace"), "name": c.get("pod_name"), "container": c.get("container"), "state": c.get("state"),
             "running": bool(c.get("running")), "outside_kubernetes": bool(c.get("outside_kubernetes"))}
            for c in containers or [] if isinstance(c, Mapping)]


def user(p):
    """One container using an image, in words: its pod and name, or (a container Docker runs outside Kubernetes) its name."""
    state = "running" if p["running"] else p["state"]
    if p.get("outside_kubernetes"):
        return "Docker container %s outside Kubernetes (%s)" % (p["container"], state)
    return "%s/%s (%s, %s)" % (p["namespace"], p["name"], p["container"], state)


def _image(entry, state):
    return {"id": entry.get("id"), "ref": display_ref(entry.get("repo_tags"), ()), "repo_tags": list(entry.get("repo_tags") or []),
            "size": as_int(entry.get("size")), "state": state, "removable": state == UNUSED,
            "pods": _pods(entry.get("containers")) if state != UNUSED else []}


def node_listed(raw, failed=False):
    """``{patterns, images, error}`` of one node: each listed image on it (``state`` unused, in_use, sandbox, pinned or keep_list;
    ``removable``: the cleanup removes it; ``pods`` using it); ``images`` None when unknown (a failed node or plan, whose
    ``error`` says why). None when no image is listed."""
    patterns = [str(p) for p in raw.get("remove_images") or [] if p not in (None, "")]
    if not patterns:
        return None
    result = raw.get("image_listed")
    if failed:
        return {"patterns": patterns, "images": None, "error": None}
    if not isinstance(result, Mapping) or result.get("failed") or result.get("skipped"):
        error = " ".join(str((result or {}).get("msg") or "the listed plan did not run").split()) if isinstance(result, Mapping) or result is None else None
        return {"patterns": patterns, "images": None, "error": error or "the listed plan did not run"}
    images = [_image(r, UNUSED) for r in result.get("removed") or [] if isinstance(r, Mapping)]
    images += [_image(k, str(k.get("reason") or "in_use")) for k in result.get("listed_kept") or [] if isinstance(k, Mapping)]
    images.sort(key=lambda i: (str(i["ref"]), str(i["id"])))
    return {"patterns": patterns, "images": images, "error": None}


def why(image):
    """Why a listed image is on a node, in words: the pods using it, or that the cleanup removes it, or the rule."""
    if image["state"] == UNUSED:
        return "unused: the cleanup removes it"
    if image["pods"]:
        return "used by " + ", ".join(user(p) for p in image["pods"])
    return LISTED_RULES.get(image["state"], "in use (came into use during the read)") + ", never removed"


def add(node, raw):
    """Add ``listed_images`` (node_listed()) to ``node`` (changed in place) and the finding ``listed_image_present`` (warning)
    when a listed image is on it, or ``listed_plan_failed`` (error) when the plan could not be made."""
    listed = node["listed_images"] = node_listed(raw, node["status"] == "failed")
    if listed is None:
        return node
    if listed["error"]:
        node["findings"].append(dict(source="image_gc", severity="error", code="listed_plan_failed",
                                     message="The plan of the listed images (kubenode_gc_remove_images) failed: %s" % listed["error"]))
    images = listed["images"] or []
    if images:
        named = "; ".join("%s (%s)" % (i["ref"], why(i)) for i in images[:SHOWN])
        more = " and %d more" % (len(images) - SHOWN) if len(images) > SHOWN else ""
        node["findings"].append(dict(source="image_gc", severity="warning", code="listed_image_present", message=(
            "%d listed image(s) (kubenode_gc_remove_images) on this node: %s%s." % (len(images), named, more))))
    return node


def fleet(nodes):
    """The fleet-wide view, or None when no node has listed images to look for: ``patterns`` (over all nodes), ``nodes_with``
    (nodes holding a listed image), ``nodes_in_use`` (nodes where a pod uses one) and ``images``, one per repository:tag, each
    with the ``nodes`` holding it (host, state, removable, pods), sorted by ref."""
    listed = [(n["host"], n.get("listed_images")) for n in nodes if n.get("listed_images")]
    if not listed:
        return None
    patterns, by_ref = [], {}
    for host, item in listed:
        patterns += [p for p in item["patterns"] if p not in patterns]
        for image in item["images"] or []:
            entry = by_ref.setdefault(image["ref"], {"ref": image["ref"], "nodes": []})
            entry["nodes"].append({"host": host, "id": image["id"], "state": image["state"], "removable": image["removable"],
                                   "pods": image["pods"]})
    images = []
    for ref in sorted(by_ref):
        entry = by_ref[ref]
        entry["nodes"].sort(key=lambda n: n["host"])
        entry["node_count"] = len({n["host"] for n in entry["nodes"]})
        entry["in_use_nodes"] = len({n["host"] for n in entry["nodes"] if n["pods"]})
        images.append(entry)
    return {"patterns": patterns,
            "nodes_with": sum(1 for _host, item in listed if item["images"]),
            "nodes_in_use": sum(1 for _host, item in listed if any(i["pods"] for i in item["images"] or [])),
            "images": images}
