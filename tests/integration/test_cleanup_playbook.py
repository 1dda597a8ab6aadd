# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The kubenode.gc.cleanup playbook against every real runtime on localhost: the history record of a node whose GC failed, pinning first."""

import glob
import json
import os
import subprocess

import pytest
import yaml

from devtools.faults import CrashAfter

from ansible_collections.kubenode.gc.plugins.module_utils.cri._image_ref import normalize_image_ref
from devtools.images import ImageSpec
from tests.integration import storage_objects as so
from tests.integration.conftest import BIN
from tests.integration.test_image_pin import CAN_PIN, clean_dropins  # noqa: F401  pylint: disable=unused-import

pytestmark = pytest.mark.runtimes("one")

MIB = 1 << 20


def cleanup(ansible, runtime, tmp_path, endpoint, extra_args=(), env=None, **extra):
    node = {
        "ansible_connection": "local",
        "ansible_python_interpreter": os.path.join(BIN, "python"),
        "kubenode_gc_cri_endpoint": endpoint,
        "kubenode_gc_pod_logs_dir": runtime.pod_logs,
        "kubenode_gc_container_logs_dir": str(tmp_path / "containers"),
        "kubenode_gc_ledger_path": str(tmp_path / "ledger.json"),
        "kubenode_gc_cleanup_history_dir": str(tmp_path / "history"),
        "kubenode_gc_container_min_age": "0s",
        "kubenode_gc_cleanup_image_min_age": "0s",
        "kubenode_gc_cleanup_image_mode": "prune",
    }
    node.update(extra)
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"gc-node": node}}}))
    cmd = [os.path.join(BIN, "ansible-playbook"), "kubenode.gc.cleanup", "-i", str(inventory)] + list(extra_args)
    return subprocess.run(cmd, cwd=str(tmp_path), env=ansible.env(env), capture_output=True, text=True, check=False)


def history(tmp_path):
    paths = glob.glob(str(tmp_path / "history" / "*.json"))
    records = []
    for path in paths:
        assert os.stat(path).st_mode & 0o777 == 0o600
        with open(path, encoding="utf-8") as f:
            records.append(json.load(f))
    return records


def test_a_node_whose_image_gc_failed_gets_a_history_record_of_its_partial_work(ansible, runtime, tmp_path):
    """Issue 11, item 1: the runtime dies after 2 image removals; the node fails and its history record says what went."""
    runtime.pull_images([ImageSpec("hist-%d:1" % n, size=MIB, share_base=False) for n in range(4)])
    pod = runtime.run_pod("keeper")
    runtime.add_container(pod, "k", "hist-0:1", "running")
    ids = {normalize_image_ref(t): i.id for i in runtime.client.list_images() for t in i.repo_tags}
    before = set(ids.values())
    candidates = before - {ids["docker.io/library/hist-0:1"], ids[runtime.sandbox_image]}
    try:
        with CrashAfter(runtime, 2) as proxy:
            proc = cleanup(ansible, runtime, tmp_path, proxy.endpoint, env=proxy.env)
        assert proxy.removed == 2 and proxy.crashed
    finally:
        runtime.restart()
    gone = before - {i.id for i in runtime.client.list_images()}
    assert proc.returncode != 0, proc.stdout  # the node failed: it counts against max_fail_percentage
    (record,) = history(tmp_path)
    assert record["host"] == "gc-node" and record["status"] == "failed" and record["check_mode"] is False
    assert record["error"].startswith("The run stopped after 2 image(s) were removed")
    assert " CRI endpoint %s is unavailable for RemoveImage: " % proxy.endpoint in record["error"]
    assert len(gone) == 2 and {i["id"] for i in record["images"]} == gone
    # the outage is one error; the removals in flight whose answer it lost are unconfirmed, never dropped (issue 21, item 5)
    assert [e["id"] for e in record["errors"]] == [""]
    assert set(record["unconfirmed"]) == candidates - gone
    assert record["bytes_freed_estimated"] == sum(i["size"] for i in record["images"]) and isinstance(record["bytes_freed_measured"], int)
    assert record["containers"] == [] and record["sandboxes"] == [] and record["log_paths"] == []
    assert record["policy"] == {"image_mode": "prune", "high_threshold_percent": 85, "low_threshold_percent": 80, "min_age": "0s", "max_age": "0s",
                                "sources": {"high_threshold_percent": {"kind": "default", "from": "kubelet default"},
                                            "low_threshold_percent": {"kind": "default", "from": "kubelet default"},
                                            "min_age": {"kind": "variable", "from": "variable kubenode_gc_cleanup_image_min_age"},
                                            "max_age": {"kind": "default", "from": "kubelet default"}}}
    assert isinstance(record["usage_before"], int) and record["finished_at"].endswith("Z")
    # the summary is printed, then the play fails naming the node (issue 21, item 8)
    out = proc.stdout
    assert proc.returncode == 2 and "NO MORE HOSTS LEFT" not in out
    assert 0 < out.index("kubenode.gc cleanup") < out.index("The cleanup did not succeed on every node: 1 node failed (gc-node).")


