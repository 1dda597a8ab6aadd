# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""The lines under the cleanup's summary table: per node, where its thresholds came from, what went (the largest images by
name, and a count) and where its history record is; in check mode, what the plan is. Pure: no I/O."""

from __future__ import annotations

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.kubenode.gc.plugins.module_utils.storage._storage_policy import LAYER_KIND, RELEASE_KIND, ROOT_KINDS
from ansible_collections.kubenode.gc.plugins.plugin_utils._gc_table import human_bytes

LARGEST = 5
# what storage_gc removes itself (containerd's roots and labels, a layer blob's references, Docker's build cache and volumes);
# the rest is containerd's collection
STORAGE_ACTIONS = ROOT_KINDS + (RELEASE_KIND, LAYER_KIND, "build_cache", "volume")
CHECK_MODE_NOTE = ("Check mode: the images listed are the kubelet's size-based plan (the candidates, oldest use first, until their "
                   "summed sizes reach the low threshold); the real run removes only images of this plan, in this order, and may stop "
                   "earlier when the measured usage shows the low threshold reached.")


def _name(image):
    tags = image.get("repo_tags") or []
    if tags:
        return tags[0]
    digests = image.get("repo_digests") or []
    return digests[0] if digests else str(image.get("id") or "(unknown)")


def _sources(policy):
    sources = policy.get("sources")
    if not isinstance(sources, Mapping):
        return None
    groups = {}
    for option in ("high_threshold_percent", "low_threshold_percent", "min_age", "max_age"):
        source = sources.get(option)
        if isinstance(source, Mapping) and option in policy:
            value = policy[option]
            groups.setdefault(source.get("from"), []).append("%s %s" % (option, "%s%%" % value if option.endswith("_percent") else value))
    return "; ".join("%s from %s" % (", ".join(items), where) for where, items in groups.items())


def _storage_lines(record, host):
    """What storage_gc removed (or would remove), each as kind namespace/id (kind id on Docker Engine, whose objects have no
    namespace): first the roots the module removes itself (ingests, leases, images, gc.root labels, Docker's build cache
    and volumes), then what containerd's collection freed after them, largest first."""
    storage = record.get("storage")
    if not isinstance(storage, Mapping) or storage.get("supported") is False:
        return []
    check = bool(record.get("check_mode"))
    items = [i for i in storage.get("plan" if check else "removed") or [] if isinstance(i, Mapping)]
    if not items:
        return ["%s: storage_gc %s nothing." % (host, "would remove" if check else "removed")]
    largest = sorted(items, key=lambda i: (i.get("kind") not in STORAGE_ACTIONS, -int(i.get("bytes") or 0), str(i.get("id"))))[:LARGEST]
    names = ", ".join("%s %s%s (%s%s)" % (i.get("kind"), "%s/" % i["namespace"] if i.get("namespace") else "", i.get("id"),
                                          human_bytes(int(i.get("bytes") or 0)), _of(i)) for i in largest)
    more = " and %d more" % (len(items) - len(largest)) if len(items) > len(largest) else ""
    return ["%s: storage_gc %s %d object(s): %s%s." % (host, "would remove" if check else "removed", len(items), names, more)]


def _of(item):
    """A layer blob's images, as the line names them."""
    images = item.get("images") if item.get("kind") == LAYER_KIND else None
    return ", of %s" % ", ".join(str(i) for i in images) if isinstance(images, list) and images else ""


def node_lines(record, host):
    """The detail lines of one node's cleanup record (None: the node stopped before it had one)."""
    if not isinstance(record, Mapping):
        return []
    lines = []
    policy = record.get("policy")
    described = _sources(policy) if isinstance(policy, Mapping) else None
    if described:
        lines.append("%s: policy: %s." % (host, described))
    images = [i for i in record.get("images") or [] if isinstance(i, Mapping)]
    if "images" in record:
        verb = "would remove" if record.get("check_mode") else "removed"
        if images:
            largest = sorted(images, key=lambda i: (-int(i.get("size") or 0), _name(i)))[:LARGEST]
            names = ", ".join("%s (%s)" % (_name(i), human_bytes(int(i.get("size") or 0))) for i in largest)
            more = " and %d more" % (len(images) - len(largest)) if len(images) > len(largest) else ""
            lines.append("%s: %s %d image(s), the largest: %s%s." % (host, verb, len(images), names, more))
        else:
            lines.append("%s: %s no image." % (host, verb))
    lines.extend(_storage_lines(record, host))
    if record.get("history_file") and not record.get("check_mode"):
        lines.append("%s: history record: %s" % (host, record["history_file"]))
    return lines


def cleanup_details(value):
    """[cleanup record or None, host] pairs -> the detail lines (see node_lines), then the check mode note when planned."""
    if not isinstance(value, list):
        raise AnsibleFilterError("cleanup_details expects a list of [record, host] pairs, got %s." % type(value).__name__)
    lines, planned = [], False
    for pair in value:
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise AnsibleFilterError("cleanup_details expects [record, host] pairs, got %r." % (pair,))
        record, host = pair
        lines.extend(node_lines(record, host))
        planned = planned or (isinstance(record, Mapping) and bool(record.get("check_mode")) and "images" in record)
    if planned:
        lines.append(CHECK_MODE_NOTE)
    return lines


class FilterModule:
    def filters(self):
        return {"cleanup_details": cleanup_details}
