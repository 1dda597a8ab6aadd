# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What kubenode.gc.containerd_storage left on each node: the parsed config (version 2 on containerd 1.x,
version 3 on 2.x), kept comments, backups, the imagefs mount, the configuration containerd itself loads
(`containerd config dump`), and a restarted containerd of the node's release answering CRI with the new
root and sandbox image, and pulling images without keeping their compressed layer blobs (discard_unpacked_layers)."""

import json
import os
import tomllib

import pytest
import testinfra.utils.ansible_runner

testinfra_hosts = testinfra.utils.ansible_runner.AnsibleRunner(os.environ["MOLECULE_INVENTORY_FILE"]).get_hosts("all")

CONFIG = "/etc/containerd/config.toml"
CRI = 'plugins."io.containerd.grpc.v1.cri"'
# node -> (containerd release line, managed how, config version)
NODES = {
    "kgc-ctrd-merge": ("1.6.", "merge", 2),
    "kgc-ctrd17-template": ("1.7.", "template", 2),
    "kgc-ctrd2-merge": ("2.1.", "merge", 3),
    "kgc-ctrd2-template": ("2.1.", "template", 3),
}
ROOT = {"merge": "/srv/containerd", "template": "/var/lib/containerd"}
SANDBOX = {"merge": "registry.k8s.io/pause:3.10", "template": "registry.k8s.io/pause:3.9-kubenode"}


def sandbox_of(config, version):
    """The sandbox image setting of a parsed config.toml of the given version."""
    if version == 3:
        return config["plugins"]["io.containerd.cri.v1.images"]["pinned_images"]["sandbox"]
    return config["plugins"]["io.containerd.grpc.v1.cri"]["sandbox_image"]


def discard_of(config, version):
    """discard_unpacked_layers of a parsed config.toml of the given version."""
    if version == 3:
        return config["plugins"]["io.containerd.cri.v1.images"]["discard_unpacked_layers"]
    return config["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["discard_unpacked_layers"]


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
    line, mode = NODES[name][:2]
    before = host.file("/var/tmp/containerd-invocation").content_string.strip()
    assert host.service("containerd").is_running
    assert host.check_output("systemctl show -p InvocationID --value containerd") != before
    info = cri_info(host)
    assert info["runtime"]["name"] == "containerd" and info["runtime"]["version"].lstrip("v").startswith(line)
    assert [fs["mountpoint"] for fs in info["imagefs"]] == [ROOT[mode] + "/io.containerd.snapshotter.v1.overlayfs"]
    assert info["runtime"]["sandbox_image"] == SANDBOX[mode]


def test_containerd_loads_the_config(host, name):
    """`containerd config dump` (what the role validates with): the effective root and sandbox image."""
    mode, version = NODES[name][1:]
    dump = tomllib.loads(host.check_output("containerd config dump"))
    assert dump["version"] == version
    assert dump["root"] == ROOT[mode] and dump["state"] == "/run/containerd"
    assert sandbox_of(dump, version) == SANDBOX[mode]
    assert discard_of(dump, version) is True


PULLED = "127.0.0.1:5000/kubenode-gc/pulled:1"  # served by the registry prepare started inside the node


def test_a_new_pull_leaves_no_compressed_layer_blob(host, name):
    """After the role's restart, an image pulled through the CRI keeps its manifest, config and snapshots, not its layer
    blobs: the manifest names none (containerd's discard_unpacked_layers), so containerd's next collection frees them."""
    version = NODES[name][2]
    assert discard_of(tomllib.loads(host.file(CONFIG).content_string), version) is True
    pull = host.run("crictl --runtime-endpoint unix:///run/containerd/containerd.sock --image-endpoint unix:///run/containerd/containerd.sock "
                    "pull %s", PULLED)
    assert pull.rc == 0, pull.stderr
    digest = next(line.split()[2] for line in host.check_output("ctr -n k8s.io images ls").splitlines()[1:] if line.split()[0] == PULLED)
    layers = [layer["digest"] for layer in json.loads(host.check_output("ctr -n k8s.io content get %s", digest))["layers"]]
    assert len(layers) == 2
    labels = next(line for line in host.check_output("ctr -n k8s.io content ls").splitlines() if line.startswith(digest))
    assert "containerd.io/gc.ref.content.config=" in labels and "containerd.io/gc.ref.content.l." not in labels
    # containerd's next collection frees the blobs nothing references: one is run now (a lease deleted with --sync)
    host.check_output("ctr -n k8s.io leases create --id kubenode-gc-verify")
    host.check_output("ctr -n k8s.io leases delete --sync kubenode-gc-verify")
    for layer in layers:
        assert host.run("ctr -n k8s.io content get %s", layer).rc != 0, layer
    # the CRI lists the image, and disk_usage counts no blob of it as a second copy
    listed = json.loads(host.check_output("crictl --runtime-endpoint unix:///run/containerd/containerd.sock images -o json"))["images"]
    assert [PULLED] in [image["repoTags"] for image in listed]
    usage = host.ansible("kubenode.gc.disk_usage", None, check=False)
    assert not usage.get("failed"), usage
    assert not [o for o in usage["categories"]["unpacked_layer_blobs"]["objects"] if PULLED in o["images"]]


def test_merged_config(host, name, config):
    mode, version = NODES[name][1:]
    if mode != "merge":
        pytest.skip("merge nodes only")
    assert config["version"] == version
    assert config["root"] == "/srv/containerd"
    assert config["state"] == "/run/containerd"
    assert sandbox_of(config, version) == "registry.k8s.io/pause:3.10"
    text = host.file(CONFIG).content_string
    if version == 3:
        assert config["plugins"]["io.containerd.cri.v1.runtime"]["restrict_oom_score_adj"] is True
        assert config["plugins"]["io.containerd.cri.v1.images"]["snapshotter"] == "overlayfs"
        assert 'io.containerd.grpc.v1.cri' not in text  # no version 2 table added to a version 3 file
        assert text.startswith("# containerd 2.x configuration of the kubenode.gc test node image.\n")
        assert "    # The pause image is imported offline by the test harness.\n" in text
    else:
        cri = config["plugins"]["io.containerd.grpc.v1.cri"]
        assert cri["restrict_oom_score_adj"] is True
        assert cri["containerd"]["snapshotter"] == "overlayfs"
        assert text.startswith("# containerd configuration of the kubenode.gc test node image.\n")
        assert "  # The pause image is imported offline by the test harness.\n" in text
        assert "[%s.containerd.runtimes.runc]" % CRI in text
    (backup,) = host.run("ls %s.*~", CONFIG).stdout.split()
    old = tomllib.loads(host.file(backup).content_string)
    assert old["root"] == "/var/lib/containerd" and old["version"] == version


def test_pinned_images(host, name, config):
    """containerd 2.x: the role's pinned_images entries next to the sandbox; an image present before pinned after the restart."""
    version = NODES[name][2]
    if version != 3:
        pytest.skip("containerd 2.x nodes only")
    entries = config["plugins"]["io.containerd.cri.v1.images"]["pinned_images"]
    assert entries == {
        "sandbox": SANDBOX[NODES[name][1]],
        "kubenode-gc/registry.example/kubenode-gc/absent:1.0": "registry.example/kubenode-gc/absent:1.0",
        "kubenode-gc/registry.example/kubenode-gc/pinned:1.0": "registry.example/kubenode-gc/pinned:1.0",
    }
    if name != "kgc-ctrd2-template":
        return  # the merge node's images stayed in the old root
    result = host.ansible("kubenode.gc.cri_info", "gather=images", check=False)
    assert not result.get("failed"), result
    pinned = {tag: image["pinned"] for image in result["images"] for tag in image["repo_tags"] if tag.startswith("registry.example/")}
    assert pinned == {"registry.example/kubenode-gc/pinned:1.0": True, "registry.example/kubenode-gc/unpinned:1.0": False}


def test_dedicated_imagefs_mount(host, name):
    if NODES[name][1] != "merge":
        pytest.skip("merge nodes only")
    mount = host.mount_point("/srv/containerd")
    assert mount.exists and mount.filesystem == "tmpfs"
    assert "size=204800k" in mount.options
    unit = host.file("/etc/systemd/system/srv-containerd.mount")
    assert "What=tmpfs" in unit.content_string and "Where=/srv/containerd" in unit.content_string
    assert host.service("srv-containerd.mount").is_enabled
    dropin = host.file("/etc/systemd/system/containerd.service.d/kubenode-gc-imagefs.conf").content_string
    assert "RequiresMountsFor=/srv/containerd" in dropin
    # containerd's snapshots now live on the dedicated filesystem
    snapshots = "/srv/containerd/io.containerd.snapshotter.v1.overlayfs"
    assert host.file(snapshots).is_directory
    assert host.check_output("findmnt --noheadings --output TARGET --target %s", snapshots) == "/srv/containerd"


def test_template_config(host, name, config):
    mode, version = NODES[name][1:]
    if mode != "template":
        pytest.skip("template nodes only")
    text = host.file(CONFIG).content_string
    assert "Managed by kubenode.gc.containerd_storage" in text.splitlines()[0]
    assert "The pause image is imported offline" not in text
    assert config["version"] == version
    assert config["root"] == "/var/lib/containerd"
    assert sandbox_of(config, version) == "registry.k8s.io/pause:3.9-kubenode"
    if version == 3:
        cri = config["plugins"]["io.containerd.cri.v1.runtime"]
        assert config["plugins"]["io.containerd.cri.v1.images"]["snapshotter"] == "overlayfs"
    else:
        cri = config["plugins"]["io.containerd.grpc.v1.cri"]
        assert cri["containerd"]["snapshotter"] == "overlayfs"
    assert cri["restrict_oom_score_adj"] is True
    assert cri["containerd"]["runtimes"]["runc"]["options"]["SystemdCgroup"] is False
    # the hand-written file it replaced was backed up
    (backup,) = host.run("ls %s.*~", CONFIG).stdout.split()
    assert "The pause image is imported offline" in host.file(backup).content_string
