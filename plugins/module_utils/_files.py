# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""The one atomic file write: a temporary file in the target's directory, fsync, then a rename.

Used by the image ledger (_ledger) and the configuration modules (_config_io). Knows no file format.
"""

from __future__ import annotations

import os
import tempfile


def atomic_write(path, text, mode=0o644, keep_owner_mode=True, prefix=None, check=None, replace=os.replace):
    """Replace ``path`` with ``text`` (UTF-8) atomically.

    The temporary file gets the existing file's owner and mode when ``keep_owner_mode`` and the file
    exists, else ``mode``. ``check(tmp)`` may inspect the temporary file and raise; ``replace(tmp, path)``
    moves it into place (``os.replace``; the config modules pass AnsibleModule.atomic_move, which also
    keeps the SELinux context). A new file ends with ``mode`` whatever the umask. On any failure the
    temporary file is removed and the target left untouched; OSError propagates.
    """
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=prefix or ".%s." % os.path.basename(path), suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        exists = keep_owner_mode and os.path.exists(path)
        if exists:
            st = os.stat(path)
            os.chmod(tmp, st.st_mode & 0o7777)
            os.chown(tmp, st.st_uid, st.st_gid)
        else:
            os.chmod(tmp, mode)
        if check is not None:
            check(tmp)
        replace(tmp, path)
        tmp = None
        if not exists and os.stat(path).st_mode & 0o7777 != mode:
            os.chmod(path, mode)  # a move may give a new file the umask's mode
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
