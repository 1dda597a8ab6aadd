# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""One cri_info run: read what ``gather`` asks for from the runtime, with the documented keys. No policy."""

from __future__ import annotations

from ansible_collections.kubenode.gc.plugins.module_utils._common import CRI_COMMON_ARGS
from ansible_collections.kubenode.gc.plugins.module_utils.cri._cri_backend import cri_options
from ansible_collections.kubenode.gc.plugins.module_utils.cri._snapshot import GATHER_CHOICES, public, read_node


def options(params):
    """The module's options, checked."""
    return dict(cri_options(params), gather=list(params["gather"]))


def run(client, opts, check_mode=False):
    """Read the node (one RPC per list) and return the module's result."""
    gather = opts["gather"]
    node = read_node(client, gather)
    result = dict(changed=False)
    if "runtime" in gather:
        result["runtime"] = node["runtime"]
    if "imagefs" in gather:
        result["imagefs"] = node["imagefs"]
        result["split_imagefs"] = node["split_imagefs"]
    for kind in ("images", "containers", "sandboxes"):
        if kind in gather:
            result[kind] = public(kind, node[kind])
    return result


# The module's options (plugins/modules/cri_info.py documents them); here so that kubenode.gc.node_audit runs it too.
ARGUMENT_SPEC = dict(
    CRI_COMMON_ARGS,
    gather=dict(type="list", elements="str", choices=list(GATHER_CHOICES), default=list(GATHER_CHOICES)),
)
