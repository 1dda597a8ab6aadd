# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What kubenode.gc.crio_storage left on each node: parsed files, kept comments, backups, findings, and the
real cri-o restarted and answering CRI from the new graphroot and imagestore."""

import os
import tomllib

import pytest
import testinfra.utils.ansible_runner

testinfra_hosts = testinfra.utils.ansible_runner.AnsibleRunner(os.environ["MOLECULE_INVENTORY_FILE"]).get_hosts("all")

STORAGE = "/etc/containers/storage.conf"
CRIO = "/etc/crio/crio.conf"
DROPIN = "/etc/crio/crio.conf.d/20-site.conf"
ENDPOINT = "unix:///run/crio/crio.sock"


@pytest.fixture
def name(host):
    return host.backend.get_hostname()


def toml(host, path):
    return tomllib.loads(host.file(path).content_string)


def backups(host, path):
    return host.run("ls %s.*~", path).stdout.split()


def cri_info(host):
    result = host.ansible("kubenode.gc.cri_info", "gather=runtime,imagefs cri_endpoint=%s" % ENDPOINT, check=False)
    assert not result.get("failed"), result
    return result


def test_crio_restarted_and_answers_cri(host, name):
    before = host.file("/var/tmp/crio-invocation").content_string.strip()
    assert host.service("crio").is_running
    if name == "kgc-crio-pins":  # only the pins changed: reloaded, not restarted
        assert host.check_output("systemctl show -p InvocationID --value crio") == before
        assert cri_info(host)["runtime"]["sandbox_image"] == "registry.k8s.io/pause:3.9-kubenode"
        return
    assert host.check_output("systemctl show -p InvocationID --value crio") != before
    info = cri_info(host)
    assert info["runtime"]["name"] == "cri-o" and info["runtime"]["version"].startswith("1.37.")
    filesystems = {fs["kind"]: fs["mountpoint"] for fs in info["imagefs"]}
    if name == "kgc-crio-merge":
        # split image filesystem: images in the imagestore, containers in the graphroot, on two devices
        assert filesystems == {"image": "/srv/crio-images/overlay-images", "container": "/srv/crio/storage/overlay-containers"}
        assert info["split_imagefs"] is True
        assert info["runtime"]["sandbox_image"] == "registry.k8s.io/pause:3.9"  # the site drop-in wins
    else:
        assert filesystems["image"] == "/var/lib/containers/storage/overlay-images"
        assert info["split_imagefs"] is False
        assert info["runtime"]["sandbox_image"] == "registry.k8s.io/pause:3.10.1"  # cri-o's default: no crio.conf


def test_merged_files(host, name):
    if name != "kgc-crio-merge":
        pytest.skip("merge node only")
    storage = toml(host, STORAGE)["storage"]
    assert storage["graphroot"] == "/srv/crio/storage"
    assert storage["runroot"] == "/run/crio-storage"
    assert storage["imagestore"] == "/srv/crio-images"
    assert storage["driver"] == "overlay"
    assert storage["options"]["overlay"]["mountopt"] == "nodev,metacopy=on"
    text = host.file(STORAGE).content_string
    assert "# Primary read/write location of container storage\n" in text
    crio = toml(host, CRIO)
    # crio.conf's explicit root overrides storage.conf: it was moved too, so they agree
    assert crio["crio"]["root"] == "/srv/crio/storage"
    assert crio["crio"]["log_dir"] == "/var/log/crio/pods"
    assert crio["crio"]["image"]["pause_image"] == "registry.k8s.io/pause:3.10"
    assert host.file(CRIO).content_string.startswith("# cri-o configuration, tuned by the platform team.\n")
    assert host.file(CRIO).mode == 0o600
    # drop-ins are never edited, the node image's own one neither
    assert toml(host, DROPIN)["crio"]["image"]["pause_image"] == "registry.k8s.io/pause:3.9"
    assert len(backups(host, STORAGE)) == 1 and len(backups(host, CRIO)) == 1
    assert backups(host, DROPIN) == [] and backups(host, "/etc/crio/crio.conf.d/00-kubenode-node.conf") == []


def test_findings(host, name):
    result = host.ansible("kubenode.gc.runtime_config", "runtime=crio query_runtime=false", check=False)
    assert not result.get("failed"), result
    codes = {f["code"] for f in result["findings"]}
    assert "crio_root_mismatch" not in codes
    if name == "kgc-crio-merge":
        (override,) = [f for f in result["findings"] if f["code"] == "dropin_overrides"]
        assert "20-site.conf" in override["message"] and override["severity"] == "warning"
        assert result["current"]["pause_image"] == "registry.k8s.io/pause:3.9"  # the drop-in wins
        assert result["current"]["graphroot"] == "/srv/crio/storage"
        assert result["current"]["imagestore"] == "/srv/crio-images"
    else:
        assert codes <= {"config_version_1"}
        assert result["current"]["graphroot"] == "/var/lib/containers/storage"


def test_pinned_images(host, name):
    """The role's drop-in and image_pin's (which carries the role's list over): cri-o pins both lists, nothing else."""
    pins = "/etc/crio/crio.conf.d/90-kubenode-gc-pinned.conf"
    if name != "kgc-crio-pins":
        assert not host.file(pins).exists
        pytest.skip("pins node only")
    wanted = ["registry.example/kubenode-gc/pinned:1.0", "registry.example/kubenode-gc/absent:1.0"]
    assert toml(host, pins)["crio"]["image"]["pinned_images"] == wanted
    image_pin = host.file("/etc/crio/crio.conf.d/99-kubenode-gc-pinned.conf").content_string
    assert tomllib.loads(image_pin)["crio"]["image"]["pinned_images"] == sorted(wanted + ["registry.example/kubenode-gc/by-image-pin:1.0"])
    assert '# kubenode.gc pins: ["registry.example/kubenode-gc/by-image-pin:1.0"]\n' in image_pin  # still image_pin's own pin
    result = host.ansible("kubenode.gc.cri_info", "gather=images cri_endpoint=%s" % ENDPOINT, check=False)
    assert not result.get("failed"), result
    pinned = {tag: image["pinned"] for image in result["images"] for tag in image["repo_tags"] if tag.startswith("registry.example/")}
    assert pinned == {
        "registry.example/kubenode-gc/pinned:1.0": True,
        "registry.example/kubenode-gc/by-image-pin:1.0": True,
        "registry.example/kubenode-gc/unpinned:1.0": False,
    }


def test_template_storage_conf(host, name):
    if name != "kgc-crio-template":
        pytest.skip("template node only")
    text = host.file(STORAGE).content_string
    assert "Managed by kubenode.gc.crio_storage" in text.splitlines()[0]
    storage = toml(host, STORAGE)["storage"]
    assert storage["driver"] == "overlay" and storage["graphroot"] == "/var/lib/containers/storage"
    assert storage["options"]["pull_options"] == {"enable_partial_images": "false"}
    assert storage["options"]["overlay"]["mountopt"] == "nodev"
    assert not host.file(CRIO).exists
