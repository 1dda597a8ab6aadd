# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""kubelet_config on real node layouts (fixtures/layouts/<name>, rendered from each distribution's public source).

Each layout is installed under a temporary root (absolute paths in its files are re-rooted there) and read with the
module's default flag files, as on the node. The expected values follow the kubelet's loading rules
(cmd/kubelet/app/server.go): the --config file decoded with the defaults (evictionHard defaulted when the file has
none), the --config-dir drop-ins (*.conf, filepath.WalkDir order) merged onto it with a JSON merge patch whose maps
are merged entry by entry into the file's, then the command-line flags.
"""

import difflib
import os
import re
import shutil

import pytest
import yaml

from ansible_collections.kubenode.gc.plugins.module_utils import _daemons
from ansible_collections.kubenode.gc.plugins.module_utils._errors import ConfigError
from ansible_collections.kubenode.gc.plugins.module_utils.config import _config_io
from ansible_collections.kubenode.gc.plugins.module_utils.config import _kubelet_config as kcfg
from ansible_collections.kubenode.gc.plugins.module_utils.config import _node_layouts as layouts
from ansible_collections.kubenode.gc.plugins.module_utils.config._kubelet_config import DEFAULT_FLAG_FILES

LAYOUTS = os.path.join(os.path.dirname(__file__), "fixtures", "layouts")
DEFAULT_HARD = {"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%", "imagefs.available": "15%",
                "imagefs.inodesFree": "5%"}


class FakeProc:
    """A /proc of made-up processes (cmdline, comm, environ, cwd, status with its uids, the exe link, cgroup; listening
    unix sockets in net/unix and fd links)."""

    def __init__(self, base):
        self.base = base
        os.makedirs(os.path.join(base, "net"), exist_ok=True)
        with open(os.path.join(base, "net", "unix"), "w", encoding="utf-8") as f:
            f.write("Num       RefCount Protocol Flags    Type St Inode Path\n")
        self.inode = 40000

    def add(self, pid, argv, comm=None, environ=None, cwd="/", listens=(), uid=0, euid=None, exe=None, exe_owner=0, exe_mode=0o755, cgroup=None):
        """A process run by ``uid`` (effective ``euid``, default the same) from ``exe`` (default: a file of this fake
        /proc owned by ``exe_owner`` with ``exe_mode``), in the systemd cgroup ``cgroup`` (a path, as /system.slice/x.service)."""
        d = os.path.join(self.base, str(pid))
        os.makedirs(os.path.join(d, "fd"))
        with open(os.path.join(d, "cmdline"), "wb") as f:
            f.write(b"\0".join(a.encode() for a in argv) + b"\0")
        with open(os.path.join(d, "comm"), "w", encoding="utf-8") as f:
            f.write((comm or os.path.basename(argv[0]))[:15] + "\n")
        with open(os.path.join(d, "environ"), "wb") as f:
            f.write(b"".join(("%s=%s" % kv).encode() + b"\0" for kv in (environ or {}).items()))
        euid = uid if euid is None else euid
        with open(os.path.join(d, "status"), "w", encoding="utf-8") as f:
            f.write("Name:\t%s\nUid:\t%d\t%d\t%d\t%d\nGid:\t0\t0\t0\t0\n" % ((comm or os.path.basename(argv[0]))[:15], uid, euid, euid, euid))
        if exe is None:
            exe = os.path.join(self.base, "exe", "%d-%s" % (pid, os.path.basename(argv[0])))
            os.makedirs(os.path.dirname(exe), exist_ok=True)
            with open(exe, "w", encoding="utf-8") as f:
                f.write("#!/bin/false\n")
            os.chown(exe, exe_owner, exe_owner)
            os.chmod(exe, exe_mode)
        os.symlink(exe, os.path.join(d, "exe"))
        if cgroup:
            with open(os.path.join(d, "cgroup"), "w", encoding="utf-8") as f:
                f.write("0::%s\n" % cgroup)
        os.symlink(cwd, os.path.join(d, "cwd"))
        for i, path in enumerate(listens):
            self.inode += 1
            with open(os.path.join(self.base, "net", "unix"), "a", encoding="utf-8") as f:
                f.write("0000000000000000: 00000002 00000000 00010000 0001 01 %d %s\n" % (self.inode, path))
            os.symlink("socket:[%d]" % self.inode, os.path.join(d, "fd", str(3 + i)))


class Files:
    """The module's config-file backend on the local disk (no Ansible module)."""

    def read_text(self, path):
        try:
            with open(path, encoding="utf-8") as f:
                return f.read()
        except FileNotFoundError:
            return None

    def resolve_path(self, path):
        return os.path.realpath(path)

    def write_text(self, path, text, backup=False, validate=None, mode=0o644):
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)

    def lock(self, paths):
        return _config_io.lock_dirs(paths)

    def path_findings(self):
        return []


def reroot(root, text):
    return re.sub(r"(?<![\w.:/}])/(etc|var|run|usr|lib|home)/", root + r"/\1/", text)


