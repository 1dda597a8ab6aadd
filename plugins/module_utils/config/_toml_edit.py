# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""Comment-preserving edits of TOML documents with tomlkit. No runtime knowledge.

Edits are tomlkit round trips: the parsed document is changed item by item (values replaced keep
their comment and indentation; new keys go after the last key of their table; new tables after the
last table of their parent, before the blank lines and comments that lead to the next table), then
dumped, parsed again with tomlkit and, where available, the strict ``tomllib``, and every edited
value read back. Each edit is made on a fresh parse, so tomlkit's own placement heuristics, which
differ between its versions, are never used. Every error is a ConfigError whose text is one sentence.

tomlkit does not round-trip every file (it re-indents some table lines of kubespray's config.toml), so
the dumped text is only a rendering: ``set_values`` keeps from it the lines of the edited keys (and of
the tables it had to add) and takes every other line from the original (_byte_guard.splice, with
``line_paths``, a line scanner that knows which key or table each line holds); the result must parse to
the same data as the rendering, and the guard checks once more that no other line changed.
"""

from __future__ import annotations

import copy
import json
import re
import traceback

from ansible_collections.kubenode.gc.plugins.module_utils._errors import ConfigError
from ansible_collections.kubenode.gc.plugins.module_utils._memo import remembered
from ansible_collections.kubenode.gc.plugins.module_utils._redact import is_secret_key, redacted, secret_leaves
from ansible_collections.kubenode.gc.plugins.module_utils.config._byte_guard import guard, refusal, splice

try:
    import tomlkit
    from tomlkit.container import Container
    from tomlkit.exceptions import TOMLKitError
    from tomlkit.items import AoT, InlineTable, KeyType, SingleKey, String, Table, Trivia
except ImportError:
    HAS_TOMLKIT = False
    TOMLKIT_IMPORT_ERROR = traceback.format_exc()
else:
    HAS_TOMLKIT = True
    TOMLKIT_IMPORT_ERROR = None

try:
    import tomllib  # Python 3.11+: a strict second parser for every edited text
except ImportError:
    tomllib = None


def parse(text, path):
    """The tomlkit document of ``text``; ConfigError with the line number when it is not TOML."""
    try:
        return tomlkit.parse(text)
    except (TOMLKitError, ValueError) as exc:
        line, col = getattr(exc, "line", None), getattr(exc, "col", None)
        reason = re.sub(r"\.? at line \d+ col \d+$", "", str(exc)).rstrip(".")
        if tomllib is not None:  # the strict parser names the line more exactly (tomlkit may name the next one, or none)
            try:
                tomllib.loads(text)
            except tomllib.TOMLDecodeError as strict:
                found = re.search(r"^(.*) \(at line (\d+), column (\d+)\)$", str(strict))
                if found:
                    reason, line, col = found.group(1), int(found.group(2)), int(found.group(3))
        where = "line %d, column %d" % (line, col) if line else "an unknown line"
        raise ConfigError("%s is not valid TOML at %s: %s." % (path, where, reason)) from None


# the plain data of the texts parsed so far (data()): a run reads, plans, redacts and plans again from the same few texts
_DATA = {}


def data(text, path):
    """The plain data (dicts, lists, values) of ``text``, as ``parse(text, path).unwrap()`` gives it, each distinct text
    parsed once per process (tomlkit is slow: node_audit reads, plans and redacts a config.toml in two passes); a copy
    each time, so a caller may change it. ConfigError as parse()."""
    return copy.deepcopy(remembered(_DATA, text, lambda: parse(text, path).unwrap()))


_REDACTED = {}


def redact_text(text, path):
    """``(text, secret leaves)``: the TOML text with every secret value (_redact) replaced by the marker, the rest as it was.

    Items are replaced in the parsed document's bodies (as the edits are), not through tomlkit's mapping
    interface, whose proxies for tables split over the file do not write through in every tomlkit version.
    Raises ConfigError when the text is not TOML. Each distinct text is redacted once per process (as data()).
    """
    shown, leaves = remembered(_REDACTED, (text, path), lambda: _redact(text, path))
    return shown, list(leaves)


def _redact(text, path):
    leaves = secret_leaves(data(text, path))
    if not leaves:
        return text, leaves
    doc = tomlkit.parse(text)
    _redact_body(doc.body, (), False)
    return tomlkit.dumps(doc), leaves


def _redact_body(body, prefix, inside):
    for i, (key, item) in enumerate(body):
        if key is None:
            continue
        path = prefix + (key.key,)
        secret = inside or is_secret_key(key.key, prefix)
        if isinstance(item, (Table, InlineTable)):
            _redact_body(item.value.body, path, secret)
        elif isinstance(item, AoT):
            for n, table in enumerate(item.body):
                _redact_body(table.value.body, path + (n,), secret)
        elif item.unwrap() is not None and redacted(item.unwrap(), secret, path) != item.unwrap():  # a secret, or a URL with credentials
            new = tomlkit.item(redacted(item.unwrap(), secret, path))
            if hasattr(item, "trivia"):
                new.trivia.indent, new.trivia.comment_ws = item.trivia.indent, item.trivia.comment_ws
                new.trivia.comment, new.trivia.trail = item.trivia.comment, item.trivia.trail
            body[i] = (key, new)


def lookup(data, table, key):
    """``data[table...][key]`` of an unwrapped document, or None."""
    node = data
    for part in table + (key,):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def _walk(body, prefix, out):
    """out[table path] -> [(key, item)] for every table, header or not, in document order."""
    for key, item in body:
        if key is not None and isinstance(item, (Table, InlineTable)):
            path = prefix + (key.key,)
            out.setdefault(path, []).append((key, item))
            _walk(item.value.body, path, out)
    return out


def _is_header(key, item):
    return isinstance(item, Table) and not key.is_dotted() and not item.is_super_table()


def _is_kv(key, item):
    return key is not None and not isinstance(item, AoT) and not (isinstance(item, Table) and not key.is_dotted())


def _kv_indent(body, default=""):
    for key, item in body:
        if _is_kv(key, item):
            if isinstance(item, Table):  # dotted keys: the indentation is on the innermost value
                return _kv_indent(item.value.body, default)
            return item.trivia.indent.replace("\n", "")
    return default


def _new_item(value, literal, like=None):
    if isinstance(value, bool):
        item = tomlkit.boolean("true" if value else "false")
    elif isinstance(value, int):
        item = tomlkit.integer(value)
    else:
        if isinstance(like, String):
            literal = like.as_string().startswith("'")  # keep the file's quoting
        item = tomlkit.string(value, literal=literal and "'" not in value)
    if like is not None and hasattr(like, "trivia"):
        item.trivia.indent, item.trivia.comment_ws = like.trivia.indent, like.trivia.comment_ws
        item.trivia.comment, item.trivia.trail = like.trivia.comment, like.trivia.trail
    else:
        item.trivia.trail = "\n"
    return item


def _key(name, literal):
    if re.match(r"^[A-Za-z0-9_-]+$", name):
        return SingleKey(name)
    return SingleKey(name, t=KeyType.Literal if literal else KeyType.Basic)


def _detach_tail(body):
    """Remove and return the comments and blank lines that end ``body`` and its last tables."""
    moved = []
    while True:
        tail = []
        while body and body[-1][0] is None:
            tail.insert(0, body.pop())
        moved = tail + moved
        if body and isinstance(body[-1][1], Table) and not body[-1][0].is_dotted():
            body = body[-1][1].value.body
        else:
            return moved


def _first_header(body):
    for key, item in body:
        if key is not None and isinstance(item, Table) and not key.is_dotted():
            return item if not item.is_super_table() else _first_header(item.value.body)
    return None


def _body(item):
    return item.body if isinstance(item, tomlkit.TOMLDocument) else item.value.body


def _set(text, path, table, key, value, literal):
    """Set one key on a fresh parse of ``text`` (a value of None removes it); return the new text."""
    doc = tomlkit.parse(text)
    tables = _walk(doc.body, (), {})
    chunks = [(None, doc)] if not table else tables.get(table, [])
    if value is None:
        for chunk in chunks:
            body = _body(chunk[1])
            for i, (k, item) in enumerate(body):
                if _is_kv(k, item) and k.key == key and not isinstance(item, Table):
                    del body[i]
                    return tomlkit.dumps(doc)
        return text
    # 1. the key exists: replace its value, keeping indentation and comment
    for chunk in chunks:
        body = _body(chunk[1])
        for i, (k, item) in enumerate(body):
            if _is_kv(k, item) and k.key == key and not isinstance(item, Table):
                body[i] = (k, _new_item(value, literal, like=item))
                return tomlkit.dumps(doc)
    # 2. the table exists with a header (or is the document): add the key after its last key
    header = doc if not table else next((item for k, item in chunks if _is_header(k, item)), None)
    if header is not None:
        own = "" if header is doc else header.trivia.indent.replace("\n", "")
        kv_indent = _kv_indent(_body(header), own)
    else:
        # only sub-tables define it so far: give it a header of its own, right before them
        implicit = next((item for k, item in chunks if isinstance(item, Table) and not k.is_dotted()), None)
        first = _first_header(implicit.value.body) if implicit is not None else None
        if first is None:
            if chunks:
                raise ConfigError(
                    "Cannot add %s to %s: that table is written inline or with dotted keys; add the key by hand." % (".".join(table + (key,)), path)
                )
            return _add_table(doc, tables, table, key, value, literal)
        header = implicit
        header._is_super_table = False  # pylint: disable=protected-access
        header.trivia.indent, header.trivia.trail = first.trivia.indent.replace("\n", ""), "\n"
        kv_indent = _kv_indent(first.value.body, header.trivia.indent)
        first.trivia.indent = "\n" + first.trivia.indent.replace("\n", "")
    body = _body(header)
    kvs = [i for i, (k, item) in enumerate(body) if _is_kv(k, item)]
    if kvs:
        at = kvs[-1] + 1
    else:
        at = len(body) if header is doc and not tables else 0
    item = _new_item(value, literal)
    item.trivia.indent = kv_indent
    body.insert(at, (_key(key, literal), item))
    return tomlkit.dumps(doc)


def _add_table(doc, tables, table, key, value, literal):
    """Add a new table after the last table of its deepest existing parent, before the comments that end it."""
    depth, parent = 0, doc
    for i in range(len(table) - 1, 0, -1):
        found = [item for k, item in tables.get(table[:i], []) if isinstance(item, Table) and not k.is_dotted()]
        if found:
            depth, parent = i, next((t for t in found if not t.is_super_table()), found[-1])
            break
    body = _body(parent)
    sibling = next((item for k, item in body if k is not None and _is_header(k, item)), None)
    if sibling is not None:
        hdr = sibling.trivia.indent.replace("\n", "")
        kv_indent = _kv_indent(sibling.value.body, hdr)
    elif parent is not doc and not parent.is_super_table():
        own = parent.trivia.indent.replace("\n", "")
        hdr = _kv_indent(body, own)
        kv_indent = hdr + hdr[len(own) :]
    else:
        hdr = kv_indent = ""
    moved = _detach_tail(body) if any(k is not None for k, item in body) else []
    item = _new_item(value, literal)
    item.trivia.indent = kv_indent
    node = Table(Container(True), Trivia(indent=("\n" if body else "") + hdr, trail="\n"), False, is_super_table=False)
    node.value.body.append((_key(key, literal), item))
    name = table[-1]
    for part in reversed(table[depth:-1]):
        outer = Table(Container(True), Trivia(indent="", trail=""), False, is_super_table=True)
        outer.value.body.append((_key(name, literal), node))
        node, name = outer, part
    body.append((_key(name, literal), node))
    body.extend(moved)
    return tomlkit.dumps(doc)


_KEY_PART = re.compile(r"""[ \t]*(?:([A-Za-z0-9_-]+)|"((?:[^"\\\n]|\\.)*)"|'([^'\n]*)')[ \t]*""")


