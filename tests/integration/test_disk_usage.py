# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""kubenode.gc.disk_usage on every real runtime: each category against the bytes statvfs saw its objects take."""

import os

import pytest

from tests.integration import storage_objects as so

pytestmark = pytest.mark.runtimes("every")

# containerd's bolt database grows in steps while objects are created; that growth lands in the step's statvfs delta
SLACK = 256 * 1024


def near(got, want, what):
    assert abs(got - want) <= 0.1 * want + SLACK, "%s: reported %d bytes, created %d" % (what, got, want)


def by_id(category, key="id"):
    return {o[key]: o for o in category["objects"]}


def image_bytes(cats, name):
    """An image's bytes as the categories count them: its k8s_images object plus the compressed layer blobs of it that
    unpacked_layer_blobs holds (those of its blobs it shares go to the first of their images by name, as in k8s_images)."""
    blobs = sum(o["bytes"] for o in cats["unpacked_layer_blobs"]["objects"] if o["images"][0] == name)
    return by_id(cats["k8s_images"], "name")[name]["bytes"] + blobs


def test_disk_usage_attributes_every_kind(ansible, runtime, runtime_name):
    logs = os.path.join(runtime.imagefs_mountpoint if runtime.kind == "cri-o" else runtime.root, "test-pod-logs")
    kubelet_root = os.path.join(runtime.workdir, "kubelet")
    volume = os.path.join(kubelet_root, "pods", "uid-vol", "volumes", "kubernetes.io~empty-dir", "scratch")
    os.makedirs(volume, exist_ok=True)
    with open(os.path.join(volume, "data"), "wb") as f:
        f.write(os.urandom(so.MIB))
    args = dict(cri_endpoint=runtime.endpoint, pod_logs_dir=logs, kubelet_root_dir=kubelet_root)
    if runtime.kind == "cri-o":
        _crio(ansible, runtime, args)
        return
    if runtime.kind == "docker":
        _docker(ansible, runtime, args)
        return
    made, created = so.create_all(runtime, logs)
    res = ansible.module("kubenode.gc.disk_usage", args, check=True)
    assert not res.get("failed"), res.get("msg")
    assert res["changed"] is False and res["not_visible"] == [] and res["walks_stopped_early"] == []
    cats = res["categories"]
    assert set(cats) == {"k8s_images", "unpacked_layer_blobs", "other_namespace_images", "writable_layers", "container_logs",
                         "stale_ingests", "leased", "unreferenced_snapshots", "unaccounted"}
    # the pulled image's compressed layer blobs are in unpacked_layer_blobs (it is unpacked), the rest in k8s_images
    assert len(cats["unpacked_layer_blobs"]["objects"]) < 10  # all listed: the sums below see every blob
    assert "registry.k8s.io/storage-k8s:1" in {n for o in cats["unpacked_layer_blobs"]["objects"] for n in o["images"]}
    near(image_bytes(cats, "registry.k8s.io/storage-k8s:1"), created["k8s_image"], "k8s image")
    others = by_id(cats["other_namespace_images"], "name")
    near(others["docker.io/library/moby-only:1"]["bytes"], created["moby_image"], "moby image")
    assert others["docker.io/library/moby-only:1"]["namespace"] == "moby"
    near(others["docker.io/library/default-only:1"]["bytes"], created["default_image"], "default image")
    near(cats["other_namespace_images"]["bytes"], created["moby_image"] + created["default_image"], "other_namespace_images")
    near(by_id(cats["writable_layers"])[made["container"]]["bytes"], created["writable"], "writable layer")
    near(cats["container_logs"]["bytes"], created["log"], "container_logs")
    near(cats["stale_ingests"]["bytes"], created["ingest"], "stale_ingests")
    ingest = by_id(cats["stale_ingests"])["stale-ingest-1"]
    assert ingest["namespace"] == "default" and ingest["age_seconds"] >= 2
    leases = by_id(cats["leased"])
    near(leases[made["expired_lease"]]["bytes"], created["expired_lease"], "expired lease")
    assert leases[made["expired_lease"]]["expired"] is True and leases[made["expired_lease"]]["expires"]
    near(leases[made["old_lease"]]["bytes"], created["old_lease"], "lease without expiry")
    assert leases[made["old_lease"]]["expired"] is False and leases[made["old_lease"]]["expires"] is None
    snaps = by_id(cats["unreferenced_snapshots"])
    near(snaps[made["snapshot"]]["bytes"], created["snapshot"], "unreferenced snapshot")
    assert snaps[made["snapshot"]]["namespace"] == "default" and snaps[made["snapshot"]]["gc_root"] is True
    # the rest: what was on the filesystem before the scenario (the sandbox image, containerd's files) and the
    # bolt database's growth, minus the sandbox image the module attributes to k8s_images
    pause = image_bytes(cats, runtime.sandbox_image)
    rest = res["used_bytes"] - sum(created.values()) - pause
    near(cats["unaccounted"]["bytes"], rest, "unaccounted")
    assert sum(c["bytes"] for c in cats.values()) == res["used_bytes"]
    # the kubelet root is on another filesystem: its pod volumes are attributed there
    assert res["nodefs"]["categories"]["pod_volumes"]["objects"][0]["id"] == "uid-vol"
    near(res["nodefs"]["categories"]["pod_volumes"]["bytes"], so.MIB, "pod volumes")
    assert res["rpc_calls"]["ListContainerStats"] == 1
    assert not any(name.startswith("containerd.snapshots.Usage") and n > 20 for name, n in res["rpc_calls"].items())
    # the sizes containerd stored for committed snapshots were kept on the node (containerd/_usage_cache): the next run
    # asks containerd only for the others, and reports the same figures
    again = ansible.module("kubenode.gc.disk_usage", args, check=True)
    assert not again.get("failed"), again.get("msg")
    assert usage_calls(again) < usage_calls(res)
    for name in ("k8s_images", "unpacked_layer_blobs", "other_namespace_images", "leased", "unreferenced_snapshots"):
        assert sized(again["categories"][name]) == sized(cats[name]), name
    kept = [n for n in os.listdir(ansible.node_cache) if n.startswith("usage.")]
    assert kept and all(os.stat(os.path.join(ansible.node_cache, n)).st_mode & 0o777 == 0o600 for n in kept)


