# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""_daemons: command lines as Go's flag package and pflag read them, systemd units as systemd expands them, /proc."""

import os
import shutil
import socket
import subprocess
import sys
import tempfile

import pytest

from ansible_collections.kubenode.gc.plugins.module_utils import _daemons
from ansible_collections.kubenode.gc.plugins.module_utils.config._kubelet_flags import command_line_flags
from tests.unit.plugins.module_utils.test__kubelet_layouts import FakeProc


def test_go_flags_forms_and_last_wins():
    words = ["-c", "/a.toml", "--root=/r1", "-state", "/s", "--root", "/r2", "--log-level", "debug", "--", "--config", "/late"]
    assert _daemons.go_flags(words, _daemons.CONTAINERD_FLAGS) == {"config": "/a.toml", "root": "/r2", "state": "/s"}
    assert _daemons.go_flags(["--config"], _daemons.CONTAINERD_FLAGS) == {}  # no value: nothing


def test_crio_flags_win_over_their_environment_variables():
    env = {"CONTAINER_CONFIG": "/env/crio.conf", "CONTAINER_ROOT": "/env/root", "CONTAINERS_STORAGE_CONF": "/env/storage.conf"}
    found = _daemons.runtime_flags("crio", ["-r", "/flag/root", "--pause-image=registry.k8s.io/pause:3.10", "-d", "/conf.d"], env)
    assert found == {"config": "/env/crio.conf", "root": "/flag/root", "pause-image": "registry.k8s.io/pause:3.10", "config-dir": "/conf.d",
                     "storage-conf": "/env/storage.conf"}
    assert _daemons.runtime_flags("containerd", ["--config", "${CONTAINERD_CONFIG}"]) == {}  # a placeholder is no value


def test_kubelet_command_line_as_pflag_reads_it():
    flags = command_line_flags(["--config", "/c.yaml", "--image-gc-high-threshold=90", "--v=2", "--", "--config=/late.yaml"], "cmdline")
    assert [(f["flag"], f["value"]) for f in flags] == [("--config", "/c.yaml"), ("--image-gc-high-threshold", "90")]


def test_args_file_words():
    text = '# MicroK8s\n--root-dir=${SNAP_COMMON}/var/lib/kubelet\n\n--eviction-hard="memory.available<100Mi,nodefs.available<1Gi"\n--config $SNAP_DATA/c\n'
    assert _daemons.args_file_words(text, {"SNAP_COMMON": "/var/snap/m/common", "SNAP_DATA": "/var/snap/m/current"}) == [
        "--root-dir=/var/snap/m/common/var/lib/kubelet", "--eviction-hard=memory.available<100Mi,nodefs.available<1Gi", "--config",
        "/var/snap/m/current/c"]


def test_unit_command_expands_environment_and_resets(tmp_path):
    (tmp_path / "system").mkdir()
    (tmp_path / "etc" / "c.service.d").mkdir(parents=True)
    (tmp_path / "env").write_text('export EXTRA="--state /run/x"\n')
    (tmp_path / "system" / "c.service").write_text(
        "[Service]\nEnvironment=CONFIG=/usr/share/c.toml\nEnvironmentFile=-%s\nExecStart=/usr/bin/c --config ${CONFIG} $EXTRA \\\n  --root /r\n"
        % (tmp_path / "env"))
    (tmp_path / "etc" / "c.service.d" / "10-custom.conf").write_text("[Service]\nEnvironment=CONFIG=/etc/c.toml\n")
    files = _daemons.unit_files("c.service", (str(tmp_path / "etc"), str(tmp_path / "system")))
    assert files == [str(tmp_path / "system" / "c.service"), str(tmp_path / "etc" / "c.service.d" / "10-custom.conf")]

    def read(path):
        return open(path, encoding="utf-8").read() if os.path.exists(path) else None

    words, used = _daemons.unit_command(files, read)
    assert words == ["/usr/bin/c", "--config", "/etc/c.toml", "--state", "/run/x", "--root", "/r"] and used == files
    (tmp_path / "etc" / "c.service.d" / "20-reset.conf").write_text("[Service]\nExecStart=\nExecStart=/usr/bin/c --config ${UNSET}\n")
    words, _used = _daemons.unit_command(_daemons.unit_files("c.service", (str(tmp_path / "etc"), str(tmp_path / "system"))), read)
    assert words == ["/usr/bin/c", "--config", "${UNSET}"] and _daemons.unexpanded(words[2])


