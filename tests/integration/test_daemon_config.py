# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""kubelet_config and runtime_config ask the running daemons, through ansible-playbook with default arguments.

The daemons run with their configuration at places no layout list contains: the harness's containerd (1.6, 1.7, 2.x)
with ``--config <work dir>/config.toml``, and again with ``--config <work dir>/odd-name.toml --root --state`` whose
file names other directories; cri-o with ``--config``/``--config-dir`` in its work directory and
CONTAINERS_STORAGE_CONF; a process named ``kubelet`` with ``--config``, ``--config-dir`` and GC flags. The modules
report exactly those files and the values the daemons use, and refuse edits that cannot take effect with every byte
of every file unchanged.
"""

import json
import os
import subprocess
import sys

import pytest
import tomlkit

from devtools import runtimes
from tests.integration.conftest import RUNTIMES
from tests.integration.test_runtime_config import codes, ok, one_sentence_failure, own_config

pytestmark = pytest.mark.runtimes("every")

KUBELET = "kubenode.gc.kubelet_config"
RUNTIME = "kubenode.gc.runtime_config"
CONTAINERD_NAMES = [n for n in RUNTIMES if n.startswith("containerd")]
CRIO_NAMES = [n for n in RUNTIMES if n == "crio"]


def snapshot(*roots):
    """Every file's bytes under ``roots`` (files or directories)."""
    out = {}
    for root in roots:
        paths = [root] if os.path.isfile(root) else [os.path.join(b, n) for b, _d, names in os.walk(root) for n in names]
        for path in paths:
            if os.path.isfile(path) and not os.path.islink(path):
                with open(path, "rb") as f:
                    out[path] = f.read()
    return out


def refused(ansible, module, args, *roots):
    """The one sentence of a refused edit; every byte under ``roots`` unchanged."""
    before = snapshot(*roots)
    msg = one_sentence_failure(ansible.module(module, args))
    assert snapshot(*roots) == before
    return msg


# ---------------------------------------------------------------------------------------------- the runtimes


def test_runtime_config_reads_the_running_runtime(ansible, runtime, tmp_path):
    """Only the CRI endpoint is given: the files and values come from the process listening on it."""
    res = ok(ansible.module(RUNTIME, {"cri_endpoint": runtime.endpoint}))
    if runtime.kind == "docker":  # read only: dockerd's command line and its daemon.json (more in test_docker.py)
        assert res["runtime"] == "docker" and res["daemon"]["pid"] == runtime.dockerd_pid() and res["resolved_path"] == runtime.config_path
        assert res["current"]["data_root"] == runtime.root and res["findings"] == []
        return
    assert res["daemon"]["pid"] == runtime.daemon_pid() and res["resolved_path"] == runtime.config_path
    cur = res["current"]
    if runtime.kind == "containerd":
        assert res["runtime"] == "containerd" and res["daemon"]["flags"] == {"config": runtime.config_path}
        assert (cur["root"], cur["state"], cur["snapshotter"], cur["sandbox_image"]) == (runtime.root, runtime.state, "overlayfs", runtime.sandbox_image)
    else:
        assert res["runtime"] == "crio"
        assert res["daemon"]["flags"] == {"config": runtime.config_path, "config-dir": runtime.dropin_dir, "storage-conf": runtime.storage_conf}
        assert (cur["graphroot"], cur["runroot"], cur["imagestore"], cur["driver"]) == (runtime.root, runtime.runroot, runtime.imagestore, "overlay")
        assert cur["pause_image"] == runtime.sandbox_image
    assert res["findings"] == []
    # the file at the default path is not the one it reads: an edit there is refused, a read says so
    other = str(tmp_path / "config.toml")
    with open(other, "w", encoding="utf-8") as f:
        f.write('version = 2\n')
    key = "snapshotter" if runtime.kind == "containerd" else "driver"
    value = "native" if runtime.kind == "containerd" else "vfs"
    msg = refused(ansible, RUNTIME, {"cri_endpoint": runtime.endpoint, "path": other, "settings": {key: value}}, other, runtime.config_path)
    assert msg == "Not editing %s: the running %s (pid %d) reads %s (its --config), not %s, so the edit would not take effect; nothing was changed." % (
        other, "containerd" if runtime.kind == "containerd" else "cri-o", runtime.daemon_pid(), runtime.config_path, other)
    assert "daemon_reads_other_file" in codes(ok(ansible.module(RUNTIME, {"cri_endpoint": runtime.endpoint, "path": other})))