def sized(category):
    return category["bytes"], sorted((o.get("id") or o.get("name"), o["bytes"]) for o in category["objects"])


def usage_calls(res):
    return sum(n for name, n in res["rpc_calls"].items() if name.startswith("containerd.snapshots.Usage"))


@pytest.mark.runtimes("one")
def test_disk_usage_walk_limit_says_it_stopped(ansible, runtime):
    logs = os.path.join(runtime.workdir, "many-logs")
    for n in range(5):
        os.makedirs(os.path.join(logs, "ns_pod%d_uid%d" % (n, n), "c"), exist_ok=True)
    res = ansible.module("kubenode.gc.disk_usage", dict(cri_endpoint=runtime.endpoint, pod_logs_dir=logs, walk_limit=3))
    assert not res.get("failed"), res.get("msg")
    assert res["walks_stopped_early"]
    assert any("walk_limit" in w for w in res.get("warnings", []))


def _crio(ansible, runtime, args):
    from devtools.images import ImageSpec

    runtime.pull_images([ImageSpec("registry.k8s.io/storage-k8s:1", size=so.SIZES["k8s_image"])])
    sandbox = runtime.run_pod("storage", namespace="storage-ns")
    cid = runtime.add_container(sandbox, "writer", "registry.k8s.io/storage-k8s:1")
    res = ansible.module("kubenode.gc.disk_usage", args, check=True)
    assert not res.get("failed"), res.get("msg")
    cats = res["categories"]
    # containers/storage's own files are read: images and layers; it has no namespaces, ingests or leases
    assert set(res["not_visible"]) == {"other_namespace_images", "stale_ingests", "leased"}
    assert all(cats[name] is None for name in res["not_visible"])
    assert cats["unreferenced_snapshots"]["bytes"] == 0  # every layer belongs to an image or a container
    # the image's layer chain (uncompressed) and its own data: the filler dominates, shared busybox goes to the first image by name
    got = by_id(cats["k8s_images"], "name")["registry.k8s.io/storage-k8s:1"]["bytes"]
    assert so.SIZES["k8s_image"] <= got <= so.SIZES["k8s_image"] * 1.1 + 4 * so.MIB
    # the harness's cri-o splits the image filesystem: its writable layers are on the container filesystem
    assert cats["writable_layers"]["bytes"] == 0 and cid
    assert any("container filesystem" in w for w in res.get("warnings", []))
    assert sum(c["bytes"] for c in cats.values() if c) == res["used_bytes"]
    assert any("cannot see" in w for w in res.get("warnings", []))


