# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The machine-wide lock on a fake kubelet process.

A test fixture that runs a process named kubelet (tests/integration/test_daemon_config.py) makes every module on this
machine see it in /proc and obey it. It holds this lock exclusively while that process is up, and so do the unit tests
marked ``real_proc`` (tests/unit/conftest.py), which start such processes and read the real /proc; every other test that
runs a module on this machine (the integration tests, the ansible-core matrix's smoke test, which may run at the same
time) holds it shared, so none runs beside such a process.
"""

import contextlib
import fcntl
import os

PATH = os.path.join(os.environ.get("TMPDIR", "/tmp"), "kubenode-gc-kubelet-process.lock")


@contextlib.contextmanager
def held(exclusive=False):
    """Hold the lock (shared, or exclusive for the test that runs the fake kubelet) for the ``with`` block."""
    with open(PATH, "a", encoding="utf-8") as f:
        fcntl.flock(f, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