def _key_path(text, i):
    """``(parts, end)`` of the dotted key at ``text[i:]``; parts None when there is none."""
    parts = []
    while True:
        match = _KEY_PART.match(text, i)
        if not match:
            return None, i
        bare, basic, literal = match.groups()
        if basic is not None:
            try:
                basic = json.loads('"%s"' % basic)
            except ValueError:
                pass
        parts.append(bare if bare is not None else basic if basic is not None else literal)
        i = match.end()
        if text[i:i + 1] != ".":
            return tuple(parts), i
        i += 1


def _value_lines(lines, n, col):
    """How many lines the value starting at ``lines[n][col:]`` spans (arrays, inline tables and multi-line strings continue)."""
    depth, quote, first = 0, None, n
    while n < len(lines):
        line, i = lines[n], col if n == first else 0
        while i < len(line):
            char = line[i]
            if quote in ('"""', "'''"):
                if line.startswith(quote, i):
                    quote, i = None, i + 3
                    continue
                i += 2 if quote == '"""' and char == "\\" else 1
                continue
            if quote:
                if char == "\\" and quote == '"':
                    i += 2
                    continue
                quote = None if char == quote else quote
            elif line.startswith('"""', i) or line.startswith("'''", i):
                quote, i = line[i:i + 3], i + 3
                continue
            elif char in "\"'":
                quote = char
            elif char in "[{":
                depth += 1
            elif char in "]}":
                depth -= 1
            elif char == "#":
                break
            i += 1
        n += 1
        if quote in ('"', "'"):
            quote = None  # a one-line string does not continue (the parsers refuse it)
        if quote is None and depth <= 0:
            break
    return n - first


