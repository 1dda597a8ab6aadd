# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""PURE: what containerd's CRI plugin records about a CRI container in containerd's own container record.

containerd 1.6, 1.7 and 2.x store, in the ``extensions`` map of every container record the CRI made, under
CONTAINER_METADATA, a protobuf Any (type URL ``github.com/containerd/cri/pkg/store/container/Metadata``) whose value is
JSON: ``{"Version": "v1", "Metadata": {"ID", "Name", "SandboxID", "Config" (the CRI ContainerConfig), "ImageRef",
"LogPath" (the absolute path of the container's log file, what the CRI's ContainerStatus answers as log_path; empty
when the pod has no log directory), "StopSignal", "ProcessLabel"}}``. Anything else (no extension, another version, not
JSON, another container's ID, an empty or relative LogPath) gives None here, and the caller asks the CRI instead.
"""

from __future__ import annotations

import json
import posixpath

CONTAINER_METADATA = "io.cri-containerd.container.metadata"
METADATA_VERSION = "v1"


def container_log_path(value, container_id=None):
    """The absolute log path in the JSON ``value`` (bytes or str) of a CONTAINER_METADATA extension, or None when it
    does not parse as version-1 metadata, names another container than ``container_id`` (when given), or its LogPath
    is empty or not absolute."""
    if value is None:
        return None
    try:
        doc = json.loads(value.decode("utf-8") if isinstance(value, (bytes, bytearray)) else value)
    except (ValueError, UnicodeDecodeError, TypeError):
        return None
    if not isinstance(doc, dict) or doc.get("Version") != METADATA_VERSION:
        return None
    meta = doc.get("Metadata")
    if not isinstance(meta, dict):
        return None
    if container_id is not None and meta.get("ID") != container_id:
        return None
    path = meta.get("LogPath")
    if not isinstance(path, str) or not path or "\x00" in path or not posixpath.isabs(path):
        return None
    return path


def log_paths(inventory):
    """{container id: absolute log path} of every container record of an inventory (_inventory.read) whose CRI metadata
    gives one. A container id whose records in two namespaces disagree is left out (the CRI is asked)."""
    found = {}
    ambiguous = set()
    for ns in sorted(inventory):
        for c in inventory[ns]["containers"]:
            path = container_log_path(c.get("cri_metadata"), c["id"])
            if path is None:
                continue
            if found.get(c["id"], path) != path:
                ambiguous.add(c["id"])
            found[c["id"]] = path
    for cid in ambiguous:
        del found[cid]
    return found
