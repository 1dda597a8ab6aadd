# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""kubenode.gc.gc_timer on real node containers: the timer, sandboxed (systemd-analyze security at most 2.5), frees space
on its own within its unit's limits and removes a gone container's logs from the kubelet's podLogsDir, waits for the node
lock, runs alongside a concurrent kubenode.gc.cleanup, records its plan in observe-only mode, refuses values that would
change its unit files and an interpreter (or anything it runs) that is not root's alone, and gc_timer_state: absent after
a failed run leaves nothing behind."""

import hashlib
import json
import os
import re
import shlex
import subprocess
import time

import pytest
import testinfra.utils.ansible_runner

INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
testinfra_hosts = testinfra.utils.ansible_runner.AnsibleRunner(INVENTORY).get_hosts("all")

ENDPOINTS = {"kgc-timer-ctrd": ("unix:///run/containerd/containerd.sock", "/var/lib/containerd"),
             "kgc-timer-crio": ("unix:///run/crio/crio.sock", "/var/lib/containers/storage")}
STATE = "/var/lib/kubenode-gc/gc-timer-state.json"
# what prepare left: a gone container's logs in the kubelet's podLogsDir (its kubelet configuration says /var/log/kgc-pods)
GONE_LOGS = ["/var/log/kgc-pods/default_gone_0d4e7c1a-5b8f-4f0e-9d43-2b1a7c9e8f10/app/0.log",
             "/var/log/kgc-pods/default_gone_0d4e7c1a-5b8f-4f0e-9d43-2b1a7c9e8f10/app/0.log.20240101-000000",
             "/var/log/containers/gone_default_app-%064x.log" % 3735928559]
TEST_IMAGES = 5
MAX_EXPOSURE = 2.5
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


def last_run_ok(host):
    """systemctl status of the service when its last run ended well (not while a run is starting), else None."""
    out = host.run("systemctl status kubenode-gc.service --no-pager").stdout
    return out if "kubenode-gc-timer: ok" in out and "status=0/SUCCESS" in out else None


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
    # the run that freed space may be minutes old (the timer fires every minute and later runs have nothing to do, the
    # state file holds the last run): its journal line says what it removed and which target started it
    line = wait_for(lambda: freeing_line(host), timeout=180)
    assert line and line.startswith("kubenode-gc-timer: ok: container GC removed 0 container(s)"), line
    # what is left in the runtime: the removed test images are gone, the others are there (the low target is 14 MiB away)
    removed = int(re.search(r"image GC removed ([0-9]+) image", line).group(1))
    left = [t for t in image_tags(host, name) if "registry.example/kubenode-gc/timer-" in t]
    assert 1 <= removed < TEST_IMAGES and len(left) == TEST_IMAGES - removed, (line, left)
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
    # (the timer fires every minute: a run may be starting right now, so ask again until the last one has ended)
    status = wait_for(lambda: last_run_ok(host), timeout=120)
    assert status, host.run("systemctl status kubenode-gc.service --no-pager").stdout


def test_1a_the_sandboxed_service_removed_a_gone_container_s_logs_from_the_kubelet_s_pod_logs_dir(host):
    """The log directory came from the node's kubelet configuration (podLogsDir), and the service may write there."""
    for path in GONE_LOGS:
        assert not host.file(path).exists and not host.file(path).is_symlink, path
    shown = host.check_output("systemctl show kubenode-gc.service -p ReadWritePaths")
    assert shown == "ReadWritePaths=/var/lib/kubenode-gc -/var/log/kgc-pods -/var/log/containers", shown
    journal = host.check_output("journalctl -u kubenode-gc.service --no-pager -o cat")
    assert "container GC removed 0 container(s), 0 sandbox(es), 3 log path(s)" in journal


