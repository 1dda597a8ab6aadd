# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""Ansible glue for the configuration modules: read a config file, write it back safely.

Writes are _files.atomic_write's: the path resolved safely (no step through a directory or link another user owns,
else the write is refused with one sentence naming it), a temporary file in the target's verified directory, checked
by an optional ``validate`` command (``%s`` is the temporary file), optionally a backup of the old file, then a rename
relative to that directory's descriptor. The old file's owner, mode and extended attributes are kept, and its SELinux
label (or the policy's default one for a new file) is put on the temporary file before the rename
(_common.selinux_relabel, through the module's SELinux functions), as ``AnsibleModule.atomic_move`` did: the rename
itself is no longer atomic_move's, which goes by the path's text. Nothing here knows any file format.

A config path that is a symbolic link (or a chain of them) is resolved first (``resolve_path``): the
target is read, backed up and replaced, and the link stays as it was. Reads go through the same resolution and keep
working through another user's directory or link (the daemons read those files too); ``ConfigFiles`` records each such
path, and the modules report it as an ``untrusted_path`` warning (``path_findings``). Diffs go through ``redacted_diff``,
which hides every secret value (_redact) whatever the format.

What is read must be a regular file (or a link to one) of at most MAX_CONFIG_BYTES: a FIFO, a device, a
directory or a bigger file fails at once, before a byte is read (``read_file``). The file's encoding
details are kept: a UTF-8 byte order mark and CRLF line endings are taken off for the editors (which see
LF text) and put back when ``ConfigFiles`` writes the file; a file mixing CRLF and LF is read, never
rewritten.

Writes are serialised per directory: ``ConfigFiles.lock`` takes an exclusive flock(2) on the directory
of each file for the whole read-plan-write of a run (no lock file is created), so two runs on one file
both land, one after the other. As a second net, ``ConfigFiles.write_text`` compares the file's bytes
with the bytes the run read just before the rename, and refuses when another writer changed them.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import fcntl
import os
import re
import stat
import time

from ansible.module_utils.common.text.converters import to_native

from ansible_collections.kubenode.gc.plugins.module_utils import _files
from ansible_collections.kubenode.gc.plugins.module_utils._common import selinux_relabel
from ansible_collections.kubenode.gc.plugins.module_utils._errors import ConfigError
from ansible_collections.kubenode.gc.plugins.module_utils._redact import MARKER, changed_secrets, secret_strings, scrub
from ansible_collections.kubenode.gc.plugins.module_utils.config._findings import finding


MAX_CONFIG_BYTES = 4 * 1024 * 1024  # the largest config, flag or drop-in file read; kubelet and runtime configs are a few KiB
LOCK_TIMEOUT = 60  # seconds a run waits for another run's lock on a config directory
BOM = "\ufeff"


class ConfigFileError(ConfigError):
    """A config file cannot be read or written; one sentence naming the file and what went wrong."""


# How a file was stored: its bytes as read (None: missing), a UTF-8 byte order mark, and its line ending
# ("\n", "\r\n", or None for a file that mixes them).
Stored = collections.namedtuple("Stored", "raw bom newline")

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _check_regular(path, st):
    if not stat.S_ISREG(st.st_mode):
        kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a regular file")
        raise ConfigFileError("%s is %s, not a regular file; config files must be regular files (or symbolic links to one)." % (path, kind))
    if st.st_size > MAX_CONFIG_BYTES:
        raise ConfigFileError("%s is %d bytes, more than the %d bytes a config file may have; not reading it." % (path, st.st_size, MAX_CONFIG_BYTES))


def file_mode(value):
    """The ``mode`` option (an int, or an octal string such as '0644') as an int; ConfigFileError otherwise."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 0o7777:
        return value
    if isinstance(value, str) and re.match(r"^0?[0-7]{3,4}$", value.strip()):
        return int(value, 8)
    raise ConfigFileError("mode must be an octal string such as '0644', got %r." % (value,))


def resolve_path(path, unsafe=None):
    """The file ``path`` names once every symbolic link (of the file and its directories) is followed (_files.chase).

    A link whose target does not exist, or a loop of links, raises ConfigFileError: nothing is created
    at the end of a link. A path that is no link comes back as its absolute form. The steps through another user's
    directory or link are added to ``unsafe`` (a list), when given.
    """
    try:
        with _files.chase(path) as found:
            if found.st is None and found.link:
                raise ConfigFileError("%s is a symbolic link to %s, which does not exist; not creating a file at the end of a link." % (path, found.path))
            _note(unsafe, found.unsafe)
            return found.path
    except FileNotFoundError:
        return os.path.realpath(path)  # a directory on the way is missing: nothing is read there, the name is only reported
    except OSError as exc:
        raise ConfigFileError("Cannot resolve %s: %s." % (path, _reason(exc)))


def _note(unsafe, found):
    if unsafe is not None:
        unsafe += [u for u in found if u not in unsafe]


def read_bytes(path, unsafe=None):
    """The file's bytes, or None when it does not exist; ConfigFileError unless it is a regular file of at most MAX_CONFIG_BYTES.

    The path is resolved with _files.open_read (its unsafe steps added to ``unsafe`` when given) and the file opened
    in the directory reached, non-blocking (a FIFO cannot hang the run); the type and size are checked on the open
    descriptor, and at most MAX_CONFIG_BYTES + 1 bytes are read.
    """
    try:
        fd, _resolved, found = _files.open_read(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigFileError("Cannot read %s: %s." % (path, _reason(exc)))
    if fd is None:
        return None
    _note(unsafe, found)
    try:
        _check_regular(path, os.fstat(fd))
        chunks, size = [], 0
        while size <= MAX_CONFIG_BYTES:
            chunk = os.read(fd, MAX_CONFIG_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise ConfigFileError("Cannot read %s: %s." % (path, _reason(exc)))
    finally:
        os.close(fd)
    if size > MAX_CONFIG_BYTES:
        raise ConfigFileError("%s grew to more than the %d bytes a config file may have while it was read; not reading it." % (path, MAX_CONFIG_BYTES))
    return b"".join(chunks)


def decode(path, raw):
    """``(text, Stored)`` of a file's bytes: UTF-8 without its byte order mark, CRLF line endings as LF."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigFileError("Cannot read %s: it is not UTF-8 text (byte %d)." % (path, exc.start))
    bom = text.startswith(BOM)
    text = text[len(BOM):] if bom else text
    crlf, lf = text.count("\r\n"), text.count("\n")
    newline = "\n" if not crlf else ("\r\n" if crlf == lf else None)
    if crlf:
        text = text.replace("\r\n", "\n")
    return text, Stored(raw, bom, newline)


def encode(text, stored):
    """The text to write for ``text`` (LF line endings) in a file stored as ``stored`` (its BOM and line endings)."""
    if stored is None or stored.raw is None:
        return text
    if stored.newline == "\r\n":
        text = text.replace("\r\n", "\n").replace("\n", "\r\n")
    return (BOM if stored.bom else "") + text


def read_file(path, unsafe=None):
    """``(text, Stored)``: the file's text as the editors see it (read_bytes, decode); text None when it does not exist."""
    raw = read_bytes(path, unsafe)
    if raw is None:
        return None, Stored(None, False, "\n")
    return decode(path, raw)


def read_text(path):
    """The file's text (no BOM, LF line endings), or None when it does not exist. Read errors raise ConfigFileError."""
    return read_file(path)[0]


def _reason(exc):
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return to_native(exc)


def write_text(module, path, text, backup=False, validate=None, mode=0o644, stored=None):
    """Atomically replace ``path`` with ``text`` (_files.atomic_write); return the backup file name or None.

    ``mode`` applies only when the file is new; an existing file keeps owner, mode and extended attributes, and the
    SELinux label is the old file's (a new file's: the policy's default). ``stored`` (read_file's second value) is how
    the file was when read: its BOM and line endings are put back, and when its bytes changed since, nothing is written
    (ConfigFileError). Root's symbolic links are followed: the target is backed up and replaced, the link kept.
    Raises ConfigFileError (the target untouched) when the path goes through a directory or link another user owns,
    the directory does not exist or is not writable, the validate command fails, or the rename fails.
    """
    shown = path
    if validate and "%s" not in validate:
        raise ConfigFileError("The validate command for %s must contain %%s (the file to check): %s." % (shown, validate))
    if stored is not None and stored.raw is not None and stored.newline is None:
        raise ConfigFileError("%s mixes CRLF and LF line endings; not rewriting it (make its line endings one kind first)." % shown)
    backups = []

    def check(tmp):
        if validate:
            rc, out, err = module.run_command(validate % tmp)
            if rc != 0:
                detail = (err or out or "").strip().splitlines()
                raise ConfigFileError(
                    "The validate command '%s' rejected the new %s (rc %d)%s" % (validate, shown, rc, (": " + detail[-1] + ".") if detail else ".")
                )
        if stored is not None and read_bytes(path) != stored.raw:
            raise ConfigFileError("%s was changed by another writer while this run planned its edit; nothing was written, run again." % shown)

    relabel = selinux_relabel(module)

    def before_replace(tmp, target, exists):
        if backup and exists:
            directory = os.path.dirname(target)
            if os.stat(directory).st_mode & 0o022:  # sticky (else atomic_write refused it): another user may own the backup's name
                raise ConfigFileError("Not backing up %s: its directory %s may be written by others, who could take the backup file's name "
                                      "first; nothing was written." % (shown, directory))
            backups.append(module.backup_local(target))  # in the directory atomic_write verified: root's alone
        relabel(tmp, target, exists)

    try:
        _files.atomic_write(path, encode(text, stored), mode=mode, check=check, before_replace=before_replace, follow=True)
    except _files.PathError as exc:
        raise ConfigFileError(str(exc))
    except FileNotFoundError as exc:
        raise ConfigFileError("Cannot write %s: the directory %s does not exist." % (shown, exc.filename or os.path.dirname(path)))
    except OSError as exc:
        raise ConfigFileError("Cannot write %s: %s." % (shown, _reason(exc)))
    return backups[0] if backups else None


@contextlib.contextmanager
def lock_dirs(paths, timeout=LOCK_TIMEOUT):
    """Hold an exclusive flock(2) on the directory of each of ``paths`` (in sorted order, so runs cannot deadlock).

    Each path is first resolved for writing (_files.chase): one that goes through a directory or link another user
    owns is refused here, with one sentence naming it, before anything is read for the edit or written (so a run
    writing several files writes none). Waits up to ``timeout`` seconds for another run; then ConfigFileError. A
    directory that does not exist is not locked (writing there fails anyway).
    """
    fds = []
    try:
        directories = {}
        for path in paths:
            try:
                with _files.chase(path, write=True) as found:
                    directories.setdefault(found.directory, path)
            except _files.PathError as exc:
                raise ConfigFileError(str(exc))
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise ConfigFileError("Cannot resolve %s: %s." % (path, _reason(exc)))
        for directory in sorted(directories):
            try:
                fd = _files.open_directory(directory, shown=directories[directory])
            except FileNotFoundError:
                continue
            except _files.PathError as exc:
                raise ConfigFileError(str(exc))
            except OSError as exc:
                raise ConfigFileError("Cannot lock the directory %s for the edit: %s." % (directory, _reason(exc)))
            fds.append(fd)
            deadline = time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as exc:
                    if exc.errno not in (errno.EAGAIN, errno.EACCES) or time.monotonic() >= deadline:
                        raise ConfigFileError("Another run has held the lock on %s for more than %d seconds; nothing was written." % (directory, timeout))
                    time.sleep(0.05)
        yield
    finally:
        for fd in reversed(fds):
            os.close(fd)  # closing the descriptor releases its lock


class ConfigFiles:
    """The config modules' file I/O: reads, and atomic writes through the module (atomic_move, backup_local, run_command).

    It remembers how each file was stored when read (BOM, line endings, bytes) and writes it back the same way.
    """

    def __init__(self, module):
        self.module = module
        self.stored = {}
        self.untrusted = {}  # path as read -> the steps of its path another user controls (_files.Unsafe)

    lock = staticmethod(lock_dirs)

    def resolve_path(self, path):
        return resolve_path(path, self.untrusted.setdefault(path, []))

    def read_text(self, path):
        text, stored = read_file(path, self.untrusted.setdefault(path, []))
        self.stored[os.path.realpath(path)] = stored
        return text

    def write_text(self, path, text, backup=False, validate=None, mode=0o644):
        stored = self.stored.get(os.path.realpath(path))
        return write_text(self.module, path, text, backup=backup, validate=validate, mode=mode, stored=stored)

    def path_findings(self):
        """An ``untrusted_path`` warning per file read through a directory or link another user controls, by path."""
        return [finding("warning", "untrusted_path", _files.unsafe_read(path, unsafe)) for path, unsafe in sorted(self.untrusted.items()) if unsafe]


def config_files(module, opts):
    """The backend of the config modules: reads and atomic writes through the module."""
    return ConfigFiles(module)


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
