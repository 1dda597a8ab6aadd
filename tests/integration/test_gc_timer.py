# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""kubenode.gc.gc_timer's runner, installed as the role installs it (the shipped module_utils, no Ansible on the path), against
every real runtime: it frees down to the target, observe-only removes nothing, and it waits for the node lock, which a
controller run reaching the same socket by another spelling takes too."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
import yaml

from ansible_collections.kubenode.gc.plugins.module_utils.cri import _ledger
from devtools.images import ImageSpec

pytestmark = pytest.mark.runtimes("one")

MIB = 1 << 20
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROLE = os.path.join(REPO, "roles", "gc_timer")


def install(tmp_path):
    """The role's layout under tmp_path/lib, and a blocker that makes any import of Ansible fail."""
    with open(os.path.join(ROLE, "vars", "main.yml")) as f:
        names = yaml.safe_load(f)["__gc_timer_module_utils"]
    dest = tmp_path / "lib" / "ansible_collections" / "kubenode" / "gc" / "plugins" / "module_utils"
    dest.mkdir(parents=True)
    for name in names:
        (dest / name).parent.mkdir(exist_ok=True)
        shutil.copy(os.path.join(REPO, "plugins", "module_utils", name), dest / name)
    shutil.copy(os.path.join(ROLE, "files", "kubenode-gc-timer"), tmp_path / "lib" / "kubenode-gc-timer")
    (tmp_path / "blocker" / "ansible").mkdir(parents=True)
    (tmp_path / "blocker" / "ansible" / "__init__.py").write_text("raise ImportError('no ansible on the node')\n")
    return str(tmp_path / "lib" / "kubenode-gc-timer")


def write_config(tmp_path, runtime, observe=False, **image):
    cfg = {"cri_endpoint": runtime.endpoint, "cri_timeout": 30, "lock_timeout": 60, "observe": observe, "containers": True,
           "image": dict({"high_threshold_percent": 85, "low_threshold_percent": 80, "min_age": "0s", "max_age": "0s", "free_bytes_high": None,
                          "free_bytes_low": None, "inodes_high_threshold_percent": None, "inodes_low_threshold_percent": None, "keep_images": [],
                          "ledger_path": str(tmp_path / "state" / "image-ledger.json")}, **image),
           "container": {"min_age": "0s", "max_per_pod_container": 1, "max_containers": -1, "pod_logs_dir": str(tmp_path / "pods"),
                         "container_logs_dir": str(tmp_path / "containers")}}
    path = tmp_path / "gc-timer.json"
    path.write_text(json.dumps(cfg))
    return str(path)


# in the runner's interpreter: stop the process (SIGSTOP) right after it first takes an exclusive flock, inside the node lock
FREEZE_IN_LOCK = """
import fcntl, os, signal
_flock = fcntl.flock
_frozen = []
def flock(fd, op):
    _flock(fd, op)
    if op & fcntl.LOCK_EX and not _frozen:
        _frozen.append(fd)
        os.kill(os.getpid(), signal.SIGSTOP)
fcntl.flock = flock
"""