def test_1c_the_service_is_as_sandboxed_as_systemd_s_own_small_services(host, name):
    """systemd-analyze security (systemd 252, the node image's) rates the unit at most 2.5, and the sandbox is in force."""
    out = host.check_output("systemd-analyze security --no-pager kubenode-gc.service")
    exposure = float(re.search(r"Overall exposure level for kubenode-gc\.service: ([0-9]+\.[0-9]+)", out).group(1))
    # the measured figure, in the run's output (the verifier shows what passing tests printed: -r P)
    print("\n%s: systemd-analyze security kubenode-gc.service: %.1f (%s; at most %.1f asserted)"
          % (name, exposure, host.check_output("systemd-analyze --version").splitlines()[0], MAX_EXPOSURE))
    assert exposure <= MAX_EXPOSURE, out
    shown = dict(line.split("=", 1) for line in host.check_output(
        "systemctl show kubenode-gc.service -p ProtectSystem -p ProtectHome -p PrivateTmp -p NoNewPrivileges -p CapabilityBoundingSet "
        "-p RestrictAddressFamilies -p UMask -p RuntimeDirectory -p RuntimeDirectoryMode -p RuntimeDirectoryPreserve").splitlines())
    assert shown == {"ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes", "NoNewPrivileges": "yes",
                     "CapabilityBoundingSet": "cap_dac_override cap_sys_ptrace", "RestrictAddressFamilies": "AF_UNIX", "UMask": "0077",
                     "RuntimeDirectory": "kubenode-gc", "RuntimeDirectoryMode": "0700", "RuntimeDirectoryPreserve": "yes"}, shown
    # the node lock's directory: made by systemd for root alone, kept between runs (a controller run takes the same lock)
    assert host.check_output("stat -c '%U %a %F' /run/kubenode-gc") == "root 700 directory"
    assert host.check_output("ls /run/kubenode-gc").endswith(".lock")


# Run inside the service's sandbox (test_1d): the runtime _daemons trusts (its /proc/<pid>/status, exe and cgroup read
# under ProtectProc=invisible with CAP_SYS_PTRACE), and _files.atomic_write making, then replacing a root-owned file in the
# ledger's directory (owner, mode and extended attributes kept, no chown system call), and what confines the process.
PROBE = """
import json, os, sys
sys.path.insert(0, "/usr/local/lib/kubenode-gc")
from ansible_collections.kubenode.gc.plugins.module_utils import _daemons, _files
runtime, proc, untrusted = _daemons.find_runtime(sys.argv[1])
path = os.path.join(sys.argv[2], ".kgc-sandbox-probe")
_files.atomic_write(path, "one", mode=0o600, keep_owner_mode=False)
_files.atomic_write(path, "two")
with open(path) as f:
    text = f.read()
st = os.stat(path)
os.unlink(path)
status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines())
print(json.dumps(dict(runtime=runtime, unit=proc and _daemons.unit_of(proc.pid), untrusted=[u.why for u in untrusted], text=text,
                      mode=st.st_mode & 0o7777, uid=st.st_uid, **{k: status[k].strip() for k in ("CapBnd", "NoNewPrivs", "Seccomp")})))
"""
# the unit's lines that say what it runs, its limits and its runtime directory; every other line of [Service] confines it
NOT_SANDBOX = ("Type", "ExecStart", "Nice", "IOSchedulingClass", "CPUWeight", "MemoryMax", "TimeoutStartSec", "RuntimeDirectory",
               "RuntimeDirectoryMode", "RuntimeDirectoryPreserve")


def test_1d_inside_the_sandbox_the_runtime_is_trusted_and_a_safe_write_keeps_root_s_file(host, name):
    """The merged code under the service's own sandbox, as a transient unit with each of its confining directives."""
    service = host.file("/etc/systemd/system/kubenode-gc.service").content_string.split("[Service]", 1)[1]
    lines = [line for line in service.splitlines() if "=" in line and not line.startswith("#") and line.split("=", 1)[0] not in NOT_SANDBOX]
    python = next(line for line in service.splitlines() if line.startswith("ExecStart=")).split("=", 1)[1].split()[0]
    assert "SystemCallFilter=~@privileged @resources" in lines and "CapabilityBoundingSet=CAP_DAC_OVERRIDE CAP_SYS_PTRACE" in lines
    endpoint = ENDPOINTS[name][0][len("unix://"):]
    out = json.loads(host.check_output("systemd-run --quiet --wait --pipe --collect %s %s -I -c %s %s /var/lib/kubenode-gc"
                                       % (" ".join("-p " + shlex.quote(line) for line in lines), python, shlex.quote(PROBE), endpoint)))
    runtime, unit = {"kgc-timer-ctrd": ("containerd", "containerd.service"), "kgc-timer-crio": ("crio", "crio.service")}[name]
    assert (out["runtime"], out["unit"], out["untrusted"]) == (runtime, unit, []), out
    assert (out["text"], out["mode"], out["uid"]) == ("two", 0o600, 0), out
    # it ran confined: the bounding set of the unit (CAP_DAC_OVERRIDE is bit 1, CAP_SYS_PTRACE bit 19), no new privileges, seccomp
    assert (out["CapBnd"], out["NoNewPrivs"], out["Seccomp"]) == ("%016x" % (1 << 1 | 1 << 19), "1", "2"), out
    assert not host.file("/var/lib/kubenode-gc/.kgc-sandbox-probe").exists