def install_layout(name, root):
    """Copy the layout ``name`` under ``root``, its absolute paths re-rooted there."""
    source = os.path.join(LAYOUTS, name)
    for base, _dirs, names in os.walk(source):
        for file_name in names:
            src = os.path.join(base, file_name)
            dst = os.path.join(root, os.path.relpath(src, source))
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            with open(src, encoding="utf-8") as f:
                text = f.read()
            with open(dst, "w", encoding="utf-8") as f:
                f.write(reroot(root, text))
            shutil.copymode(src, dst)


@pytest.fixture
def node(tmp_path, monkeypatch):
    """install(layout) copies a layout under a temporary root; run(**opts) runs kubelet_config there with default arguments."""
    root = str(tmp_path / "root")

    def install(name):
        install_layout(name, root)

    monkeypatch.setattr(kcfg, "DEFAULT_PATHS", tuple(root + p for p in kcfg.DEFAULT_PATHS))
    monkeypatch.setattr(kcfg, "DISTRO_CONFIG_DIRS", tuple(root + p for p in kcfg.DISTRO_CONFIG_DIRS))
    reroot_node(monkeypatch, root)

    def run(check_mode=False, **args):
        opts = dict(path=None, settings=None, content=None, backup=False, mode=0o644, validate=None, config_dir=None,
                    flag_files=[root + p for p in DEFAULT_FLAG_FILES])
        opts.update(args)
        return kcfg.run(Files(), opts, check_mode=check_mode)

    def path(rel):
        return root + rel

    def read(rel):
        return Files().read_text(root + rel)

    return install, run, path, read


def reroot_node(monkeypatch, root):
    """The node's fixed paths under ``root``, and an empty /proc (no daemon runs) there."""
    monkeypatch.setattr(_daemons, "PROC", root + "/proc")
    os.makedirs(root + "/proc", exist_ok=True)
    monkeypatch.setattr(layouts, "OS_RELEASE", root + layouts.OS_RELEASE)
    monkeypatch.setattr(layouts, "GKE_SCRIPTS", tuple(root + p for p in layouts.GKE_SCRIPTS))
    monkeypatch.setattr(layouts, "MICROK8S_CONTAINERD_ARGS", root + layouts.MICROK8S_CONTAINERD_ARGS)
    monkeypatch.setattr(_daemons, "SYSTEMD_UNIT_DIRS", tuple(root + p for p in _daemons.SYSTEMD_UNIT_DIRS))


def codes(result):
    return [(f["severity"], f["code"]) for f in result["findings"]]


def changed_lines(before, after):
    """The lines removed from and added to a file."""
    diff = [line for line in difflib.ndiff(before.splitlines(), after.splitlines()) if line[:1] in "+-"]
    return sorted(line for line in diff if line.startswith("-")), sorted(line for line in diff if line.startswith("+"))


# ---------------------------------------------------------------------------------------------- what the kubelet uses


def test_kubeadm(node):
    install, run, path, _read = node
    install("kubeadm")
    res = run()
    assert res["path"] == path("/var/lib/kubelet/config.yaml") and res["config_dir"] is None and res["dropins"] == []
    eff = res["effective"]
    assert (eff["imageGCHighThresholdPercent"], eff["imageGCLowThresholdPercent"], eff["imageMinimumGCAge"]) == (85, 80, "2m0s")
    assert eff["evictionHard"] == DEFAULT_HARD and eff["evictionPressureTransitionPeriod"] == "5m0s"  # 0s is defaulted in the file
    assert res["flag_overrides"] == [] and codes(res) == [("warning", "gc_high_at_or_above_eviction")]  # true of the kubelet's defaults


def test_kubespray_flags_in_kubelet_env_win(node):
    install, run, path, _read = node
    install("kubespray")
    res = run()
    assert res["path"] == path("/etc/kubernetes/kubelet-config.yaml")
    eff = res["effective"]
    # kubelet_custom_flags in KUBELET_ARGS: the flag map replaces the file's evictionHard, the threshold flag the file's 85
    assert eff["evictionHard"] == {"memory.available": "500Mi", "nodefs.available": "10%", "imagefs.available": "20%"}
    assert (eff["imageGCHighThresholdPercent"], eff["imageGCLowThresholdPercent"]) == (90, 80)
    assert res["sources"]["evictionHard"] == res["sources"]["imageGCHighThresholdPercent"] == path("/etc/kubernetes/kubelet.env")
    assert res["sources"]["imageGCLowThresholdPercent"] == path("/etc/kubernetes/kubelet-config.yaml")
    assert ("warning", "flag_overrides_file") in codes(res) and ("warning", "partial_eviction_hard") in codes(res)


