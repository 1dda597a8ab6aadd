# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What kubenode.gc.node_prereqs left on each node, and that the modules then run there."""

import json
import os

import pytest
import testinfra.utils.ansible_runner

testinfra_hosts = testinfra.utils.ansible_runner.AnsibleRunner(os.environ["MOLECULE_INVENTORY_FILE"]).get_hosts("all")

IMPORT = "import grpc, google.protobuf, tomlkit, yaml, ruamel.yaml; print(grpc.__version__, google.protobuf.__version__, tomlkit.__version__)"


@pytest.fixture
def name(host):
    return host.backend.get_hostname()


def test_debian_packages(host, name):
    packages = ["python3-grpcio", "python3-protobuf", "python3-tomlkit", "python3-yaml", "python3-ruamel.yaml"]
    installed = [p for p in packages if host.package(p).is_installed]
    if name == "kgc-prereqs-apt":
        assert installed == packages
        assert host.run("/usr/bin/python3 -c %s", IMPORT).rc == 0
    else:
        assert installed == []  # the venv method leaves the system Python alone
        assert host.run("/usr/bin/python3 -c %s", IMPORT).rc != 0


def test_venv(host, name):
    venv = host.file("/opt/kubenode-gc/venv/bin/python")
    if name == "kgc-prereqs-venv":
        assert host.check_output("/opt/kubenode-gc/venv/bin/python -c %s", IMPORT).split() == ["1.85.1", "7.36.2", "0.15.2"]
    else:
        assert not venv.exists


def test_the_venv_is_root_s_alone(host, name):
    """Owned by root and writable by root alone, every file and directory, so that kubenode.gc.gc_timer may run it as root."""
    if name != "kgc-prereqs-venv":
        assert not host.file("/opt/kubenode-gc").exists
        return
    for path in ("/opt", "/opt/kubenode-gc", "/opt/kubenode-gc/venv"):
        f = host.file(path)
        assert f.user == "root" and f.mode & 0o022 == 0, (path, f.user, oct(f.mode))
    # links are left out: their own mode is always 0777 and never used
    assert host.check_output(r"find /opt/kubenode-gc ! -type l \( ! -user root -o -perm /022 \) -print") == ""
    assert int(host.check_output("find /opt/kubenode-gc -type f | wc -l")) > 100  # the libraries are there


def test_modules_ran_with_the_prepared_interpreter(host):
    result = json.loads(host.file("/var/tmp/converge-cri-info.json").content_string)
    assert result["runtime"]["name"] == "containerd"
    assert result["imagefs"][0]["mountpoint"] == "/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs"
    assert result["imagefs"][0]["capacity_bytes"] == 160 * 1024 * 1024
