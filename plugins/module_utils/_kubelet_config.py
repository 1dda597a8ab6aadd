# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""One kubelet_config run: read the flag files, the config file and the drop-ins, plan (_kubelet_config_policy), write.

``options()`` checks the module's parameters, ``run()`` takes the config-file backend
(_config_io.ConfigFiles) and returns the module's result, or raises a ConfigError.
"""

from __future__ import annotations

import functools
import glob
import os

from ansible_collections.kubenode.gc.plugins.module_utils import _kubelet_config_policy as policy
from ansible_collections.kubenode.gc.plugins.module_utils._common import CONFIG_FILE_ARGS, require_library
from ansible_collections.kubenode.gc.plugins.module_utils._config_io import file_mode, redact_texts, redacted_diff
from ansible_collections.kubenode.gc.plugins.module_utils._errors import ConfigError, KubenodeGcError
from ansible_collections.kubenode.gc.plugins.module_utils._findings import finding, sort_findings
from ansible_collections.kubenode.gc.plugins.module_utils._kubelet_flags import (
    CONFIG_DIR_FLAG,
    FEATURE_GATES_FLAG,
    ROOT_DIR_FLAG,
    config_flag,
    distro_kubelet_args,
    flag_overrides,
    info_flags,
    parse_flag_files,
)
from ansible_collections.kubenode.gc.plugins.module_utils._redact import redacted, scrub_all, scrub_error
from ansible_collections.kubenode.gc.plugins.module_utils._yaml_edit import HAS_RUAMEL, RUAMEL_IMPORT_ERROR, load, plain, redact_text

DEFAULT_ROOT_DIR = "/var/lib/kubelet"
DEFAULT_PATHS = ("/var/lib/kubelet/config.yaml", "/etc/kubernetes/kubelet/kubelet-config.json", "/etc/kubernetes/kubelet-config.yaml")
# The drop-in directories k3s and RKE2 always pass to the kubelet (--config-dir): they build its command line themselves
DISTRO_CONFIG_DIRS = ("/var/lib/rancher/rke2/agent/etc/kubelet.conf.d", "/var/lib/rancher/k3s/agent/etc/kubelet.conf.d")
DROPIN_SUFFIX = ".conf"
# What k3s and RKE2 write into their drop-in directory at every start: their defaults, and copies of the file and the
# directory given as kubelet-arg config= and config-dir= (an edit there is lost at the next start)
DISTRO_GENERATED = {"00-k3s-defaults.conf": "k3s's defaults", "00-rke2-defaults.conf": "RKE2's defaults",
                    "10-cli-config.conf": "the file given as kubelet-arg config=", "20-cli-config-dir": "the directory given as kubelet-arg config-dir="}
RESULT_KEYS = ("changed", "format", "created", "config", "effective", "sources", "flag_overrides", "changes", "findings")


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


def read_flags(files, patterns):
    """The kubelet flags of the flag files: k3s/RKE2 config files (``*.yaml``, their ``kubelet-arg``) first, then the others."""
    texts = read_flag_files(files, patterns)
    configs = [(path, text) for path, text in texts if path.endswith((".yaml", ".yml"))]
    distro = distro_kubelet_args([(path, plain(load(text, path).data) if text.strip() else {}) for path, text in configs])
    return distro + parse_flag_files([(path, text) for path, text in texts if (path, text) not in configs])


def find_path(config_flag_path):
    """The config file: the kubelet's --config, else the first default path that exists; None when there is neither."""
    if config_flag_path:
        return config_flag_path
    for path in DEFAULT_PATHS:
        if os.path.exists(path):
            return path
    return None


def find_config_dir(flags, isdir=os.path.isdir):
    """(the kubelet's drop-in directory or None, how it was found): its --config-dir flag, else k3s's or RKE2's."""
    flagged = config_flag(flags, CONFIG_DIR_FLAG)
    if flagged:
        return flagged, "flag"
    for path in DISTRO_CONFIG_DIRS:
        if isdir(path):
            return path, "distribution"
    return None, None


def dropin_paths(directory, extra=None):
    """The drop-ins the kubelet reads in ``directory``, in its order: filepath.WalkDir (lexical, subdirectories
    included) and every file whose extension is .conf; ``extra`` (a file to create there) is placed in that order."""
    found = []
    for root, dirs, names in os.walk(directory):
        dirs.sort()
        found += [os.path.join(root, name) for name in names if go_ext(name) == DROPIN_SUFFIX]
    if extra and extra not in found:
        found.append(extra)
    return sorted(found, key=lambda p: os.path.relpath(p, directory).split(os.sep))


def go_ext(name):
    """Go's filepath.Ext: from the last dot of the name (".conf" for the file ".conf" too)."""
    dot = name.rfind(".")
    return name[dot:] if dot >= 0 else ""


def in_dropin_dir(path, directory):
    return bool(path and directory) and go_ext(os.path.basename(path)) == DROPIN_SUFFIX and \
        os.path.normpath(path).startswith(os.path.normpath(directory).rstrip("/") + "/")


