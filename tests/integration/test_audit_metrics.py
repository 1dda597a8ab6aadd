# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The audit's node_exporter textfile (playbooks/templates/metrics.prom.j2) rendered by ansible-playbook and checked by
a real ``promtool check metrics`` (Debian's prometheus package): a hostile mountpoint cannot break the file (issue 21, item 6)."""

import os
import shutil
import subprocess
import sys

import pytest
import yaml

from tests.integration.conftest import BIN

HOSTILE = '/var/lib/con"tainerd\\x\nfake_metric{a="b"} 1'
PROMTOOL = shutil.which("promtool")


def promtool(text):
    return subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, check=False)


@pytest.mark.skipif(PROMTOOL is None, reason="promtool is not installed (Debian package prometheus, scripts/setup.sh)")
def test_a_mountpoint_with_a_quote_a_backslash_and_a_newline_gives_a_metrics_file_promtool_accepts(ansible, tmp_path):
    template = os.path.join(ansible.collections_path, "ansible_collections", "kubenode", "gc", "playbooks", "templates", "metrics.prom.j2")
    dest = tmp_path / "kubenode_gc.prom"
    node = {"host": "n", "cri_info": {"imagefs": [{"mountpoint": HOSTILE, "usage_percent": 73, "capacity_bytes": 1 << 30}]},
            "kubelet_config": {"findings": [{"severity": "warning", "code": "x", "message": "m"}]}, "runtime_config": {"findings": []},
            "image_gc_policy": {"removed": [{"size": 5}]}, "image_gc_prune": {"removed": [{"size": 5}, {"size": 7}]},
            "container_gc": {"removed_containers": [{"id": "c"}]}, "kubelet_config_drift": {"changes": []}, "runtime_config_drift": {},
            "disk_usage": {"categories": {"unpacked_layer_blobs": {"bytes": 4096, "objects": []}}}}
    play = [{"hosts": "localhost", "gather_facts": False, "vars": {"kubenode_gc_audit_node": node},
             "tasks": [{"ansible.builtin.template": {"src": template, "dest": str(dest), "mode": "0644"}}]}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    cmd = [os.path.join(BIN, "ansible-playbook"), "-i", "localhost,", "-c", "local", "-e", "ansible_python_interpreter=" + sys.executable,
           str(tmp_path / "play.yml")]
    proc = subprocess.run(cmd, env=ansible.env(), capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = dest.read_text()
    checked = promtool(text)
    assert checked.returncode == 0, checked.stdout + checked.stderr + text
    escaped = '/var/lib/con\\"tainerd\\\\x\\nfake_metric{a=\\"b\\"} 1'
    assert 'kubenode_gc_imagefs_usage_percent{mountpoint="%s"} 73\n' % escaped in text
    assert 'kubenode_gc_imagefs_capacity_bytes{mountpoint="%s"} 1073741824\n' % escaped in text
    assert "\nfake_metric" not in text
    assert 'kubenode_gc_reclaimable_bytes{policy="prune"} 12\n' in text and 'kubenode_gc_findings{severity="warning"} 1\n' in text
    assert 'kubenode_gc_unpacked_layer_blob_bytes{mountpoint="%s"} 4096\n' % escaped in text
    # the same file without the escapes is what promtool rejected before
    assert promtool(text.replace(escaped, HOSTILE)).returncode != 0