def test_1b_the_service_runs_within_documented_limits(host):
    """The role's defaults: CPUWeight 20, MemoryMax 512M, TimeoutStartSec 30min (besides Nice and the idle I/O class)."""
    shown = dict(line.split("=", 1) for line in host.check_output(
        "systemctl show kubenode-gc.service -p CPUWeight -p MemoryMax -p TimeoutStartUSec -p Nice -p IOSchedulingClass").splitlines())
    assert shown["CPUWeight"] == "20" and shown["MemoryMax"] == str(512 << 20) and shown["TimeoutStartUSec"] == "30min", shown
    assert shown["Nice"] == "10", shown


def test_2_the_timer_waits_for_the_node_lock_another_run_holds(host, name):
    endpoint = ENDPOINTS[name][0]
    # the lock is named by the socket's resolved path, whatever the endpoint's spelling
    sock = host.check_output("realpath %s", endpoint[len("unix://"):])
    lock = "/run/kubenode-gc/%s.lock" % hashlib.sha256(sock.encode()).hexdigest()[:16]
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


def image_ids(host, name, field="id"):
    """The runtime's image ids (or tags), read over CRI with the runner's own client as installed on the node."""
    each = "[i.id]" if field == "id" else "i.repo_tags"
    code = ("import sys; sys.path.insert(0, '/usr/local/lib/kubenode-gc'); from ansible_collections.kubenode.gc.plugins.module_utils.cri import _cri; "
            "c = _cri.CriClient(sys.argv[1]); print(' '.join(sorted(v for i in c.list_images() for v in %s))); c.close()" % each)
    return host.check_output("/usr/bin/python3 -c %s %s", code, ENDPOINTS[name][0]).split()


def image_tags(host, name):
    return image_ids(host, name, field="tags")


def role_play(**variables):
    """A play applying the role with these variables (JSON is YAML: any character survives)."""
    return json.dumps([{"hosts": "all", "gather_facts": False,
                        "roles": [{"role": "kubenode.gc.gc_timer", "vars": variables}]}])


def test_3b_observe_only_records_its_plan_and_removes_nothing(host, name):
    images = image_ids(host, name)
    run = playbook(name, role_play(gc_timer_observe=True, gc_timer_interval="1min", gc_timer_cri_endpoint=ENDPOINTS[name][0], gc_timer_min_age="0s",
                                   gc_timer_high_threshold_percent=1, gc_timer_low_threshold_percent=0))
    out = run.communicate(timeout=300)[0]
    assert run.returncode == 0, out
    host.check_output("systemctl start kubenode-gc.service")  # oneshot: returns when the run ends
    state = read_state(host)
    assert state["result"] == "ok" and state["observe"] is True, state
    assert state["would_remove"] and state["bytes_would_free"] == sum(i["size"] for i in state["would_remove"]) > 0, state
    assert any("registry.example/kubenode-gc/timer-" in t for i in state["would_remove"] for t in i["repo_tags"]), state
    journal = host.check_output("journalctl -u kubenode-gc.service --no-pager -o cat")
    assert "would remove %d image(s) of %d bytes;" % (len(state["would_remove"]), state["bytes_would_free"]) in journal
    assert image_ids(host, name) == images  # nothing removed


