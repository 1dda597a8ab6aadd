# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What only a Docker Engine node (cri-dockerd) has, on the harness's real dockerd and cri-dockerd.

The suites of every module run on cri-dockerd like on every other runtime (``runtime`` fixture); these tests prove what
Docker does differently: containers outside Kubernetes (``docker run``) that the CRI does not list but that use images,
Docker's refusal to remove an image such a container starts using during a run, Docker's json-file logs of removed
containers, and dockerd's data root as runtime_config reports it.
"""

import json
import os
import sys

import pytest

from devtools import runtimes
from devtools.images import ImageSpec
from tests.integration.conftest import RUNTIMES, _param

from ansible_collections.kubenode.gc.plugins.module_utils._common import params_for
from ansible_collections.kubenode.gc.plugins.module_utils.cri._cri import CriClient
from ansible_collections.kubenode.gc.plugins.module_utils.gc import _image_gc
from ansible_collections.kubenode.gc.plugins.modules import image_gc

MIB = 1 << 20
DOCKER = [_param(sys.modules[__name__], n) for n in RUNTIMES if n == "cri-dockerd"]


@pytest.fixture(scope="module", params=DOCKER)
def docker_instance(request):
    with runtimes.make(request.param, imagefs_size="128M") as rt:
        yield rt


@pytest.fixture
def docker(docker_instance):
    docker_instance.reset()
    return docker_instance


def gc(ansible, runtime, check=False, **args):
    args.setdefault("cri_endpoint", runtime.endpoint)
    args.setdefault("ledger_path", "")
    args.setdefault("min_age", "0s")
    return ansible.module("kubenode.gc.image_gc", args, check=check, diff=True)


def test_an_image_a_container_outside_kubernetes_uses_is_kept_and_named(ansible, docker):
    """docker run's containers are not in the CRI's ListContainers: image_gc finds them through Docker's API, keeps their
    images (every tag: Docker would untag all but the last before refusing) and names them like a pod's containers."""
    docker.pull_images([ImageSpec(["registry.example/tools:1", "registry.example/tools:latest"], size=MIB), ImageSpec("registry.example/junk:1")])
    docker.docker("run", "-d", "--name", "ci-runner", "--network", "none", "registry.example/tools:1", "-c", "exec sleep 2147483647")
    docker.docker("create", "--name", "ci-stopped", "--network", "none", "registry.example/tools:latest")
    tags = docker.image_refs()["tags"]

    plan = gc(ansible, docker, check=True, mode="prune")
    assert not plan.get("failed"), plan.get("msg")
    assert [r["repo_tags"] for r in plan["removed"]] == [["registry.example/junk:1"]]
    res = gc(ansible, docker, mode="prune")
    assert not res.get("failed"), res.get("msg")
    assert [r["id"] for r in res["removed"]] == [r["id"] for r in plan["removed"]]
    assert res["kept"]["in_use"] == 1 and res["errors"] == []
    assert docker.image_refs()["tags"] == tags - {"registry.example/junk:1"}  # both tags of the used image stay
    assert res["rpc_calls"]["docker.ContainerList"] == 2  # read with the node, and again before the one batch

    listed = gc(ansible, docker, mode="listed", images=["registry.example/tools:*"])
    assert not listed.get("failed"), listed.get("msg")
    assert listed["removed"] == [] and listed["changed"] is False
    (kept,) = listed["listed_kept"]
    assert kept["reason"] == "in_use" and kept["repo_tags"] == ["registry.example/tools:1", "registry.example/tools:latest"]
    assert sorted(kept["containers"], key=lambda c: c["container"]) == [
        {"pod_namespace": None, "pod_name": None, "container": "ci-runner", "state": "running", "running": True, "outside_kubernetes": True},
        {"pod_namespace": None, "pod_name": None, "container": "ci-stopped", "state": "created", "running": False, "outside_kubernetes": True}]
    assert docker.image_refs()["tags"] == tags - {"registry.example/junk:1"}


class LateDockerRun(CriClient):
    """Starts a Docker container (outside Kubernetes) using the image right before RemoveImage reaches cri-dockerd: after
    the run's last container list, as a CI job could."""

    def __init__(self, endpoint, runtime, image):
        super().__init__(endpoint)
        self.runtime, self.image, self.started = runtime, image, False

    def call_async(self, method, **fields):
        if method == "RemoveImage" and not self.started:
            self.started = True
            self.runtime.docker("create", "--name", "late-job", "--network", "none", self.image)
        return super().call_async(method, **fields)


def test_docker_refusing_a_removal_keeps_the_image_and_fails_nothing(docker, tmp_path):
    ids = docker.pull_images([ImageSpec(["registry.example/late:1", "registry.example/late:2"], size=MIB)])
    client = LateDockerRun(docker.endpoint, docker, "registry.example/late:2")
    try:
        opts = _image_gc.options(params_for(image_gc.ARGUMENT_SPEC, mode="prune", min_age="0s", ledger_path="", lock_timeout=5))
        res = _image_gc.run(client, opts)
    finally:
        client.close()
    assert res["removed"] == [] and res["errors"] == [] and res["kept"]["in_use"] == 1
    assert any("Docker refused to remove image" in w and "late" in w for w in res["warnings"])
    # the image is there with at least one tag; Docker removes the other tags before refusing on the last, as it does
    refs = docker.image_refs()
    assert ids["registry.example/late:1"] in refs["ids"] and {"registry.example/late:1", "registry.example/late:2"} & refs["tags"]


