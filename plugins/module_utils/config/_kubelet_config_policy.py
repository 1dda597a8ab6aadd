# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""KubeletConfiguration rules for kubenode.gc.kubelet_config: pure, text in and text out.

* ``normalize_settings``/``apply_settings``: sets only what differs semantically (``2m`` == ``2m0s``,
  ``100Mi`` == ``104857600``), replaces maps exactly, removes keys set to None (editing: _yaml_edit).
* ``effective``: the kubelet's defaulting (_kubelet.DEFAULTS, evictionHard rules), then the file,
  then the --config-dir drop-ins (``dropin_layer``, merged as the kubelet merges them), then the flags (_kubelet_flags).
* ``validate``: the kubelet's checks with its own messages (VAL, eviction ParseThresholdConfig,
  container log manager).
* ``findings`` and ``plan``: everything the module reports.
"""

from __future__ import annotations

import functools
import json
import math
import posixpath
import re
import struct

from ansible_collections.kubenode.gc.plugins.module_utils import _kubelet
from ansible_collections.kubenode.gc.plugins.module_utils._durations import DurationError, format_duration, parse_duration
from ansible_collections.kubenode.gc.plugins.module_utils._errors import ConfigError
from ansible_collections.kubenode.gc.plugins.module_utils._kubelet import DEFAULTS, KINDS, MAP_KINDS, PREFIX, SECOND
from ansible_collections.kubenode.gc.plugins.module_utils._kubelet import EVICTION_HARD as DEFAULT_EVICTION_HARD
from ansible_collections.kubenode.gc.plugins.module_utils._quantity import QuantityError, parse_quantity
from ansible_collections.kubenode.gc.plugins.module_utils.config._findings import finding, sort_findings
from ansible_collections.kubenode.gc.plugins.module_utils.config._kubelet_flags import flag_value
from ansible_collections.kubenode.gc.plugins.module_utils.config._yaml_edit import (
    anchor_of,
    convert,
    delete,
    dump,
    dump_keeping,
    json_type,
    load,
    new_map,
    plain,
    put,
    shared_keys,
    sync_map,
)

MAPPING_OF = "KubeletConfiguration fields"
# Not pointers in v1beta1: the kubelet defaults their zero value too ("0s" -> 2m).
ZERO_DEFAULTED = ("imageMinimumGCAge", "evictionPressureTransitionPeriod", "containerLogMaxSize", "podLogsDir")
SIGNALS = ("memory.available", "allocatableMemory.available", "nodefs.available", "nodefs.inodesFree", "imagefs.available",
           "imagefs.inodesFree", "containerfs.available", "containerfs.inodesFree", "pid.available")
FLOAT32_MAX = 3.4028234663852886e38


class _ParseError(ValueError):
    """A Go parse error without context (strconv, resource.Quantity, time.Duration): reported with the map and key."""


# ---------------------------------------------------------------------------------------------- settings


def normalize_settings(settings):
    """Check the types of the module's ``settings``; digit strings become ints, map values strings. Raises ConfigError."""
    unknown = sorted(set(settings) - set(KINDS))
    if unknown:
        raise ConfigError("Unsupported key%s in settings: %s; the supported keys are %s." % (
            "s" if len(unknown) > 1 else "", ", ".join(unknown), ", ".join(sorted(KINDS))))
    return {key: None if value is None else _normalize(key, KINDS[key], value) for key, value in settings.items()}


def _normalize(key, kind, value):
    if kind == "int":
        if isinstance(value, str) and value.isascii() and value.isdigit():
            return int(value)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise ConfigError("settings.%s must be an integer (or a string of digits), got %r." % (key, value))
    if kind == "bool":
        if isinstance(value, bool):
            return value
        raise ConfigError("settings.%s must be a boolean, got %r." % (key, value))
    if kind in MAP_KINDS:
        if not isinstance(value, dict):
            raise ConfigError("settings.%s must be a mapping of eviction signal to value, got %r." % (key, value))
        return {str(k): _normalize("%s.%s" % (key, k), "entry", v) for k, v in value.items()}
    if kind in ("quantity", "entry") and isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, str):
        return value
    example = {"duration": "a Go duration string such as 2m or 1h30m", "quantity": "a quantity string such as 10Mi"}.get(kind, "a string")
    raise ConfigError("settings.%s must be %s, got %r." % (key, example, value))