def test_eks_al2023_drop_in_of_nodeadm(node):
    install, run, path, _read = node
    install("eks-al2023")
    res = run()
    assert res["path"] == path("/etc/kubernetes/kubelet/config.json")
    assert res["config_dir"] == path("/etc/kubernetes/kubelet/config.json.d")
    assert res["dropins"] == [path("/etc/kubernetes/kubelet/config.json.d/00-nodeadm.conf")]
    eff = res["effective"]
    assert (eff["imageGCHighThresholdPercent"], eff["imageGCLowThresholdPercent"]) == (75, 60)
    # the drop-in's map entry is added to the file's map (whose evictionHard replaced the defaults)
    assert eff["evictionHard"] == {"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%", "imagefs.available": "20%"}
    assert res["sources"]["imageGCHighThresholdPercent"] == path("/etc/kubernetes/kubelet/config.json.d/00-nodeadm.conf")
    assert codes(res) == [("warning", "dropin_overrides_file"), ("warning", "partial_eviction_hard")]
    assert res["findings"][0]["message"] == (
        "The drop-in %s sets the evictionHard entry imagefs.available, which the kubelet merges into the map of %s after reading it, so edits "
        "of this key in %s do not give the value the kubelet uses (%s)" % (
            path("/etc/kubernetes/kubelet/config.json.d/00-nodeadm.conf"), res["path"], res["path"], '{"memory.available": "100Mi", '
            '"nodefs.available": "10%", "nodefs.inodesFree": "5%", "imagefs.available": "20%"}'))
    assert "imagefs.inodesFree<5% is not monitored" in res["findings"][1]["message"]


def test_rke2_drop_in_is_merged_onto_the_defaults(node):
    install, run, path, _read = node
    install("rke2")
    res = run()
    assert res["path"] is None and res["config_dir"] == path("/var/lib/rancher/rke2/agent/etc/kubelet.conf.d")
    eff = res["effective"]
    assert eff["evictionHard"] == dict(DEFAULT_HARD, **{"nodefs.available": "5%", "imagefs.available": "5%"})
    assert eff["evictionMinimumReclaim"] == {"imagefs.available": "10%", "nodefs.available": "10%"}
    assert (eff["imageGCHighThresholdPercent"], eff["imageGCLowThresholdPercent"]) == (85, 80)
    assert codes(res) == [("info", "config_dir_of_distribution"), ("info", "no_config_file")]


def test_k3s_kubelet_args_and_copied_config(node):
    install, run, path, _read = node
    install("k3s")
    res = run()
    conf_d = path("/var/lib/rancher/k3s/agent/etc/kubelet.conf.d")
    assert res["path"] is None and res["dropins"] == [conf_d + "/00-k3s-defaults.conf", conf_d + "/10-cli-config.conf"]
    eff = res["effective"]
    # 10-cli-config.conf (k3s's copy of kubelet-arg config=) after k3s's defaults, then the kubelet-arg flags
    assert (eff["imageGCHighThresholdPercent"], eff["imageGCLowThresholdPercent"], eff["imageMaximumGCAge"]) == (80, 55, "168h0m0s")
    assert eff["evictionHard"] == dict(DEFAULT_HARD, **{"nodefs.available": "5%", "imagefs.available": "15%"})
    assert eff["containerLogMaxFiles"] == 4
    assert [(f["flag"], f["value"]) for f in res["flag_overrides"]] == [("--container-log-max-files", "4"), ("--image-gc-high-threshold", "80")]
    assert res["sources"]["imageGCHighThresholdPercent"] == path("/etc/rancher/k3s/config.yaml.d/50-gc.yaml")


def test_kops_1_36_config_file_only(node):
    """kOps from 1.36 writes the GC and eviction settings into kubelet.conf; DAEMON_ARGS keeps no flag for them."""
    install, run, path, _read = node
    install("kops-1.36")
    res = run()
    assert res["path"] == path("/var/lib/kubelet/kubelet.conf") and res["flag_overrides"] == []
    eff = res["effective"]
    assert (eff["imageGCHighThresholdPercent"], eff["imageGCLowThresholdPercent"], eff["imageMinimumGCAge"]) == (80, 65, "2m0s")
    assert eff["evictionHard"] == dict(DEFAULT_HARD, **{"imagefs.available": "10%"})
    assert res["sources"]["imageGCHighThresholdPercent"] == res["sources"]["evictionHard"] == path("/var/lib/kubelet/kubelet.conf")
    assert ("warning", "flag_overrides_file") not in codes(res)


def test_aks_flags_only(node):
    install, run, _path, _read = node
    install("aks")
    res = run()
    assert res["path"] is None and res["config_dir"] is None and res["config"] == {}
    eff = res["effective"]
    assert eff["evictionHard"] == {"memory.available": "750Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%"}
    assert (eff["imageGCHighThresholdPercent"], eff["imageGCLowThresholdPercent"]) == (85, 80)
    assert ("info", "no_config_file") in codes(res) and ("warning", "partial_eviction_hard") in codes(res)


def test_kops_flags_in_daemon_args_win(node):
    """kOps (nodeup up to 1.35): the GC and eviction settings of the cluster spec are flags in /etc/sysconfig/kubelet's
    DAEMON_ARGS, applied on top of its --config /var/lib/kubelet/kubelet.conf, whose zero durations are defaulted."""
    install, run, path, _read = node
    install("kops-1.35")
    res = run()
    assert res["path"] == path("/var/lib/kubelet/kubelet.conf") and res["config_dir"] is None and res["dropins"] == []
    eff = res["effective"]
    assert (eff["imageGCHighThresholdPercent"], eff["imageGCLowThresholdPercent"]) == (80, 65)
    assert eff["evictionHard"] == dict(DEFAULT_HARD, **{"imagefs.available": "10%"})
    assert (eff["imageMinimumGCAge"], eff["imageMaximumGCAge"], eff["evictionPressureTransitionPeriod"]) == ("2m0s", "0s", "5m0s")
    flags = path("/etc/sysconfig/kubelet")
    assert [(f["flag"], f["file"]) for f in res["flag_overrides"]] == [
        ("--eviction-hard", flags), ("--image-gc-high-threshold", flags), ("--image-gc-low-threshold", flags)]
    assert res["sources"]["evictionHard"] == res["sources"]["imageGCLowThresholdPercent"] == flags
    assert res["sources"]["imageMaximumGCAge"] == path("/var/lib/kubelet/kubelet.conf")
    assert ("warning", "flag_overrides_file") in codes(res) and ("info", "config_path_assumed") not in codes(res)


