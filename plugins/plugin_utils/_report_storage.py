# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""The audit report's storage view: each node's disk_usage breakdown, its findings, and the fleet's top consumers.

Pure: no I/O, no clock, no Ansible. ``add(nodes, raw_nodes)`` sets ``nodes[].storage``, returns ``storage_top`` and adds
the findings (stale ingests, expired leases, images in other namespaces, unreferenced snapshots, the compressed layer blobs
of unpacked images, a large unaccounted share; on Docker Engine nodes build cache, anonymous volumes no container uses,
containers outside Kubernetes) to each node's findings.

A node's categories are those its runtime has: containerd's and cri-o's (``_storage_policy.CATEGORIES``, cri-o's
invisible ones null) or Docker Engine's (``_docker_storage.CATEGORIES``); REPORT_CATEGORIES orders them all.
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape

from ansible_collections.kubenode.gc.plugins.module_utils.storage._docker_storage import CATEGORIES as DOCKER_CATEGORIES
from ansible_collections.kubenode.gc.plugins.module_utils.storage._storage_policy import CATEGORIES as CONTAINERD_CATEGORIES
from ansible_collections.kubenode.gc.plugins.plugin_utils._fleet import as_int as _int
from ansible_collections.kubenode.gc.plugins.plugin_utils._gc_table import human_bytes
from ansible_collections.kubenode.gc.plugins.plugin_utils._md_table import row


def _merged(first, second):
    """The categories of ``first``, with each of ``second``'s own placed after the one it follows in ``second``."""
    out = list(first)
    for i, name in enumerate(second):
        if name not in out:
            out.insert(out.index(second[i - 1]) + 1 if i else 0, name)
    return tuple(out)


# every category of every runtime, in the report's order: each runtime's own order kept (the shared ones first, unaccounted last)
REPORT_CATEGORIES = _merged(CONTAINERD_CATEGORIES, DOCKER_CATEGORIES)
CATEGORIES = REPORT_CATEGORIES
# findings that say where bytes are rather than that something should go
INFO_CODES = {"non_k8s_containers": "info", "unpacked_layer_blobs": "info"}
# unaccounted above this share of the used bytes is a finding
UNACCOUNTED_SHARE_PERCENT = 20
TOP_CONSUMERS = 10
OBJECTS_KEPT = 3  # the largest objects per category a node's breakdown keeps (disk_usage returns up to 10)


def _object(obj):
    """One object as the report keeps it: namespace, name, id (strings or None) and bytes."""
    out = {key: None if obj.get(key) is None else str(obj.get(key)) for key in ("namespace", "name", "id")}
    out["bytes"] = _int(obj.get("bytes"))
    return out


def breakdown(result):
    """{used_bytes, categories: {name: bytes or None}, objects: {name: [object]}, nodefs: {name: bytes} or None} of a
    disk_usage result, or None. ``categories`` holds the categories of the node's runtime: Docker Engine's when the result
    has them, else containerd's (null where the runtime does not let the module see one: cri-o)."""
    if not isinstance(result, Mapping) or result.get("failed") or result.get("skipped") or not isinstance(result.get("categories"), Mapping):
        return None
    cats = result["categories"]
    names = DOCKER_CATEGORIES if "build_cache" in cats else CONTAINERD_CATEGORIES
    out = dict(used_bytes=_int(result.get("used_bytes")),
               categories={name: _int((cats.get(name) or {}).get("bytes")) if isinstance(cats.get(name), Mapping) else None
                           for name in CATEGORIES if name in names},
               objects={},
               nodefs=None)
    for name in out["categories"]:
        value = cats.get(name)
        objs = value.get("objects") if isinstance(value, Mapping) else None
        kept = [_object(o) for o in objs if isinstance(o, Mapping)][:OBJECTS_KEPT] if isinstance(objs, list) else []
        if kept:
            out["objects"][name] = kept
    nodefs = result.get("nodefs")
    if isinstance(nodefs, Mapping) and isinstance(nodefs.get("categories"), Mapping):
        out["nodefs"] = {name: _int((value or {}).get("bytes")) for name, value in nodefs["categories"].items() if isinstance(value, Mapping)}
    return out