def apply_settings(data, settings, origin="the file"):
    """Set each normalized setting in the top-level mapping where it differs semantically; return the keys changed.

    A key whose value shares a node with another key's (a YAML anchor and its alias) is never changed:
    ConfigError, as the edit would change the other key too.
    """
    changed = []
    for key, value in settings.items():
        current = data.get(key)
        if key in data if value is None else (key not in data or not same(KINDS[key], current, value)):
            shared = shared_keys(data, key)
            if shared:
                anchor = anchor_of(current) or next((anchor_of(data[k]) for k in shared if anchor_of(data[k])), None)
                raise ConfigError(
                    "Not changing %s in %s: its value is shared with %s through a YAML anchor and alias%s, so the edit would change %s too; "
                    "write the value out in full under each key, then run again." % (
                        key, origin, ", ".join(shared), " (&%s)" % anchor if anchor else "", "it" if len(shared) == 1 else "them"))
        if value is None:
            if key in data:
                delete(data, key)
                changed.append(key)
        elif KINDS[key] in MAP_KINDS and isinstance(current, dict):
            if sync_map(current, value, functools.partial(same, KINDS[key])):
                changed.append(key)
        elif key not in data or not same(KINDS[key], current, value):
            if KINDS[key] in MAP_KINDS:
                value = new_map(data, value)
            put(data, key, value)
            changed.append(key)
    return changed


def same(kind, current, wanted):
    """Semantic equality of a file value and a normalized setting: durations in ns, quantities by value, percentages as numbers."""
    if kind == "int":
        return isinstance(current, int) and not isinstance(current, bool) and current == wanted
    if kind == "bool":
        return isinstance(current, bool) and current == wanted
    if isinstance(wanted, dict):
        return isinstance(current, dict) and set(current) == set(wanted) and all(same(kind, current[k], wanted[k]) for k in wanted)
    if not isinstance(current, str):
        return False
    try:
        if kind in ("duration", "periods"):
            return parse_duration(current) == parse_duration(wanted)
        if kind in ("quantity", "thresholds", "reclaims"):
            if current.endswith("%") and wanted.endswith("%"):
                return parse_percent(current) == parse_percent(wanted)
            return parse_quantity(current) == parse_quantity(wanted)
    except (DurationError, QuantityError, ValueError):
        pass
    return current == wanted


# ---------------------------------------------------------------------------------------------- effective configuration


GO_BOOLS = {"1": True, "t": True, "T": True, "TRUE": True, "true": True, "True": True,
            "0": False, "f": False, "F": False, "FALSE": False, "false": False, "False": False}


def feature_gates(cfg, flag_values=()):
    """The feature gates the kubelet runs with, as far as the node says: ``featureGates`` of the config file, then each
    ``--feature-gates`` flag value (``A=true,B=false``; a flag wins per gate, as the kubelet applies flags last).

    Returns ``{gate: bool}``; values that are not booleans (strconv.ParseBool) are left out. A gate not in
    the result has the default of the kubelet's version."""
    gates = {}
    file_gates = cfg.get("featureGates") if isinstance(cfg, dict) else None
    for name, value in (file_gates.items() if isinstance(file_gates, dict) else ()):
        if isinstance(value, bool):
            gates[str(name)] = value
    for text in flag_values:
        for pair in filter(None, (p.strip() for p in str(text).split(","))):
            name, _sep, value = pair.partition("=")
            if name.strip() and value.strip() in GO_BOOLS:
                gates[name.strip()] = GO_BOOLS[value.strip()]
    return dict(sorted(gates.items()))


