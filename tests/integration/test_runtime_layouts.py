# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""kubenode.gc.runtime_config through ansible-playbook on the node layouts of tests/unit/.../fixtures/layouts,
compared with what the real daemons read from the same files: ``containerd --config X config dump`` (1.6, 1.7, 2.x)
and ``crio --config-dir D config`` (cri-o 1.37, containers/storage's file through CONTAINERS_STORAGE_CONF).

``containerd config dump`` does not apply containerd's --root/--state flags, so for k3s and RKE2 the root and state
the module reports (their command line's) are checked against the unit tests' rules, not the dump.
"""

import os
import re
import subprocess

import pytest

from devtools import runtimes
from tests.integration.test_runtime_config import CONTAINERD_BUILDS, codes, containerd_binary, dumped, ok, one_sentence_failure, run
from tests.unit.plugins.module_utils.test__kubelet_layouts import install_layout


def snapshot(root):
    files = {}
    for base, _dirs, names in os.walk(root):
        for name in names:
            with open(os.path.join(base, name), "rb") as f:
                files[os.path.join(base, name)] = f.read()
    return files


@pytest.fixture
def root(tmp_path):
    return str(tmp_path / "root")


@pytest.mark.parametrize("name", CONTAINERD_BUILDS)
@pytest.mark.parametrize("layout", ["k3s", "rke2"])
def test_k3s_rke2_containerd_matches_config_dump_and_is_never_edited(ansible, root, name, layout):
    binary, _version = containerd_binary(name)
    install_layout("containerd-" + layout, root)
    config = root + "/var/lib/rancher/%s/agent/etc/containerd/config.toml" % layout
    res = ok(run(ansible, {"runtime": "containerd", "path": config}))
    theirs = dumped(binary, config, 2 if "1." in name else 3)  # containerd 2.x migrates the version 2 file to 3
    assert (res["current"]["snapshotter"], res["current"]["sandbox_image"]) == (theirs["snapshotter"], theirs["sandbox_image"])
    assert (res["current"]["root"], res["current"]["state"]) == (root + "/var/lib/rancher/%s/agent/containerd" % layout, "/run/k3s/containerd")
    assert codes(res) == ["generated_file", "root_from_command_line", "state_from_command_line"]
    before = snapshot(root)
    msg = one_sentence_failure(run(ansible, {"runtime": "containerd", "path": config, "settings": {"snapshotter": "native"}}))
    assert msg.startswith("Not editing %s: its header says it is generated (DO NOT EDIT)" % config) and "config.toml.tmpl" in msg
    assert snapshot(root) == before


@pytest.mark.parametrize("version", [3, 4])
def test_kubespray_containerd(ansible, root, version):
    """Version 3 against containerd 2.1's own reading of the file; version 4 against containerd 2.3's (the first line that
    reads it, when the harness has it: ../shared/runtimes/containerd-2.3), which 2.1 refuses, as the finding says."""
    install_layout("containerd-kubespray-v%d" % version, root)
    config = root + "/etc/containerd/config.toml"
    binary = containerd_binary("containerd-2.1")[0]
    reader = binary if version == 3 else v4_reader()
    res = ok(run(ansible, {"runtime": "containerd", "path": config}))
    if reader:
        theirs = dumped(reader, config, 3)  # version 4 keeps version 3's tables for every key the module manages
        assert {k: res["current"][k] for k in theirs} == theirs
    if version == 4:  # containerd before 2.3 refuses version 4 (the module says so in a finding)
        out = subprocess.run([binary, "--config", config, "config", "dump"], capture_output=True, text=True, check=False)
        assert out.returncode != 0 and "expected containerd config version equal to or less than `3`, got `4`" in out.stderr
        assert codes(res) == ["config_version_4"]
    before = snapshot(root)
    settings = {"root": root + "/data/containerd", "snapshotter": "native"}
    res = ok(run(ansible, {"runtime": "containerd", "path": config, "settings": settings}))
    assert res["changed"] is True and res["files"] == [config]
    old, new = before[config].decode().splitlines(), snapshot(root)[config].decode().splitlines()
    assert [i for i, (a, b) in enumerate(zip(old, new)) if a != b] == [i for i, line in enumerate(old) if line.startswith(("root =", "    snapshotter ="))]
    assert len(old) == len(new)
    if reader:
        theirs = dumped(reader, config, 3)
        assert (theirs["root"], theirs["snapshotter"]) == (root + "/data/containerd", "native")
    assert ok(run(ansible, {"runtime": "containerd", "path": config, "settings": settings}))["changed"] is False


def v4_reader():
    """containerd 2.3's binary, the first line that reads a version 4 config, or None when the harness lacks it."""
    bin_dir = runtimes.containerd_bin_dir("2.3")
    return os.path.join(bin_dir, "containerd") if bin_dir else None


def crio_config(root, dropin_dir, storage_conf, crio_conf=None):
    """root, runroot, storage_driver and pause_image as ``crio config`` prints them."""
    crio_dir = runtimes.crio_dir()
    if crio_dir is None:
        pytest.skip("no cri-o binaries (KUBENODE_GC_CRIO_DIR)")
    if not os.path.exists(storage_conf):  # none on the node: containers/storage's defaults (an empty file gives them)
        storage_conf = os.path.join(root, "empty-storage.conf")
        open(storage_conf, "w", encoding="utf-8").close()
    cmd = [os.path.join(crio_dir, "crio")] + (["--config", crio_conf] if crio_conf else []) + ["--config-dir", dropin_dir, "config"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=dict(os.environ, CONTAINERS_STORAGE_CONF=storage_conf)).stdout
    values = dict(re.findall(r'^#? ?(root|runroot|storage_driver|pause_image) = "(.*)"$', out, re.M))
    return dict(graphroot=values["root"], runroot=values["runroot"], driver=values["storage_driver"], pause_image=values["pause_image"])


def crio_args(root):
    return {"runtime": "crio", "path": root + "/etc/crio/crio.conf", "storage_path": root + "/etc/containers/storage.conf",
            "dropin_dir": root + "/etc/crio/crio.conf.d"}


def test_openshift_crio_matches_crio_config_and_refuses_mco_files(ansible, root):
    install_layout("crio-openshift", root)
    args = crio_args(root)
    res = ok(run(ansible, args))
    theirs = crio_config(root, args["dropin_dir"], args["storage_path"])
    assert {k: res["current"][k] for k in theirs} == theirs
    assert theirs["pause_image"].startswith("quay.io/openshift-release-dev/")  # read from 00-default, a drop-in without .conf
    # storage.conf by its header; 00-default only through the node's /etc/machine-config-daemon/currentconfig (unit tests)
    assert codes(res) == ["generated_file"]
    before = snapshot(root)
    msg = one_sentence_failure(run(ansible, dict(args, settings={"graphroot": root + "/data"})))
    assert msg.startswith("Not editing %s: " % args["storage_path"]) and "Machine Config Operator" in msg
    assert snapshot(root) == before


def test_crio_package_layout_gets_a_crio_conf(ansible, root):
    install_layout("crio-package", root)
    args = crio_args(root)
    res = ok(run(ansible, args))
    theirs = crio_config(root, args["dropin_dir"], args["storage_path"])
    assert (res["current"]["graphroot"], res["current"]["runroot"]) == (theirs["graphroot"], theirs["runroot"])
    before = snapshot(root)
    settings = {"pause_image": "registry.k8s.io/pause:3.10"}
    res = ok(run(ansible, dict(args, settings=settings)))
    assert res["changed"] is True and res["files"] == [args["path"]]
    after = snapshot(root)
    assert {p: v for p, v in after.items() if p != args["path"]} == before
    assert after[args["path"]] == b'[crio.image]\npause_image = "registry.k8s.io/pause:3.10"\n'
    assert crio_config(root, args["dropin_dir"], args["storage_path"], args["path"])["pause_image"] == "registry.k8s.io/pause:3.10"
    assert ok(run(ansible, dict(args, settings=settings)))["changed"] is False


# layout of the second set -> the containerd config it reads, and whether its file is written again by the distribution
# (the refusals that need the node's own fixed paths, GKE's scripts and Bottlerocket's /etc/os-release, are unit-tested)
SECOND_SET = {
    "kind": ("/etc/containerd/config.toml", False),
    "gke": ("/etc/containerd/config.toml", False),
    "bottlerocket": ("/etc/containerd/config.toml", False),
    "flatcar": ("/usr/share/containerd/config.toml", False),
    "microk8s": ("/var/snap/microk8s/current/args/containerd.toml", True),
    "k0s": ("/etc/k0s/containerd.toml", True),
}


@pytest.mark.parametrize("name", CONTAINERD_BUILDS)
@pytest.mark.parametrize("layout", sorted(SECOND_SET))
def test_second_set_matches_config_dump(ansible, root, name, layout):
    """The snapshotter and sandbox image (and, where no command line of the distribution sets them, root and state) equal
    what containerd reads from the same file (``containerd config dump``, imports included); a file the distribution
    writes again is never edited."""
    binary, _version = containerd_binary(name)
    install_layout(layout, root)
    rel, generated = SECOND_SET[layout]
    config = root + rel
    res = ok(run(ansible, {"runtime": "containerd", "path": config}))
    theirs = dumped(binary, config, 2 if "1." in name else 3)  # containerd 2.x migrates the version 2 file to 3
    keys = ["snapshotter", "sandbox_image"] + ([] if layout == "k0s" else ["root", "state"])  # k0s: its --root/--state win
    if layout == "flatcar":  # its file names no sandbox image: containerd's default, which depends on its version, is not guessed
        assert res["current"]["sandbox_image"] is None
        keys.remove("sandbox_image")
    assert {k: res["current"][k] for k in keys} == {k: theirs[k] for k in keys}
    if generated:
        before = snapshot(root)
        msg = one_sentence_failure(run(ansible, {"runtime": "containerd", "path": config, "settings": {"snapshotter": "native"}}))
        assert msg.startswith("Not editing %s: " % config) and ("MicroK8s generates it" in msg or "k0s writes it" in msg)
        assert snapshot(root) == before
