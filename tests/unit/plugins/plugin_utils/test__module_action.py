# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Every module runs through ansible-core's normal action; the worker it runs in, and only a worker, freezes what it inherited."""

import gc
import multiprocessing
import os

from ansible.plugins.action.normal import ActionModule as NormalAction

from ansible_collections.kubenode.gc.plugins.action import image_gc as image_gc_action
from ansible_collections.kubenode.gc.plugins.plugin_utils import _module_action

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))


def _freeze_in_child(conn):
    before = gc.get_freeze_count()
    conn.send((_module_action.freeze_inherited(), before, gc.get_freeze_count()))
    conn.close()


def test_the_controller_process_is_never_frozen():
    assert multiprocessing.parent_process() is None
    before = gc.get_freeze_count()
    assert _module_action.freeze_inherited() is False
    assert gc.get_freeze_count() == before


def test_a_child_process_freezes_what_it_inherited():
    # spawn, not fork: nothing of this test process (gRPC objects of other tests) is copied into the child
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_freeze_in_child, args=(child,))
    proc.start()
    try:
        froze, before, after = parent.recv()
    finally:
        proc.join(30)
        parent.close()
    assert proc.exitcode == 0
    assert froze is True and before == 0 and after > 0


def test_every_module_has_the_action_and_nothing_else_does():
    modules = sorted(f[:-3] for f in os.listdir(os.path.join(REPO, "plugins", "modules")) if f.endswith(".py"))
    actions = sorted(f[:-3] for f in os.listdir(os.path.join(REPO, "plugins", "action")) if f.endswith(".py") and f != "__init__.py")
    assert actions == modules
    assert issubclass(image_gc_action.ActionModule, _module_action.ModuleAction)
    assert issubclass(_module_action.ModuleAction, NormalAction)
    # it adds nothing to the normal action but the freeze
    assert [name for name in vars(_module_action.ModuleAction) if not name.startswith("_")] == ["run"]