def merge_patch(target, patch):
    """RFC 7386 JSON merge patch (jsonpatch.MergePatch, as the kubelet applies drop-ins): maps merge, null removes."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def dropin_layer(dropins):
    """What the drop-ins ``[(path, mapping)]`` (in the kubelet's order) lay over the file: ``(fields, sources)``.

    The kubelet merges the drop-ins onto each other with a JSON merge patch, then decodes the result over the
    configuration it already holds (file and defaults): a field replaces the file's value, except a map, whose
    entries are added to the file's map one by one (the file's other entries stay). A null removes nothing from
    the file, only from earlier drop-ins. ``sources`` gives, per key, the last drop-in that set it.
    """
    fields, sources = {}, {}
    for path, data in dropins:
        patch = {k: v for k, v in data.items() if k not in ("apiVersion", "kind")}
        fields = merge_patch(fields, patch)
        for key, value in patch.items():
            if key in fields:
                sources[key] = path
            elif value is None:
                sources.pop(key, None)
    return fields, sources


def effective(cfg, overrides=(), dropins=()):
    """What the kubelet uses: its defaults, the file mapping ``cfg``, the drop-ins ``[(path, mapping)]``, then flags.

    That is the kubelet's order (cmd/kubelet/app/server.go): the file, decoded with the defaults; the drop-in
    directory merged onto it (see dropin_layer); the flags parsed again on top.
    Returns ``(values, sources, errors, flag_errors)``: typed values (durations in ns), where each came
    from (``default``, ``file``, ``dropin`` or ``flag``), decode errors of file and drop-in values, and flags that do not parse.
    """
    values, sources, errors, flag_errors = {}, {}, [], []
    for key, kind in KINDS.items():
        value = None
        if cfg.get(key) is not None:
            try:
                value = _decode(key, kind, cfg[key])
            except ConfigError as exc:
                errors.append(str(exc))
        sources[key] = "file" if value is not None else "default"
        if value is None or (key in ZERO_DEFAULTED and not value):
            value = DEFAULTS[key]
        values[key] = dict(value) if isinstance(value, dict) else value
    fields, dropin_sources = dropin_layer(dropins)
    for key, kind in KINDS.items():
        if key not in fields:
            continue
        try:
            value = _decode(key, kind, fields[key])
        except ConfigError as exc:
            errors.append("%s (in %s)" % (exc, dropin_sources[key]))
            continue
        if kind in MAP_KINDS:
            values[key].update(value)
        else:
            values[key] = value  # no defaulting after the merge: a zero value stays zero
        sources[key] = "dropin"
    if sources["evictionHard"] in ("file", "dropin") and values["mergeDefaultEvictionSettings"]:
        values["evictionHard"].update((k, v) for k, v in DEFAULT_EVICTION_HARD.items() if k not in values["evictionHard"])
    seen = set()
    for flag in overrides:
        key = flag["key"]
        if key is None:
            continue
        try:
            value = flag_value(flag["flag"], KINDS[key], flag["value"])
        except ValueError as exc:
            flag_errors.append(dict(flag, message="%s (in %s)" % (exc, flag["file"])))
            continue
        if isinstance(value, dict) and key in seen:
            values[key].update(value)  # a repeated map flag adds to the first one, which replaced the file's map
        else:
            values[key] = value
        seen.add(key)
        sources[key] = "flag"
    return values, sources, errors, flag_errors


def _decode(key, kind, value):
    """A file value as the kubelet decodes it; raises ConfigError with Go's json wording."""
    def mismatch(go_type, field=key, val=value):
        found = json_type(val) + (" %s" % val if json_type(val) == "number" else "")
        return ConfigError("json: cannot unmarshal %s into Go struct field KubeletConfiguration.%s of type %s" % (found, field, go_type))

    if kind in MAP_KINDS:
        if not isinstance(value, dict):
            raise mismatch("map[string]string")
        for item in value.values():
            if not isinstance(item, str):
                raise mismatch("string", val=item)
        return {str(k): str(v) for k, v in value.items()}
    if kind == "int":
        if not isinstance(value, int) or isinstance(value, bool) or not -(2**31) <= value < 2**31:
            raise mismatch("int32")
        return int(value)
    if kind == "bool":
        if not isinstance(value, bool):
            raise mismatch("bool")
        return bool(value)
    if not isinstance(value, str):
        if kind == "duration":
            raise ConfigError("%s: json: cannot unmarshal %s into Go value of type string" % (key, json_type(value)))
        raise mismatch("string")
    if kind == "duration":
        try:
            return parse_duration(value)
        except DurationError as exc:
            raise ConfigError("%s: %s" % (key, exc))
    return str(value)


def report(values):
    """Typed effective values as the module returns them: durations as Go strings (2m0s)."""
    out = {}
    for key, kind in KINDS.items():
        value = values[key]
        if kind == "duration":
            value = format_duration(value)
        elif kind == "periods":
            value = {k: _try_format_duration(v) for k, v in value.items()}
        out[key] = value
    return out


