# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""The image GC policy that applies to a node, in one place: the node's effective kubelet configuration (file, drop-ins,
flags, as kubenode.gc.kubelet_config reads it), overridden by the variables the user set, else the kubelet's defaults;
each value with where it came from.

Used by the audit (its plan under the policy) and the cleanup (its skip decision and image_gc's options) through the
kubenode.gc.image_gc_policy filter, so that both take their thresholds from the same code. PURE: no I/O, no Ansible, so
that a node-side module can call it too.
"""

from __future__ import annotations

from collections.abc import Mapping

from ansible_collections.kubenode.gc.plugins.module_utils import _kubelet
from ansible_collections.kubenode.gc.plugins.module_utils._durations import DurationError, format_duration, parse_duration
from ansible_collections.kubenode.gc.plugins.module_utils._errors import PolicyError

# image_gc option -> (KubeletConfiguration key, the cleanup variable that overrides it, the kubelet's default)
KEYS = (
    ("high_threshold_percent", "imageGCHighThresholdPercent", "kubenode_gc_cleanup_high_threshold_percent", _kubelet.IMAGE_GC_HIGH_THRESHOLD_PERCENT),
    ("low_threshold_percent", "imageGCLowThresholdPercent", "kubenode_gc_cleanup_low_threshold_percent", _kubelet.IMAGE_GC_LOW_THRESHOLD_PERCENT),
    ("min_age", "imageMinimumGCAge", "kubenode_gc_cleanup_image_min_age", _kubelet.IMAGE_MINIMUM_GC_AGE),
    ("max_age", "imageMaximumGCAge", "kubenode_gc_cleanup_image_max_age", _kubelet.IMAGE_MAXIMUM_GC_AGE),
)
VARIABLES = tuple(variable for _option, _key, variable, _default in KEYS)

SOURCE_VARIABLE = "variable"
SOURCE_NODE = "node"
SOURCE_DEFAULT = "default"


def _unset(value):
    return value is None or (isinstance(value, str) and value.strip() == "")


def _read(option, value, name):
    """A value of ``option`` as image_gc takes it (int percent, duration in ns); PolicyError naming ``name``."""
    if option.endswith("_percent"):
        if isinstance(value, bool):
            raise PolicyError("%s must be an integer percent between 0 and 100, got %r." % (name, value))
        try:
            number = int(str(value).strip()) if isinstance(value, str) else int(value)
        except (TypeError, ValueError):
            raise PolicyError("%s must be an integer percent between 0 and 100, got %r." % (name, value)) from None
        if isinstance(value, float) and value != number:
            raise PolicyError("%s must be an integer percent between 0 and 100, got %r." % (name, value))
        if not 0 <= number <= 100:
            raise PolicyError("%s must be an integer percent between 0 and 100, got %d." % (name, number))
        return number
    if isinstance(value, int) and not isinstance(value, bool):
        return value  # nanoseconds, as the kubelet's defaults are held
    try:
        ns = parse_duration(value)
    except DurationError as exc:
        raise PolicyError("%s must be a Go duration the kubelet accepts, such as 2m or 168h, got %r (%s)." % (name, value, exc)) from None
    if ns < 0:
        raise PolicyError("%s must not be negative, got %r." % (name, value))
    return ns


def _node_source(kubelet, key):
    """Where a node's effective value of ``key`` comes from: its flags, its configuration file (or drop-ins), else None."""
    flags = [f for f in kubelet.get("flag_overrides") or [] if isinstance(f, Mapping) and f.get("key") == key]
    if flags:
        flag = flags[-1]
        return "node's kubelet flag %s in %s" % (flag.get("flag"), flag.get("file"))
    config = kubelet.get("config")
    if isinstance(config, Mapping) and key in config:
        return "node's kubelet config %s" % (kubelet.get("path") or "")
    return None


def node_readable(kubelet):
    """Whether ``kubelet`` is a kubenode.gc.kubelet_config result with the node's effective configuration."""
    return isinstance(kubelet, Mapping) and not kubelet.get("failed") and not kubelet.get("skipped") and isinstance(kubelet.get("effective"), Mapping)


def image_gc_policy(kubelet=None, overrides=None, variables=None):
    """image_gc's thresholds and ages for a node, with where each came from.

    ``kubelet`` is the node's kubenode.gc.kubelet_config result (its ``effective`` values and where they come from), or
    None / a failed result when the node's kubelet configuration could not be read (then the kubelet's defaults apply).
    ``overrides`` maps the cleanup variables (VARIABLES) to the value the user set; unset (None or empty) values are
    skipped. ``variables`` names the four overriding variables in that order when they are not the cleanup's (the
    kubenode.gc.gc_timer role's ``gc_timer_*``), so that errors and sources name what the user set.
    Returns ``{high_threshold_percent, low_threshold_percent, min_age, max_age, sources}``, durations as Go duration
    strings, ``sources`` mapping each option to ``{"kind": variable|node|default, "from": text}``.
    Raises PolicyError (one sentence naming the variable the user set) when a value is wrong or low >= high.
    """
    overrides = dict(overrides or {})
    names = tuple(variables) if variables else VARIABLES
    if len(names) != len(KEYS):
        raise PolicyError("image_gc_policy: variables must name %d variables, got %d." % (len(KEYS), len(names)))
    unknown = sorted(set(overrides) - set(names))
    if unknown:
        raise PolicyError("image_gc_policy: unknown override %s (expected one of %s)." % (unknown[0], ", ".join(names)))
    readable = node_readable(kubelet)
    effective = kubelet["effective"] if readable else {}
    values, sources = {}, {}
    for (option, key, _variable, default), variable in zip(KEYS, names):
        if not _unset(overrides.get(variable)):
            values[option] = _read(option, overrides[variable], variable)
            sources[option] = {"kind": SOURCE_VARIABLE, "from": "variable %s" % variable}
            continue
        if readable and not _unset(effective.get(key)):
            where = _node_source(kubelet, key)
            values[option] = _read(option, effective[key], "%s (%s)" % (key, where or "the node's kubelet config"))
            if where is None and values[option] == default:
                sources[option] = {"kind": SOURCE_DEFAULT, "from": "kubelet default"}
            else:
                sources[option] = {"kind": SOURCE_NODE, "from": where or "node's kubelet config"}
        else:
            values[option] = default
            sources[option] = {"kind": SOURCE_DEFAULT, "from": "kubelet default"}
    high, low = values["high_threshold_percent"], values["low_threshold_percent"]
    if low >= high:
        raise PolicyError("%s must be below %s: the low threshold %d%% (%s) is not below the high threshold %d%% (%s)." % (
            _name(sources, "low_threshold_percent", "imageGCLowThresholdPercent"),
            _name(sources, "high_threshold_percent", "imageGCHighThresholdPercent"),
            low, sources["low_threshold_percent"]["from"], high, sources["high_threshold_percent"]["from"]))
    min_age, max_age = values["min_age"], values["max_age"]
    if 0 < max_age <= min_age:
        raise PolicyError("%s must be greater than %s: the maximum image age %s (%s) is not above the minimum %s (%s)." % (
            _name(sources, "max_age", "imageMaximumGCAge"), _name(sources, "min_age", "imageMinimumGCAge"),
            format_duration(max_age), sources["max_age"]["from"], format_duration(min_age), sources["min_age"]["from"]))
    out = dict(values)
    out["min_age"], out["max_age"] = format_duration(min_age), format_duration(max_age)
    out["sources"] = sources
    return out


def _name(sources, option, key):
    """The name to give the user for ``option``: the variable they set, else the kubelet setting."""
    if sources[option]["kind"] == SOURCE_VARIABLE:
        return sources[option]["from"][len("variable "):]
    return key


def describe_sources(policy):
    """One line: which thresholds and ages came from where, for summaries and history records."""
    groups = {}
    for option, _key, _variable, _default in KEYS:
        value = policy[option]
        groups.setdefault(policy["sources"][option]["from"], []).append("%s %s" % (option, "%d%%" % value if option.endswith("_percent") else value))
    return "; ".join("%s from %s" % (", ".join(items), where) for where, items in groups.items())


def over_high_threshold(usage_percent, high):
    """The kubelet's trigger for image GC: usage at or above the high threshold (the audit's "over" and the cleanup's go)."""
    return usage_percent is not None and high is not None and int(usage_percent) >= int(high)
