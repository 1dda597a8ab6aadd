# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""Ansible glue shared by the CRI modules: common options, dependency checks, client set-up, failures."""

from __future__ import annotations

from ansible.module_utils.basic import AnsibleModule, env_fallback, missing_required_lib

from ansible_collections.kubenode.gc.plugins.module_utils import _cri

# Mirrors plugins/doc_fragments/cri.py.
CRI_COMMON_ARGS = dict(
    cri_endpoint=dict(type="str", fallback=(env_fallback, ["CONTAINER_RUNTIME_ENDPOINT"])),
    cri_timeout=dict(type="float", default=30.0),
)

INSTALL_HINT = (
    " Install them on the managed node, for example with the kubenode.gc.node_prereqs role, "
    "'apt-get install python3-grpcio python3-protobuf', 'dnf install python3-grpcio python3-protobuf' "
    "or 'pip install grpcio protobuf'."
)


class AnsibleCriModule:
    """An AnsibleModule with the shared CRI options and a lazily connected CriClient."""

    def __init__(self, argument_spec, **kwargs):
        spec = dict(CRI_COMMON_ARGS)
        spec.update(argument_spec)
        self.module = AnsibleModule(argument_spec=spec, **kwargs)
        self.params = self.module.params
        self._client = None
        self._check_requirements()
        if self.params["cri_timeout"] <= 0:
            self.fail("cri_timeout must be a positive number of seconds, got %s." % self.params["cri_timeout"])

    @property
    def check_mode(self):
        return self.module.check_mode

    def _check_requirements(self):
        missing = []
        errors = []
        if not _cri.HAS_GRPC:
            missing.append("grpcio")
            errors.append(_cri.GRPC_IMPORT_ERROR)
        if not _cri.HAS_PROTOBUF:
            missing.append("protobuf")
            errors.append(_cri.PROTOBUF_IMPORT_ERROR)
        if missing:
            self.module.fail_json(msg=missing_required_lib(" and ".join(missing)) + INSTALL_HINT, exception="\n".join(errors))

    @property
    def client(self):
        """The CriClient for the resolved endpoint (option, crictl.yaml, then default sockets)."""
        if self._client is None:
            try:
                endpoint = _cri.resolve_endpoint(self.params["cri_endpoint"])[0]
            except _cri.CriError as exc:
                self.fail(str(exc))
            self._client = _cri.CriClient(endpoint, timeout=self.params["cri_timeout"])
        return self._client

    @property
    def rpc_calls(self):
        return dict(self._client.rpc_calls) if self._client is not None else {}

    def fail(self, msg, **result):
        result.setdefault("rpc_calls", self.rpc_calls)
        if self._client is not None:
            self._client.close()
        self.module.fail_json(msg=msg, **result)

    def exit(self, **result):
        result.setdefault("rpc_calls", self.rpc_calls)
        if self._client is not None:
            self._client.close()
        self.module.exit_json(**result)
