# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""Which values of a configuration file are secrets, and their redaction: pure, no I/O, no file format.

The one rule of the collection: every value under a key whose name, compared case-insensitively and
without ``_`` and ``-``, is one of SECRET_NAMES or ends with one of SECRET_SUFFIXES is a secret. Under such
a key every scalar (however deep in maps and lists) is replaced by MARKER, Ansible's own no_log marker;
map keys (header names, registry host names) and nulls stay. This catches the kubelet's
``staticPodURLHeader``, containerd's ``registry.configs.<host>.auth`` table (username, password, auth,
identitytoken), ``registry.auths``, registry and hosts.toml ``headers``/``header``, and any inline
``password``, ``token``, ``secret``, ``private_key``... Paths to credential files (``global_auth_file``,
``key_file``, ``tlsPrivateKeyFile``) end in ``file`` and are not secrets.

The rule has a second half, for values under any key: the user information of a URL
(``https://user:password@mirror``, as in a registry mirror endpoint) is a secret; it is replaced by MARKER
inside the URL (``https://VALUE_SPECIFIED_IN_NO_LOG_PARAMETER@mirror``), the rest of the URL stays.

The documents may be plain data or round-trip documents (ruamel.yaml, tomlkit): anything that is a
MutableMapping or a MutableSequence is walked, and ``redact_in_place`` assigns the marker through
``container[key] = MARKER`` so comments and layout of the rest are kept.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, MutableMapping, MutableSequence, Sequence

MARKER = "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"

SECRET_NAMES = frozenset((
    "auth", "auths", "authorization", "staticpodurlheader", "header", "headers", "identitytoken", "registrytoken",
    "password", "passwd", "token", "bearertoken", "secret", "privatekey", "clientkey", "apikey", "credentials",
))
SECRET_SUFFIXES = ("password", "passwd", "token", "secret", "privatekey", "clientkey", "apikey", "secretkey", "auth", "auths")
# KubeletConfiguration's "authorization" is a settings struct (mode: Webhook), not an HTTP header
NOT_SECRET_PATHS = (("authorization",),)
MIN_SCRUB_LENGTH = 4  # shorter values are not replaced inside free text (they would garble every message)
# the user information of a URL: scheme "://" userinfo "@" (RFC 3986; no "/", "?", "#", "@" or space in it)
URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)([^/?#@\s\"'<>]+)@")


def url_userinfo(value):
    """The user information parts of the URLs in the string ``value`` (none for other values)."""
    return [m.group(2) for m in URL_USERINFO.finditer(value)] if isinstance(value, str) else []


def redact_urls(value):
    """The string ``value`` with the user information of every URL in it replaced by MARKER (other values as they are)."""
    if not isinstance(value, str):
        return value
    return URL_USERINFO.sub(lambda m: m.group(1) + MARKER + "@", value)


def is_secret_key(name, path=()):
    """Whether everything under the key ``name`` (at key path ``path``, top level ``()``) is a secret."""
    if not isinstance(name, str):
        return False
    if path + (name.lower(),) in NOT_SECRET_PATHS:
        return False
    norm = re.sub(r"[-_]", "", name.lower())
    return norm in SECRET_NAMES or norm.endswith(SECRET_SUFFIXES)


def _is_map(node):
    return isinstance(node, (Mapping, MutableMapping))


def _is_list(node):
    return isinstance(node, (Sequence, MutableSequence)) and not isinstance(node, (str, bytes))


def secret_leaves(node, path=(), inside=False):
    """[(key path, value)] of every secret scalar in ``node``, in document order (nulls left out)."""
    found = []
    if _is_map(node):
        for key in list(node.keys()):
            found += secret_leaves(node[key], path + (key,), inside or is_secret_key(key, path))
    elif _is_list(node):
        for i, item in enumerate(node):
            found += secret_leaves(item, path + (i,), inside)
    elif inside and node is not None:
        found.append((path, node))
    elif [info for info in url_userinfo(node) if info != MARKER]:
        found.append((path, "\n".join(url_userinfo(node))))
    return found


def redact_in_place(node, inside=False, path=()):
    """Replace every secret scalar of the (round-trip) document ``node`` by MARKER; return the values replaced."""
    replaced = []
    if _is_map(node):
        for key in list(node.keys()):
            secret = inside or is_secret_key(key, path)
            value = node[key]
            if secret and value is not None and not _is_map(value) and not _is_list(value):
                replaced.append(value)
                node[key] = MARKER
            elif url_userinfo(value):
                replaced += url_userinfo(value)
                node[key] = redact_urls(value)
            else:
                replaced += redact_in_place(value, secret, path + (key,))
    elif _is_list(node):
        for i, item in enumerate(list(node)):
            if inside and item is not None and not _is_map(item) and not _is_list(item):
                replaced.append(item)
                node[i] = MARKER
            elif url_userinfo(item):
                replaced += url_userinfo(item)
                node[i] = redact_urls(item)
            else:
                replaced += redact_in_place(item, inside, path + (i,))
    return replaced


def redacted(data, inside=False, path=()):
    """A copy of plain data (dicts, lists, scalars) with every secret scalar replaced by MARKER."""
    if _is_map(data):
        return {k: redacted(v, inside or is_secret_key(k, path), path + (k,)) for k, v in data.items()}
    if _is_list(data):
        return [redacted(v, inside, path + (i,)) for i, v in enumerate(data)]
    return MARKER if inside and data is not None else redact_urls(data)


def secret_strings(values):
    """The distinct string forms of secret ``values`` long enough to look for in free text, longest first."""
    out = set()
    for value in values:
        if value is None or isinstance(value, bool):
            continue
        out.add(str(value))
        for piece in str(value).split("\n"):  # a URL leaf holds its user informations, one a line: each, and its password alone
            out.update((piece, piece.partition(":")[2]))
    out.discard(MARKER)
    return sorted((s for s in out if len(s) >= MIN_SCRUB_LENGTH), key=lambda s: (-len(s), s))


def scrub(text, secrets):
    """``text`` with every occurrence of a string of ``secrets`` (see secret_strings) replaced by MARKER."""
    if not isinstance(text, str):
        return text
    for secret in secrets:
        text = text.replace(secret, MARKER)
    return text


def scrub_all(data, secrets):
    """Plain data with scrub() applied to every string (keys stay): the last net for free text such as messages."""
    if not secrets:
        return data
    if isinstance(data, dict):
        return {k: scrub_all(v, secrets) for k, v in data.items()}
    if isinstance(data, list):
        return [scrub_all(v, secrets) for v in data]
    return scrub(data, secrets)


def changed_secrets(before, after):
    """Dotted key paths of the secret values that differ between two lists of secret_leaves(), sorted."""
    old, new = dict(before), dict(after)
    return sorted(".".join(str(p) for p in path) for path in set(old) | set(new) if old.get(path) != new.get(path))


def scrub_error(exc, secrets):
    """The module error ``exc`` (a KubenodeGcError: one sentence and a partial result) with scrub() applied to both, in place."""
    if secrets:
        exc.args = (scrub(str(exc), secrets),)
        exc.result = scrub_all(getattr(exc, "result", None) or {}, secrets)
    return exc
