# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""kubenode.gc.cri_info against every real runtime, cross-checked with its own tool (ctr, crictl) and statvfs."""

import os
import re
import subprocess
import sys

import pytest

from devtools import runtimes
from devtools.containerd import EmbeddedContainerd
from devtools.grpc_server import GrpcServer
from devtools.images import ImageSpec

from tests.integration.expectations import expect, rpc_calls

pytestmark = pytest.mark.runtimes("every")

RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{9}Z$")
LIST_RPCS = {"Version": 1, "Status": 1, "ImageFsInfo": 1, "ListImages": 1, "ListContainers": 1, "ListPodSandbox": 1}


@pytest.fixture
def scene(runtime):
    """Two pods, containers in every state, used and unused images (one sharing no layer)."""
    ids = runtime.pull_images(
        [
            ImageSpec("app-run:1", size=2 << 20),
            ImageSpec("app-exit:1", size=1 << 20, share_base=False),
            ImageSpec(["app-created:1", "registry.example/team/alias:v1"], size=1 << 20),
            ImageSpec("unused:1", size=3 << 20),
        ]
    )
    web = runtime.run_pod("web", namespace="shop", uid="uid-web")
    batch = runtime.run_pod("batch", namespace="jobs", uid="uid-batch")
    containers = {
        "running": runtime.add_container(web, "server", "app-run:1", "running"),
        "exited": runtime.add_container(batch, "job", "app-exit:1", "exited"),
        "created": runtime.add_container(web, "sidecar", "registry.example/team/alias:v1", "created"),
    }
    return {"ids": ids, "pods": {"web": web[0], "batch": batch[0]}, "containers": containers}


