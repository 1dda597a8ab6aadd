# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: gc_summary
type: aggregate
short_description: Print a per-node table of what kubenode.gc garbage collection removed at the end of each play
version_added: 0.1.0
description:
  - Records the results of M(kubenode.gc.image_gc) and M(kubenode.gc.container_gc) tasks, and of their steps in
    M(kubenode.gc.node_cleanup) tasks (the cleanup playbook's; matched by the task's resolved action, so short names count
    only when they resolve to this collection), whether they succeeded or failed, and notes hosts that became unreachable.
    M(kubenode.gc.node_audit) is not summarised (it removes nothing; the audit's report is its summary).
  - At the end of every play that ran one of these modules it prints a fixed-width table with one row per host, sorted
    by name, and a totals row. Columns are containers, sandboxes and log paths removed, images removed, bytes freed,
    image filesystem usage before and after, whether the image GC target was reached, and errors.
  - Bytes freed are measured (growth of the filesystem's available bytes) when the module measured them, otherwise the
    sum of the removed images' sizes, marked with C(~).
  - "Results from check mode are plans, not removals. When every recorded result came from check mode the heading ends with
    C(check mode: planned) in parentheses; when only some did, those hosts are marked with C(*)."
  - "Below the table it lists the hosts that did not reach their image GC target (C(Not at target: a, b)) or says
    C(All nodes reached their target.), then one line per failed or unreachable host with its message."
  - "After them, for each host where M(kubenode.gc.image_gc) ran with C(mode=listed) (the cleanup's C(kubenode_gc_remove_images)),
    the images it removed (C(<host>: listed images removed: ...)) and each listed image still present with the pods using it
    (namespace/name, the container and whether it runs) or the rule that keeps it (C(<host>: listed images still present: ...))."
  - The table of a play is printed when the next play starts, and for the last play with the final statistics.
author: kubenode.gc contributors (@kubenode)
requirements:
  - Enable it with C(callbacks_enabled = kubenode.gc.gc_summary) in the C([defaults]) section of C(ansible.cfg), or with
    E(ANSIBLE_CALLBACKS_ENABLED=kubenode.gc.gc_summary).
"""

from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.callback import CallbackBase

from ansible_collections.kubenode.gc.plugins.plugin_utils._gc_table import apply_result, new_row, render_table

IMAGE_GC = "kubenode.gc.image_gc"
CONTAINER_GC = "kubenode.gc.container_gc"
NODE_CLEANUP = "kubenode.gc.node_cleanup"
ACTIONS = {IMAGE_GC: "image", CONTAINER_GC: "container", NODE_CLEANUP: "cleanup"}
SHORT_NAMES = {"image_gc": IMAGE_GC, "container_gc": CONTAINER_GC, "node_cleanup": NODE_CLEANUP}
# node_cleanup's results of its GC steps, as the table reads them
CLEANUP_PARTS = (("container_gc", "container"), ("image_listed", "image"), ("image_gc", "image"))
COLLECTION = "kubenode.gc"


def _public(obj, name):
    """Return the public attribute of a task result (ansible-core 2.19+), or its older private spelling."""
    value = getattr(obj, name, None)
    return value if value is not None else getattr(obj, "_" + name, None)


def gc_kind(task, resolve=True):
    """Return V(image) or V(container) when the task runs one of the collection's GC modules, else None.

    The resolved action (ansible-core's FQCN of the module actually run) decides when it is known. Otherwise the
    task's action counts when it is one of the FQCNs, or a short name with the collection in the task's C(collections).
    With resolve=False the resolved action is read only when ansible-core already resolved it: sampling it early
    for a templated action makes ansible-core warn.
    """
    resolved = getattr(task, "resolved_action", None) if resolve else getattr(task, "_resolved_action", None)
    if resolved:
        return ACTIONS.get(resolved)
    action = getattr(task, "action", None)
    if action in ACTIONS:
        return ACTIONS[action]
    if action in SHORT_NAMES and COLLECTION in (getattr(task, "collections", None) or []):
        return ACTIONS[SHORT_NAMES[action]]
    return None


class CallbackModule(CallbackBase):
    """Summarise kubenode.gc image and container garbage collection per host at the end of each play."""

    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "kubenode.gc.gc_summary"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, display=None, options=None):
        super().__init__(display=display, options=options)
        self._play_name = None
        self._play_check = False
        self._rows = {}
        self._unreachable = {}
        self._used = False

    # ---- state -------------------------------------------------------------------------------------------------
    def _reset(self, play_name=None):
        self._play_name = play_name
        self._rows = {}
        self._unreachable = {}
        self._used = False

    def _task_check_mode(self, task):
        value = getattr(task, "check_mode", None)
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and "{" not in value:
            return boolean(value, strict=False)
        return self._play_check

    def _record(self, result, failed=False):
        task = _public(result, "task")
        data = _public(result, "result") or {}
        if isinstance(data.get("results"), list):
            # A loop: its items were recorded one by one by v2_runner_item_on_*.
            return
        kind = gc_kind(task)
        if kind is None:
            return
        self._used = True
        host = _public(result, "host").get_name()
        check_mode = self._task_check_mode(task)
        parts = [(kind, data, failed)]
        if kind == "cleanup":
            # its container and image GC steps; a node it skipped or could not read ran neither (no row, as before)
            parts = [(part_kind, data[name], bool(data[name].get("failed"))) for name, part_kind in CLEANUP_PARTS if isinstance(data.get(name), dict)]
            if not parts:
                return
        rows = self._rows.setdefault(host, {})
        if check_mode not in rows:
            rows[check_mode] = new_row(host, check_mode)
        for part_kind, part, part_failed in parts:
            apply_result(rows[check_mode], part_kind, part, failed=part_failed)
        if failed and rows[check_mode]["status"] == "ok":  # a step the table has no column for failed (the pin, storage GC)
            apply_result(rows[check_mode], "container", {"msg": data.get("msg")}, failed=True)

    def rows(self):
        """Rows for render_table: one per recorded host, plus hosts that became unreachable in the play.

        A host with both real and check-mode results shows what was done; failures of either are kept.
        """
        out = []
        for host, by_mode in self._rows.items():
            done, planned = by_mode.get(False), by_mode.get(True)
            row = dict(done or planned)
            if done and planned and done["status"] == "ok" and planned["status"] != "ok":
                row.update(status=planned["status"], message=planned["message"])
            if host in self._unreachable:
                row.update(status="unreachable", message=self._unreachable[host])
            out.append(row)
        for host, msg in self._unreachable.items():
            if host not in self._rows:
                row = new_row(host, self._play_check)
                row.update(status="unreachable", message=msg)
                out.append(row)
        return out

    def _flush(self):
        if self._used:
            title = "GC SUMMARY [%s]" % self._play_name if self._play_name else "GC SUMMARY"
            self._display.display("\n" + render_table(self.rows(), title=title) + "\n")
        self._reset()

    # ---- callbacks ---------------------------------------------------------------------------------------------
    def set_play_context(self, play_context):
        self._play_check = bool(getattr(play_context, "check_mode", False))

    def v2_playbook_on_play_start(self, play):
        self._flush()
        name = play.get_name().strip() if hasattr(play, "get_name") else ""
        self._reset(name or None)

    def v2_playbook_on_task_start(self, task, is_conditional):
        if gc_kind(task, resolve=False) is not None:
            self._used = True

    def v2_runner_on_ok(self, result):
        self._record(result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._record(result, failed=True)

    def v2_runner_item_on_ok(self, result):
        self._record(result)

    def v2_runner_item_on_failed(self, result):
        self._record(result, failed=True)

    def v2_runner_on_unreachable(self, result):
        host = _public(result, "host").get_name()
        data = _public(result, "result") or {}
        self._unreachable.setdefault(host, data.get("msg") or "The host is unreachable.")
        if gc_kind(_public(result, "task"), resolve=False) is not None:
            self._used = True

    def v2_playbook_on_stats(self, stats):
        self._flush()
