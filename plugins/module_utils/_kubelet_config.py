# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""KubeletConfiguration files for kubenode.gc.kubelet_config: pure, text in and text out.

* ``load``/``dump``: YAML round-trip with ruamel.yaml (comments, key order, quoting and indentation
  kept) or JSON (key order, indent and trailing newline kept).
* ``apply_settings``: sets only what differs semantically (``2m`` == ``2m0s``, ``100Mi`` ==
  ``104857600``), replaces maps exactly, removes keys set to None.
* ``effective``: the kubelet's defaulting (DEF, evictionHard rules), then the file, then the flags.
* ``validate``: the kubelet's checks with its own messages (VAL, eviction ParseThresholdConfig,
  container log manager).
* ``parse_flag_files``: kubelet flags in kubeadm-flags.env, /etc/default/kubelet and systemd drop-ins.
* ``findings`` and ``plan``: everything the module reports.
"""

from __future__ import annotations

import bisect
import io
import json
import math
import posixpath
import re
import shlex
import struct
import traceback

from ansible_collections.kubenode.gc.plugins.module_utils import _kubelet
from ansible_collections.kubenode.gc.plugins.module_utils._durations import DurationError, format_duration, parse_duration
from ansible_collections.kubenode.gc.plugins.module_utils._errors import ConfigError
from ansible_collections.kubenode.gc.plugins.module_utils._findings import finding, sort_findings
from ansible_collections.kubenode.gc.plugins.module_utils._kubelet import EVICTION_HARD as DEFAULT_EVICTION_HARD, PREFIX, SECOND
from ansible_collections.kubenode.gc.plugins.module_utils._quantity import QuantityError, parse_quantity

try:
    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedMap
    from ruamel.yaml.error import CommentMark, YAMLError
    from ruamel.yaml.scalarstring import ScalarString
    from ruamel.yaml.tokens import CommentToken
except ImportError:
    HAS_RUAMEL = False
    RUAMEL_IMPORT_ERROR = traceback.format_exc()
else:
    HAS_RUAMEL = True
    RUAMEL_IMPORT_ERROR = None

# The supported keys and how their values are read, compared and checked.
KINDS = {
    "imageGCHighThresholdPercent": "int",
    "imageGCLowThresholdPercent": "int",
    "imageMinimumGCAge": "duration",
    "imageMaximumGCAge": "duration",
    "evictionHard": "thresholds",
    "evictionSoft": "thresholds",
    "evictionSoftGracePeriod": "periods",
    "evictionMinimumReclaim": "reclaims",
    "evictionPressureTransitionPeriod": "duration",
    "evictionMaxPodGracePeriod": "int",
    "mergeDefaultEvictionSettings": "bool",
    "containerLogMaxSize": "quantity",
    "containerLogMaxFiles": "int",
    "containerLogMaxWorkers": "int",
    "containerLogMonitorInterval": "duration",
    "podLogsDir": "string",
}
MAP_KINDS = ("thresholds", "periods", "reclaims")
DEFAULTS = {
    "imageGCHighThresholdPercent": _kubelet.IMAGE_GC_HIGH_THRESHOLD_PERCENT, "imageGCLowThresholdPercent": _kubelet.IMAGE_GC_LOW_THRESHOLD_PERCENT,
    "imageMinimumGCAge": _kubelet.IMAGE_MINIMUM_GC_AGE, "imageMaximumGCAge": _kubelet.IMAGE_MAXIMUM_GC_AGE,
    "evictionHard": DEFAULT_EVICTION_HARD, "evictionSoft": {}, "evictionSoftGracePeriod": {}, "evictionMinimumReclaim": {},
    "evictionPressureTransitionPeriod": _kubelet.EVICTION_PRESSURE_TRANSITION_PERIOD, "evictionMaxPodGracePeriod": 0,
    "mergeDefaultEvictionSettings": False, "containerLogMaxSize": _kubelet.CONTAINER_LOG_MAX_SIZE,
    "containerLogMaxFiles": _kubelet.CONTAINER_LOG_MAX_FILES, "containerLogMaxWorkers": _kubelet.CONTAINER_LOG_MAX_WORKERS,
    "containerLogMonitorInterval": _kubelet.CONTAINER_LOG_MONITOR_INTERVAL, "podLogsDir": _kubelet.POD_LOGS_DIR,
}
# Not pointers in v1beta1: the kubelet defaults their zero value too ("0s" -> 2m).
ZERO_DEFAULTED = ("imageMinimumGCAge", "evictionPressureTransitionPeriod", "containerLogMaxSize", "podLogsDir")
SIGNALS = ("memory.available", "allocatableMemory.available", "nodefs.available", "nodefs.inodesFree", "imagefs.available",
           "imagefs.inodesFree", "containerfs.available", "containerfs.inodesFree", "pid.available")
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
FLOAT32_MAX = 3.4028234663852886e38


class _ParseError(ValueError):
    """A Go parse error without context (strconv, resource.Quantity, time.Duration): reported with the map and key."""


# ---------------------------------------------------------------------------------------------- documents


class Document:
    """A parsed configuration file: its top-level mapping and what is needed to write it back the same way."""

    def __init__(self, fmt, data, yaml=None, preamble="", indent=2, newline=True):
        self.fmt, self.data, self.yaml, self.preamble, self.indent, self.newline = fmt, data, yaml, preamble, indent, newline


def detect_format(text):
    return "json" if text.lstrip("\ufeff \t\r\n").startswith("{") else "yaml"


def new_yaml(mapping=2, sequence=2, offset=0):
    yaml = YAML()
    yaml.preserve_quotes = True
    yaml.width = 4096
    yaml.indent(mapping=mapping, sequence=sequence, offset=offset)
    return yaml


def load(text, origin, fmt=None):
    """Parse ``text`` (JSON when it starts with ``{``, else YAML); ``origin`` names it in errors."""
    fmt = fmt or detect_format(text)
    if fmt == "json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError("Cannot parse %s as JSON: line %d, column %d: %s." % (origin, exc.lineno, exc.colno, exc.msg))
        match = re.search(r"\n([ \t]+)\S", text)
        indent = match.group(1) if match else (None if data and "\n" not in text.strip() else 2)
        doc = Document("json", data, indent=indent, newline=text.endswith("\n"))
    else:
        yaml = new_yaml(*_guess_indent(text))
        try:
            data = yaml.load(text)
        except YAMLError as exc:
            mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
            problem = getattr(exc, "problem", None) or str(exc).strip().splitlines()[0]
            where = "line %d, column %d: " % (mark.line + 1, mark.column + 1) if mark else ""
            raise ConfigError("Cannot parse %s as YAML: %s%s." % (origin, where, problem.rstrip(".")))
        match = re.match(r"(?:[ \t]*(?:#[^\n]*)?\n|%[^\n]*\n)*---[ \t]*(?:#[^\n]*)?\n", text)
        doc = Document("yaml", data, yaml=yaml, preamble=match.group(0) if match else "")
    if not isinstance(doc.data, dict):
        what = "empty" if doc.data is None else {"array": "a list", "number": "a number", "bool": "a boolean"}.get(_json_type(doc.data), "a string")
        raise ConfigError("The top level of %s is %s, not a mapping of KubeletConfiguration fields." % (origin, what))
    return doc


def _guess_indent(text):
    """(mapping, sequence, offset) indentation of block-style YAML, as ruamel.yaml's indent() takes it; kubeadm writes 2, 2, 0."""
    mapping = sequence = offset = None
    parent = None  # indentation of the previous line when it opened a block ("key:")
    for line in text.splitlines():
        body = line.lstrip(" ")
        if not body or body.startswith("#"):
            continue
        lead = len(line) - len(body)
        if parent is not None and lead >= parent:
            if body == "-" or body.startswith("- "):
                if sequence is None:
                    offset = lead - parent
                    sequence = offset + len(body) - len(body[1:].lstrip(" "))
            elif mapping is None and lead > parent:
                mapping = lead - parent
        parent = lead if re.match(r"[^\s#-].*?:[ \t]*(#.*)?$", body) else None
    return mapping or 2, sequence or 2, offset or 0


def dump(doc):
    if doc.fmt == "json":
        text = json.dumps(doc.data, indent=doc.indent, ensure_ascii=False)
        return text + "\n" if doc.newline else text
    out = io.StringIO()
    doc.yaml.dump(doc.data, out)
    return doc.preamble + out.getvalue()


def convert(doc, fmt):
    """The document in the other format (for content whose format differs from the path's extension)."""
    data = plain(doc.data)
    if fmt == "json":
        return Document("json", data)
    out = io.StringIO()
    new_yaml().dump(data, out)
    return load(out.getvalue(), "converted content", "yaml")


def plain(value):
    """ruamel.yaml's round-trip types as plain Python values."""
    if isinstance(value, dict):
        return {(k if isinstance(k, str) else str(k)): plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    for kind in (bool, int, float, str):
        if isinstance(value, kind):
            return kind(value)
    return value if value is None else str(value)


def _json_type(value):
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    for kind, name in ((str, "string"), (list, "array"), (dict, "object")):
        if isinstance(value, kind):
            return name
    return "value"


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


def apply_settings(data, settings):
    """Set each normalized setting in the top-level mapping where it differs semantically; return the keys changed."""
    changed = []
    for key, value in settings.items():
        current = data.get(key)
        if value is None:
            if key in data:
                _delete(data, key)
                changed.append(key)
        elif KINDS[key] in MAP_KINDS and isinstance(current, dict):
            if _sync_map(current, value, KINDS[key]):
                changed.append(key)
        elif key not in data or not same(KINDS[key], current, value):
            if KINDS[key] in MAP_KINDS:
                value = _new_map(data, value)
            _put(data, key, value)
            changed.append(key)
    return changed


def _sync_map(current, wanted, kind):
    if not current and hasattr(current, "fa"):
        current.fa.set_block_style()  # an empty "{}" that gets entries
    changed = False
    for key in [k for k in current if k not in wanted]:
        _delete(current, key)
        changed = True
    for key, value in wanted.items():
        if key not in current or not same(kind, current[key], value):
            _put(current, key, value)
            changed = True
    return changed


def _new_map(parent, items):
    if HAS_RUAMEL and isinstance(parent, CommentedMap):
        return CommentedMap(items)
    return dict(items)


def _put(mapping, key, value):
    """Replace in place (keeping position, comment and quoting style), or insert in sorted position when the keys are sorted."""
    if key in mapping:
        old = mapping[key]
        mapping[key] = type(old)(value) if HAS_RUAMEL and isinstance(old, ScalarString) and isinstance(value, str) else value
        return
    keys = list(mapping)
    if len(keys) < 2 or not all(isinstance(k, str) for k in keys) or keys != sorted(keys):
        mapping[key] = value
    elif hasattr(mapping, "insert"):
        mapping.insert(bisect.bisect(keys, key), key, value)
    else:
        items = list(mapping.items())
        items.insert(bisect.bisect(keys, key), (key, value))
        mapping.clear()
        mapping.update(items)


def _delete(mapping, key):
    """Delete a key; the full-line comments stored with it (they belong to the next key) stay where they were."""
    keys = list(mapping)
    slot = mapping.ca.items.get(key) if hasattr(mapping, "ca") else None
    del mapping[key]
    token = slot[2] if slot and len(slot) > 2 else None
    rest = token.value.partition("\n")[2] if token is not None else ""
    if not rest.strip():
        return
    position = keys.index(key)
    if position:  # after the previous key's own comment, when its value is a scalar
        if isinstance(mapping[keys[position - 1]], (dict, list)):
            return
        previous = mapping.ca.items.setdefault(keys[position - 1], [None, None, None, None])
        if previous[2] is None:
            token.value = "\n" + rest
            previous[2] = token
        else:
            previous[2].value += rest
        return
    lines = rest.splitlines()  # before the (new) first key: the mapping's start comment, shared with the parent's slot
    indent = min(len(line) - len(line.lstrip()) for line in lines if line.strip())
    tokens = [CommentToken(line.strip() + "\n" if line.strip() else "\n", CommentMark(indent)) for line in lines]
    if mapping.ca.comment and mapping.ca.comment[1] is not None:
        mapping.ca.comment[1].extend(tokens)
    else:
        mapping.ca.comment = [None, tokens]


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


# ---------------------------------------------------------------------------------------------- flags


def parse_flag_files(files):
    """The kubelet flags we know (and --config) in ``[(path, text)]``, in order: ``[{flag, value, file}]``.

    Environment files (kubeadm-flags.env, /etc/default/kubelet, /etc/sysconfig/kubelet) hold
    ``NAME="--a=b --c d"`` lines; systemd units and drop-ins hold ``Environment=`` and ``ExecStart=`` lines.
    """
    found = []
    known = set(FLAG_KEYS) | set(DEPRECATED_FLAGS) | {CONFIG_FLAG}
    for path, text in files:
        unit = re.search(r"^[ \t]*\[[A-Za-z]+\][ \t]*$", text, re.M) is not None
        tokens = []
        for line in re.sub(r"\\\r?\n", " ", text).splitlines():
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
        words = iter(tokens)
        for word in words:
            flag, sep, value = word.partition("=")
            if flag in known:
                value = value if sep else next(words, None)
                if value is not None:
                    found.append(dict(flag=flag, value=value, file=path))
    return found


def _split(value):
    try:
        return shlex.split(value)
    except ValueError:  # unbalanced quotes: take the words as they are
        return [word.strip("\"'") for word in value.split()]


def flag_overrides(flags):
    """The module's ``flag_overrides``: flags for supported keys and the deprecated container-GC flags."""
    return [dict(f, key=FLAG_KEYS.get(f["flag"]), deprecated=f["flag"] in DEPRECATED_FLAGS) for f in flags if f["flag"] != CONFIG_FLAG]


def config_flag(flags):
    """The last --config path given to the kubelet, or None."""
    paths = [f["value"] for f in flags if f["flag"] == CONFIG_FLAG]
    return paths[-1] if paths else None


def _flag_value(flag, key, text):
    """Parse a flag value as pflag does; raises ValueError with the kubelet's wording."""
    kind = KINDS[key]
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


# ---------------------------------------------------------------------------------------------- effective configuration


def effective(cfg, overrides=()):
    """What the kubelet uses: its defaults, the file mapping ``cfg``, then flags (which win, as in the kubelet).

    Returns ``(values, sources, errors, flag_errors)``: typed values (durations in ns), where each came
    from (``default``, ``file`` or ``flag``), decode errors of file values, and flags that do not parse.
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
    if sources["evictionHard"] == "file" and values["mergeDefaultEvictionSettings"]:
        values["evictionHard"].update((k, v) for k, v in DEFAULT_EVICTION_HARD.items() if k not in values["evictionHard"])
    seen = set()
    for flag in overrides:
        key = flag["key"]
        if key is None:
            continue
        try:
            value = _flag_value(flag["flag"], key, flag["value"])
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
        found = _json_type(val) + (" %s" % val if _json_type(val) == "number" else "")
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
            raise ConfigError("%s: json: cannot unmarshal %s into Go value of type string" % (key, _json_type(value)))
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
    if hard_source == "flag" or (hard_source == "file" and not values["mergeDefaultEvictionSettings"]):
        dropped = ["%s<%s" % (k, v) for k, v in DEFAULT_EVICTION_HARD.items() if k not in values["evictionHard"]]
        if dropped:
            if hard_source == "flag":
                where, fix = "the --eviction-hard flag", "list them in the flag too"
            else:
                where = "evictionHard in the config file without mergeDefaultEvictionSettings"
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


def plan(path, existing, settings=None, content=None, overrides=()):
    """Everything kubelet_config reports, from text: ``existing`` (None when missing), ``settings``, ``content`` and flags.

    Raises ConfigError (one sentence) when the text does not parse, settings are wrong, or, when
    writing, the kubelet would reject the result. Read-only when both ``settings`` and ``content`` are None.
    """
    base = existing if content is None else content
    if base is None:
        raise ConfigError("The kubelet configuration file %s does not exist; give content to create it." % path)
    doc = load(base, path if content is None else "the content given for %s" % path)
    modified = False
    if content is not None:
        wanted_fmt = "json" if path.endswith(".json") else "yaml"
        if doc.fmt != wanted_fmt:
            doc, modified = convert(doc, wanted_fmt), True
    read_only = settings is None and content is None
    changes = []
    if settings:
        before = report(effective(plain(doc.data))[0])
        keys = apply_settings(doc.data, normalize_settings(settings))
        modified = bool(keys) or modified
        after_values = report(effective(plain(doc.data))[0])
        # drift in what the kubelet would use from the file (defaults included, flags aside)
        changes = [dict(key=k, before=before[k], after=after_values[k]) for k in keys if before[k] != after_values[k]]
    after = dump(doc) if modified else base
    cfg = plain(doc.data)
    values, sources, errors, flag_errors = effective(cfg, overrides)
    errors += validate(values)
    if errors and not read_only:
        flags = sorted({f["file"] for f in overrides if f["key"]})
        raise ConfigError("Not writing %s because the kubelet would reject the result%s: %s." % (
            path, " (with the flags in %s applied on top, as the kubelet does)" % ", ".join(flags) if flags else "", "; ".join(errors)))
    changed = not read_only and after != existing
    return dict(
        changed=changed, created=changed and existing is None, format=doc.fmt, before=existing or "", after=after, config=cfg,
        effective=report(values), flag_overrides=list(overrides), changes=changes,
        findings=findings(values, sources, cfg, overrides, errors if read_only else [], flag_errors),
    )