def _try_format_duration(text):
    try:
        return format_duration(parse_duration(text))
    except DurationError:
        return text


# ---------------------------------------------------------------------------------------------- validation


def validate(values):
    """The kubelet's errors for effective ``values``: VAL (prefixed), then eviction thresholds, then the container log manager."""
    errors = _kubelet.threshold_errors(values["imageGCHighThresholdPercent"], values["imageGCLowThresholdPercent"])
    errors += _kubelet.age_errors(values["imageMinimumGCAge"], values["imageMaximumGCAge"])
    if values["containerLogMaxWorkers"] < 1:
        errors.append(PREFIX + "containerLogMaxWorkers must be greater than or equal to 1")
    if values["containerLogMonitorInterval"] < 3 * SECOND:
        errors.append(PREFIX + "containerLogMonitorInterval must be a positive time duration greater than or equal to 3s")
    if values["containerLogMaxFiles"] < 2:
        errors.append(PREFIX + "containerLogMaxFiles (--container-log-max-files) %d must be greater than 1" % values["containerLogMaxFiles"])
    logs_dir = values["podLogsDir"]
    if logs_dir == "":  # only a drop-in can leave it empty: the file's empty value is defaulted, a drop-in's is not
        errors.append(PREFIX + "podLogsDir was not specified")
    if not logs_dir.startswith("/"):
        errors.append(PREFIX + "pod logs path %s must be absolute path" % json.dumps(logs_dir, ensure_ascii=False))
    if _go_clean(logs_dir) != logs_dir:
        errors.append(PREFIX + "pod logs path %s must be normalized" % json.dumps(logs_dir, ensure_ascii=False))
    if not logs_dir.isascii():
        errors.append(PREFIX + "pod logs path %s mut contains ASCII characters only" % json.dumps(logs_dir, ensure_ascii=False))
    errors += eviction_errors(values)
    try:
        parse_quantity(values["containerLogMaxSize"])
    except QuantityError as exc:
        errors.append("failed to initialize container log manager: failed to parse container log max size %s: %s"
                      % (json.dumps(values["containerLogMaxSize"]), exc))
    return list(dict.fromkeys(errors))


def _go_clean(path):
    cleaned = posixpath.normpath(path) if path else "."
    return "/" + cleaned.lstrip("/") if cleaned.startswith("//") else cleaned


def eviction_errors(values):
    """eviction.ParseThresholdConfig's errors, all of them (the kubelet stops at the first), in map order."""
    errors = []
    soft = []
    for key in ("evictionHard", "evictionSoft"):
        for signal, value in values[key].items():
            try:
                if _threshold(signal, value) and key == "evictionSoft":
                    soft.append(signal)
            except _ParseError as exc:
                errors.append("%s[%s]: %s" % (key, signal, exc))
            except ValueError as exc:
                errors.append(str(exc))
    for signal, value in values["evictionSoftGracePeriod"].items():
        if signal not in SIGNALS:
            errors.append("unsupported eviction signal %s" % signal)
            continue
        try:
            if parse_duration(value) < 0:
                errors.append("invalid eviction grace period specified: %s, must be a positive value" % value)
        except DurationError as exc:
            errors.append("evictionSoftGracePeriod[%s]: %s" % (signal, exc))
    for signal, value in values["evictionMinimumReclaim"].items():
        try:
            if signal not in SIGNALS:
                errors.append("unsupported eviction signal %s" % signal)
            elif value.endswith("%"):
                if parse_percent(value) <= 0:
                    errors.append("eviction percentage minimum reclaim %s must be positive: %s" % (signal, value))
            elif parse_quantity(value).sign() < 0:
                errors.append("negative eviction minimum reclaim specified for %s" % signal)
        except ValueError as exc:
            errors.append("evictionMinimumReclaim[%s]: %s" % (signal, exc))
    grace = values["evictionSoftGracePeriod"]
    errors += ["grace period must be specified for the soft eviction threshold %s" % s for s in soft if s not in grace]
    return errors