def test_reports_exactly_what_the_runtime_holds(ansible, runtime, scene, interpreter):
    res = ansible.module("kubenode.gc.cri_info", {"cri_endpoint": runtime.endpoint}, interpreter=interpreter)
    assert not res.get("failed"), res.get("msg")
    assert res["changed"] is False

    want = expect(runtime)
    # runtime
    assert res["runtime"]["name"] == want.runtime_name
    assert res["runtime"]["version"] == runtime.version
    assert res["runtime"]["api_version"] == "v1"
    assert res["runtime"]["endpoint"] == runtime.endpoint
    assert res["runtime"]["sandbox_image"] == runtime.sandbox_image

    # images: exactly what the runtime's own tool lists, with the right flags
    refs = runtime.image_refs()
    assert {i["id"] for i in res["images"]} == refs["ids"]
    assert {t for i in res["images"] for t in i["repo_tags"]} == refs["tags"]
    assert all(i["id"].startswith("sha256:") != want.bare_hex_ids for i in res["images"])
    by_tag = {t: i for i in res["images"] for t in i["repo_tags"]}
    ids = scene["ids"]
    assert by_tag["docker.io/library/app-run:1"]["id"] == ids["app-run:1"]
    assert by_tag["docker.io/library/app-run:1"]["used_by"] == [scene["containers"]["running"]]
    assert by_tag["docker.io/library/app-exit:1"]["used_by"] == [scene["containers"]["exited"]]
    # referenced through its second tag only
    assert by_tag["docker.io/library/app-created:1"] is by_tag["registry.example/team/alias:v1"]
    assert by_tag["docker.io/library/app-created:1"]["used_by"] == [scene["containers"]["created"]]
    assert by_tag["docker.io/library/unused:1"]["in_use"] is False and by_tag["docker.io/library/unused:1"]["used_by"] == []
    assert [i["in_use"] for i in res["images"]].count(True) == 3
    pause = by_tag[runtime.sandbox_image]
    assert pause["sandbox_image"] is True and pause["in_use"] is False
    assert pause["pinned"] is want.sandbox_pinned
    assert [i["sandbox_image"] for i in res["images"]].count(True) == 1
    assert [i["pinned"] for i in res["images"]].count(True) == (1 if want.sandbox_pinned else 0)
    assert by_tag["docker.io/library/unused:1"]["size"] > 3 << 20
    assert all(bool(i["repo_digests"]) is want.repo_digests for i in res["images"])

    # containers and sandboxes: together exactly what the runtime's own tool lists
    assert {c["id"] for c in res["containers"]} | {s["id"] for s in res["sandboxes"]} == runtime.container_ids()
    by_id = {c["id"]: c for c in res["containers"]}
    assert {by_id[cid]["state"] for cid in scene["containers"].values()} == {"running", "exited", "created"}
    for state, cid in scene["containers"].items():
        assert by_id[cid]["state"] == state
    server = by_id[scene["containers"]["running"]]
    assert (server["name"], server["attempt"], server["pod_name"], server["pod_namespace"], server["pod_uid"]) == ("server", 0, "web", "shop", "uid-web")
    assert server["sandbox_id"] == scene["pods"]["web"]
    assert server["image_id"] == ids["app-run:1"]
    if want.image_ref == "digest":
        assert server["image_ref"] in by_tag["docker.io/library/app-run:1"]["repo_digests"]
    else:
        assert server["image_ref"] == ids["app-run:1"]
    assert RFC3339.match(server["created_at"])
    sandboxes = {s["id"]: s for s in res["sandboxes"]}
    assert set(sandboxes) == set(scene["pods"].values())
    batch = sandboxes[scene["pods"]["batch"]]
    assert (batch["name"], batch["namespace"], batch["uid"], batch["attempt"], batch["state"]) == ("batch", "jobs", "uid-batch", 0, "ready")
    assert RFC3339.match(batch["created_at"])

    # imagefs: the tmpfs, with the kubelet's usage from statvfs
    if want.container_filesystems == "split":
        fs, cfs = res["imagefs"]
        assert cfs["kind"] == "container"
        assert cfs["mountpoint"] == runtime.containerfs_mountpoint
        assert cfs["capacity_bytes"] == runtime.containerfs_size
        assert res["split_imagefs"] is True
    elif want.container_filesystems == "same":
        fs, cfs = res["imagefs"]
        assert cfs["kind"] == "container" and cfs["mountpoint"] == fs["mountpoint"]
        assert res["split_imagefs"] is False
    else:
        (fs,) = res["imagefs"]
        assert res["split_imagefs"] is False
    assert fs["kind"] == "image"
    assert fs["mountpoint"] == runtime.imagefs_mountpoint
    assert fs["capacity_bytes"] == runtime.imagefs_size
    st = os.statvfs(runtime.imagefs_mountpoint)
    assert fs["inodes_total"] == st.f_files
    assert fs["inodes_used"] == fs["inodes_total"] - fs["inodes_free"]
    assert fs["usage_percent"] == 100 - (fs["available_bytes"] * 100) // fs["capacity_bytes"]
    # the images really sit there: at least their layers are used
    assert fs["capacity_bytes"] - fs["available_bytes"] > (7 << 20)

    # one call per list, whatever the number of objects
    assert res["rpc_calls"] == rpc_calls(runtime, LIST_RPCS, pods=True)


def test_usage_percent_follows_the_disk(ansible, runtime, interpreter):
    before = ansible.module("kubenode.gc.cri_info", {"cri_endpoint": runtime.endpoint, "gather": ["imagefs"]}, interpreter=interpreter)
    runtime.pull_images([ImageSpec("big:%d" % n, size=12 << 20, share_base=False) for n in range(3)])
    after = ansible.module("kubenode.gc.cri_info", {"cri_endpoint": runtime.endpoint, "gather": ["imagefs"]}, interpreter=interpreter)
    st = os.statvfs(runtime.imagefs_mountpoint)
    expected = 100 - (st.f_bavail * st.f_frsize * 100) // (st.f_blocks * st.f_frsize)
    assert after["imagefs"][0]["usage_percent"] == expected
    # 3 x 12 MiB of unpacked layers on 128 MiB (containerd keeps the packed content too): at least 27 points more
    assert after["imagefs"][0]["usage_percent"] - before["imagefs"][0]["usage_percent"] >= 27
    assert set(after) >= {"imagefs", "split_imagefs"} and not {"images", "runtime", "containers", "sandboxes"} & set(after)
    assert after["rpc_calls"] == {"ImageFsInfo": 1}


