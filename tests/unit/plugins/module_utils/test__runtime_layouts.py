# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""runtime_config on real node layouts (fixtures/layouts/<name>, rendered from each distribution's public source).

The effective values are compared with the real daemons' own in tests/integration/test_runtime_layouts.py
(``containerd config dump``, ``crio config``); here: discovery, generated files, cri-o drop-ins as cri-o reads
them (filepath.Walk: every file, any name, lexical order), the package layout without crio.conf, config version 4.
"""

import os

import pytest

from ansible_collections.kubenode.gc.plugins.module_utils import _runtime_config as rcfg
from ansible_collections.kubenode.gc.plugins.module_utils import _runtime_config_policy as rc
from ansible_collections.kubenode.gc.plugins.module_utils._common import params_for
from ansible_collections.kubenode.gc.plugins.module_utils._errors import ConfigError
from ansible_collections.kubenode.gc.plugins.modules import runtime_config
from tests.unit.plugins.module_utils.test__kubelet_layouts import Files, install_layout


@pytest.fixture
def node(tmp_path, monkeypatch):
    root = str(tmp_path / "root")

    def install(name):
        install_layout(name, root)

    def run(**params):
        params.setdefault("query_runtime", False)
        opts = rcfg.options(params_for(runtime_config.ARGUMENT_SPEC, **params))
        return rcfg.run(Files(), opts)

    monkeypatch.setattr(rc, "MCO_CURRENT_CONFIG", root + rc.MCO_CURRENT_CONFIG)
    return install, run, (lambda rel: root + rel), (lambda rel: Files().read_text(root + rel))


def codes(result):
    return [(f["severity"], f["code"]) for f in result["findings"]]


# ---------------------------------------------------------------------------------------------- containerd


@pytest.mark.parametrize("name, program", [("k3s", "k3s"), ("rke2", "RKE2")])
def test_k3s_and_rke2_containerd(node, name, program):
    install, run, path, read = node
    install("containerd-" + name)
    config = path("/var/lib/rancher/%s/agent/etc/containerd/config.toml" % name)
    res = run(runtime="containerd", path=config)
    cur = res["current"]
    # root and state from the command line k3s/RKE2 give containerd, which wins over the file
    assert (cur["root"], cur["state"]) == (path("/var/lib/rancher/%s/agent/containerd" % name), "/run/k3s/containerd")
    assert cur["snapshotter"] == "overlayfs" and cur["sandbox_image"].endswith("rancher/mirrored-pause:3.6")
    assert codes(res) == [("warning", "generated_file"), ("info", "root_from_command_line"), ("info", "state_from_command_line")]
    before = read("/var/lib/rancher/%s/agent/etc/containerd/config.toml" % name)
    with pytest.raises(ConfigError) as err:
        run(runtime="containerd", path=config, settings={"snapshotter": "native"})
    assert str(err.value) == (
        "Not editing %s: its header says it is generated (DO NOT EDIT) by %s at every start; put the settings in %s instead (a copy of the "
        "generated file with your changes); nothing was changed." % (config, program, os.path.join(os.path.dirname(config), "config.toml.tmpl")))
    with pytest.raises(ConfigError, match="^settings.root cannot take effect: %s runs containerd with --root " % program):
        run(runtime="containerd", path=config, settings={"root": "/data/containerd"})
    assert read("/var/lib/rancher/%s/agent/etc/containerd/config.toml" % name) == before


def test_default_arguments_find_rke2_and_k3s(monkeypatch):
    present = {rc.DISTRO_CONTAINERD_PATHS[1]}
    assert rc.containerd_path(lambda p: p in present) == "/var/lib/rancher/k3s/agent/etc/containerd/config.toml"
    assert rc.detect_runtime(None, [], exists=lambda p: p in present) == "containerd"
    assert rc.containerd_path(lambda p: True) == rc.CONTAINERD_PATH
    assert rc.detect_runtime(None, [], exists=lambda p: p == rc.DROPIN_DIR) == "crio"  # a cri-o package layout: drop-ins only


def test_data_dir_of_k3s_gives_root():
    expected = dict(program="k3s", root="/srv/k3s/agent/containerd", state="/run/k3s/containerd")
    assert rc.distro_containerd("/srv/k3s/agent/etc/containerd/config.toml") == expected
    assert rc.distro_containerd("/etc/containerd/config.toml") is None


@pytest.mark.parametrize("version", [3, 4])
def test_kubespray_containerd_versions_3_and_4(node, version):
    install, run, path, read = node
    install("containerd-kubespray-v%d" % version)
    config = path("/etc/containerd/config.toml")
    res = run(runtime="containerd", path=config)
    assert res["current"] == dict(root=path("/var/lib/containerd"), state=path("/run/containerd"), snapshotter="overlayfs",
                                  sandbox_image="registry.k8s.io/pause:3.10", pinned_images=[], config_version=version)
    assert codes(res) == ([("info", "config_version_4")] if version == 4 else [])
    before = read("/etc/containerd/config.toml")
    settings = {"root": "/data/containerd", "pinned_images": ["docker.io/library/busybox:1.36"]}
    res = run(runtime="containerd", path=config, settings=settings)
    assert res["changed"] is True and res["current"]["root"] == "/data/containerd"
    assert res["current"]["pinned_images"] == ["docker.io/library/busybox:1.36"]
    after = read("/etc/containerd/config.toml")
    assert after.replace('root = "/data/containerd"', 'root = "%s"' % path("/var/lib/containerd")).replace(
        "\n    'kubenode-gc/docker.io/library/busybox:1.36' = 'docker.io/library/busybox:1.36'", "") == before
    assert run(runtime="containerd", path=config, settings=settings)["changed"] is False


# ---------------------------------------------------------------------------------------------- cri-o


def test_crio_reads_every_dropin_whatever_its_name(tmp_path):
    for rel in ("10-crio.conf", "00-default", "99-z.conf.bak", "sub/50-x", ".hidden"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    assert [os.path.relpath(p, str(tmp_path)) for p in rcfg.crio_dropins(str(tmp_path))] == [
        ".hidden", "00-default", "10-crio.conf", "99-z.conf.bak", "sub/50-x"]
    assert rcfg.crio_dropins(str(tmp_path / "none")) == []


def test_openshift_crio(node):
    install, run, path, read = node
    install("crio-openshift")
    args = dict(runtime="crio", path=path("/etc/crio/crio.conf"), storage_path=path("/etc/containers/storage.conf"),
                dropin_dir=path("/etc/crio/crio.conf.d"))
    res = run(**args)
    assert res["current"]["pause_image"].startswith("quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:")  # from 00-default
    assert res["current"]["graphroot"] == path("/var/lib/containers/storage") and res["current"]["driver"] == "overlay"
    assert codes(res) == [("warning", "generated_file")] * 2  # storage.conf and 00-default
    assert sorted(f["message"].split(" ")[0] for f in res["findings"]) == [path("/etc/containers/storage.conf"), path("/etc/crio/crio.conf.d/00-default")]
    assert all("the OpenShift Machine Config Operator writes it" in f["message"] for f in res["findings"])
    before = read("/etc/containers/storage.conf")
    with pytest.raises(ConfigError, match=r"^Not editing %s: the OpenShift Machine Config Operator writes it \(and puts it back\); change it "
                                          r"through a ContainerRuntimeConfig or MachineConfig instead; nothing was changed\.$" % path(
                                              "/etc/containers/storage.conf")):
        run(settings={"graphroot": "/data/storage"}, **args)
    assert read("/etc/containers/storage.conf") == before


def test_mco_owned_file_without_a_header():
    mco = rc.mco_files('{"spec": {"config": {"storage": {"files": [{"path": "/etc/crio/crio.conf"}]}}}}')
    assert rc.generated_by("/etc/crio/crio.conf", "[crio]\n", mco).startswith("the OpenShift Machine Config Operator writes it")
    assert rc.generated_by("/etc/crio/crio.conf", "[crio]\n", rc.mco_files("not json")) is None
    assert rc.generated_by("/etc/crio/crio.conf", "# Managed by hand.\n# DO NOT EDIT without a ticket\n[crio]\n").startswith(
        "its header says it is generated (DO NOT EDIT); change what generates it")
    assert rc.generated_by("/etc/crio/crio.conf", "[crio]\n# DO NOT EDIT further down is no header\n") is None
    # kubenode.gc's own drop-ins (image_pin's header says "do not edit") are not another program's generated files
    from ansible_collections.kubenode.gc.plugins.module_utils._image_pin_policy import DROPIN_HEADER  # pylint: disable=import-outside-toplevel
    assert rc.generated_by("/etc/crio/crio.conf.d/99-kubenode-gc-pinned.conf", DROPIN_HEADER + "\n[crio.image]\n") is None


def test_crio_package_layout_without_crio_conf(node):
    install, run, path, read = node
    install("crio-package")
    args = dict(runtime="crio", path=path("/etc/crio/crio.conf"), storage_path=path("/etc/containers/storage.conf"),
                dropin_dir=path("/etc/crio/crio.conf.d"))
    res = run(**args)
    assert res["current"]["pause_image"] is None and res["current"]["graphroot"] == "/var/lib/containers/storage"
    res = run(settings={"pause_image": "registry.k8s.io/pause:3.10"}, **args)
    assert res["changed"] is True and res["files"] == [path("/etc/crio/crio.conf")]
    assert read("/etc/crio/crio.conf") == '[crio.image]\npause_image = "registry.k8s.io/pause:3.10"\n'
    assert res["current"]["pause_image"] == "registry.k8s.io/pause:3.10"
    assert run(settings={"pause_image": "registry.k8s.io/pause:3.10"}, **args)["changed"] is False