def _docker(ansible, runtime, args):
    """Every kind of object a Docker node holds (docker_objects), each category within 10 % of ``docker system df -v`` and of
    the bytes statvfs saw it take; layers shared between images counted once; every byte of the data root attributed."""
    from tests.integration import docker_objects as do

    made, created = do.create_all(runtime)
    res = ansible.module("kubenode.gc.disk_usage", args, check=True)
    assert not res.get("failed"), res.get("msg")
    assert res["changed"] is False and res["not_visible"] == [] and res["walks_stopped_early"] == []
    assert res["mountpoint"] == runtime.root
    cats = res["categories"]
    assert list(cats) == ["k8s_images", "writable_layers", "non_k8s_containers", "container_logs", "volumes", "build_cache", "unaccounted"]
    docker = do.system_df(runtime)
    names = {c["Id"]: c["Names"][0].lstrip("/") for c in runtime.api.containers()}
    # images: Docker's own total (each layer once), which the statvfs of the pull matches; the sum of the CRI's image
    # sizes counts the base layer they share once per image
    near(cats["k8s_images"]["bytes"], docker["images"], "k8s_images against docker system df")
    image = by_id(cats["k8s_images"])[made["image_id"]]
    near(image["bytes"], created["k8s_image"], "the pulled image's own layers")
    assert cats["k8s_images"]["bytes"] < sum(i.size for i in runtime.client.list_images())
    # containers: the kubelet's (io.kubernetes.* labels: the pod's container and its sandbox) and the others
    k8s = {n: b for n, b in docker["containers"].items() if n.startswith("k8s_")}
    near(cats["writable_layers"]["bytes"], sum(k8s.values()), "writable_layers against docker system df -v")
    near(by_id(cats["writable_layers"])[made["container"]]["bytes"], created["writable"], "the pod container's writable layer")
    others = {n: b for n, b in docker["containers"].items() if not n.startswith("k8s_")}
    near(cats["non_k8s_containers"]["bytes"], sum(others.values()), "non_k8s_containers against docker system df -v")
    web = by_id(cats["non_k8s_containers"])[made["non_k8s"]]
    assert (web["name"], web["image"], web["state"]) == ("outside-web", do.IMAGE, "running")
    near(web["bytes"], created["non_k8s"], "the docker run container's writable layer")
    # logs: Docker's json-file logs of every container, as the filesystem says
    on_disk = do.log_bytes(runtime)
    near(cats["container_logs"]["bytes"], sum(on_disk.values()), "container_logs against the json-file logs")
    near(by_id(cats["container_logs"])[made["container"]]["bytes"], created["log"], "the pod container's log")
    assert {o["id"] for o in cats["container_logs"]["objects"]} <= set(names)
    # volumes, each with whether a container uses it
    near(cats["volumes"]["bytes"], sum(docker["volumes"].values()), "volumes against docker system df -v")
    volumes = by_id(cats["volumes"], "name")
    assert (volumes["kept-data"]["in_use"], volumes["kept-data"]["anonymous"]) == (True, False)
    assert (volumes[made["anonymous_volume"]]["in_use"], volumes[made["anonymous_volume"]]["anonymous"]) == (True, True)
    assert (volumes[made["dangling_volume"]]["in_use"], volumes[made["dangling_volume"]]["anonymous"]) == (False, True)
    for key, name in (("named_volume", "kept-data"), ("anonymous_volume", made["anonymous_volume"]), ("dangling_volume", made["dangling_volume"])):
        near(volumes[name]["bytes"], do.SIZES[key], key)
    # build cache: the records no image shares, as docker system df counts them
    near(cats["build_cache"]["bytes"], docker["build_cache"], "build_cache against docker system df")
    near(cats["build_cache"]["bytes"], created["build_cache"], "the build's cached layer")
    assert set(made["build_cache"]) <= {o["id"] for o in cats["build_cache"]["objects"]}
    # every byte once: the categories add up to the data root's used bytes, the rest is Docker's own metadata
    assert sum(c["bytes"] for c in cats.values()) == res["used_bytes"]
    assert 0 <= cats["unaccounted"]["bytes"] < 0.2 * res["used_bytes"]
    assert res["rpc_calls"]["docker.SystemDataUsage"] == 1 and "ListContainerStats" not in res["rpc_calls"]
    # the kubelet root is on another filesystem than the data root: its pod volumes are attributed there
    assert res["nodefs"]["categories"]["pod_volumes"]["objects"][0]["id"] == "uid-vol"
    near(res["nodefs"]["categories"]["pod_volumes"]["bytes"], so.MIB, "pod volumes")


