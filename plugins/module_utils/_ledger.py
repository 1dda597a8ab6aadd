# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""The image last-use ledger on disk, and the node lock beside it.

The kubelet keeps first_detected / last_used in memory and loses them on restart
(kubernetes/kubernetes#119642); the ledger keeps them across runs. It is a small
JSON file, written atomically (temp file in the same directory, fsync, rename)
with mode 0600. ``created`` is when tracking began: the MaxAge pass waits until
tracking is older than MaxAge, as the kubelet waits for its own uptime.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import time

from ansible_collections.kubenode.gc.plugins.module_utils._errors import KubenodeGcError
from ansible_collections.kubenode.gc.plugins.module_utils._files import atomic_write

LEDGER_VERSION = 1


class LedgerError(KubenodeGcError):
    """The ledger or lock cannot be used; str() is one sentence naming the file."""


def new_ledger(now):
    return {"version": LEDGER_VERSION, "created": now, "images": {}}


def load(path, now):
    """Read the ledger at ``path``; a missing file gives a new, empty ledger created ``now``."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return new_ledger(now)
    except OSError as exc:
        raise LedgerError("Cannot read the image ledger %s: %s." % (path, exc.strerror or exc))
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise LedgerError("The image ledger %s is not valid JSON (%s); fix or remove it." % (path, exc))
    images = data.get("images") if isinstance(data, dict) else None
    if not isinstance(images, dict) or data.get("version") != LEDGER_VERSION or not isinstance(data.get("created"), int):
        raise LedgerError("The image ledger %s is not a version %d kubenode.gc ledger; fix or remove it." % (path, LEDGER_VERSION))
    for key, rec in images.items():
        if not (isinstance(rec, dict) and isinstance(rec.get("first_detected"), int) and isinstance(rec.get("last_used"), int)):
            raise LedgerError("The image ledger %s has a malformed record for %s; fix or remove it." % (path, key))
    return data


def save(path, ledger):
    """Write the ledger atomically with mode 0600 (its directory is created 0700 if missing)."""
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), mode=0o700, exist_ok=True)
        atomic_write(path, json.dumps(ledger, sort_keys=True, separators=(",", ":")), mode=0o600, keep_owner_mode=False, prefix=".image-ledger-")
    except OSError as exc:
        raise LedgerError("Cannot write the image ledger %s: %s." % (path, exc.strerror or exc))


class NodeLock:
    """An exclusive flock on ``path``; waits up to ``timeout`` seconds, then raises LedgerError."""

    def __init__(self, path, timeout, what="image_gc"):
        self.path = path
        self.timeout = timeout
        self.what = what
        self._fd = None

    def __enter__(self):
        directory = os.path.dirname(os.path.abspath(self.path))
        try:
            os.makedirs(directory, mode=0o700, exist_ok=True)
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise LedgerError("Cannot open the node lock %s: %s." % (self.path, exc.strerror or exc))
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return self
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
            if time.monotonic() >= deadline:
                os.close(self._fd)
                self._fd = None
                raise LedgerError(
                    "Another kubenode.gc %s run holds the node lock %s; gave up waiting after %g seconds (lock_timeout)." % (self.what, self.path, self.timeout)
                )
            time.sleep(0.1)

    def __exit__(self, *exc):
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
