# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""kubenode.gc.kubelet_config through ansible-playbook on the node layouts of tests/unit/.../fixtures/layouts.

Each layout is installed under a temporary root with its paths re-rooted; the module gets the default flag files
re-rooted the same way (and, for k3s and RKE2, their drop-in directory, which it finds at its fixed path on a node).
Expected values follow the kubelet's loading rules (see tests/unit/plugins/module_utils/test__kubelet_layouts.py).
"""

import difflib
import glob
import os

import pytest

from tests.unit.plugins.module_utils.test__kubelet_layouts import DEFAULT_HARD, install_layout

MODULE = "kubenode.gc.kubelet_config"
FLAG_FILES = [
    "/var/lib/kubelet/kubeadm-flags.env", "/etc/default/kubelet", "/etc/sysconfig/kubelet", "/etc/systemd/system/kubelet.service.d/*.conf",
    "/usr/lib/systemd/system/kubelet.service.d/*.conf", "/lib/systemd/system/kubelet.service.d/*.conf", "/etc/kubernetes/kubelet.env",
    "/etc/eks/kubelet/environment", "/etc/systemd/system/kubelet.service", "/etc/rancher/k3s/config.yaml", "/etc/rancher/k3s/config.yaml.d/*.yaml",
    "/etc/rancher/rke2/config.yaml", "/etc/rancher/rke2/config.yaml.d/*.yaml",
]
GC = {"imageGCHighThresholdPercent": 80, "imageGCLowThresholdPercent": 70}

# layout -> (the file an edit goes to, the kubelet's drop-in dir when the module finds it by its fixed path, expected effective values)
LAYOUTS = {
    "kubeadm": ("/var/lib/kubelet/config.yaml", None, dict(imageGCHighThresholdPercent=85, evictionHard=DEFAULT_HARD)),
    "kubespray": ("/etc/kubernetes/kubelet-config.yaml", None, dict(
        imageGCHighThresholdPercent=90, evictionHard={"memory.available": "500Mi", "nodefs.available": "10%", "imagefs.available": "20%"})),
    "eks-al2023": ("/etc/kubernetes/kubelet/config.json.d/00-nodeadm.conf", None, dict(
        imageGCHighThresholdPercent=75, imageGCLowThresholdPercent=60,
        evictionHard={"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%", "imagefs.available": "20%"})),
    "rke2": ("/var/lib/rancher/rke2/agent/etc/kubelet.conf.d/50-kubenode-gc.conf", "/var/lib/rancher/rke2/agent/etc/kubelet.conf.d", dict(
        imageGCHighThresholdPercent=85, evictionHard=dict(DEFAULT_HARD, **{"nodefs.available": "5%", "imagefs.available": "5%"}),
        evictionMinimumReclaim={"imagefs.available": "10%", "nodefs.available": "10%"})),
    "k3s": ("/var/lib/rancher/k3s/agent/etc/kubelet.conf.d/50-kubenode-gc.conf", "/var/lib/rancher/k3s/agent/etc/kubelet.conf.d", dict(
        imageGCHighThresholdPercent=80, imageGCLowThresholdPercent=55, imageMaximumGCAge="168h0m0s", containerLogMaxFiles=4,
        evictionHard=dict(DEFAULT_HARD, **{"nodefs.available": "5%", "imagefs.available": "15%"}))),
    "kops-1.35": ("/var/lib/kubelet/kubelet.conf", None, dict(
        imageGCHighThresholdPercent=80, imageGCLowThresholdPercent=65, imageMinimumGCAge="2m0s", imageMaximumGCAge="0s",
        evictionHard=dict(DEFAULT_HARD, **{"imagefs.available": "10%"}))),
    "kops-1.36": ("/var/lib/kubelet/kubelet.conf", None, dict(
        imageGCHighThresholdPercent=80, imageGCLowThresholdPercent=65, evictionHard=dict(DEFAULT_HARD, **{"imagefs.available": "10%"}))),
    "aks": (None, None, dict(imageGCHighThresholdPercent=85, imageGCLowThresholdPercent=80,
                             evictionHard={"memory.available": "750Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%"})),
}
# layout -> (settings of its edit, effective values after it) when not GC; kOps: a key its DAEMON_ARGS flag sets is
# written, the flag still wins
EDITS = {"kops-1.35": ({"imageMaximumGCAge": "168h", "imageGCHighThresholdPercent": 90}, {"imageMaximumGCAge": "168h0m0s", "imageGCHighThresholdPercent": 80})}
NEW_DROPIN = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"


def snapshot(root):
    files = {}
    for path in glob.glob(os.path.join(root, "**"), recursive=True):
        if os.path.isfile(path):
            with open(path, "rb") as f:
                files[path] = f.read()
    return files


@pytest.fixture
def layout(tmp_path, ansible, request):
    name = request.param
    root = str(tmp_path / "root")
    install_layout(name, root)
    edit, config_dir, expected = LAYOUTS[name]

    def run(**args):
        args.setdefault("flag_files", [root + p for p in FLAG_FILES])
        if config_dir:
            args.setdefault("config_dir", root + config_dir)
        return ansible.module(MODULE, args)

    return name, root, run, (root + edit if edit else None), expected


@pytest.mark.parametrize("layout", sorted(LAYOUTS), indirect=True)
def test_layout_effective_values_and_edit(layout):
    name, root, run, edit, expected = layout
    before = snapshot(root)
    res = run()
    assert not res.get("failed"), res.get("msg")
    assert res["changed"] is False and snapshot(root) == before
    assert {k: res["effective"][k] for k in expected} == expected
    if edit is None:  # AKS: flags only, nothing to edit without a path
        failed = run(settings=GC)
        assert failed["failed"] is True and failed["msg"] == "The kubelet runs without a configuration file, so there is nothing to edit; give path."
        assert snapshot(root) == before
        return
    settings, edited = EDITS.get(name, (GC, {"imageGCLowThresholdPercent": 70}))
    args = dict(path=edit, settings=settings)
    if not os.path.exists(edit):
        args["content"] = NEW_DROPIN
    res = run(**args)
    assert not res.get("failed"), res.get("msg")
    assert res["changed"] is True
    after = snapshot(root)
    assert set(after) - set(before) <= {edit} and all(after[p] == before[p] for p in before if p != edit)
    assert {k: res["effective"][k] for k in edited} == edited
    if edit in before:  # byte for byte: every line outside the edited keys as it was (kubespray's True, its "key :" spacing)
        old, new = (
            [line for line in text.decode().splitlines(True) if line.lstrip(' "').split('"')[0].split(":")[0] not in settings]
            for text in (before[edit], after[edit]))
        assert old == new, list(difflib.unified_diff(old, new))
    again = run(path=edit, settings=settings)
    assert not again.get("failed"), again.get("msg")
    assert again["changed"] is False and snapshot(root) == after


@pytest.mark.parametrize("layout", ["eks-al2023"], indirect=True)
def test_drop_in_override_fails_and_writes_nothing(layout):
    _name, root, run, _edit, _expected = layout
    before = snapshot(root)
    res = run(settings=GC)
    assert res["failed"] is True and res["msg"].startswith("settings.imageGCHighThresholdPercent cannot take effect: the drop-in %s" % (
        root + "/etc/kubernetes/kubelet/config.json.d/00-nodeadm.conf"))
    assert snapshot(root) == before
