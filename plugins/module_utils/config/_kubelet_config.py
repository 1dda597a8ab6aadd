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

from ansible_collections.kubenode.gc.plugins.module_utils import _daemons
from ansible_collections.kubenode.gc.plugins.module_utils._common import CONFIG_FILE_ARGS, require_library
from ansible_collections.kubenode.gc.plugins.module_utils._errors import ConfigError, KubenodeGcError
from ansible_collections.kubenode.gc.plugins.module_utils.config import _kubelet_config_policy as policy
from ansible_collections.kubenode.gc.plugins.module_utils.config import _node_layouts as layouts
from ansible_collections.kubenode.gc.plugins.module_utils.config._config_io import file_mode, redact_texts, redacted_diff
from ansible_collections.kubenode.gc.plugins.module_utils.config._findings import finding, sort_findings, untrusted_findings
from ansible_collections.kubenode.gc.plugins.module_utils.config._kubelet_flags import (
    CONFIG_DIR_FLAG,
    CONFIG_FLAG,
    FEATURE_GATES_FLAG,
    KUBELET_ARG,
    ROOT_DIR_FLAG,
    command_line_flags,
    config_flag,
    distro_kubelet_args,
    flag_overrides,
    info_flags,
    parse_flag_files,
)
from ansible_collections.kubenode.gc.plugins.module_utils._redact import redacted, scrub_all, scrub_error
from ansible_collections.kubenode.gc.plugins.module_utils.config._yaml_edit import HAS_RUAMEL, RUAMEL_IMPORT_ERROR, load, plain, redact_text

DEFAULT_ROOT_DIR = "/var/lib/kubelet"
# where the kubelet's file is when no flag file names it: kubeadm, EKS, kubespray; k0s (which builds the kubelet's command line itself)
DEFAULT_PATHS = ("/var/lib/kubelet/config.yaml", "/etc/kubernetes/kubelet/kubelet-config.json", "/etc/kubernetes/kubelet-config.yaml",
                 "/var/lib/k0s/kubelet-config.yaml", "/run/k0s/kubelet-config.yaml")
# k0s runs the kubelet with --root-dir <data dir>/kubelet
K0S_ROOT_DIR = "/var/lib/k0s/kubelet"
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
    """The kubelet flags of the flag files: k3s/RKE2 config files (``*.yaml``, their ``kubelet-arg``) first, then the others.

    MicroK8s's arguments file has its snap's variables ($SNAP_DATA...) expanded, as MicroK8s does."""
    texts = [(path, _daemons.expand(text, layouts.microk8s_variables(path)) if layouts.is_microk8s_args(path) else text)
             for path, text in read_flag_files(files, patterns)]
    configs = [(path, text) for path, text in texts if path.endswith((".yaml", ".yml"))]
    distro = distro_kubelet_args([(path, plain(load(text, path).data) if text.strip() else {}) for path, text in configs])
    return distro + parse_flag_files([(path, text) for path, text in texts if (path, text) not in configs])


def running_kubelet(files):
    """(the running kubelet, untrusted_daemon_process findings): the kubelet a dict(pid, what, flags) with the flags of its
    command line (MicroK8s's kubelite: of the file of its --kubelet-args-file), relative paths as the kubelet resolves
    them, None when no trusted kubelet runs (_daemons.find_kubelet: root's, from a root-owned executable); a finding per
    process of that name that is not trusted, which is ignored."""
    proc, untrusted = _daemons.find_kubelet()
    found = untrusted_findings(untrusted, "the kubelet")
    if proc is None:
        return None, found
    words, source = proc.argv[1:], "/proc/%d/cmdline" % proc.pid
    if proc.name == _daemons.KUBELITE or os.path.basename(proc.argv[0]) == _daemons.KUBELITE:
        args_file = _daemons.go_flags(proc.argv[1:], [(_daemons.KUBELITE_ARGS_FLAG,)]).get(_daemons.KUBELITE_ARGS_FLAG)
        if not args_file:
            return None, found
        args_file = _daemons.in_process(proc, _daemons.expand(args_file, proc.environ))
        variables = dict(proc.environ, **layouts.microk8s_variables(args_file))
        words, source = _daemons.args_file_words(files.read_text(args_file), variables), args_file
    flags = command_line_flags(words, source)
    for flag in flags:
        if flag["flag"] in (CONFIG_FLAG, CONFIG_DIR_FLAG, ROOT_DIR_FLAG):
            flag["value"] = _daemons.in_process(proc, flag["value"])
    return dict(pid=proc.pid, what="the running kubelet (pid %d)" % proc.pid, flags=flags, source=source), found