def _threshold(signal, value):
    """True for a threshold the kubelet enforces, False for an ignored one (0%, 100%); ValueError with Go's message otherwise."""
    if signal not in SIGNALS:
        raise ValueError("unsupported eviction signal %s" % signal)
    if value.endswith("%"):
        if value in ("0%", "100%"):
            return False
        percentage = parse_percent(value)
        if percentage < 0:
            raise ValueError("eviction percentage threshold %s must be >= 0%%: %s" % (signal, value))
        if percentage > 1:
            raise ValueError("eviction percentage threshold %s must be <= 100%%: %s" % (signal, value))
        return True
    try:
        quantity = parse_quantity(value)
    except QuantityError as exc:
        raise _ParseError(exc)
    if quantity.sign() <= 0:
        raise ValueError("eviction threshold %s must be positive: %s" % (signal, quantity))
    return True


def parse_percent(text):
    """The kubelet's parsePercentage: float32(strconv.ParseFloat(TrimRight(text, "%"), 32)) / 100; ValueError with Go's message."""
    number = text.rstrip("%")
    if not re.match(r"[+-]?((\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|inf|infinity|nan)$", number, re.I):
        raise _ParseError("strconv.ParseFloat: parsing %s: invalid syntax" % json.dumps(number))
    value = float(number)
    if math.isfinite(value) and abs(value) > FLOAT32_MAX:
        raise _ParseError("strconv.ParseFloat: parsing %s: value out of range" % json.dumps(number))
    return _float32(_float32(value) / 100)


def _float32(value):
    return struct.unpack("f", struct.pack("f", value))[0]


# ---------------------------------------------------------------------------------------------- findings


def findings(values, sources, cfg, overrides, errors, flag_errors):
    """Checks of the effective configuration, sorted by severity then code."""
    out = [finding("error", "invalid_config", e) for e in errors]
    out += [finding("error", "invalid_flag", f["message"]) for f in flag_errors]
    high, min_age, max_age = values["imageGCHighThresholdPercent"], values["imageMinimumGCAge"], values["imageMaximumGCAge"]
    if 0 < max_age <= min_age:
        out.append(finding("error", "max_age_not_above_min", "imageMaximumGCAge %s is not above imageMinimumGCAge %s, so the kubelet refuses "
                           "the configuration; raise imageMaximumGCAge or set it to 0s to disable age-based image GC"
                           % (format_duration(max_age), format_duration(min_age))))
    for key, kind in (("evictionHard", "hard"), ("evictionSoft", "soft")):
        value = values[key].get("imagefs.available", "")
        try:
            percent = float(value[:-1]) if value.endswith("%") and value not in ("0%", "100%") else None
        except ValueError:
            percent = None
        if percent is not None and 0 < percent < 100 and 100 > high >= 100 - percent:
            out.append(finding("warning", "gc_high_at_or_above_eviction", "imageGCHighThresholdPercent %d is at or above %s%% disk usage, where "
                               "the %s eviction threshold imagefs.available<%s evicts pods, so pods can be evicted for disk pressure before "
                               "image garbage collection frees space; set imageGCHighThresholdPercent below %s" % (
                                   high, _num(100 - percent), kind, value, _num(100 - percent))))
    hard_source = sources["evictionHard"]
    if hard_source == "flag" or (hard_source in ("file", "dropin") and not values["mergeDefaultEvictionSettings"]):
        dropped = ["%s<%s" % (k, v) for k, v in DEFAULT_EVICTION_HARD.items() if k not in values["evictionHard"]]
        if dropped:
            if hard_source == "flag":
                where, fix = "the --eviction-hard flag", "list them in the flag too"
            else:
                where = "evictionHard in the config file%s without mergeDefaultEvictionSettings" % (" and drop-ins" if hard_source == "dropin" else "")
                fix = "list them too or set mergeDefaultEvictionSettings: true (kubelet v1.33+)"
            out.append(finding("warning", "partial_eviction_hard", "%s replaces the kubelet's default hard eviction thresholds, so %s %s not "
                               "monitored; %s" % (where, ", ".join(dropped), "is" if len(dropped) == 1 else "are", fix)))
    bad_flags = [(f["flag"], f["value"], f["file"]) for f in flag_errors]
    for flag in overrides:
        if (flag["flag"], flag["value"], flag["file"]) in bad_flags:
            continue
        setting = "%s=%s in %s" % (flag["flag"], flag["value"], flag["file"])
        if flag["deprecated"]:
            out.append(finding("warning", "deprecated_flag", "%s is a deprecated container garbage collection flag with no config file "
                               "equivalent (the kubelet says: use --eviction-hard or --eviction-soft instead); the kubenode.gc.container_gc "
                               "module applies such a policy from outside the kubelet" % setting))
        elif flag["key"]:
            in_file = cfg.get(flag["key"])
            what = "the config file's %s %s" % (flag["key"], json.dumps(plain(in_file))) if in_file is not None else flag["key"]
            out.append(finding("warning", "flag_overrides_file", "%s overrides %s: the kubelet applies flags on top of the config file, "
                               "so edits of this key in the file have no effect while the flag is set" % (setting, what)))
    if high == 100:
        what = "disabled" if max_age == 0 else "limited to the imageMaximumGCAge pass (no disk-usage threshold)"
        out.append(finding("info", "image_gc_disabled", "imageGCHighThresholdPercent is 100, so the kubelet's image garbage collection is %s; "
                           "images are still removed under disk pressure by eviction" % what))
    return sort_findings(out, by=("code",))