def test_disk_usage_sees_every_byte(ansible, runtime):
    """native snapshots, a ctr container in k8s.io, one ingest ref in two namespaces and logs outside pod_logs_dir."""
    if runtime.kind in ("cri-o", "docker"):
        return  # containerd's objects; cri-o's and Docker's storage are test_disk_usage_attributes_every_kind's
    from devtools.images import ImageSpec

    mount = runtime.imagefs_mountpoint
    created = {}
    # the harness's reset keeps what an earlier test left in containerd's other namespaces: free it all first
    others = [ns for ns in so.namespaces(runtime) if ns != "k8s.io"]
    first = ansible.module("kubenode.gc.storage_gc", dict(cri_endpoint=runtime.endpoint, namespaces=others, ingest_max_age="0s",
                                                          lease_max_age="0s", release_gc_roots=True),
                           task_env={"KUBENODE_GC_LOCK_DIR": runtime.workdir})
    assert not first.get("failed"), first.get("msg")

    def step(name, fn, *args, **kwargs):
        before = so.used_bytes(mount)
        value = fn(*args, **kwargs)
        created[name] = created.get(name, 0) + so.used_bytes(mount) - before
        return value

    # named after the sandbox image, which claims the base layer they share
    step("k8s_image", runtime.pull_images, [ImageSpec("registry.k8s.io/zz-every-byte:1", size=2 * so.MIB)])
    # a snapshot of the native snapshotter, which no container or label names (ctr gives it a gc.root label)
    step("native", so.write_snapshot, runtime, "tools", "native-data", 3 * so.MIB, snapshotter="native")

    def ctr_container():
        so.ctr_ok(runtime, "k8s.io", "containers", "create", "--snapshotter", "overlayfs", "registry.k8s.io/zz-every-byte:1", "ctr-writer")
        with open(os.path.join(so.snapshot_dir(runtime, "k8s.io", "ctr-writer"), "data"), "wb") as f:
            f.write(os.urandom(4 * so.MIB))

    step("writable", ctr_container)
    step("ingest", so.stale_ingest, runtime, "default", "dup-ingest", 2 * so.MIB)
    step("ingest", so.stale_ingest, runtime, "moby", "dup-ingest", 2 * so.MIB)
    # a pod whose sandbox writes its logs outside pod_logs_dir (the kubelet's podLogsDir)
    config = runtime.pod_config("logger", namespace="every-ns")
    config["log_directory"] = os.path.join(runtime.root, "elsewhere-logs", "a-pod")
    os.makedirs(config["log_directory"], exist_ok=True)
    sandbox = (runtime.client.run_pod_sandbox(config), config)
    runtime.add_container(sandbox, "logger", "registry.k8s.io/zz-every-byte:1")

    def log():
        with open(os.path.join(config["log_directory"], "logger", "1.log"), "wb") as f:
            f.write(os.urandom(2 * so.MIB))

    step("log", log)
    args = dict(cri_endpoint=runtime.endpoint, pod_logs_dir=os.path.join(runtime.root, "no-pod-logs-here"))
    res = ansible.module("kubenode.gc.disk_usage", args, check=True)
    assert not res.get("failed"), res.get("msg")
    cats = res["categories"]
    native = by_id(cats["unreferenced_snapshots"])["native-data"]
    assert native["snapshotter"] == "native" and native["gc_root"] is True and native["age_seconds"] is not None
    near(native["bytes"], created["native"], "native snapshot")
    writer = by_id(cats["writable_layers"])["ctr-writer"]
    assert writer["namespace"] == "k8s.io"
    near(writer["bytes"], created["writable"], "ctr container's writable layer")
    ingests = {(o["namespace"], o["id"]): o for o in cats["stale_ingests"]["objects"]}
    assert set(ingests) == {("default", "dup-ingest"), ("moby", "dup-ingest")}
    near(cats["stale_ingests"]["bytes"], created["ingest"], "stale_ingests")
    pod = by_id(cats["container_logs"])["every-ns_logger_%s" % config["metadata"]["uid"]]
    near(pod["bytes"], created["log"], "logs outside pod_logs_dir")
    near(image_bytes(cats, "registry.k8s.io/zz-every-byte:1"), created["k8s_image"], "k8s image")
    for name in ("native", "writable", "ingest", "log"):
        assert created[name] > 0, name
    near(cats["unreferenced_snapshots"]["bytes"], created["native"], "unreferenced_snapshots")
    near(cats["container_logs"]["bytes"], created["log"], "container_logs")
    pause = image_bytes(cats, runtime.sandbox_image)
    rest = res["used_bytes"] - sum(created.values()) - pause
    near(cats["unaccounted"]["bytes"], rest, "unaccounted")
    # one storage_gc run aborts the ingest in both namespaces
    gc = ansible.module("kubenode.gc.storage_gc", dict(cri_endpoint=runtime.endpoint, ingest_max_age="1s"),
                        task_env={"KUBENODE_GC_LOCK_DIR": runtime.workdir})
    assert not gc.get("failed"), gc.get("msg")
    assert {(s["namespace"], s["id"]) for s in gc["removed"] if s["kind"] == "ingest"} >= {("default", "dup-ingest"), ("moby", "dup-ingest")}
    for ns in ("default", "moby"):
        assert "dup-ingest" not in so.ctr_ok(runtime, ns, "content", "active")
    # the gc.root snapshot and the ctr container's layer stay
    assert "native-data" in so.ctr_ok(runtime, "tools", "snapshots", "--snapshotter", "native", "ls")
    assert "ctr-writer" in so.ctr_ok(runtime, "k8s.io", "containers", "ls", "-q")