def test_container_gc_removes_the_json_logs_of_removed_containers(ansible, docker):
    """Docker keeps a container's log as json-file in its data root (the CRI log path links to it); removing the container
    removes that file: the bytes come back on the data root's filesystem."""
    docker.pull_images([ImageSpec("registry.example/chatty:1")])
    pod = docker.run_pod("chatty", uid="uid-chatty")
    cid = docker.add_container(pod, "talk", "registry.example/chatty:1", "exited",
                               command=["/bin/sh", "-c", "busybox head -c 1500000 /dev/urandom | busybox base64"])
    log_link = os.path.join(pod[1]["log_directory"], "talk", "0.log")
    json_log = os.path.join(docker.root, "containers", cid, "%s-json.log" % cid)
    assert os.path.realpath(log_link) == json_log
    on_disk = os.lstat(json_log).st_blocks * 512
    assert on_disk > 2 * MIB
    st = os.statvfs(docker.root)
    before = (st.f_blocks - st.f_bfree) * st.f_frsize
    res = ansible.module("kubenode.gc.container_gc", dict(cri_endpoint=docker.endpoint, min_age="0s", pod_logs_dir=docker.pod_logs,
                                                          active_pod_uids=[]))
    assert not res.get("failed"), res.get("msg")
    assert cid in [c["id"] for c in res["removed_containers"]]
    # the link went with its pod's log directory (the pod is gone: not in active_pod_uids)
    assert pod[1]["log_directory"] in res["removed_log_paths"] and not os.path.lexists(log_link)
    assert not os.path.exists(json_log) and not os.path.exists(os.path.dirname(json_log))
    st = os.statvfs(docker.root)
    assert before - (st.f_blocks - st.f_bfree) * st.f_frsize >= on_disk


def test_runtime_config_reports_dockerds_data_root_from_its_command_line(ansible, docker):
    res = ansible.module("kubenode.gc.runtime_config", dict(cri_endpoint=docker.endpoint))
    assert not res.get("failed"), res.get("msg")
    assert res["runtime"] == "docker" and res["changed"] is False and res["files"] == []
    cur = res["current"]
    assert (cur["data_root"], cur["data_root_source"], cur["config_file"]) == (docker.root, "command_line", docker.config_path)
    assert cur["docker_endpoint"] == docker.docker_endpoint
    assert res["daemon"]["pid"] == docker.dockerd_pid() and res["daemon"]["flags"]["data-root"] == docker.root
    assert res["findings"] == []
    # editing dockerd's configuration is out of scope: refused in one sentence, nothing written
    with open(docker.config_path, "rb") as f:
        config = f.read()
    edit = ansible.module("kubenode.gc.runtime_config", dict(cri_endpoint=docker.endpoint, settings={"root": "/srv/docker"}))
    assert edit["failed"] is True and edit["changed"] is False and "does not edit dockerd's configuration" in edit["msg"]
    with open(docker.config_path, "rb") as f:
        assert f.read() == config


@pytest.fixture(scope="module", params=DOCKER)
def docker_config_root(request, tmp_path_factory):
    """A second engine whose data root is in its daemon.json (data-root), not on its command line."""
    rt = runtimes.make(request.param, imagefs_size="64M", data_root_in_config=True)
    rt.start()
    try:
        yield rt
    finally:
        rt.stop()


def test_runtime_config_reads_the_data_root_of_daemon_json_and_finds_a_disagreement(ansible, docker_config_root):
    rt = docker_config_root
    res = ansible.module("kubenode.gc.runtime_config", dict(cri_endpoint=rt.endpoint))
    assert not res.get("failed"), res.get("msg")
    assert (res["current"]["data_root"], res["current"]["data_root_source"]) == (rt.root, "config_file")
    assert "data-root" not in res["daemon"]["flags"] and res["findings"] == []
    # daemon.json now names another data root; dockerd runs with the old one until it restarts: the kubelet's image
    # filesystem (what cri-dockerd reports) and that root disagree
    with open(rt.config_path, encoding="utf-8") as f:
        config = json.load(f)
    original = dict(config)
    config["data-root"] = os.path.join(rt.workdir, "new-root")
    with open(rt.config_path, "w", encoding="utf-8") as f:
        json.dump(config, f)
    try:
        res = ansible.module("kubenode.gc.runtime_config", dict(cri_endpoint=rt.endpoint))
        assert not res.get("failed"), res.get("msg")
        assert res["current"]["data_root"] == config["data-root"]
        (finding,) = res["findings"]
        assert (finding["severity"], finding["code"]) == ("warning", "data_root_not_imagefs")
        assert config["data-root"] in finding["message"] and rt.root in finding["message"]
    finally:
        with open(rt.config_path, "w", encoding="utf-8") as f:
            json.dump(original, f)
