# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""Comment-preserving editing of YAML and JSON documents whose top level is a mapping. No file format rules.

* ``load``/``dump``: YAML round-trip with ruamel.yaml (comments, key order, quoting and indentation
  kept) or JSON (key order, indent and trailing newline kept); ``convert`` between the two.
* ``put``/``delete``/``sync_map``/``new_map``: change a mapping in place, keeping comments, key
  positions and sorted order.
* ``plain``: ruamel.yaml's round-trip types as plain Python values.
* ``dump_keeping``: the edited document as text in which only the lines of the edited top-level keys
  differ from the original (_byte_guard's splice and guard): booleans, spacing and indentation as written.
* ``shared_keys``: the other top-level keys whose value shares a node with a key's (YAML anchors and aliases).
"""

from __future__ import annotations

import bisect
import io
import json
import re
import traceback

from ansible_collections.kubenode.gc.plugins.module_utils._errors import ConfigError
from ansible_collections.kubenode.gc.plugins.module_utils._memo import remembered
from ansible_collections.kubenode.gc.plugins.module_utils._redact import redact_in_place, secret_leaves
from ansible_collections.kubenode.gc.plugins.module_utils.config._byte_guard import guard, refusal, splice

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


def load(text, origin, fmt=None, mapping_of="fields"):
    """Parse ``text`` (JSON when it starts with ``{``, else YAML) to a Document whose top level is a mapping.

    ``origin`` names the text in errors, ``mapping_of`` what the mapping should hold. Raises ConfigError.
    """
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
        yaml = new_yaml(*guess_indent(text))
        try:
            data = yaml.load(text)
        except YAMLError as exc:
            mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
            problem = getattr(exc, "problem", None) or str(exc).strip().splitlines()[0]
            problem = re.sub(r" with value .*$", "", problem)  # a duplicate key: its name, never the values (they may be secrets)
            where = "line %d, column %d: " % (mark.line + 1, mark.column + 1) if mark else ""
            raise ConfigError("Cannot parse %s as YAML: %s%s." % (origin, where, problem.rstrip(".")))
        except (ValueError, TypeError, OverflowError):  # a tagged value (!!int abc) that does not convert: the text quotes it
            raise ConfigError("Cannot parse %s as YAML: a tagged value does not convert to the type of its tag." % origin) from None
        match = re.match(r"(?:[ \t]*(?:#[^\n]*)?\n|%[^\n]*\n)*---[ \t]*(?:#[^\n]*)?\n", text)
        doc = Document("yaml", data, yaml=yaml, preamble=match.group(0) if match else "")
    if not isinstance(doc.data, dict):
        what = "empty" if doc.data is None else {"array": "a list", "number": "a number", "bool": "a boolean"}.get(json_type(doc.data), "a string")
        raise ConfigError("The top level of %s is %s, not a mapping of %s." % (origin, what, mapping_of))
    return doc


# redact_text's answers so far: a run redacts the same few texts again (before and after its plan, node_audit in two passes)
_REDACTED = {}


def redact_text(text, origin):
    """``(text, secret leaves)``: the YAML or JSON text with every secret value (_redact) replaced by the marker.

    A text without secrets comes back as it is; one with secrets is dumped again as the module writes files.
    Raises ConfigError when the text does not parse; a text of only comments and blank lines has no secrets.
    Each distinct text is redacted once per process (ruamel.yaml is slow).
    """
    shown, leaves = remembered(_REDACTED, (text, origin), lambda: _redact(text, origin))
    return shown, list(leaves)


def _redact(text, origin):
    if not re.sub(r"(?m)^[ \t]*(#.*)?$", "", text).strip():
        return text, []
    doc = load(text, origin)
    leaves = secret_leaves(doc.data)
    if not leaves:
        return text, leaves
    redact_in_place(doc.data)
    return dump(doc), leaves


def guess_indent(text):
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


def json_type(value):
    """The JSON type name of a Python value, as Go's encoding/json names it in errors."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    for kind, name in ((str, "string"), (list, "array"), (dict, "object")):
        if isinstance(value, kind):
            return name
    return "value"


def sync_map(current, wanted, equal):
    """Make the mapping ``current`` hold exactly ``wanted`` in place (``equal(old, new)`` values are left alone); True when changed."""
    if not current and hasattr(current, "fa"):
        current.fa.set_block_style()  # an empty "{}" that gets entries
    changed = False
    for key in [k for k in current if k not in wanted]:
        delete(current, key)
        changed = True
    for key, value in wanted.items():
        if key not in current or not equal(current[key], value):
            put(current, key, value)
            changed = True
    return changed


def new_map(parent, items):
    """A mapping for ``items`` of the same kind as ``parent`` (ruamel's CommentedMap keeps its comments)."""
    if HAS_RUAMEL and isinstance(parent, CommentedMap):
        return CommentedMap(items)
    return dict(items)


def put(mapping, key, value):
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


def delete(mapping, key):
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


def _json_keys(text):
    """[(key, first line, last line)] of the members of the top-level JSON object in ``text``."""
    space, decoder = re.compile(r"[ \t\r\n]*"), json.JSONDecoder()
    i = space.match(text, text.index("{") + 1).end()
    found = []
    while text[i] == '"':
        start = i
        key, i = json.decoder.scanstring(text, i + 1)
        i = space.match(text, i).end() + 1  # the colon
        i = decoder.raw_decode(text, space.match(text, i).end())[1]
        found.append((key, text.count("\n", 0, start), text.count("\n", 0, i - 1)))
        i = space.match(text, i).end()
        if text[i] != ",":
            break
        i = space.match(text, i + 1).end()
    return found


def _yaml_keys(text):
    """[(key, first line, last line)] of the top-level keys of a YAML mapping (a block's trailing blank and column-0 comment lines left out)."""
    data = new_yaml().load(text)
    lines = text.splitlines()
    starts = [(key, data.lc.key(key)[0]) for key in data] if hasattr(data, "lc") else []
    found = []
    for n, (key, start) in enumerate(starts):
        end = starts[n + 1][1] if n + 1 < len(starts) else len(lines)
        while end > start + 1 and (not lines[end - 1].strip() or lines[end - 1].startswith("#") or lines[end - 1].rstrip() == "..."):
            end -= 1
        found.append((key, start, end - 1))
    return found


def key_span(text, fmt, keys):
    """The line indexes of the top-level ``keys`` in ``text`` (YAML or JSON); None when keys share lines (a mapping on one line)."""
    span, lines = set(), []
    found = _json_keys(text) if fmt == "json" else _yaml_keys(text)
    if fmt == "json":
        lines += [text.count("\n", 0, text.index("{")), text.count("\n", 0, text.rindex("}"))]
    for key, first, last in found:
        lines += range(first, last + 1)
        if key in keys:
            span.update(range(first, last + 1))
    if len(set(lines)) != len(lines):
        return None
    return span


def _json_comma(old, new):
    """The original JSON line ``old`` ending with a comma exactly when its new place ``new`` does."""
    body = old.rstrip("\r\n")
    end, code = old[len(body):], body.rstrip()
    if code.endswith(",") == new.rstrip().endswith(","):
        return old
    return (code + "," if not code.endswith(",") else code[:-1]) + body[len(code):] + end


def dump_keeping(doc, original, keys, origin):
    """The text of ``doc`` (edited from ``original`` at its top-level ``keys``) with every other line as in ``original``.

    The whole document is rendered (dump), the lines outside the edited keys are taken back from the
    original (_byte_guard.splice), the result must parse to the same data as the rendering, and the
    guard checks the lines outside the keys once more. Raises ConfigError (one sentence) otherwise.
    """
    rendered = dump(doc)
    same_line = _json_comma if doc.fmt == "json" else None
    old_span, new_span = key_span(original, doc.fmt, keys), key_span(rendered, doc.fmt, keys)
    if old_span is None or new_span is None:  # a mapping written on one line: that line is the edit
        return rendered
    text, restored = splice(original, rendered, old_span, new_span, origin, keys, same_line)
    if restored:
        try:
            same = plain(load(text, origin, doc.fmt).data) == plain(load(rendered, origin, doc.fmt).data)
        except (ConfigError, ValueError):
            same = False
        if not same:
            raise refusal(origin, keys, restored[0])
        guard(original, text, old_span, key_span(text, doc.fmt, keys), origin, keys, same_line)
    return text


def _nodes(value, seen):
    """The ids of the containers and anchored scalars in ``value`` (the nodes an alias can share)."""
    if isinstance(value, (dict, list)) or getattr(getattr(value, "anchor", None), "value", None):
        if id(value) in seen:
            return seen
        seen.add(id(value))
    if isinstance(value, dict):
        for item in value.values():
            _nodes(item, seen)
    elif isinstance(value, list):
        for item in value:
            _nodes(item, seen)
    return seen


def shared_keys(data, key):
    """The other top-level keys of ``data`` whose value shares a node with ``data[key]``'s (a YAML anchor and its aliases)."""
    mine = _nodes(data.get(key), set())
    return [other for other in data if other != key and mine & _nodes(data[other], set())]


def anchor_of(value):
    """The anchor name of a node, or None."""
    return getattr(getattr(value, "anchor", None), "value", None)