def findings(result, storage):
    """The storage findings of one node (severity warning; what to run is in the message)."""
    if storage is None:
        return []
    cats = result["categories"]
    out = []

    def objects(name):
        value = cats.get(name)
        return [o for o in (value or {}).get("objects", []) if isinstance(o, Mapping)] if isinstance(value, Mapping) else []

    size = storage["categories"]
    if size.get("stale_ingests"):
        out.append(("stale_ingests", "%s in partial downloads (content ingests) that containerd keeps while a lease holds them (24 hours without one); "
                                     "kubenode.gc.storage_gc aborts those idle longer than ingest_max_age." % human_bytes(size["stale_ingests"])))
    expired = [o for o in objects("leased") if o.get("expired")]
    if expired:
        out.append(("expired_leases", "%d expired lease(s) (%s) still hold content until containerd's next garbage collection; "
                                      "kubenode.gc.storage_gc deletes them." % (len(expired), ", ".join(str(o.get("id")) for o in expired))))
    if size.get("other_namespace_images"):
        names = sorted({str(o.get("namespace")) for o in objects("other_namespace_images")})
        out.append(("other_namespace_images", "%s of images in containerd namespaces the kubelet never collects (%s); "
                                              "kubenode.gc.storage_gc with namespaces removes them."
                    % (human_bytes(size["other_namespace_images"]), ", ".join(names))))
    if size.get("unreferenced_snapshots"):
        out.append(("unreferenced_snapshots", "%s in snapshots and blobs no image, container or lease references; containerd's GC "
                                              "frees those no gc.root label keeps, kubenode.gc.storage_gc with release_gc_roots the others."
                    % human_bytes(size["unreferenced_snapshots"])))
    if size.get("unpacked_layer_blobs"):
        out.append(("unpacked_layer_blobs", "%s in the compressed layer blobs of images containerd has unpacked, a second copy of their "
                                            "layers that the node gets back with kubenode.gc.storage_gc discard_unpacked_layers "
                                            "(containerd's own discard_unpacked_layers, containerd_storage_discard_unpacked_layers, "
                                            "keeps new pulls from storing them)." % human_bytes(size["unpacked_layer_blobs"])))
    if size.get("build_cache"):
        out.append(("build_cache", "%s in Docker's build cache (BuildKit) that no image shares; kubenode.gc.storage_gc with "
                                   "build_cache_max_age removes the records unused for longer." % human_bytes(size["build_cache"])))
    unused = [o for o in objects("volumes") if o.get("anonymous") and not o.get("in_use")]
    if unused:
        out.append(("unused_volumes", "%d anonymous Docker volume(s) no container references (%s, among the largest); kubenode.gc.storage_gc "
                                      "with remove_unused_volumes removes them." % (len(unused), human_bytes(sum(_int(o.get("bytes")) or 0 for o in unused)))))
    if size.get("non_k8s_containers"):
        shown = ", ".join(str(o.get("name")) for o in objects("non_k8s_containers")[:3])
        out.append(("non_k8s_containers", "%s in the writable layers of containers Docker runs outside Kubernetes (%s); neither the kubelet "
                                          "nor this collection removes them, and image GC keeps their images."
                    % (human_bytes(size["non_k8s_containers"]), shown)))
    used, unaccounted = storage["used_bytes"], size.get("unaccounted")
    if used and unaccounted is not None and unaccounted * 100 > used * UNACCOUNTED_SHARE_PERCENT:
        out.append(("large_unaccounted", "%s (%d%%) of the image filesystem's used bytes belong to no runtime object it can see: "
                                         "files outside the runtime's APIs (for example snapshot directories containerd lost track of)."
                    % (human_bytes(unaccounted), unaccounted * 100 // used)))
    # INFO_CODES: what is how the runtime works unless told otherwise (a second copy of pulled images, containers outside
    # Kubernetes) is information, not a warning
    return [dict(source="disk_usage", severity=INFO_CODES.get(code, "warning"), code=code, message=message) for code, message in out]


def top_consumers(nodes, limit=TOP_CONSUMERS):
    """{category: [{host, bytes}] largest first} over the nodes' storage breakdowns (categories with bytes only)."""
    top = {}
    for name in CATEGORIES:
        rows = [dict(host=n["host"], bytes=n["storage"]["categories"][name]) for n in nodes
                if n.get("storage") and n["storage"]["categories"].get(name)]
        if rows:
            top[name] = sorted(rows, key=lambda r: (-r["bytes"], r["host"]))[:limit]
    return top


def add(nodes, raw_nodes):
    """Set each report node's ``storage`` (None without a disk_usage result) and add its findings; return the fleet's
    top consumers (the report's ``storage_top``)."""
    raw_by_host = {}
    for raw in raw_nodes:
        raw_by_host.setdefault(str(raw["host"]), raw)
    for node in nodes:
        result = raw_by_host.get(node["host"], {}).get("disk_usage")
        node["storage"] = breakdown(result)
        node["findings"].extend(findings(result, node["storage"]))
    return top_consumers(nodes)


def _bytes(value):
    return "-" if value is None else human_bytes(value)


def markdown_top(report):
    """The Markdown lines of the fleet's top consumers by category."""
    top = report.get("storage_top") or {}
    if not top:
        return ["No node's disk use was attributed (kubenode.gc.disk_usage)."]
    lines = ["| category | largest consumers |", "|---|---|"]
    for name in CATEGORIES:
        if top.get(name):
            lines.append(row(name, ", ".join("%s %s" % (r["host"], human_bytes(r["bytes"])) for r in top[name][:5])))
    return lines


def markdown_node(node):
    """The Markdown lines of one node's breakdown (none without one)."""
    storage = node.get("storage")
    if not storage:
        return []
    parts = ", ".join("%s %s" % (name, _bytes(value)) for name, value in storage["categories"].items() if value is None or value > 0)
    lines = ["- Disk use of %s: %s" % (_bytes(storage["used_bytes"]), parts or "nothing attributed")]
    if storage["nodefs"]:
        lines.append("- Kubelet root filesystem: %s" % ", ".join("%s %s" % (k, _bytes(v)) for k, v in sorted(storage["nodefs"].items())))
    return lines


def _e(value):
    return escape(str(value), quote=True)


def _object_text(obj):
    label = obj.get("name") or obj.get("id") or "?"
    return "%s%s %s" % (_e(obj["namespace"]) + "/" if obj.get("namespace") else "", _e(label), _e(_bytes(obj.get("bytes"))))


def html_top(report):
    """The report.html panel of the fleet's disk use by category: nodes, total bytes and the largest consumers of each."""
    nodes = [n for n in report.get("nodes") or [] if n.get("storage")]
    top = report.get("storage_top") or {}
    if not nodes:
        return ('<section class="panel" id="storage"><h2>Disk use by category</h2><p class="none">No node\'s disk use was attributed '
                '(kubenode.gc.disk_usage).</p></section>')
    rows = []
    for name in CATEGORIES:
        sizes = [n["storage"]["categories"].get(name) for n in nodes]
        known = [v for v in sizes if v]
        if not known:
            continue
        consumers = top.get(name) or []
        links = ", ".join('<a class="host" href="#node-%s">%s</a> %s' % (_e(r["host"]), _e(r["host"]), _e(human_bytes(r["bytes"])))
                          for r in consumers[:3])
        more = ""
        if len(consumers) > 3:
            more = '<details><summary>%d more</summary><p class="hosts">%s</p></details>' % (len(consumers) - 3, ", ".join(
                '<a class="host" href="#node-%s">%s</a> %s' % (_e(r["host"]), _e(r["host"]), _e(human_bytes(r["bytes"]))) for r in consumers[3:]))
        rows.append('<tr data-category="%s"><td><code>%s</code></td><td class="num">%d</td><td class="num">%s</td><td>%s%s</td></tr>'
                    % (name, name, len(known), _e(human_bytes(sum(known))), links, more))
    return ('<section class="panel" id="storage"><h2>Disk use by category</h2><p class="muted">Where the image filesystem\'s bytes go on '
            '%d node(s) (kubenode.gc.disk_usage): the nodes with bytes in each category, their total, and the largest consumers. '
            'kubenode.gc.storage_gc frees stale ingests, old leases, unreferenced snapshots, the images of the namespaces it is given and, '
            'with discard_unpacked_layers, the compressed layer blobs of unpacked images; on Docker Engine nodes old build cache and '
            'anonymous volumes no container uses.</p>'
            '<table><thead><tr><th>Category</th><th class="num">Nodes</th><th class="num">Bytes</th><th>Largest consumers</th></tr></thead>'
            '<tbody>%s</tbody></table></section>' % (len(nodes), "".join(rows)))


def html_node(node):
    """One node's breakdown in its report.html detail: each category's bytes, share of the used bytes and largest objects."""
    storage = node.get("storage")
    if not storage:
        return ""
    used = storage["used_bytes"]
    rows = []
    for name in CATEGORIES:
        if name not in storage["categories"]:
            continue  # not a category of this node's runtime
        value = storage["categories"].get(name)
        if value == 0:
            continue
        share = "-" if value is None or not used else "%d%%" % round(min(max(value * 100.0 / used, 0), 100))
        objects = ", ".join(_object_text(o) for o in storage.get("objects", {}).get(name, []))
        rows.append('<tr><td>%s</td><td class="num">%s</td><td class="num">%s</td><td>%s</td></tr>'
                    % (name, _e(_bytes(value)) if value is not None else '<span class="muted">not visible</span>', share, objects or "-"))
    nodefs = ""
    if storage.get("nodefs"):
        nodefs = "<br>Kubelet root filesystem: %s." % _e(", ".join("%s %s" % (k, _bytes(v)) for k, v in sorted(storage["nodefs"].items())))
    return ('<p>Disk use of the image filesystem: %s used (kubenode.gc.disk_usage).%s</p>'
            '<table class="storage"><thead><tr><th>Category</th><th class="num">Bytes</th><th class="num">Share</th><th>Largest objects</th></tr>'
            '</thead><tbody>%s</tbody></table>' % (_e(_bytes(used)), nodefs, "".join(rows) or '<tr><td colspan="4" class="none">nothing attributed</td></tr>'))
