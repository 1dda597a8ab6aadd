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

from ansible_collections.kubenode.gc.plugins.module_utils._common import params_for
from ansible_collections.kubenode.gc.plugins.module_utils._errors import ConfigError
from ansible_collections.kubenode.gc.plugins.module_utils.config import _runtime_config as rcfg
from ansible_collections.kubenode.gc.plugins.module_utils.config import _runtime_config_policy as rc
from ansible_collections.kubenode.gc.plugins.modules import runtime_config
from tests.unit.plugins.module_utils.test__kubelet_layouts import FakeProc, Files, install_layout, refused, reroot_node


@pytest.fixture
def node(tmp_path, monkeypatch):
    root = str(tmp_path / "root")
    reroot_node(monkeypatch, root)
    for name in ("CONTAINERD_PATH", "CRIO_PATH", "STORAGE_PATH", "DROPIN_DIR", "K0S_CONTAINERD_CONFIG"):
        monkeypatch.setattr(rc, name, root + getattr(rc, name))
    monkeypatch.setattr(rc, "DISTRO_CONTAINERD_PATHS", tuple(root + p for p in rc.DISTRO_CONTAINERD_PATHS))
    monkeypatch.setattr(rc, "CONTAINERD_PATHS", (rc.CONTAINERD_PATH,) + rc.DISTRO_CONTAINERD_PATHS + (rc.K0S_CONTAINERD_CONFIG,))

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
    expected = dict(program="k3s", who="k3s runs containerd with", root="/srv/k3s/agent/containerd", state="/run/k3s/containerd")
    assert rc.distro_containerd("/srv/k3s/agent/etc/containerd/config.toml") == expected
    assert rc.distro_containerd("/etc/containerd/config.toml") is None


