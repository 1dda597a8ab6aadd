# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The gc_summary callback: the table rendering, and the callback fed with stand-ins for ansible-core's task results."""

import pytest

from ansible_collections.kubenode.gc.plugins.callback import gc_summary as cb
from ansible_collections.kubenode.gc.plugins.plugin_utils._gc_table import human_bytes, render_table

MiB = 1024 ** 2
GiB = 1024 ** 3


# ---------------------------------------------------------------------------------------------- render_table
def row(host, **kw):
    out = cb.new_row(host)
    out.update(kw)
    return out


def test_table_layout_sorting_and_totals():
    rows = [
        row("node-b", containers=3, sandboxes=1, logs=4, images=2, bytes_freed=512 * MiB, usage_before=87, usage_after=79,
            target_reached=True),
        row("node-a", containers=0, sandboxes=0, logs=0, images=5, bytes_freed=int(1.5 * GiB), usage_before=92, usage_after=88,
            target_reached=False, errors=1),
        row("node-c", containers=1, sandboxes=0, logs=2),
    ]
    lines = render_table(rows, title="GC SUMMARY [fleet]").splitlines()
    assert lines[0] == "GC SUMMARY [fleet]"
    assert lines[1].split() == ["HOST", "CONTAINERS", "SANDBOXES", "LOGS", "IMAGES", "FREED", "USAGE", "TARGET", "ERRORS"]
    assert [line.split()[0] for line in lines[2:5]] == ["node-a", "node-b", "node-c"]
    assert lines[2].split() == ["node-a", "0", "0", "0", "5", "1.5", "GiB", "92%", "→", "88%", "no", "1"]
    assert lines[3].split() == ["node-b", "3", "1", "4", "2", "512.0", "MiB", "87%", "→", "79%", "yes", "0"]
    assert lines[4].split() == ["node-c", "1", "0", "2", "-", "-", "-", "-", "0"]
    assert lines[5].split() == ["TOTAL", "(3)", "4", "1", "6", "7", "2.0", "GiB", "-", "1/2", "1"]
    assert lines[6] == "Not at target: node-a"
    assert len(lines) == 7


def test_table_is_fixed_width():
    rows = [row("a", containers=12345, images=1, bytes_freed=10, usage_before=5, usage_after=4, target_reached=True),
            row("a-much-longer-host-name", containers=1, images=100, bytes_freed=3 * GiB, usage_before=100, usage_after=0,
                target_reached=True)]
    lines = render_table(rows).splitlines()
    header = lines[0]
    # right-aligned numeric columns end where their header ends
    for name in ("CONTAINERS", "IMAGES", "FREED"):
        end = header.index(name) + len(name)
        for line in lines[1:4]:
            assert line[end - 1] != " ", (name, line)
            assert end == len(line) or line[end] == " "
    # left-aligned text columns start where their header starts
    for name in ("USAGE", "TARGET", "ERRORS"):
        start = header.index(name)
        for line in lines[1:4]:
            assert line[start - 1] == " " and line[start] != " ", (name, line)
    assert lines[-1] == "All nodes reached their target."


def test_all_check_mode_heading_and_estimated_legend():
    rows = [row("n1", images=2, bytes_freed=2048, bytes_estimated=True, check_mode=True, target_reached=True),
            row("n2", containers=1, check_mode=True)]
    out = render_table(rows, title="GC SUMMARY [p]")
    lines = out.splitlines()
    assert lines[0] == "GC SUMMARY [p] (check mode: planned)"
    assert "~2.0 KiB" in lines[2]
    assert lines[4].split()[6] == "~2.0"      # the total is estimated too
    assert "All nodes with a known target reached it (unknown: n2)." in lines
    assert any(line.startswith("~ estimated") for line in lines)
    assert "*" not in out


def test_check_mode_heading_without_title():
    assert render_table([row("n", check_mode=True)]).splitlines()[0] == "kubenode.gc summary (check mode: planned)"


