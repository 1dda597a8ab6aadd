# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""One kubelet_config run: read the flag files and the config file, plan (_kubelet_config_policy), write.

``options()`` checks the module's parameters, ``run()`` takes the config-file backend
(_config_io.ConfigFiles) and returns the module's result, or raises a ConfigError.
"""

from __future__ import annotations

import functools
import glob
import os

from ansible_collections.kubenode.gc.plugins.module_utils import _kubelet_config_policy as policy
from ansible_collections.kubenode.gc.plugins.module_utils._common import require_library
from ansible_collections.kubenode.gc.plugins.module_utils._config_io import file_mode, redact_texts, redacted_diff
from ansible_collections.kubenode.gc.plugins.module_utils._errors import ConfigError, KubenodeGcError
from ansible_collections.kubenode.gc.plugins.module_utils._kubelet_flags import (
    FEATURE_GATES_FLAG,
    ROOT_DIR_FLAG,
    config_flag,
    flag_overrides,
    info_flags,
    parse_flag_files,
)
from ansible_collections.kubenode.gc.plugins.module_utils._redact import redacted, scrub_all, scrub_error
from ansible_collections.kubenode.gc.plugins.module_utils._yaml_edit import HAS_RUAMEL, RUAMEL_IMPORT_ERROR, redact_text

DEFAULT_ROOT_DIR = "/var/lib/kubelet"
DEFAULT_PATHS = ("/var/lib/kubelet/config.yaml", "/etc/kubernetes/kubelet/kubelet-config.json", "/etc/kubernetes/kubelet-config.yaml")
RESULT_KEYS = ("changed", "format", "created", "config", "effective", "flag_overrides", "changes", "findings")


def options(params):
    """The module's parameters, checked (the file mode as an int); ruamel.yaml must be installed."""
    require_library(HAS_RUAMEL, "ruamel.yaml", RUAMEL_IMPORT_ERROR)
    return dict(params, mode=file_mode(params["mode"]))


def read_flag_files(files, patterns):
    """[(path, text)] of the existing files matching ``patterns``, in order, each once."""
    found = []
    for pattern in patterns:
        for path in sorted(glob.glob(pattern)):
            if os.path.isfile(path) and path not in [f[0] for f in found]:
                found.append((path, files.read_text(path) or ""))
    return found


def find_path(config_flag_path, content):
    """The config file: the kubelet's --config, else the first default path that exists (or --config to create it)."""
    candidates = list(dict.fromkeys(([config_flag_path] if config_flag_path else []) + list(DEFAULT_PATHS)))
    for path in candidates:
        if os.path.exists(path):
            return path
    if content is not None and config_flag_path:
        return config_flag_path
    raise ConfigError("No kubelet configuration file found (tried %s); give path, and content to create one." % ", ".join(candidates))


def run(files, opts, check_mode=False):
    """Read, plan and (unless check mode) write; returns the module's result with ``diff``.

    A symbolic link as the config file is followed: the target is read and replaced (``resolved_path``).
    Secret values (_redact) are replaced by the marker in ``config``, ``effective`` and ``diff``, and
    removed from every message, including errors. A run that may write holds the file's lock
    (_config_io.lock_dirs) from its read to its write, so concurrent runs on one file both land.
    """
    flags = parse_flag_files(read_flag_files(files, opts["flag_files"]))
    path = opts["path"] or find_path(config_flag(flags), opts["content"])
    resolved = files.resolve_path(path)
    writing = not check_mode and (opts["settings"] or opts["content"] is not None)
    with files.lock([resolved] if writing else []):
        return _run(files, opts, check_mode, flags, path, resolved)


def _run(files, opts, check_mode, flags, path, resolved):
    existing = files.read_text(path)  # the link's target (resolved), named as the user wrote it in errors
    redact = functools.partial(redact_text, origin=path)
    secrets = redact_texts([existing, opts["content"]], redact)[1]
    try:
        planned = policy.plan(path, existing, settings=opts["settings"], content=opts["content"], overrides=flag_overrides(flags))
        found, secrets = redact_texts([existing, opts["content"], planned["before"], planned["after"]], redact)
        result = {k: planned[k] for k in RESULT_KEYS}
        result.update(path=path, resolved_path=resolved, config=redacted(result["config"]), effective=redacted(result["effective"]))
        result["feature_gates"] = policy.feature_gates(planned["config"], info_flags(flags, FEATURE_GATES_FLAG))
        root_dirs = info_flags(flags, ROOT_DIR_FLAG)
        result["root_dir"] = root_dirs[-1] if root_dirs else DEFAULT_ROOT_DIR
        if planned["changed"] and not check_mode:
            backup_file = files.write_text(path, planned["after"], backup=opts["backup"], validate=opts["validate"], mode=opts["mode"])
            if backup_file:
                result["backup_file"] = backup_file
    except KubenodeGcError as exc:
        raise scrub_error(exc, secrets)
    result["diff"] = redacted_diff(path, planned["before"], planned["after"], found)
    return scrub_all(result, secrets)
