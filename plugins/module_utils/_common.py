# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""Ansible glue shared by every module: the CRI options, dependency checks, and the one main() flow.

Every module's main() is ``execute(module, options, run, backend)``:

1. ``options(module.params)`` checks the options and returns what the run needs (OptionError);
2. ``backend(module, opts)`` gives the run its I/O: a CriClient (``_cri_backend.cri_client``) or config files
   (``_config_io.config_files``);
3. ``run(backend, opts, check_mode)`` does the work and returns the result dict, or raises a
   KubenodeGcError whose ``result`` is what was done before;
4. the result (``warnings`` warned, ``diff`` only in diff mode, ``rpc_calls`` of the client) is
   returned with exit_json, or the error's one sentence with fail_json and the partial result.
"""

from __future__ import annotations

from ansible.module_utils.basic import env_fallback, missing_required_lib

from ansible_collections.kubenode.gc.plugins.module_utils._errors import KubenodeGcError

# Mirrors plugins/doc_fragments/cri.py.
CRI_COMMON_ARGS = dict(
    cri_endpoint=dict(type="str", fallback=(env_fallback, ["CONTAINER_RUNTIME_ENDPOINT"])),
    cri_timeout=dict(type="float", default=30.0),
)

# The options of the config modules (kubelet_config, runtime_config) that mean the same in both.
CONFIG_FILE_ARGS = dict(
    path=dict(type="path"),
    settings=dict(type="dict"),
    content=dict(type="str"),
    backup=dict(type="bool", default=False),
    mode=dict(type="raw", default="0644"),
    validate=dict(type="str"),
)

INSTALL_HINT = (
    " Install them on the managed node, for example with the kubenode.gc.node_prereqs role, "
    "'apt-get install python3-grpcio python3-protobuf', 'dnf install python3-grpcio python3-protobuf' "
    "or 'pip install grpcio protobuf'."
)


class MissingLibraryError(KubenodeGcError):
    """A Python library the module needs is not installed on the managed node; ``exception`` is the import traceback."""

    def __init__(self, message, exception=None):
        super().__init__(message)
        self.exception = exception


def require_library(present, name, import_error):
    """MissingLibraryError (Ansible's missing_required_lib text) unless ``present``."""
    if not present:
        raise MissingLibraryError(missing_required_lib(name), import_error)


def params_for(argument_spec, **overrides):
    """A module's parameters as AnsibleModule gives them without arguments (the spec's defaults), then ``overrides``.

    For callers that run a module's options() and run() without Ansible (tests, benchmarks).
    """
    unknown = set(overrides) - set(argument_spec)
    if unknown:
        raise TypeError("unknown options: %s" % ", ".join(sorted(unknown)))
    params = {name: spec.get("default") for name, spec in argument_spec.items()}
    params.update(overrides)
    return params


def run_logic(module, options, run, backend, params, check_mode):
    """A module's logic on ``params`` without exiting: ``(result, error)``.

    ``error`` is None, or the KubenodeGcError whose one sentence fails the run; ``result`` is then what the run did
    before it (nothing for a MissingLibraryError). The CRI modules' results carry ``rpc_calls``. execute() is a
    module's main(); kubenode.gc.node_audit and node_cleanup run their parts through this too.

    A backend marked ``client`` (_cri_backend.cri_client) first checks its libraries (``backend.check_libraries()``);
    the result carries the ``rpc_calls`` its client made during the run, and the client is closed after the run unless
    the backend is marked ``shared`` (_cri_backend.SharedClient: the parts of one execution share it).
    """
    client = getattr(backend, "client", False)
    shared = getattr(backend, "shared", False)
    target = None
    before = {}
    try:
        if client:
            backend.check_libraries()
        opts = options(params)
        target = backend(module, opts)
        if client:
            before = dict(target.rpc_calls)
        result, error = run(target, opts, check_mode=check_mode), None
    except MissingLibraryError as exc:
        _close(client and not shared, target)
        return {}, exc
    except KubenodeGcError as exc:
        result, error = dict(exc.result), exc
    if client:
        result.setdefault("rpc_calls", calls_since(target.rpc_calls, before) if target is not None else {})
    _close(client and not shared, target)
    return result, error


def calls_since(rpc_calls, before):
    """The calls of ``rpc_calls`` ({method: count}) made since it was ``before``."""
    return {method: count - before.get(method, 0) for method, count in rpc_calls.items() if count > before.get(method, 0)}


def execute(module, options, run, backend):
    """The whole main() of a module: options -> backend -> run -> exit_json, or fail_json with one sentence."""
    result, error = run_logic(module, options, run, backend, module.params, module.check_mode)
    if isinstance(error, MissingLibraryError):
        module.fail_json(msg=str(error), exception=error.exception)
    for warning in result.pop("warnings", None) or []:
        module.warn(warning)
    if not module._diff:  # pylint: disable=protected-access
        result.pop("diff", None)
    if error is not None:
        result.setdefault("changed", False)
        module.fail_json(msg=str(error), **result)
    module.exit_json(**result)


def _close(client, target):
    if client and target is not None:
        target.close()


def selinux_relabel(module):
    """``relabel(tmp, target, exists)`` for _files.atomic_write's ``before_replace``: puts on the temporary file the SELinux
    context of the file it replaces (a new file: the policy's default for the target's path), through the module's
    SELinux functions, as AnsibleModule.atomic_move does; a no-op where SELinux is off (or the module has no such
    functions). The rename itself is atomic_write's, relative to the directory it verified."""
    enabled = getattr(module, "selinux_enabled", None)
    if enabled is None or not enabled():
        return lambda tmp, target, exists: None

    def relabel(tmp, target, exists):
        context = module.selinux_context(target) if exists else module.selinux_default_context(target)
        module.set_context_if_different(tmp, context, False)

    return relabel
