# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""kubenode.gc.storage_gc on every real runtime: the plan, check mode, the removals measured by statvfs, and cri-o's refusal."""

import os

import pytest

from devtools.images import ImageSpec
from tests.integration import storage_objects as so

pytestmark = pytest.mark.runtimes("every")

ARGS = dict(namespaces=["moby", "default"], ingest_max_age="1s", lease_max_age="1s", release_gc_roots=True)
# what the module removes itself; the plan's other objects are what containerd's collection frees after them
ACTIONS = ("ingest", "lease", "image", "gc_root")


def actions(plan):
    return {(s["kind"], s["namespace"], s["id"]) for s in plan if s["kind"] in ACTIONS}


def state(runtime):
    """What containerd holds outside the CRI, as its own tool lists it."""
    out = {}
    for ns in ("moby", "default"):
        out[ns] = {
            "images": sorted(so.ctr_ok(runtime, ns, "images", "ls", "-q").split()),
            "leases": sorted(line.split()[0] for line in so.ctr_ok(runtime, ns, "leases", "ls").splitlines()[1:]),
            "ingests": sorted(line.split()[0] for line in so.ctr_ok(runtime, ns, "content", "active").splitlines()[1:]),
            "snapshots": sorted(line.split()[0] for line in so.ctr_ok(runtime, ns, "snapshots", "ls").splitlines()[1:]),
        }
    return out


def freed_now(runtime, used_before):
    return used_before - so.used_bytes(runtime.imagefs_mountpoint)


def run(ansible, runtime, check=False, **args):
    return ansible.module("kubenode.gc.storage_gc", dict(args, cri_endpoint=runtime.endpoint), check=check,
                          task_env={"KUBENODE_GC_LOCK_DIR": runtime.workdir})


def test_storage_gc_frees_what_containerd_keeps(ansible, runtime):
    if runtime.kind == "cri-o":
        _crio(ansible, runtime)
        return
    if runtime.kind == "docker":
        _docker(ansible, runtime)
        return
    made, created = so.create_all(runtime, os.path.join(runtime.root, "test-pod-logs"))
    expected = {("ingest", "default", "stale-ingest-1"), ("lease", "default", made["expired_lease"]), ("lease", "default", made["old_lease"]),
                ("image", "moby", "docker.io/library/moby-only:1"), ("image", "default", "docker.io/library/default-only:1"),
                ("gc_root", "default", made["snapshot"])}
    before = state(runtime)
    used = so.used_bytes(runtime.imagefs_mountpoint)

    plan = run(ansible, runtime, check=True, **ARGS)
    assert not plan.get("failed"), plan.get("msg")
    assert plan["supported"] is True and plan["freed_bytes"] == 0
    assert actions(plan["plan"]) == expected
    # containerd's collection then frees the images' blobs and snapshots, the leased blobs and the released snapshot
    collected = {(s["kind"], s["namespace"], s["id"]) for s in plan["plan"]} - expected
    assert ("snapshot", "default", made["snapshot"]) in collected and {k for k, _n, _i in collected} <= {"content", "snapshot", "ingest", "lease"}
    assert not [c for c in collected if c[1] == "k8s.io"]
    assert state(runtime) == before
    assert abs(so.used_bytes(runtime.imagefs_mountpoint) - used) < 64 * 1024
    # keep_images and an unset lease_max_age narrow the plan
    narrow = run(ansible, runtime, check=True, namespaces=["moby", "default"], ingest_max_age="1s", keep_images=["docker.io/library/default-*"])
    assert {(k, i) for k, _n, i in actions(narrow["plan"])} == {(k, i) for k, _n, i in expected} - {
        ("image", "docker.io/library/default-only:1"), ("lease", made["old_lease"]), ("gc_root", made["snapshot"])}
    assert made["snapshot"] not in [s["id"] for s in narrow["plan"]]

    res = run(ansible, runtime, **ARGS)
    assert not res.get("failed"), res.get("msg")
    assert res["changed"] is True and res["plan"] == plan["plan"]
    gone = {(g["kind"], g["namespace"], g["id"]) for g in res.get("already_gone") or []}
    # everything the plan predicted, containerd's collection removed
    assert res["removed"] == [s for s in res["plan"] if (s["kind"], s["namespace"], s["id"]) not in gone] and plan["removed"] == []
    assert not [w for w in res.get("warnings", []) if "kept" in w]
    assert abs(sum(s["bytes"] for s in res["plan"]) - freed_now(runtime, used)) <= 0.1 * freed_now(runtime, used) + 256 * 1024
    freed = used - so.used_bytes(runtime.imagefs_mountpoint)
    assert abs(res["freed_bytes"] - freed) <= 0.1 * freed
    made_bytes = sum(created[k] for k in ("moby_image", "default_image", "ingest", "expired_lease", "old_lease", "snapshot"))
    assert abs(freed - made_bytes) <= 0.1 * made_bytes, (freed, made_bytes)
    after = state(runtime)
    for ns in ("moby", "default"):
        assert after[ns] == {"images": [], "leases": [], "ingests": [], "snapshots": []}, after
    # the CRI's images are untouched, and the one in use still starts a container
    cid = runtime.add_container(runtime.run_pod("after", namespace="storage-ns"), "again", "registry.k8s.io/storage-k8s:1")
    assert runtime.client.container_status(cid).status.state == 1
    assert runtime.client.container_status(made["container"]).status.state == 1

    again = run(ansible, runtime, **ARGS)
    assert not again.get("failed"), again.get("msg")
    assert again["changed"] is False and again["plan"] == []


