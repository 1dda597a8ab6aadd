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
"""

from __future__ import annotations

import os
import re

from ansible.module_utils.common.text.converters import to_native

from ansible_collections.kubenode.gc.plugins.module_utils._errors import ConfigError
from ansible_collections.kubenode.gc.plugins.module_utils._files import atomic_write


class ConfigFileError(ConfigError):
    """A config file cannot be read or written; one sentence naming the file and what went wrong."""


def file_mode(value):
    """The ``mode`` option (an int, or an octal string such as '0644') as an int; ConfigFileError otherwise."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 0o7777:
        return value
    if isinstance(value, str) and re.match(r"^0?[0-7]{3,4}$", value.strip()):
        return int(value, 8)
    raise ConfigFileError("mode must be an octal string such as '0644', got %r." % (value,))


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
    Raises ConfigFileError (the target untouched) when the directory is not writable,
    the validate command fails, or the move fails.
    """
    directory = os.path.dirname(os.path.abspath(path)) or "."
    if not os.path.isdir(directory):
        raise ConfigFileError("Cannot write %s: the directory %s does not exist." % (path, directory))
    if validate and "%s" not in validate:
        raise ConfigFileError("The validate command for %s must contain %%s (the file to check): %s." % (path, validate))
    backups = []

    def check(tmp):
        if validate:
            rc, out, err = module.run_command(validate % tmp)
            if rc != 0:
                detail = (err or out or "").strip().splitlines()
                raise ConfigFileError(
                    "The validate command '%s' rejected the new %s (rc %d)%s" % (validate, path, rc, (": " + detail[-1] + ".") if detail else ".")
                )

    def replace(tmp, target):
        if backup and os.path.exists(target):
            backups.append(module.backup_local(target))
        module.atomic_move(tmp, target, unsafe_writes=False)

    try:
        atomic_write(path, text, mode=mode, check=check, replace=replace)
    except OSError as exc:
        raise ConfigFileError("Cannot write %s: %s." % (path, _reason(exc)))
    return backups[0] if backups else None


class ConfigFiles:
    """The config modules' file I/O: reads, and atomic writes through the module (atomic_move, backup_local, run_command)."""

    def __init__(self, module):
        self.module = module

    read_text = staticmethod(read_text)

    def write_text(self, path, text, backup=False, validate=None, mode=0o644):
        return write_text(self.module, path, text, backup=backup, validate=validate, mode=mode)


def unified_diff_dict(path, before, after):
    """The Ansible diff dict for one file."""
    return dict(before=before or "", after=after or "", before_header=path, after_header=path)