# ---------------------------------------------------------------------------------------------- edits


GC = {"imageGCHighThresholdPercent": 80, "imageGCLowThresholdPercent": 70}


def test_kubeadm_edit_changes_only_the_requested_keys(node):
    install, run, path, read = node
    install("kubeadm")
    before = read("/var/lib/kubelet/config.yaml")
    res = run(settings=GC)
    assert res["changed"] is True
    after = read("/var/lib/kubelet/config.yaml")
    assert changed_lines(before, after) == ([], ["+ imageGCHighThresholdPercent: 80", "+ imageGCLowThresholdPercent: 70"])
    assert run(settings=GC)["changed"] is False and read("/var/lib/kubelet/config.yaml") == after


def test_kops_edit_changes_only_the_requested_keys(node):
    """An edit of kubelet.conf changes the requested lines only; a key a DAEMON_ARGS flag sets is written but the flag
    still wins, which the result says (flag_overrides_file) and reports as effective."""
    install, run, path, read = node
    install("kops-1.35")
    before = read("/var/lib/kubelet/kubelet.conf")
    settings = {"imageMaximumGCAge": "168h", "imageGCHighThresholdPercent": 90}
    res = run(settings=settings)
    assert res["changed"] is True
    after = read("/var/lib/kubelet/kubelet.conf")
    assert changed_lines(before, after) == (["- imageMaximumGCAge: 0s"], ["+ imageGCHighThresholdPercent: 90", "+ imageMaximumGCAge: 168h"])
    assert (res["effective"]["imageMaximumGCAge"], res["effective"]["imageGCHighThresholdPercent"]) == ("168h0m0s", 80)
    message = [f["message"] for f in res["findings"] if f["code"] == "flag_overrides_file" and "--image-gc-high-threshold" in f["message"]]
    assert message == ["--image-gc-high-threshold=80 in %s overrides the config file's imageGCHighThresholdPercent 90: the kubelet applies "
                       "flags on top of the config file, so edits of this key in the file have no effect while the flag is set" % path(
                           "/etc/sysconfig/kubelet")]
    assert run(settings=settings)["changed"] is False and read("/var/lib/kubelet/kubelet.conf") == after


def test_kops_1_36_edit(node):
    install, run, _path, read = node
    install("kops-1.36")
    before = read("/var/lib/kubelet/kubelet.conf")
    res = run(settings=GC)
    assert res["changed"] is True and (res["effective"]["imageGCHighThresholdPercent"], res["effective"]["imageGCLowThresholdPercent"]) == (80, 70)
    after = read("/var/lib/kubelet/kubelet.conf")
    assert changed_lines(before, after) == (["- imageGCLowThresholdPercent: 65"], ["+ imageGCLowThresholdPercent: 70"])
    assert run(settings=GC)["changed"] is False and read("/var/lib/kubelet/kubelet.conf") == after


def test_eks_al2023_edit_of_the_main_file_overridden_by_the_drop_in_fails(node):
    install, run, path, read = node
    install("eks-al2023")
    before = read("/etc/kubernetes/kubelet/config.json")
    with pytest.raises(ConfigError) as err:
        run(settings=GC)
    assert str(err.value) == (
        "settings.imageGCHighThresholdPercent cannot take effect: the drop-in %s sets imageGCHighThresholdPercent and the kubelet applies it "
        "after %s; edit or remove it there (or give that drop-in as path), nothing was written."
        % (path("/etc/kubernetes/kubelet/config.json.d/00-nodeadm.conf"), path("/etc/kubernetes/kubelet/config.json")))
    assert read("/etc/kubernetes/kubelet/config.json") == before
    # a key no drop-in sets is edited in the main file
    res = run(settings={"imageMaximumGCAge": "168h"})
    assert res["changed"] is True and res["effective"]["imageMaximumGCAge"] == "168h0m0s"
    assert changed_lines(before, read("/etc/kubernetes/kubelet/config.json"))[0] == ['-     "apiVersion": "kubelet.config.k8s.io/v1beta1"']


def test_eks_al2023_edit_of_the_drop_in(node):
    install, run, path, read = node
    install("eks-al2023")
    dropin = path("/etc/kubernetes/kubelet/config.json.d/00-nodeadm.conf")
    before = read("/etc/kubernetes/kubelet/config.json.d/00-nodeadm.conf")
    res = run(path=dropin, settings=GC)
    assert res["changed"] is True and res["effective"]["imageGCHighThresholdPercent"] == 80
    assert changed_lines(before, read("/etc/kubernetes/kubelet/config.json.d/00-nodeadm.conf")) == (
        ['-     "imageGCHighThresholdPercent": 75,', '-     "imageGCLowThresholdPercent": 60,'],
        ['+     "imageGCHighThresholdPercent": 80,', '+     "imageGCLowThresholdPercent": 70,'])
    assert run(path=dropin, settings=GC)["changed"] is False


