# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The compressed layer blobs of unpacked images on every real runtime (issue 42): disk_usage's unpacked_layer_blobs and
storage_gc's discard_unpacked_layers, on images pulled through the CRI from the harness's registry.

The truth each figure is held to comes from the runtime's own tool and the filesystem, not from the module: the layers a
manifest names (``ctr content get``), the blob files in containerd's content store, statvfs."""

import json
import os

import pytest

from devtools.images import ImageSpec
from tests.integration import storage_objects as so

pytestmark = pytest.mark.runtimes("every")  # each containerd line's pulls and collector; cri-o and Docker keep no compressed copy

MIB = so.MIB
PULLED = [ImageSpec("registry.k8s.io/layers-a:1", size=3 * MIB),  # shares the busybox base layer with the sandbox image
          ImageSpec("registry.k8s.io/layers-b:1", size=2 * MIB, share_base=False)]
FETCHED = ImageSpec("registry.k8s.io/layers-fetched:1", size=MIB)  # fetched, never unpacked: shares the base layer too
DISCARD = dict(discard_unpacked_layers=True)


def run(ansible, runtime, module, check=False, **args):
    res = ansible.module(module, dict(args, cri_endpoint=runtime.endpoint), check=check, task_env={"KUBENODE_GC_LOCK_DIR": runtime.workdir})
    assert not res.get("failed"), res.get("msg")
    return res


def targets(runtime):
    """{image name: target digest} of k8s.io, as ctr lists them."""
    out = {}
    for line in so.ctr_ok(runtime, "k8s.io", "images", "ls").splitlines()[1:]:
        fields = line.split()
        out[fields[0]] = fields[2]
    return out


def layers(runtime, manifest):
    """[(digest, size)] of the layers a manifest names (its JSON, read with ctr content get)."""
    doc = json.loads(so.ctr_ok(runtime, "k8s.io", "content", "get", manifest))
    return [(layer["digest"], layer["size"]) for layer in doc["layers"]]


def blob_file(runtime, digest):
    return os.path.join(runtime.root, "io.containerd.content.v1.content", "blobs", "sha256", digest.split(":", 1)[1])


def fetch_without_unpack(runtime, spec):
    """Put an image in k8s.io the way ``ctr content fetch`` does: its blobs and an image record, no snapshot."""
    import tempfile

    from devtools.images import build_archive

    fd, path = tempfile.mkstemp(prefix="fetched-", suffix=".tar", dir=runtime.workdir)
    os.close(fd)
    try:
        build_archive(path, [spec])
        runtime.registry.push(path, spec.tags[0])
    finally:
        os.unlink(path)
    so.ctr_ok(runtime, "k8s.io", "content", "fetch", "--hosts-dir", os.path.join(runtime.workdir, "certs.d"), spec.tags[0])
    runtime.wait_for_images([spec.tags[0]])


def cri_images(runtime):
    return sorted((img.id, tuple(sorted(img.repo_tags)), int(img.size)) for img in runtime.client.list_images())