def attribute(daemon_flags, file_flags):
    """The running kubelet's flags, each named by the flag file that sets it to that value when one does."""
    out = []
    for flag in daemon_flags:
        same = [f["file"] for f in file_flags if (f["flag"], f["value"]) == (flag["flag"], flag["value"])]
        out.append(dict(flag, file=same[-1]) if same else flag)
    return out


def daemon_findings(daemon, file_flags):
    """Where the running kubelet's command line and the flag files disagree: one warning per flag, naming both values."""
    if not daemon or not file_flags:
        return []
    out = []
    for name in sorted({f["flag"] for f in daemon["flags"] + file_flags} - {KUBELET_ARG}):
        running, written = info_flags(daemon["flags"], name), [f for f in file_flags if f["flag"] == name]
        if (running[-1] if running else None) != (written[-1]["value"] if written else None):
            out.append(finding("warning", "daemon_differs_from_files", "%s runs with %s, but the flag files give %s; the module uses the running "
                               "kubelet's value (a restart of the kubelet would take the files')" % (
                                   daemon["what"], "%s=%s" % (name, running[-1]) if running else "no %s" % name,
                                   "%s=%s (in %s)" % (name, written[-1]["value"], written[-1]["file"]) if written else "no %s" % name)))
    return out


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

    When a kubelet runs, its command line is the truth (running_kubelet): its --config, --config-dir and flags; the
    flag files are then only compared with it. Without one, the flag files and the default paths say what it would read.
    Only root's kubelet counts: a process of that name another user runs (or run from a file another user may write) is
    ignored and named in an ``untrusted_daemon_process`` warning. A file read through a directory or link another user
    controls is named in an ``untrusted_path`` warning; an edit of such a path is refused (_config_io.lock_dirs).
    A symbolic link as the config file is followed: the target is read and replaced (``resolved_path``).
    Secret values (_redact) are replaced by the marker in ``config``, ``effective`` and ``diff``, and
    removed from every message, including errors. A run that may write holds the file's lock
    (_config_io.lock_dirs) from its read to its write, so concurrent runs on one file both land.
    """
    file_flags = read_flags(files, opts["flag_files"])
    daemon, untrusted = running_kubelet(files)
    flags = attribute(daemon["flags"], file_flags) if daemon else file_flags
    if opts.get("config_dir"):
        config_dir, dir_found = opts["config_dir"], "option"
    elif daemon:
        config_dir, dir_found = config_flag(flags, CONFIG_DIR_FLAG), "flag"
    else:
        config_dir, dir_found = find_config_dir(flags)
    main = config_flag(flags) if daemon else find_path(config_flag(flags))
    path = opts["path"] or main
    if path is None and not (flags or config_dir or daemon):
        raise ConfigError("No kubelet configuration file found (tried %s); give path, and content to create one." % ", ".join(DEFAULT_PATHS))
    resolved = files.resolve_path(path) if path else None
    writing = not check_mode and settings_or_content(opts)
    with files.lock([path] if writing and path else []):  # refuses a path through another user's directory or link
        return _run(files, opts, check_mode, flags, config_dir, dir_found, main, path, resolved, daemon, file_flags, untrusted)


def refusal(opts, path, main, flags, daemon, existing, os_name):
    """Why an edit of ``path`` cannot take effect (one sentence), or None: a regenerated file; with a running kubelet, a
    file that is neither its --config nor a drop-in of its --config-dir, or a requested key one of its flags sets."""
    why = layouts.regenerated(path, existing, os_name)
    if why:
        return "Not editing %s: %s; nothing was written." % (path, why)
    if daemon and path != main and not in_dropin_dir(path, config_flag(flags, CONFIG_DIR_FLAG)):
        reads = "%s (its --config)" % main if main else "no configuration file (it has no --config)"
        return "Not editing %s: %s reads %s, not %s, so the edit would not take effect; nothing was written." % (path, daemon["what"], reads, path)
    if daemon:
        for key in opts["settings"] or {}:
            flag = [f for f in flag_overrides(flags) if f["key"] == key]
            if flag:
                return ("settings.%s cannot take effect: %s has %s=%s on its command line (%s), which overrides the file; nothing was written."
                        % (key, daemon["what"], flag[-1]["flag"], flag[-1]["value"], flag[-1]["file"]))
    return None


def _run(files, opts, check_mode, flags, config_dir, dir_found, main, path, resolved, daemon, file_flags, untrusted):
    existing = files.read_text(path) if path else None  # at the end of its links (resolved), named as written
    dropins = []
    if config_dir:
        editing_dropin = in_dropin_dir(path, config_dir)
        dropins = [(p, existing if p == path else files.read_text(p)) for p in dropin_paths(config_dir, path if editing_dropin else None)]
        dropins = [(p, t) for p, t in dropins if t is not None or p == path]
    os_name = layouts.os_id(files.read_text)
    refused = refusal(opts, path, main, flags, daemon, existing, os_name) if settings_or_content(opts) and path else None
    if refused:
        raise ConfigError(refused)
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
        discovered = discovery_findings(path, main, opts, flags, config_dir, dir_found, daemon)
        discovered += daemon_findings(daemon, file_flags) + generated_findings(path, existing, os_name) + untrusted + files.path_findings()
        result["findings"] = sort_findings(result["findings"] + discovered, by=("code",))
        result["feature_gates"] = policy.feature_gates(planned["config"], info_flags(flags, FEATURE_GATES_FLAG))
        root_dirs = info_flags(flags, ROOT_DIR_FLAG)
        result["root_dir"] = root_dirs[-1] if root_dirs else (K0S_ROOT_DIR if path and layouts.K0S_KUBELET_CONFIG.search(path) else DEFAULT_ROOT_DIR)
        result["daemon"] = dict(pid=daemon["pid"], source=daemon["source"]) if daemon else None
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


def discovery_findings(path, main, opts, flags, config_dir, dir_found, daemon=None):
    """What the module had to assume about the kubelet's command line, as information findings."""
    out = []
    if daemon:
        if opts["path"] and path != main and not in_dropin_dir(path, config_flag(flags, CONFIG_DIR_FLAG)):
            out.append(finding("warning", "daemon_reads_other_file", "%s reads %s, not %s, so the values reported for that file are not the ones "
                               "it uses" % (daemon["what"], "%s (its --config)" % main if main else "no configuration file", path)))
        elif path is None:
            out.append(finding("info", "no_config_file", "%s has no --config, so the values reported are the kubelet's defaults%s and its flags" % (
                daemon["what"], ", the drop-ins of %s" % config_dir if config_dir else "")))
        return out
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


def generated_findings(path, text, os_name):
    """A generated_file warning when something else writes the file read again."""
    why = layouts.regenerated(path, text, os_name) if path and text is not None else None
    return [finding("warning", "generated_file", "%s is generated: %s." % (path, why))] if why else []


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
    "/usr/lib/systemd/system/kubelet.service",
    "/var/snap/microk8s/current/args/kubelet",
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