def test_mixed_check_mode_marks_hosts():
    lines = render_table([row("n1", check_mode=True), row("n2")], title="T").splitlines()
    assert lines[0] == "T"
    assert lines[2].startswith("n1* ")
    assert lines[3].startswith("n2 ")
    assert lines[-1] == "* check mode: planned, nothing was removed."


def test_failed_and_unreachable_rows():
    rows = [row("n1", status="failed", errors=2, message="Removing 2 object(s) failed:\n boom."),
            row("n2", status="unreachable", message="Failed to connect to the host via ssh."),
            row("n3", images=1, target_reached=True)]
    lines = render_table(rows).splitlines()
    assert lines[1].split()[-2:] == ["failed", "(2)"]
    assert lines[2].split()[-1] == "unreachable"
    assert lines[4].split()[-3:] == ["2,", "2", "failed"]
    assert "n1: failed: Removing 2 object(s) failed: boom." in lines
    assert "n2: unreachable: Failed to connect to the host via ssh." in lines
    assert "All nodes with a known target reached it (unknown: n1, n2)." in lines


def test_no_target_at_all():
    assert render_table([row("n", containers=2)]).splitlines()[-1] == "No target to report: no image_gc result."


def test_empty_table():
    lines = render_table([]).splitlines()
    assert lines[1].split()[:2] == ["TOTAL", "(0)"]