@pytest.fixture(params=CONTAINERD_NAMES, ids=[runtimes.TEST_IDS[n] for n in CONTAINERD_NAMES])
def flagged_containerd(request):
    """A containerd started with --config <work dir>/odd-name.toml --root <root> --state <state>; its file names other directories."""
    rt = runtimes.make(request.param, imagefs_size="64M", config_name="odd-name.toml", root_state_flags=True)
    rt.start()
    try:
        yield rt
    finally:
        rt.stop()


def test_containerd_root_and_state_flags(ansible, flagged_containerd):
    rt = flagged_containerd
    res = ok(ansible.module(RUNTIME, {"cri_endpoint": rt.endpoint}))
    assert res["resolved_path"] == rt.config_path and res["daemon"]["flags"] == {"config": rt.config_path, "root": rt.root, "state": rt.state}
    assert (res["current"]["root"], res["current"]["state"]) == (rt.root, rt.state)
    # what containerd really uses: its content store is under the flag's root, nothing under the file's
    assert "io.containerd.content.v1.content" in os.listdir(rt.root) and not os.path.exists(os.path.join(rt.workdir, "unused-root"))
    assert codes(res) == ["root_from_command_line", "state_from_command_line"]
    assert res["findings"][0]["message"] == "the running containerd (pid %d) runs with --root %s, so that is its root (%s alone gives %r)." % (
        rt.daemon_pid(), rt.root, rt.config_path, os.path.join(rt.workdir, "unused-root"))
    msg = refused(ansible, RUNTIME, {"cri_endpoint": rt.endpoint, "settings": {"root": "/data/containerd"}}, rt.config_path)
    assert msg == "settings.root cannot take effect: the running containerd (pid %d) runs with --root %s, which wins over %s; nothing was changed." % (
        rt.daemon_pid(), rt.root, rt.config_path)
    # a key no flag sets is written to the file containerd reads
    before = open(rt.config_path, encoding="utf-8").read()
    try:
        res = ok(ansible.module(RUNTIME, {"cri_endpoint": rt.endpoint, "settings": {"sandbox_image": "registry.k8s.io/pause:3.10"}}))
        assert res["files"] == [rt.config_path] and "registry.k8s.io/pause:3.10" in open(rt.config_path, encoding="utf-8").read()
        assert "sandbox_image_mismatch" in codes(res)  # until a restart
    finally:
        with open(rt.config_path, "w", encoding="utf-8") as f:
            f.write(before)


@pytest.fixture(params=CRIO_NAMES, ids=[runtimes.TEST_IDS[n] for n in CRIO_NAMES])
def crio(request):
    """A cri-o of its own, whose files the test edits while it runs."""
    rt = runtimes.make(request.param, imagefs_size="64M")
    rt.start()
    try:
        yield rt
    finally:
        rt.stop()


def crio_says(rt):
    """What the running cri-o says it uses, through its own tools: ``crio status config`` (its HTTP API, as TOML) and
    ``crictl info`` (its CRI Status info, whose config names only the runtime table and the pause image)."""
    out = subprocess.run([rt.binary("crio"), "status", "--socket", rt.socket, "config"], capture_output=True, text=True, check=True)
    config = tomlkit.parse(out.stdout).unwrap()["crio"]
    status = json.loads(rt.crictl("info", "-o", "json"))["config"]
    return dict(graphroot=config["root"], runroot=config["runroot"], driver=config["storage_driver"], imagestore=config["imagestore"],
                pause_image=config["image"]["pause_image"], status_pause_image=status["sandboxImage"])