def test_rke2_needs_a_drop_in_of_its_own(node):
    install, run, path, read = node
    install("rke2")
    with pytest.raises(ConfigError, match="^The kubelet runs without a configuration file, so there is nothing to edit; give path.$"):
        run(settings=GC)
    generated = path("/var/lib/rancher/rke2/agent/etc/kubelet.conf.d/00-rke2-defaults.conf")
    with pytest.raises(ConfigError, match="written by k3s/RKE2 at every start from RKE2's defaults"):
        run(path=generated, settings=GC)
    own = path("/var/lib/rancher/rke2/agent/etc/kubelet.conf.d/50-kubenode-gc.conf")
    content = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
    res = run(path=own, content=content, settings=GC)
    assert res["changed"] is True and res["created"] is True
    assert (res["effective"]["imageGCHighThresholdPercent"], res["effective"]["imageGCLowThresholdPercent"]) == (80, 70)
    assert res["effective"]["evictionHard"]["imagefs.available"] == "5%"
    assert read("/var/lib/rancher/rke2/agent/etc/kubelet.conf.d/50-kubenode-gc.conf") == (
        "apiVersion: kubelet.config.k8s.io/v1beta1\nimageGCHighThresholdPercent: 80\nimageGCLowThresholdPercent: 70\nkind: KubeletConfiguration\n")
    assert run(path=own, settings=GC)["changed"] is False


def test_a_later_drop_in_blocks_an_edit_of_an_earlier_one(node):
    install, run, path, read = node
    install("k3s")
    first = path("/var/lib/rancher/k3s/agent/etc/kubelet.conf.d/05-site.conf")
    with open(first, "w") as f:
        f.write("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n")
    with pytest.raises(ConfigError, match="the drop-in .*/10-cli-config.conf sets imageGCLowThresholdPercent"):
        run(path=first, settings={"imageGCLowThresholdPercent": 50})
    assert read("/var/lib/rancher/k3s/agent/etc/kubelet.conf.d/05-site.conf").endswith("KubeletConfiguration\n")
    res = run(path=first)
    assert res["changed"] is False


def test_read_only_finding_for_a_key_a_drop_in_overrides(node):
    install, run, path, read = node
    install("eks-al2023")
    config = path("/etc/kubernetes/kubelet/config.json")
    text = read("/etc/kubernetes/kubelet/config.json").replace('"maxPods": 58,', '"maxPods": 58,\n    "imageGCLowThresholdPercent": 50,')
    with open(config, "w") as f:
        f.write(text)
    res = run()
    assert ("warning", "dropin_overrides_file") in codes(res)
    message = [f["message"] for f in res["findings"] if f["code"] == "dropin_overrides_file"][0]
    assert message == ("The drop-in %s sets imageGCLowThresholdPercent and the kubelet applies it after %s, so edits of this key in %s do not "
                       "give the value the kubelet uses (60)" % (path("/etc/kubernetes/kubelet/config.json.d/00-nodeadm.conf"), config, config))


def test_kubespray_edit_keeps_every_other_value(node):
    """Byte for byte: kubespray's ``True`` and ``containerRuntimeEndpoint :`` (its template's spacing) stay as written,
    only the lines of the requested keys change."""
    install, run, path, read = node
    install("kubespray")
    before = read("/etc/kubernetes/kubelet-config.yaml")
    assert "failSwapOn: True\n" in before and "\ncontainerRuntimeEndpoint : unix://" in before
    settings = {"imageMaximumGCAge": "168h", "imageGCLowThresholdPercent": 70}
    res = run(settings=settings)
    assert res["changed"] is True and res["effective"]["imageGCLowThresholdPercent"] == 70
    after = read("/etc/kubernetes/kubelet-config.yaml")
    assert changed_lines(before, after) == (["- imageGCLowThresholdPercent: 80"],
                                            ["+ imageGCLowThresholdPercent: 70", "+ imageMaximumGCAge: 168h"])
    outside = [[line for line in text.splitlines(True) if not line.startswith(tuple(settings))] for text in (before, after)]
    assert outside[0] == outside[1]  # every other line, its line ending included
    assert yaml.safe_load(after) == dict(yaml.safe_load(before), **settings)
    assert run(settings=settings)["changed"] is False and read("/etc/kubernetes/kubelet-config.yaml") == after


# ---------------------------------------------------------------------------------------------- the kubelet's rules, piece by piece


