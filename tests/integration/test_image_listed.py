# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""kubenode.gc.image_gc mode=listed on every real runtime: exactly the named images no container uses go, and the result
names the rest with their pods or rule."""

import json

import pytest

from devtools.images import ImageSpec
from tests.integration.expectations import expect
from tests.integration.test_image_gc import MIB, gc, tags_left

from ansible_collections.kubenode.gc.plugins.module_utils.cri._snapshot import full_names

pytestmark = pytest.mark.runtimes("every")

LIB = "docker.io/library/"


@pytest.fixture
def node(runtime):
    """A node holding: vuln:1 unused; retired:1, also tagged other-name:7, unused (listed by its digest only); vuln:run used by a
    running container; vuln:exited used by an exited one; a keep-listed registry.example.com/vuln:1; good:1, not listed; and
    the sandbox image."""
    runtime.pull_images([
        ImageSpec("vuln:1", size=MIB),
        ImageSpec(["retired:1", "other-name:7"], size=MIB),
        ImageSpec("vuln:run", size=MIB),
        ImageSpec("vuln:exited", size=MIB),
        ImageSpec("registry.example.com/vuln:1", size=MIB),
        ImageSpec("good:1", size=MIB),
    ])
    web = runtime.run_pod("web", namespace="shop")
    runtime.add_container(web, "app", "vuln:run", "running")
    batch = runtime.run_pod("batch", namespace="jobs")
    runtime.exited = runtime.add_container(batch, "step", "vuln:exited", "exited")
    # names in full (Docker lists docker.io's by their short names)
    (retired,) = [i for i in runtime.client.list_images() if LIB + "retired:1" in full_names(i.repo_tags)]
    # by repo digest (repository@sha256:...) where the runtime gives offline images one (cri-o), else by its sha256: id (containerd)
    runtime.retired_digest = sorted(full_names(retired.repo_digests))[0] if expect(runtime).repo_digests else retired.id
    assert runtime.retired_digest.startswith(("docker.io/library/retired@sha256:", "docker.io/library/other-name@sha256:", "sha256:"))
    return runtime


def listed(ansible, runtime, check=False, **args):
    sandbox_repo = runtime.sandbox_image.rsplit(":", 1)[0]
    args.setdefault("images", ["*/vuln:*", runtime.retired_digest, sandbox_repo + ":*"])
    args.setdefault("keep_images", ["registry.example.com/*"])
    return gc(ansible, runtime, check=check, mode="listed", **args)


def test_listed_removes_exactly_the_unused_named_images_and_names_the_pods_of_the_rest(ansible, node, tmp_path):
    runtime = node
    before = tags_left(runtime)
    ledger = str(tmp_path / "ledger.json")
    plan = listed(ansible, runtime, check=True, ledger_path=ledger)
    assert not plan.get("failed"), plan.get("msg")
    assert tags_left(runtime) == before  # check mode changed nothing
    assert plan["changed"] is True and plan["ledger"]["saved"] is False

    real = listed(ansible, runtime, ledger_path=ledger)
    assert not real.get("failed"), real.get("msg")
    assert sorted(r["id"] for r in real["removed"]) == sorted(r["id"] for r in plan["removed"])
    assert {t for r in real["removed"] for t in r["repo_tags"]} == {LIB + "vuln:1", LIB + "retired:1", LIB + "other-name:7"}
    assert {r["reason"] for r in real["removed"]} == {"listed"}
    assert tags_left(runtime) == {runtime.sandbox_image, LIB + "vuln:run", LIB + "vuln:exited", "registry.example.com/vuln:1", LIB + "good:1"}
    assert real["changed"] is True and real["errors"] == []
    assert real["bytes_freed_estimated"] == sum(r["size"] for r in real["removed"])
    assert "vuln:1" in real["diff"]["before"] and LIB + "vuln:1" not in real["diff"]["after"]
    assert real["ledger"]["saved"] is True
    with open(ledger, encoding="utf-8") as f:
        assert not {r["id"] for r in real["removed"]} & set(json.load(f)["images"])

    kept = {k["repo_tags"][0]: k for k in real["listed_kept"]}
    assert set(kept) == {runtime.sandbox_image, LIB + "vuln:run", LIB + "vuln:exited", "registry.example.com/vuln:1"}
    assert kept[LIB + "vuln:run"]["reason"] == "in_use" and kept[LIB + "vuln:run"]["patterns"] == ["*/vuln:*"]
    assert kept[LIB + "vuln:run"]["containers"] == [
        {"pod_namespace": "shop", "pod_name": "web", "container": "app", "state": "running", "running": True, "outside_kubernetes": False}]
    assert kept[LIB + "vuln:exited"]["containers"] == [
        {"pod_namespace": "jobs", "pod_name": "batch", "container": "step", "state": "exited", "running": False, "outside_kubernetes": False}]
    assert (kept[runtime.sandbox_image]["reason"], kept[runtime.sandbox_image]["containers"]) == ("sandbox", [])
    assert (kept["registry.example.com/vuln:1"]["reason"], kept["registry.example.com/vuln:1"]["containers"]) == ("keep_list", [])
    warned = " ".join(real["warnings"])
    assert "%s), the runtime's sandbox image: it is never removed and stays." % runtime.sandbox_image in warned
    assert "(registry.example.com/vuln:1), kept by keep_images: it is never removed and stays." in warned
    assert real["kept"]["in_use"] == 2 and real["kept"]["sandbox"] == 1 and real["kept"]["keep_list"] == 1
    assert real["kept"]["not_needed"] == 1  # good:1, which no pattern names

    again = listed(ansible, runtime, ledger_path=ledger)
    assert again["changed"] is False and again["removed"] == []
    assert tags_left(runtime) == {runtime.sandbox_image, LIB + "vuln:run", LIB + "vuln:exited", "registry.example.com/vuln:1", LIB + "good:1"}

    # once the exited container is gone (container GC), its image goes too; the running one's stays
    runtime.client.remove_container(runtime.exited)
    freed = listed(ansible, runtime)
    assert [t for r in freed["removed"] for t in r["repo_tags"]] == [LIB + "vuln:exited"]
    assert LIB + "vuln:exited" not in tags_left(runtime) and LIB + "vuln:run" in tags_left(runtime)


@pytest.mark.runtimes("one")
@pytest.mark.parametrize("args, msg", [
    (dict(mode="listed"), "mode=listed needs images, the patterns of the images to remove (as in keep_images); none were given."),
    (dict(mode="listed", images=["vuln:*", ""]), "images must not contain an empty pattern; remove it or name the image to remove."),
    (dict(mode="prune", images=["vuln:*"]),
     "images names the images mode=listed removes; it is not used with mode=prune, so remove it or set mode=listed."),
])
def test_bad_images_fail_in_one_sentence_and_change_nothing(ansible, node, args, msg):
    before = tags_left(node)
    res = gc(ansible, node, **args)
    assert res["failed"] is True and res["msg"] == msg
    assert tags_left(node) == before


@pytest.mark.runtimes("one")
def test_node_cleanup_removes_listed_images_below_the_thresholds_after_container_gc_and_check_mode_lists_exactly_that(ansible, node, tmp_path):
    """kubenode_gc_remove_images through node_cleanup on a node below its thresholds: container GC removes the exited
    container of a deleted pod (jobs/batch), so its image goes too; --check lists exactly the real run's removals."""
    runtime = node
    args = dict(host="node-x", cri_endpoint=runtime.endpoint, history_dir=str(tmp_path / "history"), image_mode="threshold",
                image_gc=dict(ledger_path=str(tmp_path / "ledger.json")), kubelet_config=dict(path=str(tmp_path / "none.yaml")),
                image_gc_overrides=dict(kubenode_gc_cleanup_high_threshold_percent=100, kubenode_gc_cleanup_low_threshold_percent=99),
                container_gc=dict(pod_logs_dir=runtime.pod_logs, active_pod_uids=["uid-shop-web"]),
                keep_images=["registry.example.com/*"], remove_images=["*/vuln:*", runtime.retired_digest])
    before = tags_left(runtime)
    plan = ansible.module("kubenode.gc.node_cleanup", args, check=True)
    assert not plan.get("failed"), plan.get("msg")
    assert plan["status"] == "planned" and plan["image_gc"] is None and "below the high threshold 100%" in plan["image_gc_skipped"]
    assert tags_left(runtime) == before and not (tmp_path / "history").exists()

    res = ansible.module("kubenode.gc.node_cleanup", args)
    assert not res.get("failed"), res.get("msg")
    assert res["status"] == "cleaned" and res["image_gc"] is None
    gone = {LIB + "vuln:1", LIB + "retired:1", LIB + "other-name:7", LIB + "vuln:exited"}
    assert {t for r in res["image_listed"]["removed"] for t in r["repo_tags"]} == gone
    assert sorted(r["id"] for r in res["image_listed"]["removed"]) == sorted(r["id"] for r in plan["image_listed"]["removed"])
    assert tags_left(runtime) == before - gone
    assert [(k["repo_tags"], k["containers"]) for k in res["image_listed"]["listed_kept"] if k["reason"] == "in_use"] == [
        ([LIB + "vuln:run"], [{"pod_namespace": "shop", "pod_name": "web", "container": "app", "state": "running", "running": True,
                               "outside_kubernetes": False}])]
