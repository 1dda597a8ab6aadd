# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The gc_timer runner: the code the role ships is the whole import closure and needs no Ansible; its configuration checks."""

import io
import json
import os
import subprocess
import sys
import tarfile

import pytest
import yaml

from ansible_collections.kubenode.gc.plugins.module_utils.gc import _timer
from tests.unit.plugins.module_utils.test_layout import graph

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
MODULE_UTILS = os.path.join(REPO, "plugins", "module_utils")
ROLE = os.path.join(REPO, "roles", "gc_timer")


def closure(start="gc._timer"):
    """The files of ``start`` and of every module_utils module it imports, directly or not (test_layout's import graph)."""
    deps = graph()
    seen, todo = set(), [start]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += deps[name]
    return sorted(n.replace(".", "/") + ".py" for n in seen)


def role_list():
    with open(os.path.join(ROLE, "vars", "main.yml")) as f:
        return yaml.safe_load(f)["__gc_timer_module_utils"]


def config(tmp_path, **image):
    cfg = {"cri_endpoint": "unix:///nonexistent/kubenode-gc-test.sock", "cri_timeout": 5, "lock_timeout": 5, "observe": False,
           "containers": True,
           "image": dict({"high_threshold_percent": 85, "low_threshold_percent": 80, "min_age": "2m", "max_age": "0s", "free_bytes_high": None,
                          "free_bytes_low": None, "inodes_high_threshold_percent": None, "inodes_low_threshold_percent": None, "keep_images": [],
                          "ledger_path": str(tmp_path / "state" / "image-ledger.json")}, **image),
           "container": {"min_age": "1m", "max_per_pod_container": 1, "max_containers": -1, "pod_logs_dir": str(tmp_path / "pods"),
                         "container_logs_dir": str(tmp_path / "containers")}}
    path = tmp_path / "gc-timer.json"
    path.write_text(json.dumps(cfg))
    return path


def test_the_role_ships_exactly_the_runner_s_import_closure():
    assert role_list() == closure()


def pack(out):
    """Build the role's code archive with the role's own packing script (tasks/present.yml), as the controller does."""
    with open(os.path.join(ROLE, "tasks", "present.yml")) as f:
        tasks = yaml.safe_load(f)
    script = [t for block in tasks for t in block.get("block", []) if "__gc_timer_pack" in t.get("vars", {})][0]["vars"]["__gc_timer_pack"]
    subprocess.run([sys.executable, "-c", script, ROLE, str(out)] + role_list(), check=True)
    with open(out, "rb") as f:
        return f.read()


def test_the_archive_holds_the_runner_and_its_closure_with_fixed_bytes(tmp_path):
    first = pack(tmp_path / "a.tar.gz")
    assert pack(tmp_path / "b.tar.gz") == first  # same code, same bytes: the role's copy is idempotent
    mu = "ansible_collections/kubenode/gc/plugins/module_utils"
    with tarfile.open(tmp_path / "a.tar.gz") as t:
        members = {m.name: m for m in t.getmembers()}
        assert sorted(n for n, m in members.items() if m.isfile()) == sorted(["kubenode-gc-timer"] + [mu + "/" + n for n in closure()])
        assert all((m.uid, m.gid, m.mode) == (0, 0, 0o644 if m.isfile() else 0o755) for m in members.values())
        for name in role_list():
            with open(os.path.join(MODULE_UTILS, name), "rb") as f:
                assert t.extractfile(mu + "/" + name).read() == f.read()


def test_the_shipped_code_runs_without_ansible(tmp_path):
    # the role's archive unpacked, and an "ansible" package that refuses to import, first on the path
    with tarfile.open(fileobj=io.BytesIO(pack(tmp_path / "code.tar.gz"))) as t:
        t.extractall(tmp_path / "lib")
    blocker = tmp_path / "blocker" / "ansible"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('ansible is not on the node')\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "blocker"))
    cfg = config(tmp_path)
    runner = str(tmp_path / "lib" / "kubenode-gc-timer")
    ok = subprocess.run([sys.executable, runner, "--check-config", str(cfg)], env=env, capture_output=True, text=True, check=False)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bad = config(tmp_path, free_bytes_high="50Gi", free_bytes_low="40Gi")
    out = subprocess.run([sys.executable, runner, "--check-config", str(bad)], env=env, capture_output=True, text=True, check=False)
    assert out.returncode == 1 and out.stdout.startswith("kubenode-gc-timer: free_bytes_low (40Gi) must be at least free_bytes_high (50Gi)")
    # a real run against a runtime that is not there: one journal line, exit 1, the state file says why
    cfg = config(tmp_path)
    run = subprocess.run([sys.executable, runner, str(cfg)], env=env, capture_output=True, text=True, check=False)
    assert run.returncode == 1 and run.stdout.count("\n") == 1
    assert run.stdout.startswith("kubenode-gc-timer: failed: FAILED: CRI endpoint unix:///nonexistent/kubenode-gc-test.sock")
    state = json.loads((tmp_path / "state" / "gc-timer-state.json").read_text())
    assert state["result"] == "failed" and state["message"].startswith("FAILED: CRI endpoint") and state["finished_at"].endswith("Z")


def test_bad_configurations_fail_in_one_sentence_naming_the_file(tmp_path):
    out = io.StringIO()
    assert _timer.main([str(tmp_path / "missing.json")], out=out) == 1
    assert out.getvalue() == "kubenode-gc-timer: Cannot read the gc_timer configuration %s: No such file or directory.\n" % (tmp_path / "missing.json")
    path = config(tmp_path)
    data = json.loads(path.read_text())
    data["image"]["high_treshold"] = 1
    path.write_text(json.dumps(data))
    out = io.StringIO()
    assert _timer.main(["--check-config", str(path)], out=out) == 1
    assert out.getvalue() == "kubenode-gc-timer: The gc_timer configuration %s has unknown keys: image.high_treshold.\n" % path
    with pytest.raises(Exception, match="needs image.ledger_path"):
        _timer.options(dict(data, image=dict(data["image"], ledger_path="", high_treshold=None)))
    assert _timer.main([], out=io.StringIO()) == 2
