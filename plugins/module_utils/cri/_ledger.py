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
import hashlib
import json
import os
import stat
import time

from ansible_collections.kubenode.gc.plugins.module_utils._errors import KubenodeGcError
from ansible_collections.kubenode.gc.plugins.module_utils._files import atomic_write
from ansible_collections.kubenode.gc.plugins.module_utils.cri._cri import socket_identity

LEDGER_VERSION = 1
LOCK_DIR = "/run/kubenode-gc"
LOCK_DIR_ENV = "KUBENODE_GC_LOCK_DIR"


def node_lock_path(endpoint):
    """The one lock of a node and runtime socket that every mutating module and the gc_timer runner take, whatever their
    ledger and however the endpoint is spelled.

    ``$KUBENODE_GC_LOCK_DIR/<sha256 of the resolved socket path, 16 hex>.lock``, by default under /run/kubenode-gc:
    ``unix:///var/run/containerd/containerd.sock`` and ``/run//containerd/containerd.sock`` take the same lock where
    /var/run links to /run (_cri.socket_identity). The ledger is read and written only under this lock.
    """
    directory = os.environ.get(LOCK_DIR_ENV) or LOCK_DIR
    return os.path.join(directory, hashlib.sha256(socket_identity(endpoint).encode("utf-8")).hexdigest()[:16] + ".lock")


class LedgerError(KubenodeGcError):
    """The ledger or lock cannot be used; str() is one sentence naming the file."""


def new_ledger(now):
    return {"version": LEDGER_VERSION, "created": now, "images": {}}


FUTURE_SLACK_NS = 24 * 3600 * 10**9  # clock skew tolerated before a timestamp counts as "in the future"


def load(path, now, warnings=None):
    """Read the ledger at ``path``; a missing file gives a new, empty ledger created ``now`` (ns).

    A corrupt ledger (not UTF-8 JSON, wrong shape) fails with one sentence naming the file: it is never
    silently replaced, since it holds what keeps young images alive. Records with absurd timestamps
    (booleans, negative, later than now plus a day of clock skew) are dropped with a warning, so the image
    is tracked afresh from ``now``; a ``created`` in the future is clamped to ``now`` with a warning.
    """
    warnings = [] if warnings is None else warnings
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return new_ledger(now)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise LedgerError("The image ledger %s is a symbolic link; kubenode.gc does not follow links for its ledger." % path)
        raise LedgerError("Cannot read the image ledger %s: %s." % (path, exc.strerror or exc))
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise LedgerError("The image ledger %s is not UTF-8 text (corrupt); fix or remove it." % path)
    except ValueError as exc:
        raise LedgerError("The image ledger %s is not valid JSON (%s); fix or remove it." % (path, exc))
    images = data.get("images") if isinstance(data, dict) else None
    if not isinstance(images, dict) or data.get("version") != LEDGER_VERSION or not _is_int(data.get("created")):
        raise LedgerError("The image ledger %s is not a version %d kubenode.gc ledger; fix or remove it." % (path, LEDGER_VERSION))
    latest = now + FUTURE_SLACK_NS
    if not 0 <= data["created"] <= latest:
        warnings.append("The image ledger %s was created at an impossible time (%r); tracking restarts now." % (path, data["created"]))
        data["created"] = now
    dropped = []
    for key, rec in list(images.items()):
        if not (isinstance(rec, dict) and _is_int(rec.get("first_detected")) and _is_int(rec.get("last_used"))):
            if isinstance(rec, dict) and all(isinstance(rec.get(k), (int, float)) for k in ("first_detected", "last_used")):
                dropped.append(key)  # booleans and floats such as 1e30: absurd, not malformed
                del images[key]
                continue
            raise LedgerError("The image ledger %s has a malformed record for %s; fix or remove it." % (path, key))
        if not all(0 <= rec[k] <= latest for k in ("first_detected", "last_used")):
            dropped.append(key)
            del images[key]
    if dropped:
        warnings.append("The image ledger %s had %d record(s) with impossible timestamps (negative, non-integer or in the future: %s); "
                        "they were dropped and those images are tracked afresh from now." % (path, len(dropped), ", ".join(sorted(dropped)[:5])))
    return data


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def check_directory(directory, what, warnings):
    """Refuse a symlinked directory; warn, like sshd's StrictModes, when it is not owned by us or root, or group/other-writable."""
    try:
        st = os.lstat(directory)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise LedgerError("Cannot inspect the %s directory %s: %s." % (what, directory, exc.strerror or exc))
    if stat.S_ISLNK(st.st_mode):
        raise LedgerError("The %s directory %s is a symbolic link; kubenode.gc does not follow links for its %s." % (what, directory, what))
    if not stat.S_ISDIR(st.st_mode):
        raise LedgerError("The %s directory %s is not a directory." % (what, directory))
    if st.st_uid not in (0, os.geteuid()) or st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
        warnings.append("The %s directory %s is owned by uid %d with mode %04o: another user could replace the %s; "
                        "make it owned by root and not group- or world-writable." % (what, directory, st.st_uid, stat.S_IMODE(st.st_mode), what))


def save(path, ledger):
    """Write the ledger atomically with mode 0600 (its directory is created 0700 if missing)."""
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), mode=0o700, exist_ok=True)
        atomic_write(path, json.dumps(ledger, sort_keys=True, separators=(",", ":")), mode=0o600, keep_owner_mode=False, prefix=".image-ledger-")
    except OSError as exc:
        raise LedgerError("Cannot write the image ledger %s: %s." % (path, exc.strerror or exc))


class NodeLock:
    """An exclusive flock on ``path``; waits up to ``timeout`` seconds, then raises LedgerError."""

    def __init__(self, path, timeout, what="image_gc", warnings=None):
        self.warnings = [] if warnings is None else warnings
        self.path = path
        self.timeout = timeout
        self.what = what
        self._fd = None

    def __enter__(self):
        directory = os.path.dirname(os.path.abspath(self.path))
        try:
            os.makedirs(directory, mode=0o700, exist_ok=True)
            check_directory(directory, "lock", self.warnings)
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise LedgerError("The node lock %s is a symbolic link; kubenode.gc does not follow links for its lock." % self.path)
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
                    "Another kubenode.gc run holds the node lock %s; %s gave up waiting after %g seconds (lock_timeout)." % (self.path, self.what, self.timeout)
                )
            time.sleep(0.1)

    def __exit__(self, *exc):
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