def test_fake_proc_kubelet_and_runtime(tmp_path, monkeypatch):
    proc = FakeProc(str(tmp_path))
    proc.add(10, ["/usr/bin/containerd", "--config", "c.toml"], cwd="/etc/ctrd", listens=["/run/ctrd.sock"])
    proc.add(11, ["/opt/kubernetes/bin/kubelet-v1.31", "--config=/k.yaml"], comm="kubelet")
    monkeypatch.setattr(_daemons, "PROC", str(tmp_path))
    assert _daemons.kubelet_process().pid == 11
    runtime, found = _daemons.runtime_process("/run/ctrd.sock")
    assert (runtime, found.pid) == ("containerd", 10)
    assert _daemons.runtime_flags(runtime, found.argv[1:], found.environ, found) == {"config": "/etc/ctrd/c.toml"}
    assert _daemons.runtime_process("/run/other.sock") == (None, None)


@pytest.mark.real_proc
def test_real_process_named_kubelet():
    """/proc itself: a process whose comm is kubelet (prctl PR_SET_NAME), found with its command line and environment."""
    code = "import ctypes, sys; ctypes.CDLL(None).prctl(15, b'kubelet', 0, 0, 0); print('up', flush=True); sys.stdin.read()"
    child = subprocess.Popen([sys.executable, "-c", code, "--config", "/x.yaml"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             env=dict(os.environ, KGC_TEST="1"))
    try:
        assert child.stdout.readline() == "up\n"
        found = _daemons.kubelet_process()
        assert found.pid == child.pid and found.argv[-2:] == ["--config", "/x.yaml"] and found.environ["KGC_TEST"] == "1"
    finally:
        child.stdin.close()
        child.wait(timeout=30)
        child.stdout.close()


@pytest.mark.real_proc
def test_real_unprivileged_kubelet_is_not_trusted():
    """/proc itself (issue 39): a process named kubelet that uid 65534 runs is ignored, named with its uid and the
    executable the kernel runs (the interpreter, root's: the uid alone fails it)."""
    code = "import ctypes, sys; ctypes.CDLL(None).prctl(15, b'kubelet', 0, 0, 0); print('up', flush=True); sys.stdin.read()"
    child = subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c", code, "--config", "/x.yaml"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "up\n"
        found, ignored = _daemons.find_kubelet()
        assert found is None or found.pid != child.pid
        (mine,) = [u for u in ignored if u.pid == child.pid]
        assert (mine.uid, mine.euid, mine.exe, mine.why) == (65534, 65534, os.path.realpath(sys.executable), "it does not run as root")
    finally:
        child.stdin.close()
        child.wait(timeout=30)
        child.stdout.close()


@pytest.mark.real_proc
def test_real_listener():
    directory = tempfile.mkdtemp(prefix="kgc-", dir="/tmp")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        path = os.path.join(directory, "s.sock")
        server.bind(path)
        server.listen(1)
        runtime, proc = _daemons.runtime_process(path)
        assert runtime is None and proc.pid == os.getpid()  # pytest is no runtime
    finally:
        server.close()
        shutil.rmtree(directory)


# ---------------------------------------------------------------------------------------------- issue 39: only root's daemons


KUBELET_ARGV = ["/usr/bin/kubelet", "--config=/k.yaml"]


def fake(tmp_path, monkeypatch):
    proc = FakeProc(str(tmp_path))
    monkeypatch.setattr(_daemons, "PROC", str(tmp_path))
    return proc


def untrusted(found):
    return [(u.pid, u.uid, u.why) for u in found]


@pytest.mark.parametrize("kwargs, why", [
    (dict(uid=65534), "it does not run as root"),
    (dict(uid=1000, euid=0), "its real uid is 1000 and its effective uid 0, not both 0"),  # a set-user-ID program another user started
    (dict(exe_owner=65534), "its executable is owned by uid 65534 (nobody), not root"),
    (dict(exe_mode=0o775), "its executable is writable by its group (mode 0775)"),
    (dict(exe_mode=0o757), "its executable is writable by others (mode 0757)"),
])
def test_a_process_named_kubelet_that_is_not_roots_is_ignored(tmp_path, monkeypatch, kwargs, why):
    proc = fake(tmp_path, monkeypatch)
    proc.add(5, KUBELET_ARGV, **kwargs)
    found, ignored = _daemons.find_kubelet()
    assert found is None and _daemons.kubelet_process() is None
    assert untrusted(ignored) == [(5, kwargs.get("uid", 0), why)]
    proc.add(9, KUBELET_ARGV)  # root's, from root's file, with a higher pid: the one believed
    found, ignored = _daemons.find_kubelet()
    assert found.pid == 9 and untrusted(ignored) == [(5, kwargs.get("uid", 0), why)]


def test_unreadable_or_odd_processes_are_not_trusted(tmp_path, monkeypatch):
    proc = fake(tmp_path, monkeypatch)
    proc.add(5, KUBELET_ARGV, exe=str(tmp_path))  # a directory
    proc.add(6, KUBELET_ARGV, exe=str(tmp_path / "gone"))
    proc.add(7, KUBELET_ARGV)
    os.unlink(str(tmp_path / "7" / "status"))
    _found, ignored = _daemons.find_kubelet()
    assert [(u.pid, u.why) for u in ignored] == [
        (5, "its executable is not a regular file"), (6, "its executable cannot be read (No such file or directory)"), (7, "its uids cannot be read")]


def test_the_finding_names_pid_uid_and_executable(tmp_path, monkeypatch):
    proc = fake(tmp_path, monkeypatch)
    proc.add(5, ["/home/u/kubelet"], uid=65534, exe_owner=65534)
    (item,) = _daemons.find_kubelet()[1]
    assert _daemons.untrusted_message(item, "the kubelet") == (
        "Process 5 named kubelet, run by uid 65534 (nobody) from %s, is ignored as the kubelet: it does not run as root; kubenode.gc believes "
        "only a daemon root runs from a root-owned executable no one else may write." % os.path.join(str(tmp_path), "exe", "5-kubelet"))


def test_the_kubelet_its_unit_runs_is_preferred(tmp_path, monkeypatch):
    """systemd's cgroup of the unit (v2 or v1's name=systemd hierarchy): the kubelet kubelet.service (or a distribution's
    unit) runs wins over a root process of that name started by hand with a lower pid; a cgroup a user could make
    (/user.slice/.../system.slice/kubelet.service) does not count."""
    proc = fake(tmp_path, monkeypatch)
    proc.add(5, KUBELET_ARGV, cgroup="/user.slice/user-0.slice/session-1.scope")
    proc.add(6, KUBELET_ARGV, cgroup="/user.slice/user-1000.slice/user@1000.service/system.slice/kubelet.service")
    proc.add(8, KUBELET_ARGV, uid=65534, cgroup="/system.slice/kubelet.service")  # not root's: never
    assert _daemons.kubelet_process().pid == 5
    proc.add(40, KUBELET_ARGV)
    with open(os.path.join(str(tmp_path), "40", "cgroup"), "w", encoding="utf-8") as f:
        f.write("12:memory:/system.slice/kubelet.service\n1:name=systemd:/system.slice/kubelet.service\n0::/\n")
    assert _daemons.unit_of(40) == "kubelet.service" and _daemons.unit_of(6) is None
    assert _daemons.kubelet_process().pid == 40
    proc.add(30, ["/var/lib/rancher/rke2/bin/kubelet"], cgroup="/system.slice/rke2-agent.service")  # RKE2 starts it as a child of its unit
    assert _daemons.kubelet_process().pid == 30
    # a node that is a container seen through the host's cgroup namespace (kind; --cgroupns host): its systemd's root is
    # pid 1's cgroup without init.scope, and its units are below it; a cgroup outside that root is no unit of this node
    os.makedirs(os.path.join(str(tmp_path), "1"), exist_ok=True)
    with open(os.path.join(str(tmp_path), "1", "cgroup"), "w", encoding="utf-8") as f:
        f.write("1:name=systemd:/docker/abc/init.scope\n0::/docker/abc/init.scope\n")
    with open(os.path.join(str(tmp_path), "40", "cgroup"), "w", encoding="utf-8") as f:
        f.write("1:name=systemd:/docker/abc/system.slice/kubelet.service\n")
    assert _daemons.unit_of(40) == "kubelet.service" and _daemons.unit_of(30) is None
    assert set(_daemons.KUBELET_UNITS) >= {
        "kubelet.service", "snap.microk8s.daemon-kubelite.service", "k0sworker.service", "k3s.service", "k3s-agent.service", "rke2-server.service",
        "rke2-agent.service"}


def test_an_untrusted_listener_on_the_cri_socket_is_not_believed(tmp_path, monkeypatch):
    proc = fake(tmp_path, monkeypatch)
    proc.add(10, ["/usr/bin/containerd", "--config", "/tmp/theirs.toml"], uid=65534, listens=["/run/c.sock"])
    assert _daemons.find_runtime("/run/c.sock") == (None, None, [_daemons.Untrusted(10, "containerd", 65534, 65534, os.path.join(
        str(tmp_path), "exe", "10-containerd"), "it does not run as root")])
    assert _daemons.runtime_process("/run/c.sock") == (None, None)
    # of several holders of the socket (a child inherited it), the one of the runtime's unit
    proc.add(20, ["/usr/bin/containerd"], listens=["/run/d.sock"])
    proc.add(21, ["/usr/bin/containerd"], cgroup="/system.slice/containerd.service")
    os.symlink(os.readlink(os.path.join(str(tmp_path), "20", "fd", "3")), os.path.join(str(tmp_path), "21", "fd", "3"))
    runtime, found, ignored = _daemons.find_runtime("/run/d.sock")
    assert (runtime, found.pid, ignored) == ("containerd", 21, [])
    assert _daemons.listener_pids("/run/d.sock") == [20, 21] and _daemons.listener_pid("/run/d.sock") == 20


def test_once_reads_proc_once_for_every_question(tmp_path, monkeypatch):
    proc = FakeProc(str(tmp_path))
    proc.add(10, ["/usr/bin/containerd"], listens=["/run/ctrd.sock"])
    proc.add(11, ["/usr/bin/kubelet", "--config=/k.yaml"])
    monkeypatch.setattr(_daemons, "PROC", str(tmp_path))
    reads = []
    real = _daemons.read_process
    monkeypatch.setattr(_daemons, "read_process", lambda pid: reads.append(pid) or real(pid))
    with _daemons.once():
        with _daemons.once():
            assert _daemons.kubelet_process().pid == 11
        assert _daemons.kubelet_process().pid == 11
        assert _daemons.runtime_process("/run/ctrd.sock")[1].pid == _daemons.runtime_process("/run/ctrd.sock")[1].pid == 10
    assert sorted(reads) == [10, 11]  # the runtime's listener and the one process named kubelet, each once
    assert _daemons.kubelet_process().pid == 11 and sorted(reads) == [10, 11, 11]  # outside once(): read again


def test_only_processes_named_kubelet_are_read_in_full(tmp_path, monkeypatch):
    proc = FakeProc(str(tmp_path))
    proc.add(10, ["/usr/bin/containerd"])
    proc.add(11, ["/opt/bin/kubelet-v1.31"], comm="kubelet")
    proc.add(12, ["/usr/local/bin/kubelet"], comm="kubelet-wrapper")
    monkeypatch.setattr(_daemons, "PROC", str(tmp_path))
    reads = []
    real = _daemons.read_process
    monkeypatch.setattr(_daemons, "read_process", lambda pid: reads.append(pid) or real(pid))
    assert _daemons.kubelet_process().pid == 11
    assert sorted(reads) == [11, 12]
