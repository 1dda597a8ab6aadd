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
