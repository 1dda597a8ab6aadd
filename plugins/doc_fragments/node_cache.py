# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment:
    # What every module keeps on the node between runs (plugins/module_utils/_cache.py, _zipimport.py,
    # containerd/_usage_cache.py).
    DOCUMENTATION = r"""
options: {}
notes:
  - Run as root, the module keeps in V(/var/cache/kubenode-gc) what the next run may reuse - the code Python compiled
    from the module's files (one file per module and Python version), and, on containerd, the sizes containerd stored
    for committed snapshots. The directory is made owned by root with mode 0700; a file is used only when it and the
    directory are root's alone and every step of the path to them is, and each entry is used only for what it was made
    from (the source file's SHA-256, the snapshot's creation time), so a stale or planted entry is never run or
    reported. The directory holds no state of the node, may be removed at any time, and is written in check mode too.
    The environment variable E(KUBENODE_GC_CACHE_DIR) names another directory, or V(off) for none;
    E(PYTHONDONTWRITEBYTECODE) stops the writing of compiled code. Other users' processes neither read nor write it.
"""