@pytest.mark.parametrize("version", [3, 4])
def test_kubespray_containerd_versions_3_and_4(node, version):
    install, run, path, read = node
    install("containerd-kubespray-v%d" % version)
    config = path("/etc/containerd/config.toml")
    res = run(runtime="containerd", path=config)
    assert res["current"] == dict(discard_unpacked_layers=False, root=path("/var/lib/containerd"), state=path("/run/containerd"), snapshotter="overlayfs",
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
    from ansible_collections.kubenode.gc.plugins.module_utils.cri._image_pin_policy import DROPIN_HEADER  # pylint: disable=import-outside-toplevel
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


# ---------------------------------------------------------------------------------------------- the second set of layouts


def test_microk8s_containerd(node):
    """MicroK8s: containerd's flags in args/containerd (snap variables expanded); containerd.toml is rendered from the
    template at every start, so the template is the file to edit, and its ${VAR} placeholders are no values."""
    install, run, path, read = node
    install("microk8s")
    res = run(query_runtime=False)
    config, template = path("/var/snap/microk8s/current/args/containerd.toml"), path("/var/snap/microk8s/current/args/containerd-template.toml")
    assert res["resolved_path"] == config
    assert res["current"] == dict(discard_unpacked_layers=False, root=path("/var/snap/microk8s/common/var/lib/containerd"),
                                  state=path("/var/snap/microk8s/common/run/containerd"),
                                  snapshotter="overlayfs", sandbox_image="registry.k8s.io/pause:3.7", config_version=2)
    assert codes(res) == [("warning", "generated_file"), ("info", "root_from_command_line"), ("info", "state_from_command_line")]
    assert refused(run, path(""), query_runtime=False, settings={"sandbox_image": "registry.k8s.io/pause:3.10"}) == (
        "Not editing %s: MicroK8s generates it from %s at every start; edit %s instead; nothing was changed." % (config, template, template))
    res = run(query_runtime=False, path=template)
    assert res["current"]["snapshotter"] is None and res["current"]["sandbox_image"] == "registry.k8s.io/pause:3.7"
    assert ("info", "template_placeholder") in codes(res) and ("warning", "daemon_reads_other_file") not in codes(res)
    res = run(query_runtime=False, path=template, settings={"sandbox_image": "registry.k8s.io/pause:3.10"})
    assert res["files"] == [template] and 'snapshotter = "${SNAPSHOTTER}"' in read("/var/snap/microk8s/current/args/containerd-template.toml")


def test_k0s_containerd(node):
    install, run, path, _read = node
    install("k0s")
    res = run(query_runtime=False)
    config = path("/etc/k0s/containerd.toml")
    assert res["resolved_path"] == config
    # k0s's command line (--root /var/lib/k0s/containerd --state /run/k0s/containerd); the sandbox image from its CRI import
    assert res["current"] == dict(discard_unpacked_layers=False, root="/var/lib/k0s/containerd", state="/run/k0s/containerd", snapshotter="overlayfs",
                                  sandbox_image="quay.io/k0sproject/pause:3.10", config_version=2)
    msg = refused(run, path(""), query_runtime=False, settings={"snapshotter": "native"})
    assert msg.startswith("Not editing %s: k0s writes it at every start (k0s_managed=true); put the settings in a file of /etc/k0s/containerd.d/" % config)


def test_flatcar_containerd_config_of_its_unit(node):
    """Flatcar: containerd reads /usr/share/containerd/config.toml through CONTAINERD_CONFIG in its unit; a file at
    containerd's default path would never be read, so the module does not create one."""
    install, run, path, read = node
    install("flatcar")
    res = run(query_runtime=False)
    assert res["resolved_path"] == path("/usr/share/containerd/config.toml")
    cur = res["current"]
    assert (cur["root"], cur["state"], cur["snapshotter"]) == (path("/var/lib/containerd"), path("/run/containerd"), "overlayfs")
    etc = path("/etc/containerd/config.toml")
    assert refused(run, path(""), query_runtime=False, path=etc, content="version = 2\n", settings={"snapshotter": "native"}) == (
        "Not editing %s: containerd as its systemd unit starts it (%s) reads %s (its --config), not %s, so the edit would not take effect; "
        "nothing was changed." % (etc, path("/usr/lib/systemd/system/containerd.service"), path("/usr/share/containerd/config.toml"), etc))
    assert not os.path.exists(etc)
    # Flatcar's documented way: a drop-in pointing CONTAINERD_CONFIG at /etc/containerd/config.toml
    os.makedirs(path("/etc/systemd/system/containerd.service.d"))
    os.makedirs(path("/etc/containerd"))
    with open(path("/etc/systemd/system/containerd.service.d/10-use-custom-config.conf"), "w", encoding="utf-8") as f:
        f.write("[Service]\nEnvironment=CONTAINERD_CONFIG=%s\n" % etc)
    res = run(query_runtime=False, content="version = 2\n", settings={"snapshotter": "native"})
    assert res["files"] == [etc] and read("/etc/containerd/config.toml").startswith("version = 2")


def test_gke_containerd_is_rewritten_at_boot(node):
    install, run, path, _read = node
    install("gke")
    res = run(query_runtime=False)
    assert res["current"]["sandbox_image"].startswith("gke.gcr.io/pause:3.8@sha256:") and codes(res) == [("warning", "generated_file")]
    assert refused(run, path(""), query_runtime=False, settings={"snapshotter": "native"}).startswith(
        "Not editing %s: GKE's configure.sh writes it at every boot" % path("/etc/containerd/config.toml"))


def test_bottlerocket_containerd_read_only(node):
    install, run, path, _read = node
    install("bottlerocket")
    res = run(query_runtime=False)
    assert res["current"]["sandbox_image"] == "602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/pause:3.1-eksbuild.1"
    assert res["current"]["snapshotter"] == "overlayfs" and res["current"]["root"] == path("/var/lib/containerd")
    msg = refused(run, path(""), query_runtime=False, settings={"sandbox_image": "registry.k8s.io/pause:3.10"})
    assert "Bottlerocket renders it from its settings API" in msg and "apiclient set" in msg


def test_kind_containerd(node):
    install, run, path, _read = node
    install("kind")
    res = run(query_runtime=False)
    assert res["current"] == dict(discard_unpacked_layers=True, root="/var/lib/containerd", state="/run/containerd", snapshotter="overlayfs",
                                  sandbox_image="registry.k8s.io/pause:3.10", config_version=2)
    assert res["findings"] == []


# ---------------------------------------------------------------------------------------------- the running runtime


def test_running_containerd_at_odd_places(node):
    """containerd listening on the CRI socket with --config at an odd path and --root/--state flags: the module reads
    that file, reports the flags' root and state, and refuses what cannot take effect."""
    install, run, path, read = node
    install("kind")
    os.makedirs(path("/srv/ctrd"))
    with open(path("/srv/ctrd/main.toml"), "w", encoding="utf-8") as f:
        f.write('version = 2\nroot = "/var/lib/containerd"\n[plugins."io.containerd.grpc.v1.cri"]\n  sandbox_image = "registry.k8s.io/pause:3.9"\n')
    sock = path("/srv/ctrd/c.sock")
    FakeProc(path("/proc")).add(900, ["/opt/ctrd/bin/containerd", "-c", "main.toml", "--root=/data/ctrd", "--state", "/run/ctrd", "--address", sock],
                                cwd=path("/srv/ctrd"), listens=[sock])
    args = dict(cri_endpoint="unix://" + sock, query_runtime=False)
    # query_runtime false: no daemon read, the files of the layout
    assert run(**args)["resolved_path"] == path("/etc/containerd/config.toml")
    args["query_runtime"] = True
    res = run(**args)
    assert res["runtime"] == "containerd" and res["resolved_path"] == path("/srv/ctrd/main.toml")
    assert res["daemon"]["pid"] == 900 and res["daemon"]["flags"]["config"] == path("/srv/ctrd/main.toml")
    assert (res["current"]["root"], res["current"]["state"], res["current"]["sandbox_image"]) == ("/data/ctrd", "/run/ctrd", "registry.k8s.io/pause:3.9")
    assert ("info", "root_from_command_line") in codes(res) and ("info", "state_from_command_line") in codes(res)
    assert refused(run, path(""), settings={"root": "/data/other"}, **args) == (
        "settings.root cannot take effect: the running containerd (pid 900) runs with --root /data/ctrd, which wins over %s; nothing was changed."
        % path("/srv/ctrd/main.toml"))
    etc = path("/etc/containerd/config.toml")
    assert refused(run, path(""), path=etc, settings={"snapshotter": "native"}, **args) == (
        "Not editing %s: the running containerd (pid 900) reads %s (its --config), not %s, so the edit would not take effect; nothing was changed."
        % (etc, path("/srv/ctrd/main.toml"), etc))
    res = run(settings={"sandbox_image": "registry.k8s.io/pause:3.10"}, **args)
    assert res["files"] == [path("/srv/ctrd/main.toml")] and 'sandbox_image = "registry.k8s.io/pause:3.10"' in read("/srv/ctrd/main.toml")


def test_an_untrusted_listener_is_not_believed(node):
    """Issue 39: a containerd another user runs on the socket: its --config is not believed, the layout's file is read,
    and the finding names it."""
    install, run, path, _read = node
    install("kind")
    sock = path("/srv/theirs/c.sock")
    FakeProc(path("/proc")).add(901, ["/home/u/containerd", "--config", path("/srv/theirs/c.toml")], listens=[sock], uid=65534, exe_owner=65534)
    res = run(cri_endpoint="unix://" + sock, query_runtime=True)
    assert res["daemon"] is None and res["resolved_path"] == path("/etc/containerd/config.toml")
    (finding,) = [f for f in res["findings"] if f["code"] == "untrusted_daemon_process"]
    assert finding == dict(severity="warning", code="untrusted_daemon_process", message=(
        "Process 901 named containerd, run by uid 65534 (nobody) from %s, is ignored as the runtime listening on %s: it does not run as root; "
        "kubenode.gc believes only a daemon root runs from a root-owned executable no one else may write." % (path("/proc/exe/901-containerd"), sock)))


def test_running_crio_at_odd_places(node):
    install, run, path, _read = node
    os.makedirs(path("/srv/crio/conf.d"))
    with open(path("/srv/crio/crio.conf"), "w", encoding="utf-8") as f:
        f.write('[crio]\nroot = "/data/crio"\n[crio.image]\npause_image = "registry.k8s.io/pause:3.9"\n')
    with open(path("/srv/crio/conf.d/50-x.conf"), "w", encoding="utf-8") as f:
        f.write('[crio]\nrunroot = "/run/odd"\n')
    with open(path("/srv/crio/storage.conf"), "w", encoding="utf-8") as f:
        f.write('[storage]\ndriver = "overlay"\ngraphroot = "/data/crio"\nrunroot = "/run/odd"\n')
    sock = path("/srv/crio/crio.sock")
    FakeProc(path("/proc")).add(950, ["/usr/local/bin/crio", "--config", path("/srv/crio/crio.conf"), "-d", path("/srv/crio/conf.d"),
                                      "--pause-image=registry.k8s.io/pause:3.8"],
                                environ={"CONTAINERS_STORAGE_CONF": path("/srv/crio/storage.conf")}, listens=[sock])
    install("crio-package")  # the package's files at the default paths, which this cri-o does not read
    res = run(cri_endpoint=sock, query_runtime=True)
    assert res["runtime"] == "crio" and res["resolved_path"] == path("/srv/crio/crio.conf")
    assert res["current"] == dict(graphroot="/data/crio", runroot="/run/odd", imagestore=None, driver="overlay", pause_image="registry.k8s.io/pause:3.8")
    assert ("info", "pause_image_from_command_line") in codes(res)
    assert refused(run, path(""), cri_endpoint=sock, query_runtime=True, settings={"pause_image": "registry.k8s.io/pause:3.10"}).startswith(
        "settings.pause_image cannot take effect: the running cri-o (pid 950) runs with --pause-image registry.k8s.io/pause:3.8, which wins")
    storage = path("/etc/containers/storage.conf")
    assert refused(run, path(""), cri_endpoint=sock, query_runtime=True, storage_path=storage, settings={"graphroot": "/data/x"}) == (
        "Not editing %s: the running cri-o (pid 950) reads %s (its CONTAINERS_STORAGE_CONF), not %s, so the edit would not take effect; "
        "nothing was changed." % (path("/etc/containers/storage.conf"), path("/srv/crio/storage.conf"), path("/etc/containers/storage.conf")))
