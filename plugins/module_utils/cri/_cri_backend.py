# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""The CRI modules' backend for _common.execute: the library check, the checked CRI options and the client; and the one
client every part of node_audit and node_cleanup shares (SharedClient)."""

from __future__ import annotations

from ansible.module_utils.basic import missing_required_lib

from ansible_collections.kubenode.gc.plugins.module_utils._common import INSTALL_HINT, MissingLibraryError
from ansible_collections.kubenode.gc.plugins.module_utils.cri import _cri


def require_cri_libraries(why=""):
    """MissingLibraryError naming grpcio and/or protobuf (and ``why``, a sentence) unless both import."""
    missing, errors = [], []
    if not _cri.HAS_GRPC:
        missing.append("grpcio")
        errors.append(_cri.GRPC_IMPORT_ERROR)
    if not _cri.HAS_PROTOBUF:
        missing.append("protobuf")
        errors.append(_cri.PROTOBUF_IMPORT_ERROR)
    if missing:
        raise MissingLibraryError(missing_required_lib(" and ".join(missing)) + why + INSTALL_HINT, "\n".join(errors))


def cri_options(params):
    """The shared CRI options, checked (_cri.cri_options, which code running without Ansible uses too)."""
    return _cri.cri_options(params)


def cri_client(module, opts):
    """The backend of the CRI modules: a CriClient for the resolved endpoint (option, crictl.yaml, default sockets)."""
    endpoint = _cri.resolve_endpoint(opts["cri_endpoint"])[0]
    return _cri.CriClient(endpoint, timeout=opts["cri_timeout"])


def _check_libraries():
    require_cri_libraries()


# what _common.run_logic asks of a client backend
cri_client.client = True
cri_client.check_libraries = _check_libraries


class SharedClient:
    """A backend for _common.run_logic that gives every part of one execution (node_audit, node_cleanup) the same CriClient:
    one endpoint resolution, one connection, and each read the ``scope`` of CriClient.share_answers shares sent once.
    Made on first use (with the first part's CRI options: the parts share them), closed by close(); run_logic neither
    closes it after a part nor counts in a part's ``rpc_calls`` the calls made before it."""

    client = True
    shared = True

    def __init__(self, scope):
        self.scope = scope
        self.target = None

    def __call__(self, module, opts):
        if self.target is None:
            self.target = cri_client(module, opts)
            self.target.share_answers(self.scope)
        return self.target

    @staticmethod
    def check_libraries():
        require_cri_libraries()

    def close(self):
        if self.target is not None:
            self.target.close()