def _num(value):
    return ("%f" % value).rstrip("0").rstrip(".")


# ---------------------------------------------------------------------------------------------- one module run


API_VERSION = "kubelet.config.k8s.io/v1beta1"
KIND = "KubeletConfiguration"


def check_kind(cfg, where):
    """Refuse a document that is not a KubeletConfiguration (kind and apiVersion exactly as the kubelet reads them)."""
    kind, api = cfg.get("kind"), cfg.get("apiVersion")
    if kind is None and api is None:  # a bare fragment of fields (no type at all): read and edited as KubeletConfiguration fields
        return
    if kind != KIND or api != API_VERSION:
        raise ConfigError("%s is not a KubeletConfiguration (kind %s, apiVersion %s; expected kind %s, apiVersion %s); not touching it." % (
            where, "missing" if kind is None else repr(kind), "missing" if api is None else repr(api), KIND, API_VERSION))


def _dropin_data(path, text):
    """A drop-in's mapping; the kubelet decodes each as a typed object, so it must name its kind and apiVersion."""
    data = plain(load(text, path, mapping_of=MAPPING_OF).data)
    if data.get("kind") is None and data.get("apiVersion") is None:
        raise ConfigError("The kubelet drop-in %s has no kind and apiVersion, so the kubelet would not start (it decodes every drop-in as a "
                          "typed object); add kind %s and apiVersion %s to it." % (path, KIND, API_VERSION))
    check_kind(data, "The kubelet drop-in %s" % path)
    return data


def _overridden(key, later, path, uses=None):
    """Which later drop-ins change ``key`` of ``path``, in one clause."""
    setters = _later_setters(key, later)
    entries = sorted({k for p, data in later if isinstance(data.get(key), dict) for k in data[key]})
    if KINDS[key] in MAP_KINDS and entries:
        what = "sets the %s entr%s %s, which the kubelet merges into the map of %s after reading it" % (
            key, "y" if len(entries) == 1 else "ies", ", ".join(entries), path)
    else:
        what = "sets %s and the kubelet applies it after %s" % (key, path)
    text = "the drop-in%s %s %s" % ("s" if len(setters) > 1 else "", ", ".join(setters), what)
    if uses is None:
        return text
    return "%s%s, so edits of this key in %s do not give the value the kubelet uses (%s)" % (text[0].upper(), text[1:], path, json.dumps(uses))


def _later_setters(key, later):
    """The later drop-ins that set ``key`` (all of them when none sets it: then their other keys change it)."""
    return [p for p, data in later if data.get(key) is not None] or [p for p, data in later]