def _allocated(top):
    """Bytes allocated (st_blocks) by everything below ``top``, as the filesystem says."""
    total = 0
    for parent, dirs, files in os.walk(top):
        for name in dirs + files:
            total += os.lstat(os.path.join(parent, name)).st_blocks * 512
    return total


def _by_pod(found):
    return {(meta.namespace, meta.name, meta.uid): sorted(dirs) for meta, dirs in found.values()}


def test_disk_usage_log_paths_without_a_call_per_container(ansible, runtime):
    """Pods that log outside pod_logs_dir: their bytes are found through each container's log path, which on containerd
    comes from its own container records (one containers.ListStream per namespace), with no ContainerStatus per
    container; cri-o still asks ContainerStatus once per container. The same directories either way."""
    from devtools.images import ImageSpec

    from ansible_collections.kubenode.gc.plugins.module_utils.containerd import _cri_metadata, _inventory
    from ansible_collections.kubenode.gc.plugins.module_utils.containerd._client import ContainerdClient
    from ansible_collections.kubenode.gc.plugins.module_utils.storage import _disk_usage

    if runtime.kind == "docker":
        return  # Docker's logs are json-files in its data root, found through its containers: _docker
    runtime.pull_images([ImageSpec("registry.k8s.io/log-paths:1", size=so.MIB)])
    base = os.path.join(runtime.imagefs_mountpoint if runtime.kind == "cri-o" else runtime.root, "log-paths")
    empty = os.path.join(runtime.workdir, "no-pod-logs")  # pod_logs_dir: the fallback finds nothing there
    os.makedirs(empty, exist_ok=True)
    pods = {}  # pod id (<namespace>_<name>_<uid>) -> (its log directory, bytes written)
    containers = 0
    for name, states, sizes in (("web", ("running", "created", "exited"), (96, 160, 32)), ("db", ("running",), (224,))):
        config = runtime.pod_config(name, namespace="logs-ns")
        config["log_directory"] = os.path.join(base, "logs-ns_%s_%s" % (name, config["metadata"]["uid"]))
        os.makedirs(config["log_directory"], exist_ok=True)
        sandbox = (runtime.client.run_pod_sandbox(config), config)
        written = 0
        for n, (state, kib) in enumerate(zip(states, sizes)):
            cname = "%s-%d" % (name, n)
            runtime.add_container(sandbox, cname, "registry.k8s.io/log-paths:1", state=state)
            containers += 1
            # a rotated log beside the runtime's own (empty: the containers print nothing)
            with open(os.path.join(config["log_directory"], cname, "0.log.20260101-000000"), "wb") as f:
                f.write(os.urandom(kib * 1024))
            written += kib * 1024
        pods[os.path.basename(config["log_directory"])] = (config["log_directory"], written)

    res = ansible.module("kubenode.gc.disk_usage", dict(cri_endpoint=runtime.endpoint, pod_logs_dir=empty), check=True)
    assert not res.get("failed"), res.get("msg")
    logs = by_id(res["categories"]["container_logs"])
    for pod_id, (directory, written) in pods.items():
        on_disk = _allocated(directory)
        assert written <= on_disk <= written + 64 * 1024, (pod_id, written, on_disk)
        assert logs[pod_id]["bytes"] == on_disk, (pod_id, logs[pod_id], on_disk)
        assert logs[pod_id]["namespace"] == "logs-ns"
    calls = res["rpc_calls"]
    assert calls["ListContainers"] == 1 and calls["ListPodSandbox"] == 1
    if runtime.kind == "cri-o":
        assert calls["ContainerStatus"] == containers  # no containerd API: one call per container, as before
        return
    assert "ContainerStatus" not in calls, calls
    assert calls["containerd.containers.ListStream"] == len(so.namespaces(runtime))

    # in this process: the records give every CRI container's log path, the same directories ContainerStatus gives
    client = runtime.client
    known = _cri_metadata.log_paths(_inventory.read(ContainerdClient(client)))
    assert {c.id for c in client.list_containers()} <= set(known)
    before = client.rpc_calls.get("ContainerStatus", 0)
    via_records = _disk_usage.log_dirs(client, known)
    assert client.rpc_calls.get("ContainerStatus", 0) == before
    via_cri = _disk_usage.log_dirs(client)
    assert client.rpc_calls.get("ContainerStatus", 0) == before + containers
    assert _by_pod(via_records) == _by_pod(via_cri)
    assert sorted(d for dirs in _by_pod(via_records).values() for d in dirs) == sorted(
        os.path.join(directory, c) for directory, _written in pods.values() for c in os.listdir(directory))
