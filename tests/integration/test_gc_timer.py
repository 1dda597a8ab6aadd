# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""kubenode.gc.gc_timer's runner, installed as the role installs it (the shipped module_utils, no Ansible on the path), against
every real runtime: it frees down to the target, observe-only removes nothing, and it waits for the node lock."""

import json
import os
import shutil
import subprocess
import sys
import time

import yaml

from ansible_collections.kubenode.gc.plugins.module_utils import _ledger
from devtools.images import ImageSpec

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


def start(tmp_path, runner, cfg):
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "blocker"))
    return subprocess.Popen([sys.executable, runner, cfg], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def available(runtime):
    st = os.statvfs(runtime.imagefs_mountpoint)
    return min(st.f_bavail, st.f_blocks) * st.f_frsize


def state(tmp_path):
    return json.loads((tmp_path / "state" / "gc-timer-state.json").read_text())


def test_runner_frees_to_the_byte_target_without_ansible_and_logs_one_line(runtime, tmp_path):
    runtime.import_images([ImageSpec("timer-%d:1" % n, size=4 * MIB, share_base=False) for n in range(6)])
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
    runtime.import_images([ImageSpec("seen-%d:1" % n, size=MIB, share_base=False) for n in range(3)])
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
    assert sorted(runtime.image_refs()["tags"]) == before
    assert runtime.container_ids() == containers
    ledger = json.loads((tmp_path / "state" / "image-ledger.json").read_text())
    assert len(ledger["images"]) == 4  # three images and the sandbox image
    in_use = [rec for rec in ledger["images"].values() if rec["last_used"]]
    assert len(in_use) == 1  # seen-0 is used by the exited container
    assert state(tmp_path)["observe"] is True and state(tmp_path)["removed_images"] == 0


def test_runner_waits_for_the_node_lock_a_controller_run_holds(runtime, tmp_path):
    runtime.import_images([ImageSpec("locked-%d:1" % n, size=2 * MIB, share_base=False) for n in range(3)])
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
