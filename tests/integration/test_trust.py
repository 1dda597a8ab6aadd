# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Issue 39: nothing another user runs or owns on the node steers kubenode.gc, with real processes and a real containerd.

Each test runs in a private pid and mount namespace (``unshare --pid --fork --mount-proc --mount``, entered with
``nsenter`` for every process, ansible-playbook included): the modules there see only the processes the test starts
(the machine's, and other tests' fake kubelets, are not in it; its own are in no other test's namespace), and /run is
a tmpfs of the namespace (mode 0755, root's, with a /run/lock of mode 1777), so /run/lock/kubenode-gc can be squatted
and /run/kubenode-gc made without touching the machine's. uid 65534 (nobody) plays the other user (setpriv).

* An unprivileged ``kubelet`` with a lower pid than root's, one root runs from a file that user owns, and one whose
  ``--config`` is that user's link to a root-owned file: kubelet_config reports and edits root's kubelet's file, names
  each impostor (pid, uid, executable), and every byte of every other file is unchanged. Alone, the impostor is
  ignored and the flag files decide, as when no kubelet runs.
* Root's kubelet whose ``--config`` goes through a directory and a link another user owns: the edit is refused with one
  sentence naming the path and the directory, the link's target untouched; a read reports it (untrusted_path).
* A squatted /run/lock/kubenode-gc, and a KUBENODE_GC_LOCK_DIR that user made first: neither blocks a real image_gc,
  nor lets one run beside the gc_timer runner frozen (SIGSTOP) inside the node lock in /run/kubenode-gc, where that
  user can neither remove nor create a file.
"""

import hashlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time

import pytest

from ansible_collections.kubenode.gc.plugins.module_utils.cri import _ledger
from devtools.images import ImageSpec
from tests.integration.test_gc_timer import FREEZE_IN_LOCK, install, write_config

pytestmark = pytest.mark.runtimes("one")  # the node lock and the kubelet process are runtime-independent

KUBELET = "kubenode.gc.kubelet_config"
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
# a process whose name (comm) is kubelet, holding its command line, until its stdin closes; it prints its pid (in the namespace)
FAKE_KUBELET = "import ctypes, os, sys; ctypes.CDLL(None).prctl(15, b'kubelet', 0, 0, 0); print('up', os.getpid(), flush=True); sys.stdin.read()"
# pid 1 of the namespace: /run a tmpfs of its own (root's, 0755) with /run/lock (1777), as on a node; it ends with its stdin,
# and with it every process of the namespace
HOLDER = ("import os, subprocess, sys; subprocess.run(['mount', '-t', 'tmpfs', '-o', 'mode=0755,size=8m', 'kubenode-gc-test-run', '/run'], check=True); "
          "os.mkdir('/run/lock'); os.chmod('/run/lock', 0o1777); print('up', flush=True); sys.stdin.read()")
MIB = 1 << 20
CONFIG = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nimageGCHighThresholdPercent: %d\nimageGCLowThresholdPercent: 70\n"


def children(pid):
    """The pids of ``pid``'s children, once it has one."""
    while True:
        with open("/proc/%d/task/%d/children" % (pid, pid), encoding="utf-8") as f:
            found = [int(p) for p in f.read().split()]
        if found:
            return found
        time.sleep(0.05)


class Namespace:
    """A private pid and mount namespace; ``prefix`` runs a command in it (as root, or as uid 65534 with ``nobody``)."""

    def __init__(self):
        self.holder = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", "--mount", "--propagation", "private", "--",
                                        sys.executable, "-c", HOLDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.holder.stdout.readline() == "up\n"
        (self.pid,) = children(self.holder.pid)  # pid 1 of the namespace, as this machine numbers it
        self.procs = []

    def prefix(self, nobody=False):
        return ["nsenter", "-t", str(self.pid), "-m", "-p", "--"] + (NOBODY if nobody else [])

    def run(self, cmd, nobody=False):
        return subprocess.run(self.prefix(nobody) + cmd, capture_output=True, text=True, check=False)

    def start(self, cmd, nobody=False, env=None):
        """A long-running process in the namespace (stdin, stdout piped); closed with the namespace."""
        proc = subprocess.Popen(self.prefix(nobody) + cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        self.procs.append(proc)
        return proc

    def kubelet(self, argv, nobody=False):
        """A process named kubelet; returns its pid in the namespace."""
        proc = self.start(argv, nobody=nobody)
        line = proc.stdout.readline().split()
        assert line[:1] == ["up"], proc.stderr.read()
        return int(line[1])

    def close(self):
        self.holder.stdin.close()  # pid 1 ends: the kernel kills every process of the namespace, stopped ones included
        self.holder.wait(timeout=60)
        self.holder.stdout.close()
        for proc in self.procs:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGCONT)  # an nsenter stopped with its stopped child: it reaps the killed child and ends
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=60)
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                stream.close()


@pytest.fixture
def ns():
    space = Namespace()
    try:
        yield space
    finally:
        space.close()


@pytest.fixture
def in_ns(ansible, ns):
    ansible.prefix = ns.prefix()
    return ansible


def snapshot(root):
    """sha256 of every file's bytes and every link's target under ``root`` (owners and modes too)."""
    out = {}
    for base, dirs, names in os.walk(str(root)):
        for name in dirs + names:
            path = os.path.join(base, name)
            st = os.lstat(path)
            what = os.readlink(path) if os.path.islink(path) else hashlib.sha256(open(path, "rb").read()).hexdigest() if os.path.isfile(path) else "dir"
            out[path] = (what, st.st_uid, st.st_mode)
    return out


def ok(res):
    assert not res.get("failed"), res.get("msg")
    return res


def untrusted(res):
    return sorted(f["message"] for f in res["findings"] if f["code"] == "untrusted_daemon_process")


def impostor_finding(pid, uid, exe, why):
    return ("Process %d named kubelet, run by %s from %s, is ignored as the kubelet: %s; kubenode.gc believes only a daemon root runs from a "
            "root-owned executable no one else may write." % (pid, uid, exe, why))


@pytest.fixture
def node_files(tmp_path):
    """root's kubelet file (etc/kubelet.yaml, 85), another root-owned file (etc/precious.yaml, 60), the fallback file the
    flag file names (var/fallback.yaml, 80), and uid 65534's directory holding its own config (100), its link to
    root's precious file, and a copy of dash named kubelet."""
    root = tmp_path / "node"  # beside ansible's playbooks and results
    etc, user, var = root / "etc", root / "user", root / "var"
    for d in (etc, user, var):
        d.mkdir(parents=True)
    (etc / "kubelet.yaml").write_text(CONFIG % 85)
    (etc / "precious.yaml").write_text(CONFIG % 60)
    (var / "fallback.yaml").write_text(CONFIG % 80)
    (root / "kubeadm-flags.env").write_text('KUBELET_KUBEADM_ARGS="--config=%s"\n' % (var / "fallback.yaml"))
    (user / "kubelet.yaml").write_text(CONFIG % 100)
    (user / "link.yaml").symlink_to(etc / "precious.yaml")
    shutil.copy("/bin/dash", str(user / "kubelet"))
    for path in (user / "kubelet.yaml", user / "link.yaml", user / "kubelet", user):
        os.chown(str(path), 65534, 65534, follow_symlinks=False)
    return root


def test_impostor_kubelets_are_ignored_and_named(in_ns, ns, node_files):
    """uid 65534's kubelet (lower pid, its --config its own link to a root-owned file) and a kubelet root runs from a
    file uid 65534 owns, then root's: kubelet_config reports and edits root's file only, and names both impostors."""
    root = node_files
    theirs = ns.kubelet(["/usr/bin/python3", "-c", FAKE_KUBELET, "--config", str(root / "user" / "link.yaml")], nobody=True)
    copied = ns.start([str(root / "user" / "kubelet"), "-c", "echo up $$; read x", "--config", str(root / "user" / "kubelet.yaml")])
    copied_pid = int(copied.stdout.readline().split()[1])
    mine = ns.kubelet([sys.executable, "-c", FAKE_KUBELET, "--config", str(root / "etc" / "kubelet.yaml")])
    assert theirs < copied_pid < mine
    before = snapshot(root)
    res = ok(in_ns.module(KUBELET, {"flag_files": [str(root / "kubeadm-flags.env")]}))
    assert res["daemon"] == {"pid": mine, "source": "/proc/%d/cmdline" % mine}
    assert res["path"] == str(root / "etc" / "kubelet.yaml") and res["effective"]["imageGCHighThresholdPercent"] == 85
    assert untrusted(res) == sorted([
        impostor_finding(theirs, "uid 65534 (nobody)", os.path.realpath("/usr/bin/python3"), "it does not run as root"),
        impostor_finding(copied_pid, "uid 0 (root)", str(root / "user" / "kubelet"), "its executable is owned by uid 65534 (nobody), not root")])
    assert snapshot(root) == before
    res = ok(in_ns.module(KUBELET, {"flag_files": [str(root / "kubeadm-flags.env")], "settings": {"imageGCHighThresholdPercent": 90}}))
    assert res["changed"] is True and res["path"] == str(root / "etc" / "kubelet.yaml") and len(untrusted(res)) == 2
    after = snapshot(root)
    edited = str(root / "etc" / "kubelet.yaml")
    assert (root / "etc" / "kubelet.yaml").read_text() == CONFIG % 90
    assert {k: v for k, v in after.items() if k != edited} == {k: v for k, v in before.items() if k != edited}


def test_an_impostor_alone_is_ignored_and_the_files_decide(in_ns, ns, node_files):
    """With no kubelet of root's, the flag files and their --config decide, as when none runs; the impostor is named."""
    root = node_files
    theirs = ns.kubelet(["/usr/bin/python3", "-c", FAKE_KUBELET, "--config", str(root / "user" / "link.yaml"), "--image-gc-high-threshold=100"],
                        nobody=True)
    before = snapshot(root)
    args = {"flag_files": [str(root / "kubeadm-flags.env")]}
    res = ok(in_ns.module(KUBELET, args))
    assert res["daemon"] is None and res["path"] == str(root / "var" / "fallback.yaml") and res["effective"]["imageGCHighThresholdPercent"] == 80
    assert untrusted(res) == [impostor_finding(theirs, "uid 65534 (nobody)", os.path.realpath("/usr/bin/python3"), "it does not run as root")]
    res = ok(in_ns.module(KUBELET, dict(args, settings={"imageGCHighThresholdPercent": 90})))
    assert res["changed"] is True and res["path"] == str(root / "var" / "fallback.yaml")
    fallback = str(root / "var" / "fallback.yaml")
    assert (root / "var" / "fallback.yaml").read_text() == CONFIG % 90
    assert {k: v for k, v in snapshot(root).items() if k != fallback} == {k: v for k, v in before.items() if k != fallback}


def test_roots_kubelet_config_through_another_users_directory_and_link_is_not_edited(in_ns, ns, node_files):
    root = node_files
    link = root / "user" / "link.yaml"
    mine = ns.kubelet([sys.executable, "-c", FAKE_KUBELET, "--config", str(link)])
    before = snapshot(root)
    res = ok(in_ns.module(KUBELET, {"flag_files": [str(root / "kubeadm-flags.env")]}))
    assert res["daemon"]["pid"] == mine and res["path"] == str(link) and res["resolved_path"] == str(root / "etc" / "precious.yaml")
    assert res["effective"]["imageGCHighThresholdPercent"] == 60  # the kubelet reads it: so do we, and say so
    (warning,) = [f for f in res["findings"] if f["code"] == "untrusted_path"]
    assert warning["severity"] == "warning" and warning["message"].startswith(
        "%s is read through %s, a directory owned by uid 65534 (nobody), not root; %s, a symbolic link owned by uid 65534 (nobody), not root:" % (
            link, root / "user", link))
    res = in_ns.module(KUBELET, {"flag_files": [str(root / "kubeadm-flags.env")], "settings": {"imageGCHighThresholdPercent": 90}})
    assert res["failed"] is True and res["msg"] == (
        "Not writing %s: its path goes through %s, a directory owned by uid 65534 (nobody), not root, so another user could redirect the write; "
        "nothing was written." % (link, root / "user"))
    assert res.get("changed") is False and snapshot(root) == before


# ---------------------------------------------------------------------------------------------- the node lock


def lock_name(runtime):
    return os.path.basename(_ledger.node_lock_path(runtime.endpoint))


def tags(runtime, prefix):
    return sorted(t for t in runtime.image_refs()["tags"] if t.startswith("docker.io/library/" + prefix))


def image_gc(ansible, runtime, lock_dir=None, lock_timeout=5):
    args = {"cri_endpoint": runtime.endpoint, "mode": "prune", "min_age": "0s", "ledger_path": "", "lock_timeout": lock_timeout}
    if lock_dir:
        return ansible.module("kubenode.gc.image_gc", args, task_env={"KUBENODE_GC_LOCK_DIR": lock_dir})
    return ansible.module("kubenode.gc.image_gc", args, unset_env=("KUBENODE_GC_LOCK_DIR",))


HOLD_LOCK = ("import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o666); fcntl.flock(fd, fcntl.LOCK_EX); print('up', flush=True); "
             "sys.stdin.read()")


def stopped(pid):
    with open("/proc/%d/stat" % pid, encoding="utf-8") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "T"


def test_squatted_lock_directories_neither_block_gc_nor_admit_a_second_run(in_ns, ns, runtime, tmp_path):
    name = lock_name(runtime)
    # uid 65534 squats /run/lock/kubenode-gc (where the lock was) and holds the lock file there; /run/kubenode-gc it cannot make
    assert ns.run(["mkdir", "/run/lock/kubenode-gc"], nobody=True).returncode == 0
    squat = ns.start(["/usr/bin/python3", "-c", HOLD_LOCK, "/run/lock/kubenode-gc/" + name], nobody=True)
    assert squat.stdout.readline() == "up\n"
    denied = ns.run(["mkdir", "/run/kubenode-gc"], nobody=True)
    assert denied.returncode != 0 and "Permission denied" in denied.stderr
    # and a KUBENODE_GC_LOCK_DIR it made first (in /tmp, where anyone may), holding the lock file there too
    # a name of its own: the test runs for several runtimes at once, in pytest runs whose tmp_path names can be the same
    squatted_env = "/tmp/kubenode-gc-squat-%d-%s" % (os.getpid(), secrets.token_hex(6))
    assert ns.run(["mkdir", "-m", "0755", squatted_env], nobody=True).returncode == 0
    try:
        env_squat = ns.start(["/usr/bin/python3", "-c", HOLD_LOCK, os.path.join(squatted_env, name)], nobody=True)
        assert env_squat.stdout.readline() == "up\n"
        squats = snapshot("/proc/%d/root/run/lock" % ns.pid), snapshot(squatted_env)

        # 1. neither squat blocks a run: it takes its lock in /run/kubenode-gc (0700, root's) and removes what it should
        runtime.import_images([ImageSpec("squat-%d:1" % n, size=MIB, share_base=False) for n in range(4)])
        res = ok(image_gc(in_ns, runtime))
        assert tags(runtime, "squat-") == [] and {t for r in res["removed"] for t in r["repo_tags"]} >= {"docker.io/library/squat-0:1"}
        st = os.stat("/proc/%d/root/run/kubenode-gc" % ns.pid)
        assert (st.st_uid, st.st_mode & 0o7777) == (0, 0o700)
        assert os.listdir("/proc/%d/root/run/kubenode-gc" % ns.pid) == [name]
        runtime.import_images([ImageSpec("squat-%d:1" % n, size=MIB, share_base=False) for n in range(2)])
        res = ok(image_gc(in_ns, runtime, lock_dir=squatted_env))
        assert tags(runtime, "squat-") == []
        assert "Not using %s for the node lock: its path goes through %s, a directory owned by uid 65534 (nobody) in a directory others may write, " \
               "so another user could hold, remove or recreate the lock. The node lock is taken in /run/kubenode-gc instead." % (
                   squatted_env, squatted_env) in res["warnings"]

        # 2. while the gc_timer runner holds the lock (frozen inside it), no run goes ahead beside it, whatever that user does
        runtime.import_images([ImageSpec("frozen-%d:1" % n, size=MIB, share_base=False) for n in range(3)])
        runner = install(tmp_path)
        (tmp_path / "blocker" / "sitecustomize.py").write_text(FREEZE_IN_LOCK)
        env = dict(os.environ, PYTHONPATH=str(tmp_path / "blocker"))
        env.pop("KUBENODE_GC_LOCK_DIR", None)
        timer = ns.start([sys.executable, runner, write_config(tmp_path, runtime, high_threshold_percent=1, low_threshold_percent=0)], env=env)
        (frozen,) = children(timer.pid)
        while timer.poll() is None and not stopped(frozen):
            time.sleep(0.1)
        assert timer.poll() is None and stopped(frozen)
        try:
            for attempt in (["rm", "-f", "/run/kubenode-gc/" + name], ["touch", "/run/kubenode-gc/" + name + ".new"], ["ls", "/run/kubenode-gc"]):
                out = ns.run(attempt, nobody=True)
                assert out.returncode != 0 and "Permission denied" in out.stderr, attempt
            held = "Another kubenode.gc run holds the node lock /run/kubenode-gc/%s; image_gc gave up waiting after 1 seconds (lock_timeout)." % name
            for lock_dir in (None, squatted_env):
                res = image_gc(in_ns, runtime, lock_dir=lock_dir, lock_timeout=1)
                assert res["failed"] is True and res["msg"] == held
                assert tags(runtime, "frozen-") == ["docker.io/library/frozen-%d:1" % n for n in range(3)]  # nothing removed beside the runner
        finally:
            os.kill(timer.pid, signal.SIGCONT)  # nsenter stops itself when its child stops (as a shell's job): both go on
            os.kill(frozen, signal.SIGCONT)
        out, err = timer.communicate(timeout=120)
        assert timer.returncode == 0, out + err
        assert tags(runtime, "frozen-") == []  # the runner, resumed, removed them
        assert (snapshot("/proc/%d/root/run/lock" % ns.pid), snapshot(squatted_env)) == squats  # their files: never touched
    finally:
        subprocess.run(["rm", "-rf", squatted_env], check=True)


def test_node_audit_names_the_impostor(in_ns, ns, runtime, node_files, tmp_path):
    """node_audit's kubelet_config part (and so the audit report) carries the untrusted_daemon_process warning."""
    root = node_files
    theirs = ns.kubelet(["/usr/bin/python3", "-c", FAKE_KUBELET, "--config", str(root / "user" / "kubelet.yaml")], nobody=True)
    res = in_ns.module("kubenode.gc.node_audit", dict(
        cri_endpoint=runtime.endpoint, kubelet_config=dict(flag_files=[str(root / "kubeadm-flags.env")]),
        image_gc=dict(ledger_path=str(tmp_path / "ledger.json")), container_gc=dict(pod_logs_dir=runtime.pod_logs),
        disk_usage=dict(pod_logs_dir=runtime.pod_logs, kubelet_root_dir=str(tmp_path)), kubelet_root_dir=str(tmp_path)))
    assert not res.get("failed"), res.get("msg")
    kubelet = res["audit"]["kubelet_config"]
    assert kubelet["daemon"] is None and kubelet["path"] == str(root / "var" / "fallback.yaml")
    assert untrusted(kubelet) == [impostor_finding(theirs, "uid 65534 (nobody)", os.path.realpath("/usr/bin/python3"), "it does not run as root")]