def test_a_cleaned_node_records_no_error(ansible, runtime, tmp_path):
    runtime.pull_images([ImageSpec("ok-%d:1" % n) for n in range(2)])
    proc = cleanup(ansible, runtime, tmp_path, runtime.endpoint)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (record,) = history(tmp_path)
    assert record["status"] == "cleaned" and "error" not in record and record["errors"] == []
    assert {t for i in record["images"] for t in i["repo_tags"]} == {"docker.io/library/ok-0:1", "docker.io/library/ok-1:1"}


@pytest.mark.runtimes("every")
def test_cleanup_pins_the_keep_list_before_it_removes(ansible, clean_dropins, runtime_name, tmp_path):
    """Issue 14, item 1: kubenode_gc_cleanup_pin pins the keep-listed images (the kubelet's own GC keeps them then), and the
    prune removes the rest; a runtime that cannot pin (containerd 1.6) only warns, and the keep list still protects."""
    runtime = clean_dropins
    runtime.pull_images([ImageSpec("registry.k8s.io/keep-me:1", size=MIB, share_base=False), ImageSpec("drop-me:1", size=MIB, share_base=False)])
    proc = cleanup(ansible, runtime, tmp_path, runtime.endpoint, kubenode_gc_keep_images=["registry.k8s.io/keep-*"], kubenode_gc_cleanup_pin=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    state = {t: img.pinned for img in runtime.client.list_images() for t in img.repo_tags}
    assert "docker.io/library/drop-me:1" not in state
    assert state["registry.k8s.io/keep-me:1"] is CAN_PIN[runtime_name]
    (record,) = history(tmp_path)
    assert record["status"] == "cleaned" and "docker.io/library/drop-me:1" in {t for i in record["images"] for t in i["repo_tags"]}
    if not CAN_PIN[runtime_name]:
        assert "cannot pin images" in proc.stdout + proc.stderr
    # leave the runtime as it was: our pins go again
    undo = ansible.module("kubenode.gc.image_pin", {"cri_endpoint": runtime.endpoint, "images": [], "exclusive": True})
    assert not undo.get("failed"), undo.get("msg")


def test_cleanup_frees_a_node_below_its_byte_target_that_the_percentages_would_skip(ansible, runtime, tmp_path):
    """Issue 26: kubenode_gc_free_bytes_high / _low. Usage is far below 85 %, so without the byte target the node is skipped."""
    runtime.pull_images([ImageSpec("bytes-%d:1" % n, size=4 * MIB, share_base=False) for n in range(6)])
    st = os.statvfs(runtime.imagefs_mountpoint)
    free = min(st.f_bavail, st.f_blocks) * st.f_frsize
    tags = runtime.image_refs()["tags"]
    skipped = cleanup(ansible, runtime, tmp_path, runtime.endpoint, kubenode_gc_cleanup_image_mode="threshold")
    assert skipped.returncode == 0, skipped.stdout
    assert "is below the high threshold" in skipped.stdout and runtime.image_refs()["tags"] == tags
    for path in glob.glob(str(tmp_path / "history" / "*.json")):
        os.remove(path)
    low = free + 10 * MIB
    proc = cleanup(ansible, runtime, tmp_path, runtime.endpoint, kubenode_gc_cleanup_image_mode="threshold", kubenode_gc_free_bytes_high=free + MIB,
                   kubenode_gc_free_bytes_low="%dKi" % (low // 1024))
    assert proc.returncode == 0, proc.stdout
    (record,) = history(tmp_path)
    assert record["status"] == "cleaned" and record["images"] and {i["reason"] for i in record["images"]} == {"space"}
    assert record["policy"]["free_bytes_high"] == free + MIB and record["policy"]["free_bytes_low"] == "%dKi" % (low // 1024)
    st = os.statvfs(runtime.imagefs_mountpoint)
    assert min(st.f_bavail, st.f_blocks) * st.f_frsize >= low // 1024 * 1024
    assert len([t for t in runtime.image_refs()["tags"] if "bytes-" in t]) > 0  # not everything: it stopped at the target


STORAGE_ARGS = ["-e", "kubenode_gc_cleanup_storage=true", "-e", '{"kubenode_gc_cleanup_storage_namespaces": ["moby"]}']


def test_cleanup_storage_removes_other_namespace_images_and_records_them(ansible, runtime, tmp_path):
    """Issue 24: kubenode_gc_cleanup_storage runs storage_gc after image GC; the history record and the summary name what it removed."""
    if runtime.kind in ("cri-o", "docker"):
        return  # storage_gc refuses cri-o (test_storage_gc.py; the cleanup's record of that is a unit test); Docker's is below
    so.import_into(runtime, "moby", [ImageSpec("docker.io/library/moby-cleanup:1", size=2 * MIB, share_base=False)])
    runtime.pull_images([ImageSpec("registry.k8s.io/cleanup-used:1", size=MIB, share_base=False)])
    pod = runtime.run_pod("storage-keeper")
    runtime.add_container(pod, "k", "registry.k8s.io/cleanup-used:1", "running")
    in_use = {t for i in runtime.client.list_images() for t in i.repo_tags}
    assert so.ctr_ok(runtime, "moby", "images", "ls", "-q").split() == ["docker.io/library/moby-cleanup:1"]

    proc = cleanup(ansible, runtime, tmp_path, runtime.endpoint, extra_args=STORAGE_ARGS)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert so.ctr_ok(runtime, "moby", "images", "ls", "-q").split() == []
    # the CRI's images in use are intact, and the one a container runs still starts another
    after = {t for i in runtime.client.list_images() for t in i.repo_tags}
    assert {"registry.k8s.io/cleanup-used:1", runtime.sandbox_image} <= after <= in_use
    cid = runtime.add_container(runtime.run_pod("storage-again"), "again", "registry.k8s.io/cleanup-used:1")
    assert runtime.client.container_status(cid).status.state == 1
    (record,) = history(tmp_path)
    assert record["status"] == "cleaned" and record["errors"] == []
    storage = record["storage"]
    assert storage["supported"] is True
    removed = {(i["kind"], i["namespace"], i["id"]) for i in storage["removed"]}
    assert ("image", "moby", "docker.io/library/moby-cleanup:1") in removed
    assert all(i["namespace"] != "k8s.io" or i["kind"] != "image" for i in storage["removed"])
    assert storage["removed"] == [i for i in storage["plan"] if (i["kind"], i["namespace"], i["id"]) in removed]
    assert storage["freed_bytes"] >= MIB  # the 2 MiB image's blobs and snapshot, measured on the filesystem
    assert "gc-node: storage_gc removed %d object(s)" % len(storage["removed"]) in proc.stdout
    assert "image moby/docker.io/library/moby-cleanup:1" in proc.stdout


def test_cleanup_storage_discards_the_layer_blobs_of_unpacked_images_and_names_them(ansible, runtime, tmp_path):
    """Issue 42: kubenode_gc_cleanup_storage_discard_unpacked_layers frees the compressed layer blobs of the images in use
    (prune keeps those); the history record names each blob's images, the summary too, and the image still starts containers."""
    if runtime.kind in ("cri-o", "docker"):
        return  # containerd's layer blobs: storage_gc refuses cri-o (test_layer_blobs.py), Docker keeps no compressed copy
    name = "registry.k8s.io/cleanup-layers:1"
    runtime.pull_images([ImageSpec(name, size=MIB, share_base=False)])
    runtime.add_container(runtime.run_pod("layers-keeper"), "k", name, "running")
    ids = {i.id for i in runtime.client.list_images() if name in i.repo_tags}
    proc = cleanup(ansible, runtime, tmp_path, runtime.endpoint,
                   extra_args=["-e", "kubenode_gc_cleanup_storage=true", "-e", "kubenode_gc_cleanup_storage_discard_unpacked_layers=true"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (record,) = history(tmp_path)
    blobs = [i for i in record["storage"]["removed"] if i["kind"] == "layer_blob" and name in i["images"]]
    assert len(blobs) == 2 and all(i["namespace"] == "k8s.io" and i["bytes"] > 0 for i in blobs)
    assert record["storage"]["freed_bytes"] >= MIB
    for blob in blobs:
        assert so.ctr(runtime, "k8s.io", "content", "get", blob["id"]).returncode != 0
    assert "layer_blob k8s.io/" in proc.stdout and "of %s" % name in proc.stdout
    assert {i.id for i in runtime.client.list_images() if name in i.repo_tags} == ids
    cid = runtime.add_container(runtime.run_pod("layers-again"), "again", name)
    assert runtime.client.container_status(cid).status.state == 1


@pytest.mark.runtimes("every")
def test_cleanup_storage_on_docker_removes_build_cache_and_unused_volumes(ansible, runtime, tmp_path):
    """Issue 41: on a Docker Engine node the cleanup's storage step removes the build cache and the anonymous volume no
    container references, and its record and summary name them (the step differs by runtime: on the others it is the
    test above's)."""
    if runtime.kind != "docker":
        return
    import time

    from tests.integration import docker_objects as do

    runtime.pull_images([ImageSpec(do.IMAGE, size=MIB)])
    cache = do.build(runtime)
    runtime.docker("run", "--name", "left-volume", "--network", "none", "-v", "/vol", do.IMAGE, "-c", "busybox head -c 1048576 /dev/urandom > /vol/x")
    volume = runtime.docker("inspect", "-f", "{{range .Mounts}}{{.Name}}{{end}}", "left-volume").strip()
    runtime.docker("rm", "left-volume")
    time.sleep(2)  # the cache records were last used at least this long ago
    proc = cleanup(ansible, runtime, tmp_path, runtime.endpoint, extra_args=[
        "-e", "kubenode_gc_cleanup_storage=true", "-e", "kubenode_gc_cleanup_storage_build_cache_max_age=1s",
        "-e", "kubenode_gc_cleanup_storage_remove_unused_volumes=true"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (record,) = history(tmp_path)
    storage = record["storage"]
    assert storage["supported"] is True and storage["removed"] == storage["plan"]
    removed = {(i["kind"], i["id"]) for i in storage["removed"]}
    assert {("build_cache", c) for c in cache} | {("volume", volume)} <= removed
    assert storage["freed_bytes"] >= MIB
    assert not {r["ID"] for r in runtime.api.system_df().get("BuildCache") or []} & set(cache)
    assert volume not in {v["Name"] for v in runtime.api.request("VolumeList", "GET", "/volumes")["Volumes"]}
    assert "gc-node: storage_gc removed %d object(s): " % len(storage["removed"]) in proc.stdout
    assert "volume %s (1.0 MiB)" % volume in proc.stdout


def test_serial_and_hosts_from_the_inventory_are_refused_and_take_effect_with_e(ansible, runtime, tmp_path):
    """Issue 32: kubenode_gc_cleanup_serial and kubenode_gc_hosts are play keywords, which read only extra variables. Set in
    the inventory (all's vars, as group_vars/all) they are refused in one sentence before any node is touched; with -e they
    take effect: one wave of the three workers, the other host untouched."""
    runtime.pull_images([ImageSpec("waves-%d:1" % n, size=MIB, share_base=False) for n in range(2)])
    node = {"ansible_connection": "local", "ansible_python_interpreter": os.path.join(BIN, "python"), "kubenode_gc_cri_endpoint": runtime.endpoint,
            "kubenode_gc_pod_logs_dir": runtime.pod_logs, "kubenode_gc_container_logs_dir": str(tmp_path / "containers"),
            "kubenode_gc_ledger_path": str(tmp_path / "ledger.json"), "kubenode_gc_cleanup_history_dir": str(tmp_path / "history"),
            "kubenode_gc_cleanup_image_min_age": "0s", "kubenode_gc_cleanup_image_mode": "prune"}
    inventory = {"all": {"vars": node, "children": {"workers": {"hosts": {"w1": {}, "w2": {}, "w3": {}}}, "others": {"hosts": {"o1": {}}}}}}
    path = tmp_path / "inventory.yml"
    before = {i.id for i in runtime.client.list_images()}

    def run(*args, **inventory_vars):
        path.write_text(yaml.safe_dump({"all": dict(inventory["all"], vars=dict(node, **inventory_vars))}))
        cmd = [os.path.join(BIN, "ansible-playbook"), "kubenode.gc.cleanup", "-i", str(path), "--check"] + list(args)
        return subprocess.run(cmd, cwd=str(tmp_path), env=ansible.env(), capture_output=True, text=True, check=False)

    for name, value in (("kubenode_gc_cleanup_serial", 3), ("kubenode_gc_hosts", "workers")):
        proc = run(**{name: value})
        assert proc.returncode != 0
        shown = repr(value) if isinstance(value, str) else str(value)
        assert ("%s=%s is set for o1 in the inventory or group_vars, but a play keyword (hosts, serial) reads only extra variables: "
                "pass it with -e %s=..." % (name, shown, name)) in proc.stdout, proc.stdout
        assert "PLAY [Free disk space on the nodes, in waves]" not in proc.stdout
        assert {i.id for i in runtime.client.list_images()} == before and not os.path.exists(tmp_path / "history")
    proc = run("-e", "kubenode_gc_cleanup_serial=3", "-e", "kubenode_gc_hosts=workers")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("PLAY [Free disk space on the nodes, in waves]") == 1  # one wave of three, not three of one (25%)
    recap = proc.stdout[proc.stdout.index("PLAY RECAP"):]
    assert all(h in recap for h in ("w1", "w2", "w3")) and "o1" not in recap
