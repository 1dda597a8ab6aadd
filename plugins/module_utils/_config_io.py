# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""Ansible glue for the configuration modules: read a config file, write it back safely.

Writes go to a temporary file in the target's directory, are checked by an optional
``validate`` command (``%s`` is the temporary file), optionally back up the old file,
and replace it with ``AnsibleModule.atomic_move``, which keeps the old file's owner,
mode and SELinux context (the write itself is _files.atomic_write). Nothing here knows any file format.

A config path that is a symbolic link (or a chain of them) is resolved first (``resolve_path``): the
target is read, backed up and replaced, and the link stays as it was. Diffs go through ``redacted_diff``,
which hides every secret value (_redact) whatever the format.
"""

from __future__ import annotations

import os
import re

from ansible.module_utils.common.text.converters import to_native

from ansible_collections.kubenode.gc.plugins.module_utils._errors import ConfigError
from ansible_collections.kubenode.gc.plugins.module_utils._files import atomic_write
from ansible_collections.kubenode.gc.plugins.module_utils._redact import MARKER, changed_secrets, secret_strings, scrub


class ConfigFileError(ConfigError):
    """A config file cannot be read or written; one sentence naming the file and what went wrong."""


def file_mode(value):
    """The ``mode`` option (an int, or an octal string such as '0644') as an int; ConfigFileError otherwise."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 0o7777:
        return value
    if isinstance(value, str) and re.match(r"^0?[0-7]{3,4}$", value.strip()):
        return int(value, 8)
    raise ConfigFileError("mode must be an octal string such as '0644', got %r." % (value,))


def resolve_path(path):
    """The file ``path`` names once every symbolic link (of the file and its directories) is followed.

    A link whose target does not exist, or a loop of links, raises ConfigFileError: nothing is created
    at the end of a link. A path that is no link comes back as its absolute form.
    """
    resolved = os.path.realpath(path)
    if os.path.islink(path) or resolved != os.path.abspath(path):
        try:
            os.stat(path)
        except FileNotFoundError:
            if os.path.islink(path):
                raise ConfigFileError("%s is a symbolic link to %s, which does not exist; not creating a file at the end of a link." % (path, resolved))
        except OSError as exc:
            raise ConfigFileError("Cannot resolve %s: %s." % (path, _reason(exc)))
    return resolved


def read_text(path):
    """The file's text, or None when it does not exist. Other read errors raise ConfigFileError."""
    try:
        with open(path, "r", encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigFileError("Cannot read %s: %s." % (path, _reason(exc)))


def _reason(exc):
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return to_native(exc)


def write_text(module, path, text, backup=False, validate=None, mode=0o644):
    """Atomically replace ``path`` with ``text``; return the backup file name or None.

    ``mode`` applies only when the file is new; an existing file keeps owner and mode.
    A symbolic link is followed (resolve_path): its target is backed up and replaced, the link kept.
    Raises ConfigFileError (the target untouched) when the directory is not writable,
    the validate command fails, or the move fails.
    """
    shown, path = path, resolve_path(path)
    directory = os.path.dirname(os.path.abspath(path)) or "."
    if not os.path.isdir(directory):
        raise ConfigFileError("Cannot write %s: the directory %s does not exist." % (shown, directory))
    if validate and "%s" not in validate:
        raise ConfigFileError("The validate command for %s must contain %%s (the file to check): %s." % (shown, validate))
    backups = []

    def check(tmp):
        if validate:
            rc, out, err = module.run_command(validate % tmp)
            if rc != 0:
                detail = (err or out or "").strip().splitlines()
                raise ConfigFileError(
                    "The validate command '%s' rejected the new %s (rc %d)%s" % (validate, shown, rc, (": " + detail[-1] + ".") if detail else ".")
                )

    def replace(tmp, target):
        if backup and os.path.exists(target):
            backups.append(module.backup_local(target))
        module.atomic_move(tmp, target, unsafe_writes=False)

    try:
        atomic_write(path, text, mode=mode, check=check, replace=replace)
    except OSError as exc:
        raise ConfigFileError("Cannot write %s: %s." % (shown, _reason(exc)))
    return backups[0] if backups else None


class ConfigFiles:
    """The config modules' file I/O: reads, and atomic writes through the module (atomic_move, backup_local, run_command)."""

    def __init__(self, module):
        self.module = module

    read_text = staticmethod(read_text)
    resolve_path = staticmethod(resolve_path)

    def write_text(self, path, text, backup=False, validate=None, mode=0o644):
        return write_text(self.module, path, text, backup=backup, validate=validate, mode=mode)


def unified_diff_dict(path, before, after):
    """The Ansible diff dict for one file."""
    return dict(before=before or "", after=after or "", before_header=path, after_header=path)


def redact_texts(texts, redact):
    """``({text: (redacted text, secret leaves)}, secret strings)`` for file texts; ``redact(text)`` is the format's redact_text.

    A text that does not parse (so where its secrets are cannot be told) becomes the marker alone. Every
    redacted text is checked: no secret value of any of the texts (four characters or more) may be left in
    it (in a comment, say) and, parsed again, it must hold no secret but the marker; else it too becomes the marker.
    """
    found = {}
    for text in texts:
        text = text or ""
        if text in found:
            continue
        try:
            found[text] = redact(text) if text else (text, [])
        except ConfigError:
            found[text] = (MARKER + "\n", [])
    secrets = secret_strings(value for shown, leaves in found.values() for key, value in leaves)
    for text, (shown, leaves) in found.items():
        if not secrets or shown == MARKER + "\n":
            continue
        shown = scrub(shown, secrets)
        try:
            clean = all(value == MARKER for key, value in redact(shown)[1]) if shown else True
        except ConfigError:
            clean = False
        found[text] = (shown if clean else MARKER + "\n", leaves)
    return found, secrets


def redacted_diff(path, before, after, found):
    """unified_diff_dict of the redacted texts (``found``: redact_texts' first value, holding both texts).

    When a secret value itself changes, both sides show the marker and the after header names its keys:
    ``<path> (secret values changed: a.b.password)``.
    """
    (old, old_leaves), (new, new_leaves) = found[before or ""], found[after or ""]
    diff = unified_diff_dict(path, old, new)
    changed = changed_secrets(old_leaves, new_leaves)
    if changed:
        diff["after_header"] = "%s (secret values changed: %s)" % (path, ", ".join(changed))
    return diff