def test_rpc_calls_do_not_grow_with_the_node(ansible, runtime):
    runtime.pull_images([ImageSpec("many:%d" % n) for n in range(40)])
    pod = runtime.run_pod("crowd")
    for n in range(6):
        runtime.add_container(pod, "c%d" % n, "many:%d" % n, "created")
    res = ansible.module("kubenode.gc.cri_info", {"cri_endpoint": runtime.endpoint})
    assert len(res["images"]) == 41 and len(res["containers"]) == 6
    assert res["rpc_calls"] == rpc_calls(runtime, LIST_RPCS, pods=True)


def test_gather_images_only_still_knows_usage(ansible, runtime):
    runtime.pull_images([ImageSpec("solo:1"), ImageSpec("idle:1")])
    runtime.add_container(runtime.run_pod("p"), "c", "solo:1", "exited")
    res = ansible.module("kubenode.gc.cri_info", {"cri_endpoint": runtime.endpoint, "gather": ["images"]})
    assert not {"runtime", "imagefs", "containers", "sandboxes"} & set(res)
    in_use = {t: i["in_use"] for i in res["images"] for t in i["repo_tags"]}
    assert in_use == {"docker.io/library/solo:1": True, "docker.io/library/idle:1": False, runtime.sandbox_image: False}
    assert res["rpc_calls"] == rpc_calls(runtime, {"Version": 1, "Status": 1, "ListImages": 1, "ListContainers": 1, "ListPodSandbox": 1}, pods=True)


def test_endpoint_from_environment(ansible, runtime):
    res = ansible.module("kubenode.gc.cri_info", {"gather": ["runtime"]}, task_env={"CONTAINER_RUNTIME_ENDPOINT": runtime.endpoint})
    assert res["runtime"]["endpoint"] == runtime.endpoint
    # no pod here: containerd 2.x's sandbox image comes from the config file it runs with
    assert res["runtime"]["sandbox_image"] == runtime.sandbox_image
    assert res["rpc_calls"] == rpc_calls(runtime, {"Version": 1, "Status": 1}, pods=False)


@pytest.mark.runtimes("one")
def test_check_mode_reads_the_same(ansible, runtime):
    runtime.pull_images([ImageSpec("chk:1")])
    real = ansible.module("kubenode.gc.cri_info", {"cri_endpoint": runtime.endpoint, "gather": ["images"]})
    check = ansible.module("kubenode.gc.cri_info", {"cri_endpoint": runtime.endpoint, "gather": ["images"]}, check=True)
    assert check["images"] == real["images"] and check["changed"] is False


def test_wrong_endpoint_fails_naming_it(ansible, tmp_path, interpreter):
    missing = "unix://%s/nothing-here.sock" % tmp_path
    res = ansible.module("kubenode.gc.cri_info", {"cri_endpoint": missing}, interpreter=interpreter)
    assert res["failed"] is True
    assert res["msg"] == "CRI endpoint %s is unusable for Version: socket %s/nothing-here.sock does not exist." % (missing, tmp_path)
    assert "Traceback" not in res["msg"]


def test_tcp_endpoint_is_refused_in_one_sentence(ansible):
    res = ansible.module("kubenode.gc.cri_info", {"cri_endpoint": "tcp://127.0.0.1:10010"})
    assert res["failed"] is True
    assert res["msg"] == "CRI endpoint 'tcp://127.0.0.1:10010' is not supported: use a unix socket such as unix:///run/containerd/containerd.sock."


def test_not_a_cri_server(ansible, interpreter):
    with GrpcServer() as server:
        res = ansible.module("kubenode.gc.cri_info", {"cri_endpoint": server.endpoint}, interpreter=interpreter)
    assert res["failed"] is True
    assert res["msg"].startswith("CRI endpoint %s does not implement Version of the CRI runtime.v1 API (UNIMPLEMENTED" % server.endpoint)
    assert res["rpc_calls"] == {"Version": 1}