def test_crio_reports_what_the_running_crio_says(ansible, crio):
    """With default arguments the values are the ones cri-o says it uses; files edited after it started (it runs on with
    what it read) give a finding naming both values, and the module leaves them as they are."""
    says = crio_says(crio)
    assert says == dict(graphroot=crio.root, runroot=crio.runroot, driver="overlay", imagestore=crio.imagestore, pause_image=crio.sandbox_image,
                        status_pause_image=crio.sandbox_image)
    res = ok(ansible.module(RUNTIME, {"cri_endpoint": crio.endpoint}))
    assert {k: res["current"][k] for k in ("graphroot", "runroot", "driver", "imagestore", "pause_image")} == {
        k: v for k, v in says.items() if k != "status_pause_image"}
    assert res["findings"] == []
    other_root = os.path.join(crio.root, "moved")  # on cri-o's container filesystem still: only the disagreement is found
    with own_config(crio, root=other_root, sandbox_image="registry.k8s.io/pause:3.10") as args:
        files = snapshot(args["path"], args["storage_path"])
        res = ok(ansible.module(RUNTIME, {"cri_endpoint": crio.endpoint}))
        assert snapshot(args["path"], args["storage_path"]) == files
    assert res["changed"] is False and (res["current"]["graphroot"], res["current"]["pause_image"]) == (other_root, "registry.k8s.io/pause:3.10")
    assert codes(res) == ["daemon_differs_from_files", "sandbox_image_mismatch"]
    assert [f["message"] for f in res["findings"]] == [
        "The runtime at %s reports graphroot %s in its configuration (GET /config), but its files and command line give %s." % (
            crio.endpoint, crio.root, other_root),
        "The config sets pause_image registry.k8s.io/pause:3.10 but the runtime at %s uses %s." % (crio.endpoint, crio.sandbox_image),
    ]
    assert crio_says(crio) == says  # it runs on with what it read


def audit_drift(ansible, rt, tmp_path, settings):
    """node_audit's runtime_config_drift part for ``settings`` on containerd ``rt``, with only the CRI endpoint given."""
    res = ansible.module("kubenode.gc.node_audit", dict(
        cri_endpoint=rt.endpoint, runtime_config=dict(containerd=dict(settings=settings)), image_gc=dict(ledger_path=str(tmp_path / "ledger.json")),
        container_gc=dict(pod_logs_dir=rt.pod_logs), disk_usage=dict(pod_logs_dir=rt.pod_logs, kubelet_root_dir=str(tmp_path)),
        kubelet_root_dir=str(tmp_path)))
    assert not res.get("failed"), res.get("msg")
    assert res["audit"]["runtime_config"]["resolved_path"] == rt.config_path  # the read pass
    return res["audit"]["runtime_config_drift"]


def test_node_audit_drift_judges_what_the_running_containerd_uses(ansible, flagged_containerd, tmp_path):
    """The audit's drift pass reads the file of containerd's --config and its --root/--state flags, as the read pass does
    (not the fallback /etc/containerd/config.toml), with no CRI call of its own; it changes nothing."""
    rt = flagged_containerd
    before = open(rt.config_path, encoding="utf-8").read()
    odd = "registry.k8s.io/pause:odd-file"
    assert before.count('"%s"' % rt.sandbox_image) == 1
    with open(rt.config_path, "w", encoding="utf-8") as f:
        f.write(before.replace('"%s"' % rt.sandbox_image, '"%s"' % odd))
    try:
        edited = snapshot(rt.config_path)
        drift = audit_drift(ansible, rt, tmp_path, {"sandbox_image": "registry.k8s.io/pause:3.10", "snapshotter": "overlayfs"})
        assert not drift.get("failed"), drift.get("msg")
        assert drift["resolved_path"] == rt.config_path and drift["daemon"]["flags"] == {"config": rt.config_path, "root": rt.root, "state": rt.state}
        assert drift["changed"] is True and drift["files"] == [rt.config_path]
        assert drift["changes"] == [dict(key="sandbox_image", before=odd, after="registry.k8s.io/pause:3.10")]
        assert (drift["current"]["root"], drift["current"]["state"], drift["current"]["snapshotter"]) == (rt.root, rt.state, "overlayfs")
        assert "root_from_command_line" in codes(drift) and drift["rpc_calls"] == {}
        # a key the running containerd's flag sets: the drift part says it cannot take effect
        drift = audit_drift(ansible, rt, tmp_path, {"root": "/data/containerd"})
        assert drift["failed"] is True and drift["msg"] == (
            "settings.root cannot take effect: the running containerd (pid %d) runs with --root %s, which wins over %s; nothing was changed." % (
                rt.daemon_pid(), rt.root, rt.config_path))
        assert snapshot(rt.config_path) == edited
    finally:
        with open(rt.config_path, "w", encoding="utf-8") as f:
            f.write(before)


# ---------------------------------------------------------------------------------------------- the kubelet