def start(tmp_path, runner, cfg, freeze_in_lock=False):
    if freeze_in_lock:
        (tmp_path / "blocker" / "sitecustomize.py").write_text(FREEZE_IN_LOCK)
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "blocker"))
    return subprocess.Popen([sys.executable, runner, cfg], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def available(runtime):
    st = os.statvfs(runtime.imagefs_mountpoint)
    return min(st.f_bavail, st.f_blocks) * st.f_frsize


def state(tmp_path):
    return json.loads((tmp_path / "state" / "gc-timer-state.json").read_text())


def test_runner_frees_to_the_byte_target_without_ansible_and_logs_one_line(runtime, tmp_path):
    runtime.pull_images([ImageSpec("timer-%d:1" % n, size=4 * MIB, share_base=False) for n in range(6)])
    pod = runtime.run_pod("timer")
    runtime.add_container(pod, "used", "timer-5:1", "running")
    runtime.add_container(pod, "dead", "timer-4:1", "exited")
    free = available(runtime)
    low = free + 10 * MIB
    runner = install(tmp_path)
    proc = start(tmp_path, runner, write_config(tmp_path, runtime, high_threshold_percent=100, free_bytes_high=free + MIB, free_bytes_low=low))
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, out + err
    lines = out.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kubenode-gc-timer: ok: container GC removed ")
    assert "started by the bytes target, freed to the bytes target" in lines[0]
    after = available(runtime)
    tags = runtime.image_refs()["tags"]
    assert "docker.io/library/timer-5:1" in tags and "docker.io/library/timer-4:1" in tags  # in use: never removed
    st = state(tmp_path)
    assert st["result"] == "ok" and st["removed_images"] >= 1 and st["bytes_freed"] >= 10 * MIB and st["triggered_by"] == ["bytes"]
    # down to free_bytes_low, and less than one more image's worth further
    assert low <= after < low + st["bytes_freed"] // st["removed_images"]
    # the same ledger as the modules: the images left are recorded, the removed ones dropped
    ledger = json.loads((tmp_path / "state" / "image-ledger.json").read_text())
    assert len(ledger["images"]) == 7 - st["removed_images"]  # six images and the sandbox image


def test_observe_only_records_sightings_and_removes_nothing(runtime, tmp_path):
    runtime.pull_images([ImageSpec("seen-%d:1" % n, size=MIB, share_base=False) for n in range(3)])
    pod = runtime.run_pod("seen")
    runtime.add_container(pod, "dead", "seen-0:1", "exited")
    before = sorted(runtime.image_refs()["tags"])
    containers = runtime.container_ids()
    runner = install(tmp_path)
    # over every target: a real run would remove; observe-only must not, containers included
    proc = start(tmp_path, runner, write_config(tmp_path, runtime, observe=True, high_threshold_percent=1, low_threshold_percent=0))
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, out + err
    assert out.startswith("kubenode-gc-timer: ok (observe only): observed ") and "nothing removed" in out
    # the plan is recorded: the journal line gives its count and bytes, the state file lists the images (issue 32)
    st = state(tmp_path)
    planned = {t for i in st["would_remove"] for t in i["repo_tags"]}
    assert planned == {"docker.io/library/seen-1:1", "docker.io/library/seen-2:1"}, st["would_remove"]
    assert st["bytes_would_free"] == sum(i["size"] for i in st["would_remove"]) > 0
    assert "would remove 2 image(s) of %d bytes;" % st["bytes_would_free"] in out
    assert sorted(runtime.image_refs()["tags"]) == before
    assert runtime.container_ids() == containers
    ledger = json.loads((tmp_path / "state" / "image-ledger.json").read_text())
    assert len(ledger["images"]) == 4  # three images and the sandbox image
    in_use = [rec for rec in ledger["images"].values() if rec["last_used"]]
    assert len(in_use) == 1  # seen-0 is used by the exited container
    assert state(tmp_path)["observe"] is True and state(tmp_path)["removed_images"] == 0


def test_runner_waits_for_the_node_lock_a_controller_run_holds(runtime, tmp_path):
    runtime.pull_images([ImageSpec("locked-%d:1" % n, size=2 * MIB, share_base=False) for n in range(3)])
    runner = install(tmp_path)
    cfg = write_config(tmp_path, runtime, high_threshold_percent=1, low_threshold_percent=0)
    with _ledger.NodeLock(_ledger.node_lock_path(runtime.endpoint), 10):
        proc = start(tmp_path, runner, cfg)
        time.sleep(3)
        assert proc.poll() is None  # still waiting for the lock
        assert not (tmp_path / "state" / "gc-timer-state.json").exists()
        assert len([t for t in runtime.image_refs()["tags"] if "locked-" in t]) == 3  # nothing removed while the lock is held
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, out + err
    assert not [t for t in runtime.image_refs()["tags"] if "locked-" in t]
    assert state(tmp_path)["removed_images"] == 3


def stopped(proc):
    with open("/proc/%d/stat" % proc.pid) as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "T"


def test_a_controller_run_by_another_spelling_of_the_socket_waits_for_a_frozen_timer_run(ansible, runtime, tmp_path):
    """The timer runner, frozen inside the node lock, and node_cleanup reaching the same socket through a linked directory
    (as /var/run -> /run), with a doubled slash: the controller run gives up on the same lock file and removes nothing."""
    runtime.pull_images([ImageSpec("spelled-%d:1" % n, size=MIB, share_base=False) for n in range(3)])
    sock = runtime.endpoint[len("unix://"):] if runtime.endpoint.startswith("unix://") else runtime.endpoint
    (tmp_path / "var").mkdir()
    (tmp_path / "var" / "run").symlink_to(os.path.dirname(sock))
    spelled = "unix://" + str(tmp_path / "var" / "run") + "//" + os.path.basename(sock)
    runner = install(tmp_path)
    proc = start(tmp_path, runner, write_config(tmp_path, runtime, high_threshold_percent=1, low_threshold_percent=0), freeze_in_lock=True)
    try:
        while proc.poll() is None and not stopped(proc):
            time.sleep(0.1)  # until it stops itself inside the lock (or ends: then the assertion below says so)
        assert proc.poll() is None and stopped(proc)  # frozen inside the lock
        res = ansible.module("kubenode.gc.node_cleanup", dict(
            host="node-x", cri_endpoint=spelled, history_dir=str(tmp_path / "history"), image_mode="prune",
            image_gc=dict(ledger_path=str(tmp_path / "ledger.json"), lock_timeout=1), image_gc_overrides=dict(kubenode_gc_cleanup_image_min_age="0s"),
            kubelet_config=dict(path=str(tmp_path / "none.yaml")), container_gc=dict(pod_logs_dir=runtime.pod_logs, lock_timeout=1)))
        lock = _ledger.node_lock_path(runtime.endpoint)
        assert res.get("failed") is True and "holds the node lock %s;" % lock in res["msg"], res.get("msg")
        assert not (res.get("image_gc") or {}).get("removed") and not (res.get("container_gc") or {}).get("removed")
        assert len([t for t in runtime.image_refs()["tags"] if "spelled-" in t]) == 3  # the controller removed nothing
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, out + err
    assert not [t for t in runtime.image_refs()["tags"] if "spelled-" in t]  # the timer run, resumed, removed them