def plan(path, existing, settings=None, content=None, overrides=(), dropins=(), base=None):
    """Everything kubelet_config reports, from text: ``existing`` (None when missing), ``settings``, ``content`` and flags.

    ``dropins`` are the [(path, text)] of the kubelet's --config-dir in its order; ``path`` may be one of them, and
    then ``base`` is the (path, text or None) of the --config file. ``path`` None reports a kubelet without a
    configuration file (flags, drop-ins and defaults only), read-only.
    Raises ConfigError (one sentence) when a text does not parse, settings are wrong, a requested key is overridden
    by a later drop-in, or, when writing, the kubelet would reject the result. Read-only when both ``settings``
    and ``content`` are None.
    """
    read_only = settings is None and content is None
    names = [p for p, t in dropins]
    position = names.index(path) if path in names else -1
    layers = [(p, _dropin_data(p, t)) for p, t in dropins if p != path]
    earlier, later = layers[:max(position, 0)], layers[max(position, 0):]
    if position < 0:
        earlier, later = [], layers
    converted = False
    changes, keys = [], []
    if path is None:
        if not read_only:
            raise ConfigError("The kubelet runs without a configuration file, so there is nothing to edit; give path.")
        doc, base_text, after = None, "", None
        cfg = {}
    else:
        base_text = existing if content is None else content
        if base_text is None:
            raise ConfigError("The kubelet configuration file %s does not exist; give content to create it." % path)
        where = path if content is None else "the content given for %s" % path
        doc = load(base_text, where, mapping_of=MAPPING_OF)
        check_kind(plain(doc.data), where)
        if content is not None:
            wanted_fmt = "json" if path.endswith(".json") else "yaml"
            if doc.fmt != wanted_fmt:
                doc, converted = convert(doc, wanted_fmt), True
        cfg = plain(doc.data)

    def layered(own, with_later=True):
        """(file mapping, drop-ins) with the edited file's mapping ``own`` in its place."""
        if position < 0:
            return own, later if with_later else []
        main = plain(load(base[1], base[0], mapping_of=MAPPING_OF).data) if base and base[1] is not None else {}
        return main, earlier + [(path, own)] + (later if with_later else [])

    def file_values(own, with_later=True):
        """What the kubelet would use from the files alone (flags aside), reported."""
        main, layers_ = layered(own, with_later)
        return report(effective(main, (), layers_)[0])

    if settings:
        before = file_values(cfg, False)
        normalized = normalize_settings(settings)
        keys = apply_settings(doc.data, normalized, where)
        cfg = plain(doc.data)
        alone, merged = file_values(cfg, False), file_values(cfg)
        blocked = [k for k, v in normalized.items() if v is not None and alone[k] != merged[k]]
        if blocked:
            key = blocked[0]
            raise ConfigError("settings.%s cannot take effect: %s; edit or remove it there (or give that drop-in as path), nothing was written."
                              % (key, _overridden(key, later, path)))
        # drift in what the kubelet would use from the file (defaults included, flags and later drop-ins aside)
        changes = [dict(key=k, before=before[k], after=alone[k]) for k in keys if before[k] != alone[k]]
    if doc is not None and converted:
        after = dump(doc)
    elif doc is not None:  # every line outside the edited keys as written (_byte_guard)
        after = dump_keeping(doc, base_text, keys, path) if keys else base_text
    main_cfg, dropin_cfgs = layered(cfg)
    values, sources, errors, flag_errors = effective(main_cfg, overrides, dropin_cfgs)
    errors += validate(values)
    if errors and not read_only:
        flags = sorted({f["file"] for f in overrides if f["key"]})
        raise ConfigError("Not writing %s because the kubelet would reject the result%s: %s." % (
            path, " (with the flags in %s applied on top, as the kubelet does)" % ", ".join(flags) if flags else "", "; ".join(errors)))
    changed = not read_only and after != existing
    found = findings(values, sources, cfg, overrides, errors if read_only else [], flag_errors)
    if path is not None:
        alone, merged = file_values(cfg, False), file_values(cfg)
        for key in KINDS:
            if cfg.get(key) is not None and alone[key] != merged[key]:
                found.append(finding("warning", "dropin_overrides_file", _overridden(key, later, path, merged[key])))
    where_from = dict(sources)
    dropin_sources = dropin_layer(dropin_cfgs)[1]
    for key, source in where_from.items():
        if source == "dropin":
            where_from[key] = dropin_sources[key]
        elif source == "file":
            where_from[key] = main_cfg is cfg and path or (base[0] if base else path)
        elif source == "flag":
            where_from[key] = [f["file"] for f in overrides if f["key"] == key][-1]
    return dict(
        changed=changed, created=changed and existing is None, format=doc.fmt if doc is not None else None, before=existing or "",
        after=after, config=cfg, effective=report(values), sources=where_from, flag_overrides=list(overrides), changes=changes,
        findings=sort_findings(found, by=("code",)),
    )