KUBELET_CONFIG = """apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
imageGCHighThresholdPercent: 70
imageGCLowThresholdPercent: 50
imageMaximumGCAge: 72h
evictionHard:
  imagefs.available: 20%
"""
DROPIN = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nimageMinimumGCAge: 5m\ncontainerLogMaxFiles: 3\n"
# a process whose name (comm) is kubelet, holding its command line, until its stdin closes
FAKE_KUBELET = "import ctypes, sys; ctypes.CDLL(None).prctl(15, b'kubelet', 0, 0, 0); sys.stdout.write('up\\n'); sys.stdout.flush(); sys.stdin.read()"


@pytest.fixture
def kubelet(tmp_path):
    """A process named kubelet running with --config (relative to its working directory), --config-dir and GC flags."""
    odd = tmp_path / "srv" / "kubelet"
    (odd / "conf.d").mkdir(parents=True)
    (odd / "main.yaml").write_text(KUBELET_CONFIG)
    (odd / "conf.d" / "10-gc.conf").write_text(DROPIN)
    argv = [sys.executable, "-c", FAKE_KUBELET, "--kubeconfig=/etc/kubernetes/kubelet.conf", "--config", "main.yaml",
            "--config-dir=%s" % (odd / "conf.d"), "--image-gc-low-threshold=40", "--eviction-hard", "imagefs.available<25%,memory.available<300Mi",
            "--root-dir", str(tmp_path / "kubelet-root")]
    proc = subprocess.Popen(argv, cwd=str(odd), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "up\n"
        yield proc, odd
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
        proc.stdout.close()


def test_kubelet_config_reads_the_running_kubelet(ansible, kubelet, tmp_path):
    proc, odd = kubelet
    res = ok(ansible.module(KUBELET, {}))
    assert res["daemon"] == {"pid": proc.pid, "source": "/proc/%d/cmdline" % proc.pid}
    assert res["path"] == str(odd / "main.yaml") and res["config_dir"] == str(odd / "conf.d")
    assert res["dropins"] == [str(odd / "conf.d" / "10-gc.conf")] and res["root_dir"] == str(tmp_path / "kubelet-root")
    eff = res["effective"]
    assert (eff["imageGCHighThresholdPercent"], eff["imageGCLowThresholdPercent"]) == (70, 40)
    assert (eff["imageMinimumGCAge"], eff["imageMaximumGCAge"], eff["containerLogMaxFiles"]) == ("5m0s", "72h0m0s", 3)
    assert eff["evictionHard"] == {"imagefs.available": "25%", "memory.available": "300Mi"}  # the flag's map replaces the file's
    cmdline = "/proc/%d/cmdline" % proc.pid
    assert (res["sources"]["imageGCLowThresholdPercent"], res["sources"]["evictionHard"]) == (cmdline, cmdline)
    assert res["sources"]["imageGCHighThresholdPercent"] == str(odd / "main.yaml")
    assert res["sources"]["imageMinimumGCAge"] == str(odd / "conf.d" / "10-gc.conf")
    assert [(f["flag"], f["file"]) for f in res["flag_overrides"]] == [("--image-gc-low-threshold", cmdline), ("--eviction-hard", cmdline)]


def test_kubelet_config_refuses_edits_that_cannot_take_effect(ansible, kubelet, tmp_path):
    proc, odd = kubelet
    other = tmp_path / "config.yaml"
    other.write_text(KUBELET_CONFIG)
    msg = refused(ansible, KUBELET, {"path": str(other), "settings": {"imageGCHighThresholdPercent": 80}}, str(other), str(odd))
    assert msg == "Not editing %s: the running kubelet (pid %d) reads %s (its --config), not %s, so the edit would not take effect; nothing was written." % (
        other, proc.pid, odd / "main.yaml", other)
    msg = refused(ansible, KUBELET, {"settings": {"imageGCLowThresholdPercent": 60}}, str(other), str(odd))
    assert msg == ("settings.imageGCLowThresholdPercent cannot take effect: the running kubelet (pid %d) has --image-gc-low-threshold=40 on its "
                   "command line (/proc/%d/cmdline), which overrides the file; nothing was written." % (proc.pid, proc.pid))
    # a key no flag sets goes to the file the kubelet reads
    res = ok(ansible.module(KUBELET, {"settings": {"imageGCHighThresholdPercent": 65}}))
    assert res["changed"] is True and res["path"] == str(odd / "main.yaml")
    assert "imageGCHighThresholdPercent: 65" in (odd / "main.yaml").read_text() and res["effective"]["imageGCHighThresholdPercent"] == 65
