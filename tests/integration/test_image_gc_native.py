# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""image_gc's native removals (containerd's images API, one collection) keep the CRI's view right, on every runtime.

On each containerd of the matrix (1.6, 1.7, 2.1, 2.2, 2.3) a prune large enough to take the native path must leave the
CRI exactly as RemoveImage would, with images pulled through the CRI as the kubelet pulls them (repo digests,
distribution-source labels, the compressed layers in the content store beside their snapshots): ListImages no longer
lists the removed images (right when the module returns), containerd keeps no record of them (tag, digest or id) and
its collection frees their blobs and snapshots, pulling the same images again makes the CRI list them again under the
same ids and a container starts from one, ImageFsInfo (the kubelet's view) reflects the freed bytes, and the sandbox
image and the images in use are intact. cri-o keeps the CRI. These tests are what _image_gc.NATIVE_LINES rests on: a
containerd line fails here before it is listed there.
"""

import json
import os
import time

import pytest

from ansible_collections.kubenode.gc.plugins.module_utils._common import params_for
from ansible_collections.kubenode.gc.plugins.module_utils.cri._cri import CriClient
from ansible_collections.kubenode.gc.plugins.module_utils.gc import _image_gc
from ansible_collections.kubenode.gc.plugins.modules import image_gc
from devtools.faults import CrashAfter
from devtools.images import ImageSpec

pytestmark = pytest.mark.runtimes("every")

KIB = 1 << 10
# enough images for the native path, each with a layer of its own (beside the shared base) so that removing it frees bytes
COUNT = _image_gc.NATIVE_MIN_IMAGES + 4
LAYER = 256 * KIB


def specs(prefix, count=COUNT):
    return [ImageSpec("%s-%02d:1" % (prefix, n), size=LAYER) for n in range(count)]


def prune(endpoint, **extra):
    """One prune run in this process; returns (result, rpc_calls)."""
    with CriClient(endpoint) as client:
        opts = _image_gc.options(params_for(image_gc.ARGUMENT_SPEC, mode="prune", min_age="0s", lock_timeout=5, **extra))
        result = _image_gc.run(client, opts)
        return result, dict(client.rpc_calls)


def cri_images(runtime):
    return {img.id: set(img.repo_tags) for img in runtime.client.list_images()}


def imagefs_used(runtime):
    return sum(fs.used_bytes.value for fs in runtime.client.image_fs_info().image_filesystems)


def wait_for_used(runtime, good, timeout=40):
    """ImageFsInfo's used bytes once ``good(used)`` (containerd's CRI refreshes them every 10 s), else the last read."""
    deadline = time.time() + timeout
    used = imagefs_used(runtime)
    while not good(used) and time.time() < deadline:
        time.sleep(0.5)
        used = imagefs_used(runtime)
    return used


def wait_for_settled_used(runtime, good, refresh=11, timeout=60):
    """ImageFsInfo's used bytes once ``good(used)`` holds and they stayed the same for longer than the CRI's refresh
    period: the CRI counts each new snapshot at its next refresh, so a threshold alone can be met before the last
    image pulled is counted (by other bytes: the sandbox image's)."""
    deadline = time.time() + timeout
    used = wait_for_used(runtime, good, timeout)
    since = time.time()
    while time.time() - since < refresh and time.time() < deadline:
        time.sleep(0.5)
        now = imagefs_used(runtime)
        if now != used:
            used, since = now, time.time()
    return used


def is_containerd(runtime):
    return runtime.name.startswith("containerd")


def free_bytes(runtime):
    st = os.statvfs(runtime.imagefs_mountpoint)
    return st.f_bavail * st.f_frsize


def test_prune_of_many_pulled_images_removes_exactly_the_unused_ones_and_a_removed_one_runs_again(ansible, runtime, tmp_path):
    """Issue 40, on every runtime: image_gc prune (through ansible-playbook) of more than NATIVE_MIN_IMAGES pulled images
    removes exactly the images no container uses (the native path on containerd, RemoveImage on cri-o); the CRI no longer
    lists them and the runtime's own tool has no name of them left; a second run changes nothing; pulling a removed image
    again works, under the same id, and a container starts from it."""
    ids = runtime.pull_images(specs("pulled"))
    runtime.pull_images([ImageSpec("pulled-running:1", size=LAYER), ImageSpec("pulled-exited:1", size=LAYER)])
    pod = runtime.run_pod("users")
    runtime.add_container(pod, "running", "pulled-running:1", "running")
    runtime.add_container(pod, "exited", "pulled-exited:1", "exited")
    kept = {runtime.image_id_of(t) for t in ("pulled-running:1", "pulled-exited:1", runtime.sandbox_image)}
    listed = {img.id: img for img in runtime.client.list_images()}
    assert set(listed) == kept | set(ids.values())
    # pulled, as the kubelet pulls: every image has a repo digest of its upstream name
    assert all(img.repo_digests for img in listed.values())
    refs = runtime.image_refs()
    free = free_bytes(runtime)
    args = {"cri_endpoint": runtime.endpoint, "mode": "prune", "min_age": "0s", "ledger_path": str(tmp_path / "ledger.json")}

    res = ansible.module("kubenode.gc.image_gc", args)
    assert not res.get("failed"), res.get("msg")
    assert res["changed"] is True and res["errors"] == [] and res["unconfirmed"] == []
    assert {r["id"] for r in res["removed"]} == set(ids.values()) and {r["reason"] for r in res["removed"]} == {"prune"}
    assert res["kept"]["in_use"] == 2 and res["kept"]["sandbox"] == 1
    if is_containerd(runtime):  # the native path: every record deleted through containerd's images API, one collection
        assert "RemoveImage" not in res["rpc_calls"] and res["rpc_calls"]["containerd.images.Delete"] >= 3 * COUNT
        assert res["rpc_calls"]["containerd.leases.Delete"] == 1
    else:
        assert res["rpc_calls"]["RemoveImage"] == COUNT
    # the CRI lists exactly the images in use and the sandbox image, right when the module returned
    assert set(cri_images(runtime)) == kept
    # the runtime's own tool: no tag, repo digest or id of a removed image is left (containerd: its records)
    after = runtime.image_refs()
    gone_tags = {t for i in ids for t in refs["tags"] if t.endswith("/" + i)}
    assert len(gone_tags) == COUNT and not gone_tags & after["tags"]
    assert not set(ids.values()) & after["ids"]
    if "digests" in refs:  # containerd names a pulled image by its repo digest too (name@sha256:<manifest>)
        gone_digests = {d for d in refs["digests"] if d.split("@")[0] in {"docker.io/library/" + t.split(":")[0] for t in ids}}
        assert len(gone_digests) == COUNT and not gone_digests & after["digests"]
    # the bytes are free: containerd's collection took each image's compressed layer blob and its snapshot (the layer
    # twice), cri-o its layer
    freed = free_bytes(runtime) - free
    assert freed >= COUNT * LAYER * (2 if is_containerd(runtime) else 1) * 0.9, freed

    again = ansible.module("kubenode.gc.image_gc", args)
    assert not again.get("failed"), again.get("msg")
    assert again["changed"] is False and again["removed"] == [] and "RemoveImage" not in again["rpc_calls"]
    assert set(cri_images(runtime)) == kept

    # a removed image pulled again: the same id, and a container starts from it
    back = runtime.pull_images([ImageSpec("pulled-07:1", size=LAYER)])
    assert back == {"pulled-07:1": ids["pulled-07:1"]} and ids["pulled-07:1"] in cri_images(runtime)
    cid = runtime.add_container(runtime.run_pod("again"), "again", "pulled-07:1", "running")
    status = runtime.client.container_status(cid).status
    assert status.state == 1  # CONTAINER_RUNNING
    # from the image pulled again: its id, or (ContainerStatus on containerd and cri-o, for a pulled image) its repo digest
    # (cri-dockerd writes it as docker-pullable://<repo digest>, the dockershim's form)
    (image,) = [img for img in runtime.client.list_images() if img.id == ids["pulled-07:1"]]
    ref = status.image_ref[len("docker-pullable://"):] if status.image_ref.startswith("docker-pullable://") else status.image_ref
    assert ref in {image.id} | set(image.repo_digests)


def test_native_prune_keeps_the_cri_view_right(runtime, tmp_path):
    ids = runtime.pull_images(specs("native"))
    runtime.pull_images([ImageSpec("native-used:1", size=LAYER)])
    pod = runtime.run_pod("keeper")
    runtime.add_container(pod, "used", "native-used:1", "running")
    used_id = runtime.image_id_of("native-used:1")
    sandbox_id = runtime.image_id_of(runtime.sandbox_image)
    containers = {c.id for c in runtime.client.list_containers()}
    # the kubelet's view once it counts every layer pulled
    used_before = wait_for_settled_used(runtime, lambda used: used >= (COUNT + 1) * LAYER)
    free_before = os.statvfs(runtime.imagefs_mountpoint).f_bavail

    result, calls = prune(runtime.endpoint, ledger_path=str(tmp_path / "ledger.json"))

    removed = {r["id"] for r in result["removed"]}
    assert removed == set(ids.values())
    if not is_containerd(runtime):
        # cri-o keeps the CRI: RemoveImage per image, nothing of containerd's API
        assert calls["RemoveImage"] == COUNT and not [k for k in calls if k.startswith("containerd.")]
        return
    # the native path ran: records deleted without a collection, one collection, no RemoveImage
    assert "RemoveImage" not in calls
    assert calls["containerd.images.Delete"] >= COUNT and calls["containerd.leases.Delete"] == 1
    # the CRI's view, right when the module returned: none of them, the used and sandbox images intact
    left = cri_images(runtime)
    assert not removed & set(left)
    assert used_id in left and "docker.io/library/native-used:1" in left[used_id]
    assert sandbox_id in left and runtime.sandbox_image in left[sandbox_id]
    # containerd's own records agree (no tag and no id record left), the containers are all there
    refs = runtime.image_refs()
    assert not {"docker.io/library/" + tag for tag in ids} & refs["tags"] and not removed & refs["ids"]
    assert {used_id, sandbox_id} <= refs["ids"]
    assert {c.id for c in runtime.client.list_containers()} == containers
    # the collection ran before the module returned: the bytes are free on the filesystem, and the kubelet's view follows
    freed = (os.statvfs(runtime.imagefs_mountpoint).f_bavail - free_before) * os.statvfs(runtime.imagefs_mountpoint).f_frsize
    assert freed >= COUNT * LAYER * 0.9 and result["bytes_freed_measured"] >= COUNT * LAYER * 0.9
    target = used_before - COUNT * LAYER * 0.9
    assert wait_for_used(runtime, lambda used: used <= target) <= target
    # the ledger drops their records, as after RemoveImage
    with open(tmp_path / "ledger.json", encoding="utf-8") as f:
        assert not set(json.load(f)["images"]) & removed

    # the same images pulled again: the CRI lists them again (pull_images waits for it), under the same ids
    again = runtime.pull_images(specs("native"))
    assert again == ids and set(ids.values()) <= set(cri_images(runtime))
    assert all(runtime.image_id_of(tag) == ids[tag] for tag in ids)
    # and a second native prune removes them again, the used and sandbox images still intact
    result, calls = prune(runtime.endpoint, ledger_path=str(tmp_path / "ledger.json"))
    assert {r["id"] for r in result["removed"]} == set(ids.values()) and "RemoveImage" not in calls
    left = cri_images(runtime)
    assert not set(ids.values()) & set(left) and {used_id, sandbox_id} <= set(left)


def test_small_prune_keeps_the_cri(runtime):
    """Fewer than NATIVE_MIN_IMAGES images: RemoveImage, on every runtime."""
    ids = runtime.pull_images(specs("small", count=3))
    result, calls = prune(runtime.endpoint, ledger_path="")
    assert {r["id"] for r in result["removed"]} == set(ids.values())
    assert calls["RemoveImage"] == 3 and not [k for k in calls if k.startswith("containerd.")]


def test_runtime_killed_mid_native_prune_reports_only_what_is_gone(runtime, tmp_path):
    """The runtime dies (SIGKILL) after 10 record deletions: removed holds only images the restarted runtime no longer
    has, every image gone is removed or unconfirmed, and the next run removes the rest."""
    if not is_containerd(runtime):
        return  # cri-o keeps the CRI (test_image_gc's crash test covers it)
    runtime.pull_images(specs("crash"))
    listed = set(cri_images(runtime))
    before = listed - {runtime.image_id_of(runtime.sandbox_image)}
    ledger = tmp_path / "ledger.json"
    opts = _image_gc.options(params_for(image_gc.ARGUMENT_SPEC, mode="prune", min_age="0s", lock_timeout=5, ledger_path=str(ledger)))
    try:
        with CrashAfter(runtime, 10, methods=("Delete",)) as proxy:
            with CriClient(proxy.endpoint) as client, pytest.raises(_image_gc.GcError) as err:
                _image_gc.run(client, opts)
        assert proxy.crashed
    finally:
        runtime.restart()
    result, message = err.value.result, str(err.value)
    gone = before - set(cri_images(runtime))
    removed = {r["id"] for r in result["removed"]}
    assert message.startswith("The run stopped after %d image(s) were removed" % len(removed))
    # records were deleted: changed, even when none of the ten Deletes the runtime answered finished an image (the proxy
    # serves the 512 in flight from 16 threads, so which records those ten are depends on the scheduling)
    assert result["changed"] is True
    assert removed <= gone and gone <= removed | set(result["unconfirmed"])
    assert [e["id"] for e in result["errors"]] == [""] and "unavailable" in result["errors"][0]["msg"]
    with open(ledger, encoding="utf-8") as f:
        assert set(json.load(f)["images"]) == listed - removed
    # the restarted runtime serves the next run, which removes the rest without errors
    again, _calls = prune(runtime.endpoint, ledger_path=str(ledger))
    assert again["errors"] == [] and again["unconfirmed"] == []
    assert not before & set(cri_images(runtime))
