# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""The node's cache directory: what a run may keep for the next one, where only root can put it.

Two things are kept, each in one file: the compiled code of the collection's files (``_zipimport``), and the sizes
containerd reported for committed snapshots (``containerd/_usage_cache``). Both are read by root and steer what root
runs or reports, so the directory and each file are used only when they are root's alone:

* the directory is /var/cache/kubenode-gc (``KUBENODE_GC_CACHE_DIR`` names another one, for tests; ``off`` turns the
  cache off), resolved as every path root writes (``_files.chase``: no step through a directory or link another user
  controls), made with mode 0700 when missing, and used only when root owns it and neither its group nor others may
  write it, sticky or not;
* a file is read only when it is a regular file root owns that neither its group nor others may write, opened in that
  directory without following a link, and at most MAX_BYTES long;
* a file is replaced atomically: a new file of mode 0600 made in the directory (``O_EXCL``), written, synced, renamed.

Only a process running as root uses the cache: any other gets None from ``directory`` and neither reads nor writes.
Anything wrong (the directory unsafe, a file planted, corrupt or unreadable) means no cache: a run then does what it
would do without one, and a write that fails is dropped. The files hold nothing the next run does not check: each
user of the cache keys its entries by what they were made from.
"""

from __future__ import annotations

import os
import stat

from ansible_collections.kubenode.gc.plugins.module_utils import _files

CACHE_DIR = "/var/cache/kubenode-gc"
CACHE_DIR_ENV = "KUBENODE_GC_CACHE_DIR"  # another directory (tests), or OFF
OFF = "off"
MAX_BYTES = 64 * 1024 * 1024
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)


def path(environ=None):
    """The cache directory this process would use, or None when the cache is off."""
    configured = (os.environ if environ is None else environ).get(CACHE_DIR_ENV) or CACHE_DIR
    return None if configured.strip().lower() == OFF else configured


def directory(environ=None):
    """A descriptor of the cache directory (close it), or None: not root, the cache is off, or the directory is not
    root's alone."""
    where = path(environ)
    if where is None or os.geteuid() != 0:
        return None
    try:
        fd = _files.open_directory(where, mode=0o700, follow=False)
    except (OSError, _files.PathError):
        return None
    if _files.problem(os.fstat(fd)) is not None:  # a sticky directory others write is no cache either
        os.close(fd)
        return None
    return fd


def read(dir_fd, name):
    """The bytes of the file ``name`` in the cache directory, or None: missing, not a regular file, not root's alone,
    larger than MAX_BYTES or unreadable."""
    try:
        fd = os.open(name, _READ, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or _files.problem(st) is not None or st.st_size > MAX_BYTES:
            return None
        chunks, left = [], st.st_size
        while left > 0:
            chunk = os.read(fd, left)
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def write(dir_fd, name, data):
    """Replace the file ``name`` in the cache directory with ``data`` (bytes), mode 0600; False when it could not."""
    if len(data) > MAX_BYTES:
        return False
    try:
        tmp, fd = _files.create_temporary(dir_fd, ".%s." % name)
    except OSError:
        return False
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        tmp = None
        return True
    except OSError:
        return False
    finally:
        _files.remove_temporary(dir_fd, tmp)


def load(name):
    """The bytes of the cache file ``name``, or None (no cache for this process, or ``read``'s None)."""
    fd = directory()
    if fd is None:
        return None
    try:
        return read(fd, name)
    finally:
        os.close(fd)


def store(name, data):
    """Replace the cache file ``name`` with ``data``; False when there is no cache for this process or ``write`` failed."""
    fd = directory()
    if fd is None:
        return False
    try:
        return write(fd, name, data)
    finally:
        os.close(fd)