def run(files, opts, check_mode=False):
    """Read, plan and (unless check mode) write; returns the module's result with ``diff``.

    A symbolic link as the config file is followed: the target is read and replaced (``resolved_path``).
    Secret values (_redact) are replaced by the marker in ``config``, ``effective`` and ``diff``, and
    removed from every message, including errors. A run that may write holds the file's lock
    (_config_io.lock_dirs) from its read to its write, so concurrent runs on one file both land.
    """
    flags = read_flags(files, opts["flag_files"])
    config_dir, dir_found = (opts["config_dir"], "option") if opts.get("config_dir") else find_config_dir(flags)
    main = find_path(config_flag(flags))
    path = opts["path"] or main
    if path is None and not (flags or config_dir):
        raise ConfigError("No kubelet configuration file found (tried %s); give path, and content to create one." % ", ".join(DEFAULT_PATHS))
    resolved = files.resolve_path(path) if path else None
    writing = not check_mode and settings_or_content(opts)
    with files.lock([resolved] if writing and resolved else []):
        return _run(files, opts, check_mode, flags, config_dir, dir_found, main, path, resolved)


def _run(files, opts, check_mode, flags, config_dir, dir_found, main, path, resolved):
    existing = files.read_text(path) if path else None  # at the end of its links (resolved), named as written
    dropins = []
    if config_dir:
        editing_dropin = in_dropin_dir(path, config_dir)
        dropins = [(p, existing if p == path else files.read_text(p)) for p in dropin_paths(config_dir, path if editing_dropin else None)]
        dropins = [(p, t) for p, t in dropins if t is not None or p == path]
    if settings_or_content(opts) and config_dir and os.path.normpath(config_dir) in DISTRO_CONFIG_DIRS and in_dropin_dir(path, config_dir):
        first = os.path.relpath(path, config_dir).split(os.sep, maxsplit=1)[0]
        if first in DISTRO_GENERATED:
            raise ConfigError("%s is written by k3s/RKE2 at every start from %s, so an edit there would be lost; put the settings in a drop-in "
                              "of your own in %s (such as 50-kubenode-gc.conf) instead." % (path, DISTRO_GENERATED[first], config_dir))
    base = None
    if path in [p for p, t in dropins]:
        base = (main, files.read_text(main)) if main and main != path else None
    redact = functools.partial(redact_text, origin=path or "the kubelet configuration")
    texts = [existing, opts["content"]] + [t for p, t in dropins] + [base[1] if base else None]
    secrets = redact_texts(texts, redact)[1]
    try:
        planned = policy.plan(path, existing, settings=opts["settings"], content=opts["content"], overrides=flag_overrides(flags),
                              dropins=dropins, base=base)
        found, secrets = redact_texts(texts + [planned["before"], planned["after"]], redact)
        result = {k: planned[k] for k in RESULT_KEYS}
        result.update(path=path, resolved_path=resolved, config=redacted(result["config"]), effective=redacted(result["effective"]),
                      config_dir=config_dir, dropins=[p for p, t in dropins])
        discovered = discovery_findings(path, main, opts, flags, config_dir, dir_found)
        result["findings"] = sort_findings(result["findings"] + discovered, by=("code",))
        result["feature_gates"] = policy.feature_gates(planned["config"], info_flags(flags, FEATURE_GATES_FLAG))
        root_dirs = info_flags(flags, ROOT_DIR_FLAG)
        result["root_dir"] = root_dirs[-1] if root_dirs else DEFAULT_ROOT_DIR
        if planned["changed"] and not check_mode:
            backup_file = files.write_text(path, planned["after"], backup=opts["backup"], validate=opts["validate"], mode=opts["mode"])
            if backup_file:
                result["backup_file"] = backup_file
    except KubenodeGcError as exc:
        raise scrub_error(exc, secrets)
    result["diff"] = redacted_diff(path or "", planned["before"], planned["after"] or "", found)
    return scrub_all(result, secrets)


def settings_or_content(opts):
    return opts["settings"] is not None or opts["content"] is not None


def discovery_findings(path, main, opts, flags, config_dir, dir_found):
    """What the module had to assume about the kubelet's command line, as information findings."""
    out = []
    if path is None:
        out.append(finding("info", "no_config_file", "The kubelet's command line in the flag files names no configuration file (--config) and "
                           "none of the default paths exists, so the values reported are the kubelet's defaults%s and its flags" % (
                               ", the drop-ins of %s" % config_dir if config_dir else "")))
    elif not config_flag(flags) and not opts["path"] and path == main:
        out.append(finding("info", "config_path_assumed", "No flag file names the kubelet's --config, so %s (a default path) is assumed to be the "
                           "file it reads; if the kubelet is started otherwise the values reported may not be the ones it uses" % path))
    if dir_found == "distribution":
        out.append(finding("info", "config_dir_of_distribution", "%s is the drop-in directory k3s/RKE2 pass to the kubelet (--config-dir), "
                           "read in the kubelet's order" % config_dir))
    return out


# The module's options (plugins/modules/kubelet_config.py documents them); here so that kubenode.gc.node_audit runs it too.
DEFAULT_FLAG_FILES = [
    "/var/lib/kubelet/kubeadm-flags.env",
    "/etc/default/kubelet",
    "/etc/sysconfig/kubelet",
    "/etc/systemd/system/kubelet.service.d/*.conf",
    "/usr/lib/systemd/system/kubelet.service.d/*.conf",
    "/lib/systemd/system/kubelet.service.d/*.conf",
    "/etc/kubernetes/kubelet.env",
    "/etc/eks/kubelet/environment",
    "/etc/systemd/system/kubelet.service",
    "/etc/rancher/k3s/config.yaml",
    "/etc/rancher/k3s/config.yaml.d/*.yaml",
    "/etc/rancher/rke2/config.yaml",
    "/etc/rancher/rke2/config.yaml.d/*.yaml",
]

ARGUMENT_SPEC = dict(
    CONFIG_FILE_ARGS,
    flag_files=dict(type="list", elements="path", default=DEFAULT_FLAG_FILES),
    config_dir=dict(type="path"),
)