def line_paths(text):
    """One ``(kind, path)`` per line of ``text``: ("table", header path), ("key", full key path) on each line of
    a key's value, or (None, None) for blank and comment lines."""
    lines = text.splitlines(True)
    out, table, n = [], (), 0
    while n < len(lines):
        body = lines[n].lstrip(" \t")
        if body.startswith("["):
            parts = _key_path(body, 2 if body.startswith("[[") else 1)[0]
            table = parts if parts is not None else table
            out.append(("table", parts))
            n += 1
            continue
        parts, end = (None, 0) if not body.strip() or body.startswith("#") else _key_path(body, 0)
        if parts is None or not body[end:].startswith("="):
            out.append((None, None))
            n += 1
            continue
        count = _value_lines(lines, n, len(lines[n]) - len(body) + end + 1)
        out += [("key", table + parts)] * count
        n += count
    return out


def _span(text, wanted, new_tables=()):
    """The line indexes of the keys ``wanted`` (full paths) in ``text``, and of the headers of ``new_tables``."""
    span = set()
    for i, (kind, found) in enumerate(line_paths(text)):
        if kind == "key" and any(found == want[:len(found)] or want == found[:len(want)] for want in wanted):
            span.add(i)
        elif kind == "table" and found in new_tables:
            span.add(i)
    return span


