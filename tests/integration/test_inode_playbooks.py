# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The audit and cleanup playbooks on a real containerd whose image filesystem is a tmpfs with few inodes (nr_inodes):
a node near its imagefs.inodesFree hard eviction threshold in report.json, report.md and report.html, and a cleanup
that inodes alone trigger, down to the low inode mark. containerd 1.6 only (as the ansible-core smoke test); image_gc's
inode pass itself runs on every runtime in test_image_gc.py."""

import json
import os
import subprocess
import sys

import pytest

from devtools.containerd import EmbeddedContainerd
from devtools.images import ImageSpec

BIN = os.path.dirname(sys.executable)
INODES = 2000


def inode_usage(runtime):
    st = os.statvfs(runtime.imagefs_mountpoint)
    return 100 - (st.f_ffree * 100) // st.f_files


def free_inodes_percent(runtime):
    st = os.statvfs(runtime.imagefs_mountpoint)
    return st.f_ffree * 100.0 / st.f_files


def tags(runtime):
    return {t for img in runtime.client.list_images() for t in img.repo_tags}


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    runtime = EmbeddedContainerd(workdir=str(tmp_path_factory.mktemp("ctrd")), imagefs_size="128M", imagefs_inodes=INODES)
    runtime.start()
    try:
        runtime.pull_images([ImageSpec("many-%d:1" % n, files=200) for n in range(6)] + [ImageSpec("live:1", files=200)])
        runtime.add_container(runtime.run_pod("live", uid="uid-live"), "live", "live:1", "running")
        yield runtime
    finally:
        runtime.stop()


def playbook(collections_path, work, runtime, name, **extra):
    work.mkdir(exist_ok=True)
    (work / "containers").mkdir(exist_ok=True)
    host = {
        "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable,
        "kubenode_gc_cri_endpoint": runtime.endpoint,
        "kubenode_gc_pod_logs_dir": runtime.pod_logs,
        "kubenode_gc_container_logs_dir": str(work / "containers"),
        "kubenode_gc_ledger_path": "",
        "kubenode_gc_report_dir": str(work / "report"),
        "kubenode_gc_report_history_dir": "",
        "kubenode_gc_cleanup_history_dir": str(work / "history"),
        "kubenode_gc_cleanup_image_min_age": "0s",
        "kubenode_gc_kubelet_root_dir": str(work),
        "containerd_storage_config_path": runtime.config_path,
    }
    host.update(extra)
    inventory = work / "inventory.json"
    inventory.write_text(json.dumps({"all": {"hosts": {"inode-node": host}}}))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections_path, ANSIBLE_NOCOLOR="1", ANSIBLE_RETRY_FILES_ENABLED="0",
               ANSIBLE_LOCALHOST_WARNING="0")
    proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", str(inventory), "kubenode.gc." + name], env=env, cwd=str(work),
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    return proc


def test_audit_shows_the_node_near_eviction_then_cleanup_frees_inodes_to_the_low_mark(collections_path, node, tmp_path):
    runtime = node
    now, free = inode_usage(runtime), free_inodes_percent(runtime)
    assert now >= 70, now
    # imagefs.inodesFree two points below the free share: near with the default margin of 5, not reached
    threshold = int(free) - 2
    kubelet = tmp_path / "kubelet-config.yaml"
    kubelet.write_text("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nevictionHard:\n"
                       "  imagefs.available: 15%%\n  imagefs.inodesFree: %d%%\n  nodefs.available: 1%%\n" % threshold)
    low = now - 30
    inodes = {"kubenode_gc_inodes_high_threshold_percent": now, "kubenode_gc_inodes_low_threshold_percent": low}
    before = tags(runtime)

    playbook(collections_path, tmp_path / "audit", runtime, "audit", kubelet_gc_config_path=str(kubelet), **inodes)
    assert tags(runtime) == before  # the audit changed nothing
    report_dir = tmp_path / "audit" / "report"
    report = json.loads((report_dir / "report.json").read_text())
    (n,) = report["nodes"]
    assert n["status"] == "ok" and n["near_eviction"] is True and report["summary"]["nodes_near_eviction"] == 1
    signals = {s["signal"]: s for s in n["eviction_signals"]}
    assert signals["imagefs.inodesFree"]["state"] == "near" and signals["imagefs.inodesFree"]["threshold"] == "%d%%" % threshold
    assert signals["imagefs.inodesFree"]["source"] == "kubelet_config"
    assert signals["imagefs.available"]["state"] == "ok" and signals["nodefs.inodesFree"]["state"] == "off"
    assert signals["nodefs.available"]["state"] == "ok" and signals["nodefs.available"]["free_percent"] is not None
    assert n["imagefs"]["inodes_usage_percent"] == now and n["thresholds"]["inodes_high_percent"] == now
    codes = {f["code"] for f in n["findings"]}
    assert {"near_eviction", "over_inodes_high_threshold"} <= codes and "over_high_threshold" not in codes
    # the policy plan includes the inode pass (an estimate)
    assert n["images"]["reclaimable_policy"]["count"] > 0
    md = (report_dir / "report.md").read_text()
    assert "- Near a hard eviction threshold: 1" in md and "(**near eviction**)" in md and "imagefs.inodesFree" in md
    html = (report_dir / "report.html").read_text()
    assert '<span class="badge warning">near eviction</span>' in html and "near_eviction" in html

    # bytes alone: below the high threshold, the node is skipped
    playbook(collections_path, tmp_path / "skip", runtime, "cleanup")
    assert tags(runtime) == before
    # with the inode thresholds, inodes trigger the cleanup and image_gc frees them down to the low mark
    playbook(collections_path, tmp_path / "clean", runtime, "cleanup", **inodes)
    (record,) = [json.loads(p.read_text()) for p in (tmp_path / "clean" / "history").iterdir()]
    assert record["status"] == "cleaned", record
    assert inode_usage(runtime) <= low
    left = tags(runtime)
    assert {"docker.io/library/live:1", runtime.sandbox_image} <= left and len(left) < len(before)
