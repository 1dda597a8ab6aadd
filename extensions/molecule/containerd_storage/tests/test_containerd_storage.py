# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What kubenode.gc.containerd_storage left on each node: the parsed config, kept comments, backups,
the imagefs mount, and a restarted containerd answering CRI with the new root."""

import os
import tomllib

import pytest
import testinfra.utils.ansible_runner

testinfra_hosts = testinfra.utils.ansible_runner.AnsibleRunner(os.environ["MOLECULE_INVENTORY_FILE"]).get_hosts("all")

CONFIG = "/etc/containerd/config.toml"
CRI = 'plugins."io.containerd.grpc.v1.cri"'


@pytest.fixture
def name(host):
    return host.backend.get_hostname()


@pytest.fixture
def config(host):
    return tomllib.loads(host.file(CONFIG).content_string)


def cri_info(host):
    result = host.ansible("kubenode.gc.cri_info", "gather=runtime,imagefs", check=False)
    assert not result.get("failed"), result
    return result


def test_containerd_restarted_and_answers_cri(host, name):
    before = host.file("/var/tmp/containerd-invocation").content_string.strip()
    assert host.service("containerd").is_running
    assert host.check_output("systemctl show -p InvocationID --value containerd") != before
    info = cri_info(host)
    root = "/srv/containerd" if name == "kgc-ctrd-merge" else "/var/lib/containerd"
    assert info["imagefs"][0]["mountpoint"] == root + "/io.containerd.snapshotter.v1.overlayfs"
    expected_sandbox = "registry.k8s.io/pause:3.10" if name == "kgc-ctrd-merge" else "registry.k8s.io/pause:3.9-kubenode"
    assert info["runtime"]["sandbox_image"] == expected_sandbox


def test_merged_config(host, name, config):
    if name != "kgc-ctrd-merge":
        pytest.skip("merge node only")
    assert config["version"] == 2
    assert config["root"] == "/srv/containerd"
    assert config["state"] == "/run/containerd"
    cri = config["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["sandbox_image"] == "registry.k8s.io/pause:3.10"
    assert cri["restrict_oom_score_adj"] is True
    assert cri["containerd"]["snapshotter"] == "overlayfs"
    text = host.file(CONFIG).content_string
    assert text.startswith("# containerd configuration of the kubenode.gc test node image.\n")
    assert "  # The pause image is imported offline by the test harness.\n" in text
    assert "[%s.containerd.runtimes.runc]" % CRI in text
    (backup,) = host.run("ls %s.*~", CONFIG).stdout.split()
    old = tomllib.loads(host.file(backup).content_string)
    assert old["root"] == "/var/lib/containerd"


def test_dedicated_imagefs_mount(host, name):
    if name != "kgc-ctrd-merge":
        pytest.skip("merge node only")
    mount = host.mount_point("/srv/containerd")
    assert mount.exists and mount.filesystem == "tmpfs"
    assert "size=204800k" in mount.options
    unit = host.file("/etc/systemd/system/srv-containerd.mount")
    assert "What=tmpfs" in unit.content_string and "Where=/srv/containerd" in unit.content_string
    assert host.service("srv-containerd.mount").is_enabled
    dropin = host.file("/etc/systemd/system/containerd.service.d/kubenode-gc-imagefs.conf").content_string
    assert "RequiresMountsFor=/srv/containerd" in dropin
    # containerd's content now lives on the dedicated filesystem
    assert host.file("/srv/containerd/io.containerd.content.v1.content").is_directory


def test_template_config(host, name, config):
    if name != "kgc-ctrd-template":
        pytest.skip("template node only")
    text = host.file(CONFIG).content_string
    assert "Managed by kubenode.gc.containerd_storage" in text.splitlines()[0]
    assert "The pause image is imported offline" not in text
    assert config["root"] == "/var/lib/containerd"
    cri = config["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["restrict_oom_score_adj"] is True
    assert cri["containerd"]["runtimes"]["runc"]["options"]["SystemdCgroup"] is False
    # the hand-written file it replaced was backed up
    (backup,) = host.run("ls %s.*~", CONFIG).stdout.split()
    assert "The pause image is imported offline" in host.file(backup).content_string
