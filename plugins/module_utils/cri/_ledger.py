# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""The image last-use ledger on disk, and the node lock.

The kubelet keeps first_detected / last_used in memory and loses them on restart
(kubernetes/kubernetes#119642); the ledger keeps them across runs. It is a small
JSON file, written atomically (_files.atomic_write: temp file in the same directory,
fsync, rename) with mode 0600. ``created`` is when tracking began: the MaxAge pass
waits until tracking is older than MaxAge, as the kubelet waits for its own uptime.
Its path is resolved safely (_files.chase): a run that will write it refuses, before
it removes anything, a ledger whose path goes through a directory or link another
user controls (``check_path``); a read through one works, with a warning.

The node lock lives in /run/kubenode-gc, a directory only root can create (/run is
root's, mode 0755), made 0700 without following links and used only when root owns
it and no one else may write it (``lock_directory``): no other user can hold, remove
or recreate the lock file, so none can delay a run or let a second one start beside
it. (/run/lock, mode 1777, would let any user create the directory first.) The
gc_timer role's unit has systemd make the same directory (RuntimeDirectory=).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import stat
import time

from ansible_collections.kubenode.gc.plugins.module_utils import _files
from ansible_collections.kubenode.gc.plugins.module_utils._errors import KubenodeGcError
from ansible_collections.kubenode.gc.plugins.module_utils.cri._cri import socket_digest

LEDGER_VERSION = 1
LOCK_DIR = "/run/kubenode-gc"  # the gc_timer role's unit names it too (RuntimeDirectory=kubenode-gc)
LOCK_DIR_ENV = "KUBENODE_GC_LOCK_DIR"  # another directory, for tests; used only when it passes the same checks


def node_lock_path(endpoint):
    """The one lock of a node and runtime socket that every mutating module and the gc_timer runner take, whatever their
    ledger and however the endpoint is spelled.

    ``$KUBENODE_GC_LOCK_DIR/<sha256 of the resolved socket path, 16 hex>.lock``, by default under /run/kubenode-gc:
    ``unix:///var/run/containerd/containerd.sock`` and ``/run//containerd/containerd.sock`` take the same lock where
    /var/run links to /run (_cri.socket_identity). The ledger is read and written only under this lock.
    """
    directory = os.environ.get(LOCK_DIR_ENV) or LOCK_DIR
    return os.path.join(directory, socket_digest(endpoint) + ".lock")


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
        fd, _resolved, _unsafe = _files.open_read(path, follow=False)  # check_path warned of its unsafe steps
        if fd is None:
            return new_ledger(now)
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise LedgerError("The image ledger %s is not a regular file." % path)
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


def check_path(path, writing, warnings):
    """Check the ledger's path (_files.chase): a run that will write it (``writing``) refuses, with LedgerError, a path
    through a directory or link another user controls, so it fails before it removes anything; a read only warns.
    The ledger's own directory may not be a symbolic link (nor the ledger: load)."""
    try:
        with _files.chase(os.path.dirname(path), write=writing, follow=False) as parent:
            if parent.st is not None and stat.S_ISLNK(parent.st.st_mode):
                raise LedgerError("The ledger directory %s is a symbolic link; kubenode.gc does not follow links for its ledger." % parent.path)
        with _files.chase(path, write=writing, follow=False) as found:
            if found.unsafe:
                warnings.append("The image ledger %s is read through %s: another user could change the records that keep images alive; a run "
                                "that removes images refuses it." % (path, "; ".join(str(u) for u in found.unsafe)))
    except _files.UnsafePathError as exc:
        raise LedgerError("Not using the image ledger %s: its path goes through %s, so another user could replace it or redirect its "
                          "write; nothing was removed." % (path, exc.unsafe))
    except FileNotFoundError:
        return  # a missing directory: made when the ledger is saved
    except OSError as exc:
        raise LedgerError("Cannot inspect the image ledger %s: %s." % (path, exc.strerror or exc))


def save(path, ledger):
    """Write the ledger atomically with mode 0600, its missing directories made 0700 (_files.atomic_write: refused
    through a directory or link another user controls)."""
    try:
        _files.atomic_write(path, json.dumps(ledger, sort_keys=True, separators=(",", ":")), mode=0o600, keep_owner_mode=False,
                            prefix=".image-ledger-", mkdir=0o700)
    except _files.UnsafePathError as exc:
        raise LedgerError("Cannot write the image ledger %s: its path goes through %s, so another user could redirect the write." % (path, exc.unsafe))
    except OSError as exc:
        raise LedgerError("Cannot write the image ledger %s: %s." % (path, exc.strerror or exc))


def lock_directory(directory):
    """A descriptor of the lock directory ``directory``, made 0700 when missing (its parents too), never through a
    link (the directory itself may not be one either); LedgerError unless root owns it and neither group nor others
    may write it (a sticky bit does not help: a lock file must be root's to remove)."""
    try:
        fd = _files.open_directory(directory, mode=0o700, follow=False)
    except _files.UnsafePathError as exc:
        raise LedgerError("Not using %s for the node lock: its path goes through %s, so another user could hold, remove or recreate the lock."
                          % (directory, exc.unsafe))
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise LedgerError("Not using %s for the node lock: it is a symbolic link; kubenode.gc does not follow links for its lock." % directory)
        raise LedgerError("Cannot open the node lock directory %s: %s." % (directory, exc.strerror or exc))
    why = _files.problem(os.fstat(fd))  # sticky or not
    if why:
        os.close(fd)
        raise LedgerError("Not using %s for the node lock: it is %s, so another user could remove or recreate the lock." % (directory, why))
    return fd


class NodeLock:
    """An exclusive flock on ``path``; waits up to ``timeout`` seconds, then raises LedgerError.

    The lock file is opened with O_NOFOLLOW in the directory lock_directory verified, and must be a regular file of
    root's. A directory other than /run/kubenode-gc (KUBENODE_GC_LOCK_DIR) that fails lock_directory's checks is not
    used: the lock is taken in /run/kubenode-gc instead, with a warning (``path`` then names that file), so no user can
    stop a run, or let two run together, by making that directory first."""

    def __init__(self, path, timeout, what="image_gc", warnings=None):
        self.warnings = [] if warnings is None else warnings
        self.path = path
        self.timeout = timeout
        self.what = what
        self._fd = None

    def _open(self):
        directory, name = os.path.split(os.path.abspath(self.path))
        try:
            dir_fd = lock_directory(directory)
        except LedgerError as exc:
            if directory == LOCK_DIR:
                raise
            self.warnings.append("%s The node lock is taken in %s instead." % (exc, LOCK_DIR))
            directory, self.path = LOCK_DIR, os.path.join(LOCK_DIR, name)
            dir_fd = lock_directory(directory)
        try:
            fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o600, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise LedgerError("The node lock %s is a symbolic link; kubenode.gc does not follow links for its lock." % self.path)
            raise LedgerError("Cannot open the node lock %s: %s." % (self.path, exc.strerror or exc))
        finally:
            os.close(dir_fd)
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != 0:
            os.close(fd)
            raise LedgerError("The node lock %s is not a regular file of root's; remove it." % self.path)
        return fd

    def __enter__(self):
        self._fd = self._open()
        deadline = time.monotonic() + self.timeout
        pause = 0.005  # the holder's run may end any moment: asked again soon, then less often (0.1 s at most)
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
            time.sleep(min(pause, max(deadline - time.monotonic(), 0)))
            pause = min(pause * 2, 0.1)

    def __exit__(self, *exc):
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