@pytest.mark.parametrize("variables, sentence", [
    ({"gc_timer_python": "/usr/bin/python3\nExecStartPre=/bin/touch /var/tmp/kgc-injected"},
     'gc_timer_python "/usr/bin/python3\\nExecStartPre=/bin/touch /var/tmp/kgc-injected" must be an absolute path without whitespace, '
     "control characters, % or a backslash, since it is written into the service unit's ExecStart."),
    ({"gc_timer_interval": "0"}, 'gc_timer_interval "0" is shorter than one minute: the timer would start a run almost continuously.'),
    ({"gc_timer_interval": "5min\nOnBootSec=1s"}, 'gc_timer_interval "5min\\nOnBootSec=1s" is not a systemd time span such as 5min or 1h 30min.'),
    ({"gc_timer_memory_max": "lots"}, 'gc_timer_memory_max "lots" is not a systemd MemoryMax such as 512M, 2G, 10% or infinity.'),
    ({"gc_timer_container_logs_dir": "/var/log/my logs"}, 'gc_timer_container_logs_dir "/var/log/my logs" must be an absolute path without '
     "whitespace, control characters, % or a backslash, since it is written into the service unit's ReadWritePaths."),
    ({"gc_timer_ledger_path": "/tmp/kgc/image-ledger.json"}, "gc_timer_ledger_path /tmp/kgc/image-ledger.json is in /tmp, which the timer's "
     "service cannot write (its sandbox hides /home, /root, /run/user, /tmp, /var/tmp)."),
])
def test_3c_values_that_would_change_the_units_are_refused_before_anything_is_written(host, name, variables, sentence):
    units = host.check_output("cat /etc/systemd/system/kubenode-gc.service /etc/systemd/system/kubenode-gc.timer /etc/kubenode-gc/gc-timer.json")
    run = playbook(name, role_play(gc_timer_cri_endpoint=ENDPOINTS[name][0], **variables))
    out = run.communicate(timeout=300)[0]
    assert run.returncode != 0 and sentence in out, out
    assert host.check_output("cat /etc/systemd/system/kubenode-gc.service /etc/systemd/system/kubenode-gc.timer /etc/kubenode-gc/gc-timer.json") == units
    assert not host.file("/var/tmp/kgc-injected").exists


# an interpreter that says when it ran, and a .pth file that says when site read it: the role must run neither
WRAPPER = "#!/bin/sh\ntouch /var/tmp/kgc-untrusted-ran\nexec /usr/bin/python3 \"$@\"\n"
PTH = "import os; open('/var/tmp/kgc-untrusted-ran', 'w').close()\n"
SETUP = {
    "owned by another user": "install -d -m 0755 /opt/kgc-user && printf %s > /opt/kgc-user/python3 && chmod 0755 /opt/kgc-user/python3 "
                             "&& chown nobody /opt/kgc-user/python3",
    "in a directory another user owns": "install -d -m 0755 -o nobody /opt/kgc-nobody && install -d -m 0755 /opt/kgc-nobody/bin "
                                        "&& printf %s > /opt/kgc-nobody/bin/python3 && chmod 0755 /opt/kgc-nobody/bin/python3",
    "a root link to another user's file": "install -d -m 0755 /opt/kgc-user && printf %s > /opt/kgc-user/python3 && chmod 0755 /opt/kgc-user/python3 "
                                          "&& chown nobody /opt/kgc-user/python3 && ln -sfn /opt/kgc-user/python3 /usr/local/bin/kgc-python",
    "in a world-writable directory": "install -d -m 0777 /opt/kgc-ww && printf %s > /opt/kgc-ww/python3 && chmod 0755 /opt/kgc-ww/python3",
    "a venv whose site-packages another user owns": "/usr/bin/python3 -m venv --without-pip /opt/kgc-venv "
                                                    "&& chown nobody /opt/kgc-venv/lib/python3.11/site-packages "
                                                    "&& printf %s > /opt/kgc-venv/lib/python3.11/site-packages/kgc.pth",
}
WHY = "root runs it in the timer's service, so it and every directory above it must be owned by root and writable by root alone."


def node_files(host):
    """The units, the configuration and every file of the runner's code, with their bytes' digest."""
    return host.check_output("sha256sum /etc/systemd/system/kubenode-gc.service /etc/systemd/system/kubenode-gc.timer /etc/kubenode-gc/gc-timer.json "
                             "&& find /usr/local/lib/kubenode-gc -type f -print0 | sort -z | xargs -0 sha256sum")


