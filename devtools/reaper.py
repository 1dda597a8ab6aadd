# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Run a command as a child subreaper: ``python -m devtools.reaper CMD ARGS...``.

cri-o's conmon processes daemonize; when a container stops, its conmon exits and
is reparented to the nearest subreaper.  Where PID 1 is no init (a CI container),
nobody reaps them.  This wrapper becomes their subreaper and reaps them, forwards
SIGTERM/SIGINT to the command, and exits with the command's status.
"""

import ctypes
import os
import signal
import sys

PR_SET_CHILD_SUBREAPER = 36


def main(argv):
    if not argv:
        sys.stderr.write("usage: python -m devtools.reaper CMD [ARGS...]\n")
        return 2
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    child = os.fork()
    if child == 0:
        try:
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)  # pylint: disable=protected-access

    def forward(signum, _frame):
        try:
            os.kill(child, signum)
        except ProcessLookupError:
            pass

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            return 1
        except InterruptedError:
            continue
        if pid == child:
            return os.waitstatus_to_exitcode(status) if status else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