def test_dropins_are_read_as_filepath_walkdir_gives_them(tmp_path):
    """Every file whose extension is .conf, subdirectories included, in lexical order of the path's components."""
    for rel in ("20-b.conf", "10-a.conf", "10-a.conf.bak", "README", "15-dir/01-x.conf", "15-dir/notes.txt", ".conf", "a.CONF", "99.conf.d/z.conf"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    names = [os.path.relpath(p, str(tmp_path)) for p in kcfg.dropin_paths(str(tmp_path))]
    assert names == [".conf", "10-a.conf", "15-dir/01-x.conf", "20-b.conf", "99.conf.d/z.conf"]
    assert kcfg.dropin_paths(str(tmp_path), str(tmp_path / "12-new.conf"))[2] == str(tmp_path / "12-new.conf")


def test_dropin_merge_is_a_merge_patch_laid_over_the_file():
    from ansible_collections.kubenode.gc.plugins.module_utils.config import _kubelet_config_policy as kc
    file_cfg = {"evictionHard": {"memory.available": "1Gi"}, "imageGCHighThresholdPercent": 90, "imageGCLowThresholdPercent": 50}
    dropins = [("/d/10.conf", {"kind": "KubeletConfiguration", "evictionHard": {"nodefs.available": "7%"}, "imageGCLowThresholdPercent": 60,
                               "imageMinimumGCAge": "0s"}),
               ("/d/20.conf", {"kind": "KubeletConfiguration", "imageGCLowThresholdPercent": None, "evictionHard": {"imagefs.available": None}})]
    values, sources, errors, _flag_errors = kc.effective(file_cfg, (), dropins)
    assert errors == []
    # maps: entries added to the file's map; null only removes what an earlier drop-in set, never the file's value
    assert values["evictionHard"] == {"memory.available": "1Gi", "nodefs.available": "7%"}
    assert (values["imageGCHighThresholdPercent"], values["imageGCLowThresholdPercent"]) == (90, 50)
    assert values["imageMinimumGCAge"] == 0  # no defaulting after the merge
    assert (sources["evictionHard"], sources["imageGCLowThresholdPercent"], sources["imageGCHighThresholdPercent"]) == ("dropin", "file", "file")


def test_a_dropin_without_kind_stops_the_kubelet():
    from ansible_collections.kubenode.gc.plugins.module_utils.config import _kubelet_config_policy as kc
    with pytest.raises(ConfigError, match="^The kubelet drop-in /d/10.conf has no kind and apiVersion, so the kubelet would not start"):
        kc.plan(None, None, dropins=[("/d/10.conf", "imageGCHighThresholdPercent: 70\n")])


def test_k3s_kubelet_arg_lists():
    from ansible_collections.kubenode.gc.plugins.module_utils.config import _kubelet_flags as kf
    configs = [("/c.yaml", {"kubelet-arg": ["image-gc-high-threshold=90", "config=/x", "--eviction-hard=memory.available<1Gi"]}),
               ("/d/10.yaml", {"kubelet-arg+": ["image-gc-low-threshold=70"]}),
               ("/d/20.yaml", {"kubelet-arg": "container-log-max-files=3"})]
    assert [(f["flag"], f["value"], f["file"]) for f in kf.distro_kubelet_args(configs[:2])] == [
        ("--image-gc-high-threshold", "90", "/c.yaml"), ("--eviction-hard", "memory.available<1Gi", "/c.yaml"),
        ("--image-gc-low-threshold", "70", "/d/10.yaml")]
    assert [f["flag"] for f in kf.distro_kubelet_args(configs)] == ["--container-log-max-files"]  # a later list replaces
    unit = ("[Service]\nExecStart=/usr/local/bin/k3s \\\n    server \\\n\t'--kubelet-arg=image-gc-high-threshold=70' \\\n"
            "\t'--kubelet-arg' 'config-dir=/x' \\\n\n")
    assert [(f["flag"], f["value"]) for f in kf.parse_flag_files([("/k3s.service", unit)])] == [("--image-gc-high-threshold", "70")]


def test_config_dir_discovery(monkeypatch):
    assert kcfg.find_config_dir([{"flag": "--config-dir", "value": "/etc/kubelet.conf.d", "file": "/f"}]) == ("/etc/kubelet.conf.d", "flag")
    assert kcfg.find_config_dir([], isdir=lambda p: "rke2" in p) == ("/var/lib/rancher/rke2/agent/etc/kubelet.conf.d", "distribution")
    assert kcfg.find_config_dir([], isdir=lambda p: False) == (None, None)


# ---------------------------------------------------------------------------------------------- the second set of layouts


def snapshot(root):
    """Every file's bytes under ``root``, to prove a refused edit wrote nothing."""
    out = {}
    for base, _dirs, names in os.walk(root):
        for name in names:
            if not os.path.islink(os.path.join(base, name)):
                with open(os.path.join(base, name), "rb") as f:
                    out[os.path.join(base, name)] = f.read()
    return out


def refused(run, root, **args):
    """The one sentence of a refused edit; every byte under ``root`` unchanged."""
    before = snapshot(root)
    with pytest.raises(ConfigError) as err:
        run(**args)
    assert snapshot(root) == before
    return str(err.value)


def test_microk8s_args_file(node):
    """MicroK8s's args/kubelet: one flag per line, the snap's variables expanded; no configuration file."""
    install, run, path, _read = node
    install("microk8s")
    res = run()
    args = path("/var/snap/microk8s/current/args/kubelet")
    assert res["path"] is None and res["config_dir"] is None
    assert res["root_dir"] == path("/var/snap/microk8s/common/var/lib/kubelet")
    assert res["effective"]["evictionHard"] == {"memory.available": "100Mi", "nodefs.available": "1Gi", "imagefs.available": "1Gi"}
    assert [(f["flag"], f["file"]) for f in res["flag_overrides"]] == [("--eviction-hard", args)]
    assert res["sources"]["evictionHard"] == args
    assert ("info", "no_config_file") in codes(res)


def test_microk8s_running_kubelite(node, tmp_path):
    """kubelite (the kubelet inside MicroK8s) takes the kubelet's flags from the file of its --kubelet-args-file."""
    install, run, path, _read = node
    install("microk8s")
    args = path("/var/snap/microk8s/current/args/kubelet")
    with open(args, "a", encoding="utf-8") as f:
        f.write("--image-gc-high-threshold=75\n")
    FakeProc(path("/proc")).add(4242, ["/snap/microk8s/6089/kubelite", "--kubelet-args-file=" + args, "--start-control-plane=true"])
    res = run()
    assert res["daemon"] == {"pid": 4242, "source": args}
    assert res["effective"]["imageGCHighThresholdPercent"] == 75 and res["root_dir"] == path("/var/snap/microk8s/common/var/lib/kubelet")


def test_gke_config_and_flags_and_refusal(node):
    """GKE: --config /home/kubernetes/kubelet-config.yaml in KUBELET_OPTS of /etc/default/kubelet; configure.sh writes the file at every boot."""
    install, run, path, _read = node
    install("gke")
    res = run()
    config = path("/home/kubernetes/kubelet-config.yaml")
    assert res["path"] == config and res["flag_overrides"] == []
    eff = res["effective"]
    assert (eff["imageGCHighThresholdPercent"], eff["imageGCLowThresholdPercent"], eff["imageMinimumGCAge"]) == (85, 80, "2m0s")
    assert eff["evictionHard"] == {"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%", "pid.available": "10%"}
    assert ("warning", "generated_file") in codes(res)
    msg = refused(run, path(""), settings=GC)
    assert msg.startswith("Not editing %s: GKE's configure.sh writes it at every boot" % config) and msg.endswith("; nothing was written.")


def test_bottlerocket_rendered_files_are_read_never_edited(node):
    install, run, path, _read = node
    install("bottlerocket")
    res = run()
    config = path("/etc/kubernetes/kubelet/config")
    assert res["path"] == config and res["root_dir"] == path("/var/lib/kubelet")
    eff = res["effective"]
    assert (eff["imageGCHighThresholdPercent"], eff["imageGCLowThresholdPercent"], eff["containerLogMaxFiles"]) == (80, 75, 5)
    assert eff["evictionHard"] == {"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%"}
    msg = refused(run, path(""), settings=GC)
    assert msg.startswith("Not editing %s: Bottlerocket renders it from its settings API" % config) and "apiclient set" in msg


def test_k0s_kubelet_config_is_k0s_s(node):
    install, run, path, _read = node
    install("k0s")
    res = run()
    config = path("/var/lib/k0s/kubelet-config.yaml")
    assert res["path"] == config and res["root_dir"] == "/var/lib/k0s/kubelet"
    assert (res["effective"]["imageGCHighThresholdPercent"], res["effective"]["imageGCLowThresholdPercent"]) == (80, 70)
    assert res["effective"]["evictionHard"] == {"imagefs.available": "10%", "memory.available": "200Mi"}
    msg = refused(run, path(""), settings=GC)
    assert msg.startswith("Not editing %s: k0s writes it at every start from its worker profile; change workerProfiles" % config)


def test_kind(node):
    """kind: kubeadm's files with kind's own settings (image GC off, disk eviction at 0%)."""
    install, run, path, _read = node
    install("kind")
    res = run()
    assert res["path"] == path("/var/lib/kubelet/config.yaml") and res["flag_overrides"] == []
    eff = res["effective"]
    assert eff["imageGCHighThresholdPercent"] == 100
    assert eff["evictionHard"] == {"imagefs.available": "0%", "nodefs.available": "0%", "nodefs.inodesFree": "0%"}
    assert ("info", "image_gc_disabled") in codes(res)


def test_template_placeholders_are_no_values(node):
    """A flag whose value is a ${VAR} nothing expands is not reported (a template's, or an unset variable's)."""
    install, run, path, _read = node
    install("aks")
    with open(path("/etc/default/kubelet"), "a", encoding="utf-8") as f:
        f.write('KUBELET_MORE="--container-log-max-files=${LOG_FILES}"\n')
    res = run()
    assert res["effective"]["containerLogMaxFiles"] == 5
    assert "--container-log-max-files" not in [f["flag"] for f in res["flag_overrides"]]


# ---------------------------------------------------------------------------------------------- the running kubelet


ODD = "/srv/odd/kubelet/main.yaml"


@pytest.fixture
def running(node):
    """kubeadm's layout, and a kubelet running with --config, --config-dir and GC flags at places no layout has."""
    install, run, path, read = node
    install("kubeadm")
    os.makedirs(path("/srv/odd/kubelet/conf.d"))
    with open(path(ODD), "w", encoding="utf-8") as f:
        f.write("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nimageGCHighThresholdPercent: 70\n"
                "imageGCLowThresholdPercent: 50\nimageMaximumGCAge: 72h\n")
    with open(path("/srv/odd/kubelet/conf.d/10-gc.conf"), "w", encoding="utf-8") as f:
        f.write("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nimageMinimumGCAge: 5m\n")
    argv = ["/opt/bin/kubelet", "--kubeconfig=/etc/kubernetes/kubelet.conf", "--config", "main.yaml", "--config-dir=" + path("/srv/odd/kubelet/conf.d"),
            "--image-gc-low-threshold=40", "--root-dir", path("/srv/odd/root")]
    FakeProc(path("/proc")).add(777, argv, cwd=path("/srv/odd/kubelet"))
    return install, run, path, read


def test_running_kubelet_is_the_truth(running):
    _install, run, path, _read = running
    res = run()
    assert res["daemon"] == {"pid": 777, "source": "/proc/777/cmdline"}
    assert res["path"] == path(ODD) and res["config_dir"] == path("/srv/odd/kubelet/conf.d")  # --config relative to the kubelet's cwd
    assert res["dropins"] == [path("/srv/odd/kubelet/conf.d/10-gc.conf")] and res["root_dir"] == path("/srv/odd/root")
    eff = res["effective"]
    assert (eff["imageGCHighThresholdPercent"], eff["imageGCLowThresholdPercent"]) == (70, 40)
    assert (eff["imageMinimumGCAge"], eff["imageMaximumGCAge"]) == ("5m0s", "72h0m0s")
    assert res["sources"]["imageGCLowThresholdPercent"] == "/proc/777/cmdline"
    # the flag files say another --config: a finding names both
    differs = [f["message"] for f in res["findings"] if f["code"] == "daemon_differs_from_files"]
    assert "the running kubelet (pid 777) runs with --config=%s, but the flag files give --config=%s (in %s)" % (
        path(ODD), path("/var/lib/kubelet/config.yaml"), path("/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf")) in differs[0]


def test_running_kubelet_refuses_edits_that_cannot_take_effect(running):
    _install, run, path, _read = running
    kubeadm = path("/var/lib/kubelet/config.yaml")
    assert refused(run, path(""), path=kubeadm, settings=GC) == (
        "Not editing %s: the running kubelet (pid 777) reads %s (its --config), not %s, so the edit would not take effect; nothing was written."
        % (kubeadm, path(ODD), kubeadm))
    assert refused(run, path(""), settings={"imageGCLowThresholdPercent": 60}) == (
        "settings.imageGCLowThresholdPercent cannot take effect: the running kubelet (pid 777) has --image-gc-low-threshold=40 on its command "
        "line (/proc/777/cmdline), which overrides the file; nothing was written.")
    res = run(path=kubeadm)
    assert ("warning", "daemon_reads_other_file") in codes(res)
    res = run(settings={"imageGCHighThresholdPercent": 65})  # a key no flag sets, in the file the kubelet reads
    assert res["changed"] is True and res["path"] == path(ODD) and res["effective"]["imageGCHighThresholdPercent"] == 65


def test_an_untrusted_kubelet_is_ignored_and_named(node):
    """Issue 39: a process named kubelet that is not root's (alone, or with a lower pid than root's) is not the kubelet:
    alone, the flag files and default paths decide, as when none runs; beside root's, root's is the truth."""
    install, run, path, _read = node
    install("kubeadm")
    theirs = path("/home/u/kubelet.yaml")
    os.makedirs(os.path.dirname(theirs))
    with open(theirs, "w", encoding="utf-8") as f:
        f.write("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nimageGCHighThresholdPercent: 100\n")
    procs = FakeProc(path("/proc"))
    procs.add(12, ["/home/u/kubelet", "--config", theirs], uid=65534, exe_owner=65534)
    res = run()
    assert res["daemon"] is None and res["path"] == path("/var/lib/kubelet/config.yaml")
    assert res["effective"]["imageGCHighThresholdPercent"] != 100
    (finding,) = [f for f in res["findings"] if f["code"] == "untrusted_daemon_process"]
    assert finding["severity"] == "warning" and finding["message"].startswith(
        "Process 12 named kubelet, run by uid 65534 (nobody) from %s, is ignored as the kubelet: it does not run as root;" % path(
            "/proc/exe/12-kubelet"))
    procs.add(31, ["/usr/bin/kubelet", "--config", path("/var/lib/kubelet/config.yaml")])
    res = run(settings={"imageGCHighThresholdPercent": 90})
    assert res["daemon"] == {"pid": 31, "source": "/proc/31/cmdline"} and res["changed"] is True
    assert res["path"] == path("/var/lib/kubelet/config.yaml") and "untrusted_daemon_process" in [f["code"] for f in res["findings"]]
    assert "imageGCHighThresholdPercent: 100" in open(theirs, encoding="utf-8").read()


def test_running_kubelet_without_config(node):
    install, run, path, _read = node
    install("kubeadm")
    FakeProc(path("/proc")).add(31, ["kubelet", "--eviction-hard=memory.available<1Gi"])
    res = run()
    assert res["path"] is None and res["effective"]["evictionHard"] == {"memory.available": "1Gi"}
    assert ("info", "no_config_file") in codes(res)
