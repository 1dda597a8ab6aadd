# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""kubenode.gc.audit on three hosts against a real runtime (issue 21, item 6; issue 22, item 3): a good node, a hostile
node whose Python returns a capacity of 1e400, and a non-root node without become. The report is written for the
fleet, the hostile node is a failed node ("malformed result"), the non-root node's one error says permission denied and
names become, and the play fails after the report (kubenode_gc_audit_fail_on: never lets it pass)."""

import json
import os
import shutil
import stat
import subprocess

import pytest
import yaml

from tests.integration.conftest import BIN

pytestmark = pytest.mark.runtimes("one")

PROMTOOL = shutil.which("promtool")


def script(path, text):
    path.write_text("#!/bin/sh\n" + text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return str(path)


def audit(ansible, runtime, tmp_path, *args):
    common = {
        "ansible_connection": "local",
        "kubenode_gc_cri_endpoint": runtime.endpoint,
        "kubenode_gc_pod_logs_dir": runtime.pod_logs,
        "kubenode_gc_ledger_path": "",
        "kubenode_gc_report_dir": str(tmp_path / "report"),
        "kubenode_gc_report_history_dir": "",
        "kubenode_gc_kubelet_root_dir": str(tmp_path),
        "kubelet_gc_config_path": str(tmp_path / "kubelet-config.yaml"),
        "containerd_storage_config_path": runtime.config_path,
        "crio_storage_config_path": runtime.config_path,
    }
    (tmp_path / "kubelet-config.yaml").write_text("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n")
    python = os.path.join(BIN, "python")
    hostile = script(tmp_path / "hostile-python", 'out=$("%s" "$@"); rc=$?\n'
                     'printf "%%s" "$out" | sed -E \'s/"capacity_bytes": [0-9]+/"capacity_bytes": 1e400/g\'\nexit $rc\n' % python)
    # a non-root user without become: Debian's python3 as nobody (pipelining: the module comes on stdin)
    nobody = script(tmp_path / "nobody-python", 'exec setpriv --reuid=65534 --regid=65534 --clear-groups /usr/bin/python3 "$@"\n')
    hosts = {
        "node-good": dict(common, ansible_python_interpreter=python, kubenode_gc_audit_metrics_dir=str(tmp_path / "metrics")),
        "node-hostile": dict(common, ansible_python_interpreter=hostile),
        "node-nobody": dict(common, ansible_python_interpreter=nobody, ansible_pipelining=True),
    }
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": hosts}}))
    cmd = [os.path.join(BIN, "ansible-playbook"), "kubenode.gc.audit", "-i", str(inventory)] + list(args)
    return subprocess.run(cmd, cwd=str(tmp_path), env=ansible.env(), capture_output=True, text=True, check=False)


def test_a_hostile_and_a_forbidden_node_are_failed_nodes_of_a_written_report_and_the_play_fails(ansible, runtime, tmp_path):
    before = {t for i in runtime.client.list_images() for t in i.repo_tags}
    proc = audit(ansible, runtime, tmp_path)
    out = proc.stdout
    assert proc.returncode == 2, out[-6000:] + proc.stderr
    assert "The audit fails: 2 nodes could not be audited (node-hostile, node-nobody) (kubenode_gc_audit_fail_on: never lets it pass)." in out
    assert out.index("Report: ") < out.index("The audit fails: ")
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    nodes = {n["host"]: n for n in report["nodes"]}
    assert nodes["node-good"]["status"] == "ok" and nodes["node-good"]["imagefs"]["capacity_bytes"] > 0
    assert nodes["node-hostile"]["status"] == "failed"
    assert nodes["node-hostile"]["error"].startswith("malformed result: cri_info.imagefs[0].capacity_bytes is inf, not a plausible number")
    # permission denied on the given endpoint says so and names become; one error line for that node
    forbidden = nodes["node-nobody"]
    assert forbidden["status"] == "failed" and "permission denied on socket" in forbidden["error"] and "become: true" in forbidden["error"]
    assert out.count("fatal: [node-nobody]") == 1, out
    assert forbidden["imagefs"]["usage_percent"] is None and forbidden["drift"] == [] and forbidden["findings"] == []
    html = (tmp_path / "report" / "report.html").read_text()
    assert "malformed result: cri_info.imagefs[0].capacity_bytes is inf" in html and "become: true" in html
    assert "malformed result" in (tmp_path / "report" / "report.md").read_text()
    assert {t for i in runtime.client.list_images() for t in i.repo_tags} == before   # the audit changed nothing
    metrics = (tmp_path / "metrics" / "kubenode_gc.prom").read_text()
    assert 'kubenode_gc_imagefs_usage_percent{mountpoint="%s"} ' % nodes["node-good"]["imagefs"]["mountpoint"] in metrics
    if PROMTOOL:
        checked = subprocess.run([PROMTOOL, "check", "metrics"], input=metrics, capture_output=True, text=True, check=False)
        assert checked.returncode == 0, checked.stdout + checked.stderr

    # kubenode_gc_audit_fail_on: never opts out; the report is the same
    proc = audit(ansible, runtime, tmp_path, "-e", "kubenode_gc_audit_fail_on=never")
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert json.loads((tmp_path / "report" / "report.json").read_text())["summary"]["nodes_failed"] == 2


@pytest.fixture(autouse=True)
def _nobody_can_reach_python():
    """The non-root node runs Debian's python3; nothing else is needed from root's home."""
    assert os.access("/usr/bin/python3", os.X_OK)