def keep_other_lines(original, rendered, path, edits):
    """``rendered`` (an edit of ``original``) with every line outside the edited keys taken from ``original``.

    ConfigError (one sentence) when that cannot be done.
    """
    wanted = [t + (k,) for t, k, v in edits]
    names = [".".join(w) for w in wanted]
    old_tables = {p for kind, p in line_paths(original) if kind == "table"}
    new_tables = {p for kind, p in line_paths(rendered) if kind == "table"} - old_tables
    old_span, new_span = _span(original, wanted), _span(rendered, wanted, new_tables)
    text, restored = splice(original, rendered, old_span, new_span, path, names)
    if restored:
        try:
            same = tomlkit.parse(text).unwrap() == tomlkit.parse(rendered).unwrap()
        except (TOMLKitError, ValueError):
            same = False
        if not same:
            raise refusal(path, names, restored[0])
        guard(original, text, old_span, _span(text, wanted, new_tables), path, names)
    return text


def set_values(text, path, edits, literal=False):
    """``text`` with every (table, key, value) of ``edits`` set (None: removed), every other line as it was; ConfigError when the result would be wrong."""
    original = text
    if text and not text.endswith("\n"):
        text += "\n"
    for table, key, value in sorted(edits, key=lambda e: len(e[0])):  # parents first, so children nest in them
        text = _set(text, path, table, key, value, literal)
    if original:
        text = keep_other_lines(original, text, path, edits)
    try:
        data = tomlkit.parse(text).unwrap()
        if tomllib is not None:
            tomllib.loads(text)
        bad = [".".join(t + (k,)) for t, k, v in edits if lookup(data, t, k) != v or type(lookup(data, t, k)) is not type(v)]
    except (TOMLKitError, ValueError) as exc:
        bad = [str(exc)]
    if bad:
        raise ConfigError("Editing %s would not give the wanted values (%s); nothing was written." % (path, "; ".join(bad)))
    return text
