# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""The action every module of the collection runs through: ansible-core's own ``normal`` action, unchanged, in a
worker whose garbage collector leaves alone what the worker inherited from the controller.

ansible-core forks a worker process for each host and task; the worker builds the module's payload (the first worker
of a task parses every module_utils file the module ships) and ends with the task. Parsing allocates hundreds of
thousands of short-lived syntax-tree objects, and they set off the collector's full passes, each of which walks every
object the worker inherited: all of ansible-core's loaded code and data. That was most of the difference between two
modules' fixed cost (issue 43, docs/development.md): image_gc's payload set off two full passes, cri_info's one, and a
pass costs 30 to 100 ms. ``gc.freeze()`` moves the inherited objects out of the collector's view, as CPython's
documentation advises for forked children; new objects are still collected. The freeze lasts only as long as the
worker, so it is made only in a child process (``multiprocessing.parent_process()``), never in the controller's own.
Arguments, check mode, async, module_defaults and results are exactly the ``normal`` action's.
"""

from __future__ import annotations

import gc
import multiprocessing

from ansible.plugins.action.normal import ActionModule as NormalAction


def freeze_inherited():
    """Freeze the collector's view of every object alive now, in a forked worker only; True when it did."""
    if multiprocessing.parent_process() is None:
        return False
    gc.freeze()
    return True


class ModuleAction(NormalAction):
    """ansible-core's ``normal`` action, after ``freeze_inherited()``."""

    def run(self, tmp=None, task_vars=None):
        freeze_inherited()
        return super().run(tmp, task_vars)