@pytest.mark.parametrize("case, python, sentence", [
    ("owned by another user", "/opt/kgc-user/python3", "gc_timer_python /opt/kgc-user/python3 is owned by uid 65534 (nobody), not root: " + WHY),
    ("in a directory another user owns", "/opt/kgc-nobody/bin/python3",
     "gc_timer_python /opt/kgc-nobody/bin/python3 goes through /opt/kgc-nobody, which is owned by uid 65534 (nobody), not root: " + WHY),
    ("a root link to another user's file", "/usr/local/bin/kgc-python",
     "gc_timer_python /usr/local/bin/kgc-python goes through /opt/kgc-user/python3, which is owned by uid 65534 (nobody), not root: " + WHY),
    ("in a world-writable directory", "/opt/kgc-ww/python3",
     "gc_timer_python /opt/kgc-ww/python3 goes through /opt/kgc-ww, which is writable by its group and others (mode 0777): " + WHY),
    ("a venv whose site-packages another user owns", "/opt/kgc-venv/bin/python",
     "gc_timer_python /opt/kgc-venv/bin/python's sys.path directory /opt/kgc-venv/lib/python3.11/site-packages is owned by uid 65534 "
     "(nobody), not root: " + WHY),
])
def test_3d_an_interpreter_that_is_not_root_s_alone_is_refused_unrun_and_nothing_is_written(host, name, case, python, sentence):
    host.check_output(SETUP[case], PTH if "venv" in case else WRAPPER)
    before = node_files(host)
    run = playbook(name, role_play(gc_timer_python=python, gc_timer_cri_endpoint=ENDPOINTS[name][0]))
    out = run.communicate(timeout=300)[0]
    assert run.returncode != 0 and sentence in out, out
    assert node_files(host) == before  # no unit, timer, configuration or code written
    assert not host.file("/var/tmp/kgc-untrusted-ran").exists  # the interpreter and the .pth file never ran


def test_3e_runner_code_another_user_owns_is_refused(host, name):
    """A file of the runner's copy of module_utils that another user owns (or could replace): the role stops, rewrites nothing."""
    victim = "/usr/local/lib/kubenode-gc/ansible_collections/kubenode/gc/plugins/module_utils/_errors.py"
    host.check_output("chown nobody %s", victim)
    try:
        before = node_files(host)
        run = playbook(name, role_play(gc_timer_cri_endpoint=ENDPOINTS[name][0]))
        out = run.communicate(timeout=300)[0]
        sentence = "The runner's code /usr/local/lib/kubenode-gc holds %s, which is owned by uid 65534 (nobody), not root: %s" % (victim, WHY)
        assert run.returncode != 0 and sentence in out, out
        assert node_files(host) == before
    finally:
        host.check_output("chown root %s", victim)


def test_4_absent_after_a_failed_run_leaves_nothing_behind(host, name):
    # a run that fails (the configured socket is gone) leaves the service failed
    code = ("import json; p = '/etc/kubenode-gc/gc-timer.json'; c = json.load(open(p)); c['cri_endpoint'] = 'unix:///run/kgc-gone.sock'; "
            "json.dump(c, open(p, 'w'))")
    host.check_output("/usr/bin/python3 -c %s", code)
    assert host.run("systemctl start kubenode-gc.service").rc != 0
    assert host.check_output("systemctl is-failed kubenode-gc.service || true") == "failed"
    run = playbook(name, "- hosts: all\n  gather_facts: false\n  roles:\n    - role: kubenode.gc.gc_timer\n      vars:\n        gc_timer_state: absent\n")
    out = run.communicate(timeout=300)[0]
    assert run.returncode == 0, out
    for path in LEFT_BEHIND:
        assert not host.file(path).exists, path
    assert host.run("systemctl cat kubenode-gc.timer").rc != 0
    assert "kubenode-gc" not in host.check_output("systemctl list-unit-files --no-pager")
    assert "kubenode-gc" not in host.check_output("systemctl list-timers --all --no-pager")
    # the failed run's state is cleared too (systemctl reset-failed): nothing for failed-unit alerts
    assert "kubenode-gc" not in host.check_output("systemctl list-units --all --no-pager")
    assert host.check_output("systemctl is-failed kubenode-gc.service || true") != "failed"