@pytest.mark.runtimes("one")
def test_storage_gc_refuses_k8s_io(ansible, runtime):
    if runtime.kind == "cri-o":
        return
    runtime.pull_images([ImageSpec("registry.k8s.io/refuse:1", size=so.MIB)])
    res = run(ansible, runtime, namespaces=["moby", "k8s.io"])
    assert res.get("failed") and res["changed"] is False
    assert "k8s.io" in res["msg"] and res["msg"].count(". ") == 0
    assert "registry.k8s.io/refuse:1" in {t for img in runtime.client.list_images() for t in img.repo_tags}


def _crio(ansible, runtime):
    runtime.pull_images([ImageSpec("registry.k8s.io/crio-storage:1", size=so.MIB)])
    images = sorted(img.id for img in runtime.client.list_images())
    for check in (True, False):
        res = run(ansible, runtime, check=check, **ARGS)
        assert not res.get("failed"), res.get("msg")
        assert res["supported"] is False and res["changed"] is False and res["plan"] == [] and res["freed_bytes"] == 0
        assert any("crio wipe" in w and "drain" in w for w in res.get("warnings", []))
    assert sorted(img.id for img in runtime.client.list_images()) == images


def _docker(ansible, runtime):
    """Docker Engine: build cache records unused for longer than build_cache_max_age and anonymous volumes no container
    references go, through Docker's API; check mode lists exactly what the real run frees (statvfs); named volumes,
    volumes a container references, images and every container (inside Kubernetes or not) stay."""
    import time

    from tests.integration import docker_objects as do

    made, created = do.create_all(runtime)
    time.sleep(2)  # the build cache records were last used at least this long ago
    images, containers = runtime.image_refs(), runtime.container_ids()
    volumes = {v["Name"] for v in runtime.api.request("VolumeList", "GET", "/volumes")["Volumes"]}
    used = do.used_bytes(runtime.imagefs_mountpoint)

    # unset options: nothing planned; containerd's options do nothing here, and say so
    idle = run(ansible, runtime, check=True, namespaces=["moby"])
    assert not idle.get("failed"), idle.get("msg")
    assert idle["supported"] is True and idle["plan"] == [] and any("namespaces" in w and "Docker" in w for w in idle["warnings"])
    only_cache = run(ansible, runtime, check=True, build_cache_max_age="1s")
    assert {s["kind"] for s in only_cache["plan"]} == {"build_cache"}
    assert run(ansible, runtime, check=True, build_cache_max_age="1h")["plan"] == []  # younger than an hour

    args = dict(build_cache_max_age="1s", remove_unused_volumes=True)
    plan = run(ansible, runtime, check=True, **args)
    assert not plan.get("failed"), plan.get("msg")
    assert plan["changed"] is False and plan["removed"] == [] and plan["freed_bytes"] == 0
    assert [s for s in plan["plan"] if s["kind"] == "volume"] == [{"kind": "volume", "id": made["dangling_volume"], "bytes": plan["plan"][-1]["bytes"]}]
    cache = [s for s in plan["plan"] if s["kind"] == "build_cache"]
    assert set(made["build_cache"]) <= {s["id"] for s in cache} and [s["kind"] for s in plan["plan"]] == ["build_cache"] * len(cache) + ["volume"]
    assert abs(do.used_bytes(runtime.imagefs_mountpoint) - used) < 64 * 1024  # check mode changed nothing

    res = run(ansible, runtime, **args)
    assert not res.get("failed"), res.get("msg")
    assert res["changed"] is True and res["plan"] == plan["plan"] and res["removed"] == plan["plan"]
    assert not res.get("already_gone") and not [w for w in res.get("warnings", []) if "kept" in w]
    freed = used - do.used_bytes(runtime.imagefs_mountpoint)
    planned = sum(s["bytes"] for s in plan["plan"])
    assert abs(planned - freed) <= 0.1 * freed + 256 * 1024, (planned, freed)  # check mode's bytes are what the run frees
    assert abs(res["freed_bytes"] - freed) <= 0.1 * freed
    made_bytes = created["dangling_volume"] + created["build_cache"]
    assert abs(freed - made_bytes) <= 0.1 * made_bytes + 256 * 1024, (freed, made_bytes)
    # what stays: every image, every container, the named volume and the anonymous one a container references
    assert runtime.image_refs() == images and runtime.container_ids() == containers
    left = {v["Name"] for v in runtime.api.request("VolumeList", "GET", "/volumes")["Volumes"]}
    assert left == volumes - {made["dangling_volume"]} and {"kept-data", made["anonymous_volume"]} <= left
    assert not {r["ID"] for r in runtime.api.system_df().get("BuildCache") or []} & {s["id"] for s in cache}

    again = run(ansible, runtime, **args)
    assert not again.get("failed"), again.get("msg")
    assert again["changed"] is False and again["plan"] == []
