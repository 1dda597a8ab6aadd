# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""kubenode.gc.gc_timer on real node containers: the timer frees space on its own, waits for the node lock, runs alongside
a concurrent kubenode.gc.cleanup, and gc_timer_state: absent leaves nothing behind."""

import hashlib
import json
import os
import re
import subprocess
import time

import pytest
import testinfra.utils.ansible_runner

INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
testinfra_hosts = testinfra.utils.ansible_runner.AnsibleRunner(INVENTORY).get_hosts("all")

ENDPOINTS = {"kgc-timer-ctrd": ("unix:///run/containerd/containerd.sock", "/var/lib/containerd"),
             "kgc-timer-crio": ("unix:///run/crio/crio.sock", "/var/lib/containers/storage")}
STATE = "/var/lib/kubenode-gc/gc-timer-state.json"
LEFT_BEHIND = ["/etc/systemd/system/kubenode-gc.timer", "/etc/systemd/system/kubenode-gc.service", "/etc/kubenode-gc",
               "/usr/local/lib/kubenode-gc", STATE]


@pytest.fixture
def name(host):
    return host.backend.get_hostname()


def available(host, name):
    out = host.check_output("stat -f -c '%%a %%S' %s", ENDPOINTS[name][1]).split()
    return int(out[0]) * int(out[1])


def read_state(host):
    f = host.file(STATE)
    return json.loads(f.content_string) if f.exists else None


def freeing_line(host):
    """The timer's journal line for a run that removed images because of the byte target, if there is one yet."""
    journal = host.check_output("journalctl -u kubenode-gc.service --no-pager -o cat")
    return next((line for line in journal.splitlines() if re.search(r"image GC removed [1-9][0-9]* image\(s\).*started by the bytes target", line)), None)


def wait_for(predicate, timeout=90, step=2):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    return predicate()


def playbook(name, text, *extra):
    """Run a playbook from the controller against one node (the collection on ANSIBLE_COLLECTIONS_PATH, as Molecule has it)."""
    path = os.path.join(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "/tmp"), "verify-%s-%d.yml" % (name, time.time_ns()))
    with open(path, "w") as f:
        f.write(text)
    return subprocess.Popen(["ansible-playbook", "-i", INVENTORY, "-l", name, path] + list(extra), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)


def cleanup(name, *extra):
    return subprocess.Popen(["ansible-playbook", "-i", INVENTORY, "-l", name, "kubenode.gc.cleanup", "-e", "kubenode_gc_cleanup_only_over_threshold=false",
                             "-e", "kubenode_gc_cleanup_history_dir=/var/tmp/kgc-history", "-e", "kubenode_gc_cri_endpoint=" + ENDPOINTS[name][0]]
                            + list(extra),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_1_the_timer_fires_and_frees_to_the_low_byte_target_without_the_controller(host, name):
    target = json.loads(host.file("/var/tmp/kgc-timer-target.json").content_string)
    assert host.service("kubenode-gc.timer").is_enabled and host.service("kubenode-gc.timer").is_running
    # the run that freed space may be minutes old (the timer fires every 10 s and later runs have nothing to do, the
    # state file holds the last run): its journal line says what it removed and which target started it
    line = wait_for(lambda: freeing_line(host))
    assert line and line.startswith("kubenode-gc-timer: ok: container GC removed 0 container(s)"), line
    assert "started by the bytes target, freed to the bytes target" in line and ", short of the target" not in line, line
    state = read_state(host)
    assert state and state["result"] == "ok" and state["observe"] is False, state
    now = available(host, name)
    assert now >= target["low"]  # down to the low byte target
    # and not much further: test images are left (5 of 6 MiB each, about 14 MiB to free)
    left = host.check_output("ls /var/lib/kubenode-gc/")
    assert "image-ledger.json" in left
    ledger = json.loads(host.file("/var/lib/kubenode-gc/image-ledger.json").content_string)
    assert len(ledger["images"]) >= 2
    # one journal line per run, what was removed and freed; systemctl status shows the last result
    journal = host.check_output("journalctl -u kubenode-gc.service --no-pager -o cat")
    assert "kubenode-gc-timer: ok: container GC removed 0 container(s)" in journal and "image GC removed" in journal
    status = host.run("systemctl status kubenode-gc.service --no-pager")
    assert "kubenode-gc-timer: ok" in status.stdout and "status=0/SUCCESS" in status.stdout


def test_2_the_timer_waits_for_the_node_lock_another_run_holds(host, name):
    endpoint = ENDPOINTS[name][0]
    lock = "/run/lock/kubenode-gc/%s.lock" % hashlib.sha256(endpoint.encode()).hexdigest()[:16]
    before = read_state(host)["finished_at"]
    time.sleep(1.1)  # state times have one-second resolution
    host.check_output("systemctl stop kubenode-gc.timer")
    # hold the very lock the modules take (flock, as kubenode.gc's NodeLock) for 15 s, then start a run
    host.check_output("systemd-run --unit kgc-hold-lock --collect flock %s sleep 15", lock)
    time.sleep(1)
    host.check_output("systemctl start --no-block kubenode-gc.service")
    time.sleep(6)
    assert host.check_output("systemctl is-active kubenode-gc.service || true") == "activating"  # waiting on the lock
    assert read_state(host)["finished_at"] == before
    state = wait_for(lambda: read_state(host)["finished_at"] != before and read_state(host), timeout=60)
    assert state and state["result"] == "ok"
    host.check_output("systemctl start kubenode-gc.timer")


def test_3_a_concurrent_cleanup_and_the_timer_both_finish(host, name):
    before = read_state(host)["finished_at"]
    time.sleep(1.1)
    host.check_output("systemctl start --no-block kubenode-gc.service")
    run = cleanup(name)
    out = run.communicate(timeout=300)[0]
    assert run.returncode == 0, out
    state = wait_for(lambda: read_state(host)["finished_at"] != before and read_state(host), timeout=60)
    assert state and state["result"] == "ok", state
    records = host.check_output("cat /var/tmp/kgc-history/*.json")
    assert '"status": "cleaned"' in records
    json.loads(host.file("/var/lib/kubenode-gc/image-ledger.json").content_string)  # still one valid ledger


def test_4_absent_leaves_nothing_behind(host, name):
    run = playbook(name, "- hosts: all\n  gather_facts: false\n  roles:\n    - role: kubenode.gc.gc_timer\n      vars:\n        gc_timer_state: absent\n")
    out = run.communicate(timeout=300)[0]
    assert run.returncode == 0, out
    for path in LEFT_BEHIND:
        assert not host.file(path).exists, path
    assert host.run("systemctl cat kubenode-gc.timer").rc != 0
    assert "kubenode-gc" not in host.check_output("systemctl list-unit-files --no-pager")
    assert "kubenode-gc" not in host.check_output("systemctl list-timers --all --no-pager")
