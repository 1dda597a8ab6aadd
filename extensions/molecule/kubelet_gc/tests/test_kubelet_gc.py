# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What kubenode.gc.kubelet_gc left on each node: parsed files, kept comments and keys, backups, restarts."""

import json
import os

import pytest
import testinfra.utils.ansible_runner
import yaml

testinfra_hosts = testinfra.utils.ansible_runner.AnsibleRunner(os.environ["MOLECULE_INVENTORY_FILE"]).get_hosts("all")

ENFORCED = {
    "imageGCHighThresholdPercent": 75,
    "imageGCLowThresholdPercent": 60,
    "imageMaximumGCAge": "168h",
    "evictionHard": {"memory.available": "200Mi", "imagefs.available": "10%"},
    "mergeDefaultEvictionSettings": True,
    "containerLogMaxSize": "20Mi",
}
PATHS = {
    "kgc-kubelet-yaml": "/var/lib/kubelet/config.yaml",
    "kgc-kubelet-json": "/etc/kubernetes/kubelet/kubelet-config.json",
    "kgc-kubelet-new": "/var/lib/kubelet/config.yaml",
}


@pytest.fixture
def name(host):
    return host.backend.get_hostname()


@pytest.fixture
def config_file(host, name):
    return host.file(PATHS[name])


def parsed(config_file):
    text = config_file.content_string
    return json.loads(text) if config_file.path.endswith(".json") else yaml.safe_load(text)


def backups(host, path):
    out = host.run("ls %s.*~", path)
    return out.stdout.split()


def test_enforced_keys(config_file):
    config = parsed(config_file)
    for key, value in ENFORCED.items():
        assert config[key] == value, key
    # kubelet_gc_image_minimum_gc_age is not set: the role leaves the key as it was (absent), issue 22
    assert "imageMinimumGCAge" not in config


def test_kubelet_restarted_once(host):
    before = host.file("/var/tmp/kubelet-invocation").content_string.strip()
    assert host.service("kubelet").is_running
    assert host.check_output("systemctl show -p InvocationID --value kubelet") != before


def test_kubeadm_yaml_kept_everything_else(host, name, config_file):
    if name != "kgc-kubelet-yaml":
        pytest.skip("kubeadm node only")
    text = config_file.content_string
    assert text.startswith("# Written by kubeadm; edited by hand since.\n")
    assert "enabled: false  # keep this off" in text
    assert "# GC tuned for the old 50G disks" in text
    config = parsed(config_file)
    assert config["authentication"] == {"anonymous": {"enabled": False}}
    assert config["cgroupDriver"] == "systemd"
    assert config["staticPodPath"] == "/etc/kubernetes/manifests"
    assert list(config)[:3] == ["apiVersion", "kind", "authentication"]
    assert config_file.mode == 0o640
    (backup,) = backups(host, config_file.path)
    old = yaml.safe_load(host.file(backup).content_string)
    assert old["imageGCHighThresholdPercent"] == 90 and old["imageGCLowThresholdPercent"] == 85


def test_eks_json_stays_json(host, name, config_file):
    if name != "kgc-kubelet-json":
        pytest.skip("EKS node only")
    text = config_file.content_string
    assert text.startswith('{\n    "kind": "KubeletConfiguration",\n')
    config = parsed(config_file)
    assert config["clusterDomain"] == "cluster.local"
    assert config["evictionHard"] == ENFORCED["evictionHard"]
    assert config_file.mode == 0o644
    (backup,) = backups(host, config_file.path)
    assert json.loads(host.file(backup).content_string)["evictionHard"] == {"memory.available": "100Mi"}


def test_greenfield_template(host, name, config_file):
    if name != "kgc-kubelet-new":
        pytest.skip("greenfield node only")
    config = parsed(config_file)
    assert config["kind"] == "KubeletConfiguration"
    assert config["cgroupDriver"] == "systemd"
    assert config["authentication"] == {"anonymous": {"enabled": False}}
    assert config_file.mode == 0o644
    assert backups(host, config_file.path) == []