def test_unpacked_images_layer_blobs_are_counted_and_freed(ansible, runtime):
    if runtime.kind == "docker":
        _docker(ansible, runtime)
        return
    if runtime.kind == "cri-o":
        _crio(ansible, runtime)
        return
    mount = runtime.imagefs_mountpoint
    runtime.pull_images(PULLED)
    fetch_without_unpack(runtime, FETCHED)
    names = targets(runtime)
    unpacked = [runtime.sandbox_image] + [s.tags[0] for s in PULLED]
    named = {}
    for name in unpacked:
        for digest, size in layers(runtime, names[name]):
            named[digest] = size
    kept = dict(layers(runtime, names[FETCHED.tags[0]]))
    expected = {d: size for d, size in named.items() if d not in kept}
    assert len(expected) == 3 and set(kept) & set(named), (named, kept)  # A's filler, B's base and filler; the shared base stays
    on_disk = sum(os.stat(blob_file(runtime, d)).st_size for d in expected)
    assert on_disk == sum(expected.values())

    usage = run(ansible, runtime, "kubenode.gc.disk_usage", check=True)
    cat = usage["categories"]["unpacked_layer_blobs"]
    assert abs(cat["bytes"] - on_disk) <= 0.05 * on_disk, (cat["bytes"], on_disk)
    assert {o["id"] for o in cat["objects"]} == set(expected)
    assert {o["id"]: o["images"] for o in cat["objects"]}[next(d for d, _s in layers(runtime, names[PULLED[0].tags[0]]) if d in expected)] \
        == [PULLED[0].tags[0]]
    assert sum(c["bytes"] for c in usage["categories"].values()) == usage["used_bytes"]

    images = cri_images(runtime)
    used = so.used_bytes(mount)
    plan = run(ansible, runtime, "kubenode.gc.storage_gc", check=True, **DISCARD)
    layer_steps = [s for s in plan["plan"] if s["kind"] == "layer_blob"]
    assert {s["id"]: s["bytes"] for s in layer_steps} == expected and plan["plan"] == layer_steps
    assert all(s["namespace"] == "k8s.io" and s["images"] for s in layer_steps)
    assert all(os.path.exists(blob_file(runtime, d)) for d in expected) and plan["changed"] is False

    res = run(ansible, runtime, "kubenode.gc.storage_gc", **DISCARD)
    assert res["changed"] is True and res["removed"] == res["plan"] == plan["plan"], res
    freed = used - so.used_bytes(mount)
    assert abs(freed - on_disk) <= 0.1 * on_disk, (freed, on_disk)
    assert abs(res["freed_bytes"] - freed) <= 0.1 * on_disk
    assert not any(os.path.exists(blob_file(runtime, d)) for d in expected)
    # the image not unpacked keeps every blob, the one it shares with unpacked images too
    assert all(os.path.exists(blob_file(runtime, d)) for d in kept)
    # the CRI lists the same images with the same ids and sizes, and a new container starts from each unpacked one
    assert cri_images(runtime) == images
    pod = runtime.run_pod("after-discard", namespace="layers")
    for n, name in enumerate(unpacked):
        cid = runtime.add_container(pod, "c%d" % n, name)
        assert runtime.client.container_status(cid).status.state == 1, name
    assert so.ctr(runtime, "k8s.io", "content", "get", next(iter(expected))).returncode != 0

    again = run(ansible, runtime, "kubenode.gc.storage_gc", **DISCARD)
    assert again["changed"] is False and again["plan"] == []
    assert run(ansible, runtime, "kubenode.gc.disk_usage", check=True)["categories"]["unpacked_layer_blobs"] == {"bytes": 0, "objects": []}

    # a pull again works and downloads nothing; containerd labels the manifest's layers again, naming absent blobs
    runtime.client.pull_image(PULLED[0].tags[0])
    assert cri_images(runtime) == images
    relabelled = so.ctr_ok(runtime, "k8s.io", "content", "ls")
    assert any("containerd.io/gc.ref.content.l." in line for line in relabelled.splitlines() if line.startswith(names[PULLED[0].tags[0]]))
    after_pull = run(ansible, runtime, "kubenode.gc.storage_gc", **DISCARD)
    assert after_pull["changed"] is False and after_pull["plan"] == []
    cid = runtime.add_container(pod, "again", PULLED[0].tags[0])
    assert runtime.client.container_status(cid).status.state == 1


def _crio(ansible, runtime):
    """containers/storage keeps no compressed copy of a layer: the category is 0, storage_gc is not supported."""
    runtime.pull_images(PULLED[:1])
    usage = run(ansible, runtime, "kubenode.gc.disk_usage", check=True)
    assert usage["categories"]["unpacked_layer_blobs"] == {"bytes": 0, "objects": []}
    images = cri_images(runtime)
    for check in (True, False):
        res = run(ansible, runtime, "kubenode.gc.storage_gc", check=check, **DISCARD)
        assert res["supported"] is False and res["changed"] is False and res["plan"] == [] and res["freed_bytes"] == 0
    assert cri_images(runtime) == images