def test_deadline_exceeded(ansible, interpreter):
    with GrpcServer({"Version": ("sleep", 3)}) as server:
        res = ansible.module("kubenode.gc.cri_info", {"cri_endpoint": server.endpoint, "cri_timeout": 0.5}, interpreter=interpreter)
    assert res["failed"] is True
    assert res["msg"] == "CRI endpoint %s did not answer Version within 0.5 seconds (cri_timeout)." % server.endpoint


@pytest.mark.runtimes("one")
def test_non_positive_timeout_is_refused(ansible, runtime):
    res = ansible.module("kubenode.gc.cri_info", {"cri_endpoint": runtime.endpoint, "cri_timeout": 0})
    assert res["failed"] is True and res["msg"] == "cri_timeout must be a positive number of seconds, got 0.0."


@pytest.mark.runtimes("one")
def test_runtime_stopped_mid_life(ansible, runtime_name):
    rt = runtimes.make(runtime_name, imagefs_size="32M")
    rt.start()
    endpoint = rt.endpoint
    rt.stop()
    res = ansible.module("kubenode.gc.cri_info", {"cri_endpoint": endpoint})
    assert res["failed"] is True and res["msg"].startswith("CRI endpoint %s is unusable for Version: " % endpoint)


@pytest.mark.runtimes("one")
def test_missing_libraries_fail_with_install_hint(ansible, runtime, tmp_path):
    bare = tmp_path / "bare"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(bare)], check=True)
    res = ansible.module("kubenode.gc.cri_info", {"cri_endpoint": runtime.endpoint}, interpreter=str(bare / "bin" / "python"))
    assert res["failed"] is True
    assert "Failed to import the required Python library (grpcio and protobuf)" in res["msg"]
    assert "python3-grpcio python3-protobuf" in res["msg"] and "pip install grpcio protobuf" in res["msg"]
    assert "Traceback" not in res["msg"]


DEFAULT_SOCKET = "/run/containerd/containerd.sock"


def test_finds_containerd_at_its_default_path_without_options(ansible, tmp_path):
    if os.path.exists("/etc/crictl.yaml"):
        pytest.skip("/etc/crictl.yaml exists on this machine and would be chosen first")
    from ansible_collections.kubenode.gc.plugins.module_utils.cri._cri import probe_socket

    own = None
    if probe_socket(DEFAULT_SOCKET) is not None:  # nothing answers there: put a real containerd there
        own = EmbeddedContainerd(imagefs_size="32M", socket=DEFAULT_SOCKET)
        own.start()
        own.pull_images([ImageSpec("found-by-default:1")])
    try:
        res = ansible.module("kubenode.gc.cri_info", {"gather": ["runtime", "images"]}, unset_env=("CONTAINER_RUNTIME_ENDPOINT",))
        assert not res.get("failed"), res.get("msg")
        assert res["runtime"]["endpoint"] == "unix://" + DEFAULT_SOCKET
        assert res["runtime"]["name"] == "containerd"
        if own is not None:
            tags = {t for i in res["images"] for t in i["repo_tags"]}
            assert tags == {"docker.io/library/found-by-default:1", own.sandbox_image}
    finally:
        if own is not None:
            own.stop()
            if os.path.exists(DEFAULT_SOCKET):
                os.unlink(DEFAULT_SOCKET)


def test_ansible_doc_renders_from_the_installed_tarball(collections_path):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections_path, ANSIBLE_NOCOLOR="1")
    ansible_doc = os.path.join(os.path.dirname(sys.executable), "ansible-doc")
    out = subprocess.run([ansible_doc, "kubenode.gc.cri_info"], env=env, capture_output=True, text=True, check=True)
    assert "kubenode.gc.cri_info" in out.stdout and "cri_endpoint" in out.stdout and "usage_percent" in out.stdout
    assert collections_path in out.stdout
