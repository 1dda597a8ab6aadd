# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""The kubelet's command-line flags, as they are set in environment files and systemd units.

* ``parse_flag_files``: the flags we know (and --config, --config-dir) in kubeadm-flags.env, /etc/default/kubelet,
  /etc/sysconfig/kubelet, kubespray's kubelet.env, EKS nodeadm's environment and systemd units or drop-ins,
  including k3s/RKE2 ``--kubelet-arg`` options;
* ``distro_kubelet_args``: the ``kubelet-arg`` lists of k3s/RKE2 config files;
* ``flag_overrides``/``config_flag``: which flags override config file keys, and the config file (and directory);
* ``flag_value``: one flag value parsed as pflag does, with the kubelet's wording.
"""

from __future__ import annotations

import json
import re
import shlex

from ansible_collections.kubenode.gc.plugins.module_utils._daemons import unexpanded
from ansible_collections.kubenode.gc.plugins.module_utils._durations import DurationError, parse_duration
from ansible_collections.kubenode.gc.plugins.module_utils._kubelet import MAP_KINDS

FLAG_KEYS = {
    "--image-gc-high-threshold": "imageGCHighThresholdPercent",
    "--image-gc-low-threshold": "imageGCLowThresholdPercent",
    "--minimum-image-ttl-duration": "imageMinimumGCAge",
    "--eviction-hard": "evictionHard",
    "--eviction-soft": "evictionSoft",
    "--eviction-soft-grace-period": "evictionSoftGracePeriod",
    "--eviction-minimum-reclaim": "evictionMinimumReclaim",
    "--eviction-pressure-transition-period": "evictionPressureTransitionPeriod",
    "--eviction-max-pod-grace-period": "evictionMaxPodGracePeriod",
    "--container-log-max-size": "containerLogMaxSize",
    "--container-log-max-files": "containerLogMaxFiles",
}
DEPRECATED_FLAGS = ("--minimum-container-ttl-duration", "--maximum-dead-containers-per-container", "--maximum-dead-containers")
CONFIG_FLAG = "--config"
CONFIG_DIR_FLAG = "--config-dir"
# k3s and RKE2 pass the kubelet flags of their --kubelet-arg options (name=value, without dashes) to the kubelet
KUBELET_ARG = "--kubelet-arg"
# flags read for information only (never in flag_overrides): the feature gates and the kubelet's root directory
FEATURE_GATES_FLAG = "--feature-gates"
ROOT_DIR_FLAG = "--root-dir"
INFO_FLAGS = (FEATURE_GATES_FLAG, ROOT_DIR_FLAG)
KNOWN_FLAGS = frozenset(set(FLAG_KEYS) | set(DEPRECATED_FLAGS) | {CONFIG_FLAG, CONFIG_DIR_FLAG} | set(INFO_FLAGS))


def parse_flag_files(files):
    """The kubelet flags we know (and --config, --config-dir) in ``[(path, text)]``, in order: ``[{flag, value, file}]``.

    Environment files (kubeadm-flags.env, /etc/default/kubelet, /etc/sysconfig/kubelet) hold
    ``NAME="--a=b --c d"`` lines; systemd units and drop-ins hold ``Environment=`` and ``ExecStart=`` lines.
    """
    found = []
    known = KNOWN_FLAGS
    for path, text in files:
        unit = re.search(r"^[ \t]*\[[A-Za-z]+\][ \t]*$", text, re.M) is not None
        tokens = []
        for line in re.sub(r"\\\r?\n", " ", text).splitlines():
            if not unit and line.strip().startswith("--"):  # an arguments file, one flag per line (MicroK8s's args/kubelet)
                tokens += _split(line.strip())
                continue
            name, sep, value = line.strip().partition("=")
            name = name.strip()
            if not sep or name.startswith(("#", ";")):
                continue
            if unit and name == "ExecStart":
                tokens += _split(value)
            elif unit and name == "Environment":
                tokens += [t for item in _split(value) for t in item.partition("=")[2].split()]
            elif not unit and re.match(r"(export\s+)?[A-Za-z_][A-Za-z0-9_]*$", name):
                tokens += [t for item in _split(value) for t in item.split()]
        found += _flags_of(tokens, path, known)
    return found


def command_line_flags(words, source):
    """The kubelet flags we know (and --config, --config-dir) in the words of its command line, parsed as pflag does:
    ``--flag=value`` or ``--flag value``, up to a ``--``; ``source`` names where they come from."""
    words = list(words)
    return _flags_of(words[:words.index("--")] if "--" in words else words, source, KNOWN_FLAGS)


def _flags_of(tokens, path, known):
    found = []
    words = iter(tokens)
    for word in words:
        flag, sep, value = word.partition("=")
        if flag == KUBELET_ARG:
            value = value if sep else next(words, None)
            found += kubelet_arg_flags([value] if value is not None else [], path)
        elif flag in known:
            value = value if sep else next(words, None)
            if value is not None and not unexpanded(value):  # a ${VAR} nothing expands is no value
                found.append(dict(flag=flag, value=value, file=path))
    return found


def kubelet_arg_flags(values, path):
    """The flags we know in k3s/RKE2 ``kubelet-arg`` values (``name=value``, dashes optional), as parse_flag_files gives them.

    k3s and RKE2 never pass ``config`` and ``config-dir`` on: they copy that file (as 10-cli-config.conf) or
    directory (as 20-cli-config-dir/) into their own drop-in directory, which is then read with the others."""
    found = []
    for item in values:
        if not isinstance(item, str):
            continue
        name, sep, value = item.strip().partition("=")
        flag = "--" + name.lstrip("-")
        if sep and flag in KNOWN_FLAGS and flag not in (CONFIG_FLAG, CONFIG_DIR_FLAG):
            found.append(dict(flag=flag, value=value, file=path))
    return found


def distro_kubelet_args(configs):
    """The kubelet flags of k3s/RKE2 config files ``[(path, data)]`` in the order they read them (config.yaml, then
    config.yaml.d/*.yaml sorted): a later file's ``kubelet-arg`` replaces the list, ``kubelet-arg+`` appends to it."""
    found = []
    for path, data in configs:
        if not isinstance(data, dict):
            continue
        for key in ("kubelet-arg", "kubelet-arg+"):
            if key not in data:
                continue
            values = data[key] if isinstance(data[key], list) else [data[key]]
            found = (found if key.endswith("+") else []) + kubelet_arg_flags(values, path)
    return found


def _split(value):
    try:
        return shlex.split(value)
    except ValueError:  # unbalanced quotes: take the words as they are
        return [word.strip("\"'") for word in value.split()]


def flag_overrides(flags):
    """The module's ``flag_overrides``: flags for supported keys and the deprecated container-GC flags."""
    return [dict(f, key=FLAG_KEYS.get(f["flag"]), deprecated=f["flag"] in DEPRECATED_FLAGS) for f in flags
            if f["flag"] not in (CONFIG_FLAG, CONFIG_DIR_FLAG) and f["flag"] not in INFO_FLAGS]


def info_flags(flags, flag):
    """The values of an information-only flag (INFO_FLAGS), in order."""
    return [f["value"] for f in flags if f["flag"] == flag]


def config_flag(flags, flag=CONFIG_FLAG):
    """The last --config (or ``flag``, such as --config-dir) path given to the kubelet, or None."""
    paths = [f["value"] for f in flags if f["flag"] == flag]
    return paths[-1] if paths else None


def flag_value(flag, kind, text):
    """Parse a flag value of ``kind`` (_kubelet.KINDS) as pflag does; raises ValueError with the kubelet's wording."""
    try:
        if kind == "int":
            return _go_int32(text)
        if kind == "duration":
            return parse_duration(text)
        if kind in MAP_KINDS:
            separator = "<" if kind == "thresholds" else "="
            result = {}
            for pair in filter(None, (p.strip() for p in text.split(","))):
                name, sep, value = pair.partition(separator)
                if not sep:
                    raise ValueError("malformed pair, expect string%sstring" % separator)
                result[name.strip()] = value.strip()
            return result
        return text
    except (ValueError, DurationError) as exc:
        raise ValueError('invalid argument "%s" for "%s" flag: %s' % (text, flag, exc))


def _go_int32(text):
    """strconv.ParseInt(text, 0, 32): decimal, 0x, 0o, 0b, or a leading 0 for octal."""
    try:
        if text != text.strip():
            raise ValueError(text)
        number = int(text, 8) if re.match(r"[+-]?0[0-7_]+$", text) else int(text, 0)
    except ValueError:
        raise ValueError("strconv.ParseInt: parsing %s: invalid syntax" % json.dumps(text))
    if not -(2**31) <= number < 2**31:
        raise ValueError("strconv.ParseInt: parsing %s: value out of range" % json.dumps(text))
    return number