def _docker(ansible, runtime):
    """Docker Engine (20.10's graph drivers) keeps no compressed copy of a layer either: disk_usage has Docker's categories
    (none of them unpacked_layer_blobs), and storage_gc's discard_unpacked_layers says it does nothing there and changes nothing."""
    runtime.pull_images(PULLED[:1])
    usage = run(ansible, runtime, "kubenode.gc.disk_usage", check=True)
    assert "unpacked_layer_blobs" not in usage["categories"] and "build_cache" in usage["categories"]
    images = cri_images(runtime)
    for check in (True, False):
        res = run(ansible, runtime, "kubenode.gc.storage_gc", check=check, **DISCARD)
        assert res["supported"] is True and res["changed"] is False and res["plan"] == [] and res["removed"] == []
        assert "discard_unpacked_layers apply to containerd and do nothing on Docker Engine (cri-dockerd)." in res["warnings"]
    assert cri_images(runtime) == images


def test_discard_unpacked_layers_in_the_config_applies_to_new_pulls(ansible, runtime):
    """runtime_config writes discard_unpacked_layers where this containerd reads it; after a restart a pulled image leaves
    no layer blob, its containers start, and disk_usage and storage_gc have nothing to add."""
    if runtime.kind == "docker":
        return  # runtime_config never edits dockerd's configuration (test_docker.py)
    if runtime.kind == "cri-o":
        res = ansible.module("kubenode.gc.runtime_config", dict(runtime="crio", settings={"discard_unpacked_layers": True}, query_runtime=False))
        assert res.get("failed") and "Unknown settings key discard_unpacked_layers for runtime crio" in res["msg"]
        return
    with open(runtime.config_path, encoding="utf-8") as f:
        saved = f.read()
    try:
        res = ansible.module("kubenode.gc.runtime_config", dict(
            runtime="containerd", path=runtime.config_path, settings={"discard_unpacked_layers": True}, cri_endpoint=runtime.endpoint,
            validate=runtime.binary("containerd") + " --config %s config dump"))
        assert not res.get("failed"), res.get("msg")
        assert res["changed"] is True and res["current"]["discard_unpacked_layers"] is True
        assert "discard_unpacked_layers = true" in runtime.config_dump()
        runtime.restart()
        if runtime.major < 2:  # containerd 1.x says it in its CRI status, 2.x does not
            info = json.loads(dict(runtime.client.status(verbose=True).info)["config"])
            assert info["containerd"]["discardUnpackedLayers"] is True
        after = ansible.module("kubenode.gc.runtime_config", dict(runtime="containerd", path=runtime.config_path, cri_endpoint=runtime.endpoint))
        assert not after.get("failed"), after.get("msg")
        assert after["changed"] is False and after["current"]["discard_unpacked_layers"] is True
        assert "daemon_differs_from_files" not in [f["code"] for f in after["findings"]]

        spec = ImageSpec("registry.k8s.io/layers-discarded:1", size=2 * MIB, share_base=False)
        runtime.pull_images([spec])
        manifest = targets(runtime)[spec.tags[0]]
        pulled_layers = layers(runtime, manifest)
        assert len(pulled_layers) == 2
        labels = [line for line in so.ctr_ok(runtime, "k8s.io", "content", "ls").splitlines() if line.startswith(manifest)]
        assert labels and "containerd.io/gc.ref.content.l." not in labels[0] and "containerd.io/gc.ref.content.config" in labels[0]
        # nothing references the layer blobs: containerd's next collection frees them (one is run here, as any removal does)
        so.ctr_ok(runtime, "k8s.io", "leases", "create", "--id", "collect-now")
        so.ctr_ok(runtime, "k8s.io", "leases", "delete", "--sync", "collect-now")
        assert not any(os.path.exists(blob_file(runtime, d)) for d, _size in pulled_layers)
        cid = runtime.add_container(runtime.run_pod("discarded", namespace="layers"), "c", spec.tags[0])
        assert runtime.client.container_status(cid).status.state == 1
        objects = run(ansible, runtime, "kubenode.gc.disk_usage", check=True)["categories"]["unpacked_layer_blobs"]["objects"]
        assert not [o for o in objects if spec.tags[0] in o["images"]]
        plan = run(ansible, runtime, "kubenode.gc.storage_gc", check=True, **DISCARD)["plan"]
        assert not [s for s in plan if spec.tags[0] in s.get("images", [])]
    finally:
        with open(runtime.config_path, "w", encoding="utf-8") as f:
            f.write(saved)
        runtime.remove_all_pods()
        runtime.restart()