@pytest.mark.parametrize("value, text", [(None, "-"), (0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (10 * MiB + 1, "10.0 MiB"),
                                         (1023 * MiB, "1023.0 MiB"), (1024 * MiB - 1, "1.0 GiB"), (5 * GiB, "5.0 GiB")])
def test_human_bytes(value, text):
    assert human_bytes(value) == text


# ---------------------------------------------------------------------------------------------- the callback
class FakeHost:
    def __init__(self, name):
        self.name = name

    def get_name(self):
        return self.name


class FakeTask:
    def __init__(self, resolved_action=None, action=None, check_mode=False, collections=None):
        self.resolved_action = resolved_action
        self.action = action or resolved_action
        self.check_mode = check_mode
        self.collections = collections or []


class FakeResult:
    """What the callback reads of ansible-core's CallbackTaskResult (private spellings, as before 2.19)."""

    def __init__(self, host, task, result):
        self._host = FakeHost(host)
        self._task = task
        self._result = result


class PublicResult:
    """ansible-core 2.19's public spellings."""

    def __init__(self, host, task, result):
        self.host = FakeHost(host)
        self.task = task
        self.result = result


class FakePlay:
    def __init__(self, name):
        self.name = name

    def get_name(self):
        return self.name


class FakePlayContext:
    def __init__(self, check_mode=False):
        self.check_mode = check_mode


class Recorder:
    verbosity = 0

    def __init__(self):
        self.lines = []

    def display(self, msg, **kwargs):
        self.lines.append(msg)

    def __getattr__(self, name):
        # warning, vvv, ... are not expected: make them visible
        def fail(*args, **kwargs):
            raise AssertionError("unexpected display.%s%r" % (name, args))
        return fail


IMAGE = "kubenode.gc.image_gc"
CONTAINER = "kubenode.gc.container_gc"


def image_result(removed=(100 * MiB, 50 * MiB), measured=None, before=90, after=82, target=True, errors=()):
    return {"changed": bool(removed), "removed": [{"id": "sha256:%d" % i, "size": s, "reason": "space"} for i, s in enumerate(removed)],
            "kept": {"in_use": 3}, "usage_before": before, "usage_after": after, "bytes_to_free": 0,
            "bytes_freed_estimated": sum(removed), "bytes_freed_measured": measured, "target_reached": target,
            "insufficient": not target, "errors": list(errors)}


def container_result(containers=2, sandboxes=1, logs=3, errors=()):
    return {"changed": True, "removed_containers": [{"id": "c%d" % i} for i in range(containers)],
            "removed_sandboxes": [{"id": "s%d" % i} for i in range(sandboxes)],
            "removed_log_paths": ["/var/log/pods/x/%d.log" % i for i in range(logs)], "kept": {}, "errors": list(errors)}


@pytest.fixture
def plugin():
    display = Recorder()
    callback = cb.CallbackModule(display=display)
    callback.set_play_context(FakePlayContext(False))
    callback.v2_playbook_on_play_start(FakePlay("GC the fleet"))
    callback.recorder = display
    return callback


def output(plugin):
    assert len(plugin.recorder.lines) == 1
    return plugin.recorder.lines[0].strip("\n").splitlines()


def test_callback_metadata():
    assert cb.CallbackModule.CALLBACK_TYPE == "aggregate"
    assert cb.CallbackModule.CALLBACK_NEEDS_ENABLED is True
    assert cb.CallbackModule.CALLBACK_VERSION == 2.0


@pytest.mark.parametrize("task, kind", [
    (FakeTask(IMAGE), "image"),
    (FakeTask(CONTAINER), "container"),
    (FakeTask("ansible.builtin.command"), None),
    (FakeTask("other.collection.image_gc", action="image_gc"), None),                   # resolved elsewhere
    (FakeTask(None, action=IMAGE), "image"),                                              # no resolved action: the FQCN
    (FakeTask(None, action="image_gc"), None),                                            # short name, not ours
    (FakeTask(None, action="container_gc", collections=["kubenode.gc"]), "container"),   # short name via collections
])
def test_gc_kind(task, kind):
    assert cb.gc_kind(task) == kind


def test_records_image_and_container_results(plugin):
    plugin.v2_runner_on_ok(FakeResult("node-2", FakeTask(CONTAINER), container_result()))
    plugin.v2_runner_on_ok(FakeResult("node-2", FakeTask(IMAGE), image_result(measured=160 * MiB)))
    plugin.v2_runner_on_ok(FakeResult("node-1", FakeTask(IMAGE), image_result(removed=(), measured=0, before=40, after=40)))
    plugin.v2_runner_on_ok(FakeResult("node-1", FakeTask("ansible.builtin.ping"), {"ping": "pong"}))
    plugin.v2_playbook_on_stats(None)
    lines = output(plugin)
    assert lines[0] == "GC SUMMARY [GC the fleet]"
    assert lines[2].split() == ["node-1", "-", "-", "-", "0", "0", "B", "40%", "→", "40%", "yes", "0"]
    assert lines[3].split() == ["node-2", "2", "1", "3", "2", "160.0", "MiB", "90%", "→", "82%", "yes", "0"]
    assert lines[4].split() == ["TOTAL", "(2)", "2", "1", "3", "2", "160.0", "MiB", "-", "2/2", "0"]
    assert lines[5] == "All nodes reached their target."
    assert len(lines) == 6


def test_public_result_attributes(plugin):
    plugin.v2_runner_on_ok(PublicResult("n", FakeTask(CONTAINER), container_result(containers=7)))
    plugin.v2_playbook_on_stats(None)
    assert output(plugin)[2].split()[:2] == ["n", "7"]


def test_several_runs_on_one_host_add_up(plugin):
    plugin.v2_runner_on_ok(FakeResult("n", FakeTask(IMAGE), image_result(removed=(MiB,), measured=MiB, before=95, after=90, target=False)))
    plugin.v2_runner_on_ok(FakeResult("n", FakeTask(IMAGE), image_result(removed=(2 * MiB,), measured=2 * MiB, before=90, after=70)))
    plugin.v2_playbook_on_stats(None)
    assert output(plugin)[2].split() == ["n", "-", "-", "-", "2", "3.0", "MiB", "95%", "→", "70%", "yes", "0"]


def test_check_mode_results_are_marked_planned(plugin):
    plugin.v2_runner_on_ok(FakeResult("n1", FakeTask(IMAGE, check_mode=True), image_result(removed=(MiB,), measured=None)))
    plugin.v2_runner_on_ok(FakeResult("n2", FakeTask(CONTAINER, check_mode=True), container_result()))
    plugin.v2_playbook_on_stats(None)
    lines = output(plugin)
    assert lines[0] == "GC SUMMARY [GC the fleet] (check mode: planned)"
    assert "~1.0 MiB" in lines[2]
    assert lines[-1].startswith("~ estimated")


def test_check_mode_from_the_play_context():
    display = Recorder()
    plugin = cb.CallbackModule(display=display)
    plugin.set_play_context(FakePlayContext(True))
    plugin.v2_playbook_on_play_start(FakePlay("p"))
    plugin.v2_runner_on_ok(FakeResult("n", FakeTask(IMAGE, check_mode=None), image_result()))
    plugin.v2_playbook_on_stats(None)
    assert display.lines[0].strip().splitlines()[0] == "GC SUMMARY [p] (check mode: planned)"


def test_real_run_wins_over_a_plan_on_the_same_host(plugin):
    plugin.v2_runner_on_ok(FakeResult("n", FakeTask(IMAGE, check_mode=True), image_result(removed=(9 * MiB,), target=True)))
    plugin.v2_runner_on_ok(FakeResult("n", FakeTask(IMAGE), image_result(removed=(MiB,), measured=MiB, target=False)))
    plugin.v2_runner_on_ok(FakeResult("m", FakeTask(IMAGE, check_mode=True), image_result(removed=(MiB,))))
    plugin.v2_playbook_on_stats(None)
    lines = output(plugin)
    assert lines[0] == "GC SUMMARY [GC the fleet]"
    assert lines[2].startswith("m* ")
    assert lines[3].split()[:7] == ["n", "-", "-", "-", "1", "1.0", "MiB"]
    assert "Not at target: n" in lines
    assert lines[-1] == "* check mode: planned, nothing was removed."


def test_failed_and_unreachable_hosts(plugin):
    failed = container_result(containers=1, sandboxes=0, logs=0, errors=[{"id": "c9", "msg": "boom."}])
    failed.update(failed=True, msg="Removing 1 object(s) failed: boom.")
    plugin.v2_runner_on_failed(FakeResult("n1", FakeTask(CONTAINER), failed), ignore_errors=True)
    plugin.v2_runner_on_failed(FakeResult("n2", FakeTask(IMAGE), {"failed": True, "msg": "CRI endpoint unix:///x does not exist."}))
    plugin.v2_runner_on_unreachable(FakeResult("n3", FakeTask("ansible.builtin.setup"), {"unreachable": True, "msg": "ssh: no route"}))
    plugin.v2_runner_on_ok(FakeResult("n4", FakeTask(IMAGE), image_result(measured=0)))
    plugin.v2_playbook_on_stats(None)
    lines = output(plugin)
    assert lines[2].split() == ["n1", "1", "0", "0", "-", "-", "-", "-", "failed", "(1)"]
    assert lines[3].split() == ["n2", "-", "-", "-", "-", "-", "-", "-", "failed"]
    assert lines[4].split() == ["n3", "-", "-", "-", "-", "-", "-", "-", "unreachable"]
    assert lines[5].split()[0] == "n4"
    assert lines[6].split()[-3:] == ["1,", "3", "failed"]
    assert "n1: failed: Removing 1 object(s) failed: boom." in lines
    assert "n2: failed: CRI endpoint unix:///x does not exist." in lines
    assert "n3: unreachable: ssh: no route" in lines


def test_loop_items_are_recorded_once(plugin):
    task = FakeTask(CONTAINER)
    items = [dict(container_result(containers=1), item=1), dict(container_result(containers=2), item=2)]
    for item in items:
        plugin.v2_runner_item_on_ok(FakeResult("n", task, item))
    plugin.v2_runner_on_ok(FakeResult("n", task, {"changed": True, "results": items}))
    plugin.v2_playbook_on_stats(None)
    assert output(plugin)[2].split()[:2] == ["n", "3"]


def test_nothing_printed_for_plays_without_gc(plugin):
    plugin.v2_runner_on_ok(FakeResult("n", FakeTask("ansible.builtin.ping"), {"ping": "pong"}))
    plugin.v2_runner_on_unreachable(FakeResult("m", FakeTask("ansible.builtin.ping"), {"msg": "down"}))
    plugin.v2_playbook_on_stats(None)
    assert plugin.recorder.lines == []


def test_gc_task_where_every_host_was_unreachable(plugin):
    task = FakeTask(IMAGE)
    plugin.v2_playbook_on_task_start(task, False)
    plugin.v2_runner_on_unreachable(FakeResult("n", task, {"msg": "down"}))
    plugin.v2_playbook_on_stats(None)
    lines = output(plugin)
    assert lines[2].split()[-1] == "unreachable"
    assert "n: unreachable: down" in lines


def test_one_table_per_play(plugin):
    plugin.v2_runner_on_ok(FakeResult("n", FakeTask(CONTAINER), container_result(containers=1)))
    plugin.v2_playbook_on_play_start(FakePlay("second"))     # flushes the first play
    assert len(plugin.recorder.lines) == 1
    assert plugin.recorder.lines[0].strip().startswith("GC SUMMARY [GC the fleet]")
    plugin.v2_runner_on_ok(FakeResult("n", FakeTask(CONTAINER), container_result(containers=5)))
    plugin.v2_playbook_on_play_start(FakePlay("third, no gc"))
    plugin.v2_runner_on_ok(FakeResult("n", FakeTask("ansible.builtin.ping"), {}))
    plugin.v2_playbook_on_stats(None)
    assert len(plugin.recorder.lines) == 2
    second = plugin.recorder.lines[1].strip().splitlines()
    assert second[0] == "GC SUMMARY [second]"
    assert second[2].split()[:2] == ["n", "5"]


CLEANUP = "kubenode.gc.node_cleanup"


def test_node_cleanup_steps_are_rows_and_skipped_or_unreadable_nodes_are_not(plugin):
    cleaned = {"status": "cleaned", "container_gc": container_result(), "image_gc": image_result(measured=160 * MiB), "storage_gc": None}
    plugin.v2_runner_on_ok(FakeResult("n1", FakeTask(CLEANUP), cleaned))
    plugin.v2_runner_on_ok(FakeResult("n2", FakeTask(CLEANUP), {"status": "skipped", "container_gc": None, "image_gc": None}))
    plugin.v2_runner_on_failed(FakeResult("n3", FakeTask(CLEANUP), {"status": "unreadable", "msg": "no socket", "image_gc": None}))
    broke = {"status": "failed", "msg": "storage broke", "container_gc": container_result(), "image_gc": image_result(),
             "storage_gc": {"failed": True, "msg": "storage broke"}}
    plugin.v2_runner_on_failed(FakeResult("n4", FakeTask(CLEANUP), broke))
    plugin.v2_playbook_on_stats(None)
    lines = output(plugin)
    assert lines[2].split() == ["n1", "2", "1", "3", "2", "160.0", "MiB", "90%", "→", "82%", "yes", "0"]
    assert lines[3].split()[0] == "n4" and "failed" in lines[3]
    assert not any(line.split()[:1] in (["n2"], ["n3"]) for line in lines)
    assert any("storage broke" in line for line in lines)


def test_gc_kind_of_node_cleanup():
    assert cb.gc_kind(FakeTask(CLEANUP)) == "cleanup"
    assert cb.gc_kind(FakeTask("kubenode.gc.node_audit")) is None
