# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""kubenode.gc.node_cleanup on every real runtime: the plan writes nothing, the real run completes an interrupted run's
record, writes its provisional record and removes exactly the unused image; a node below its threshold is skipped."""

import json
import os

import pytest

from devtools.images import ImageSpec

pytestmark = pytest.mark.runtimes("one")


def tags(runtime):
    return {t for i in runtime.client.list_images() for t in i.repo_tags}


def args(runtime, tmp_path, **kw):
    return dict(dict(host="node-x", cri_endpoint=runtime.endpoint, history_dir=str(tmp_path / "history"), image_mode="prune",
                     image_gc=dict(ledger_path=str(tmp_path / "ledger.json")), image_gc_overrides=dict(kubenode_gc_cleanup_image_min_age="0s"),
                     kubelet_config=dict(path=str(tmp_path / "none.yaml")),
                     container_gc=dict(pod_logs_dir=runtime.pod_logs)), **kw)


def test_node_cleanup_plans_then_cleans(ansible, runtime, tmp_path):
    runtime.pull_images([ImageSpec("registry.k8s.io/nc-used:1", size=64 << 10), ImageSpec("registry.k8s.io/nc-unused:1", size=64 << 10)])
    runtime.add_container(runtime.run_pod("nc", namespace="nc-ns"), "used", "registry.k8s.io/nc-used:1")
    before = tags(runtime)

    plan = ansible.module("kubenode.gc.node_cleanup", args(runtime, tmp_path), check=True)
    assert not plan.get("failed"), plan.get("msg")
    assert plan["status"] == "planned" and plan["changed"] is True
    assert any("registry.k8s.io/nc-unused:1" in r["repo_tags"] for r in plan["image_gc"]["removed"])
    assert not any("registry.k8s.io/nc-used:1" in r["repo_tags"] for r in plan["image_gc"]["removed"])
    assert plan["policy"]["sources"]["min_age"]["from"] == "variable kubenode_gc_cleanup_image_min_age"
    assert tags(runtime) == before and not os.path.exists(tmp_path / "history")

    # an interrupted run's provisional record: it saw an image that is gone now
    (tmp_path / "history").mkdir(mode=0o700)
    old = tmp_path / "history" / "20260101T000000.000000Z.json"
    old.write_text(json.dumps({"host": "node-x", "status": "interrupted", "in_progress": True, "images_before": [
        {"id": "sha256:" + "a" * 64, "repo_tags": ["gone:1"], "size": 7}]}, indent=2))
    res = ansible.module("kubenode.gc.node_cleanup", args(runtime, tmp_path))
    assert not res.get("failed"), res.get("msg")
    assert res["status"] == "cleaned" and res["changed"] is True
    assert res["interrupted_records"] == [str(old)]
    completed = json.loads(old.read_text())
    assert completed["in_progress"] is False and [i["repo_tags"] for i in completed["images"]] == [["gone:1"]]
    provisional = json.loads(open(res["record_file"]).read())
    assert provisional["in_progress"] is True and provisional["host"] == "node-x"
    assert "registry.k8s.io/nc-unused:1" in {t for i in provisional["images_before"] for t in i["repo_tags"]}
    assert oct(os.stat(res["record_file"]).st_mode & 0o777) == "0o600"
    left = tags(runtime)
    assert "registry.k8s.io/nc-unused:1" not in left and "registry.k8s.io/nc-used:1" in left
    assert [r["repo_tags"] for r in res["image_gc"]["removed"]] == [r["repo_tags"] for r in plan["image_gc"]["removed"]]


def test_node_cleanup_skips_a_node_below_its_threshold(ansible, runtime, tmp_path):
    res = ansible.module("kubenode.gc.node_cleanup", args(runtime, tmp_path, image_mode="threshold",
                                                          image_gc_overrides=dict(kubenode_gc_cleanup_high_threshold_percent=100,
                                                                                  kubenode_gc_cleanup_low_threshold_percent=99)))
    assert not res.get("failed"), res.get("msg")
    assert res["status"] == "skipped" and res["image_gc"] is None and res["container_gc"] is None and res["record_file"] is None
    assert res["reason"] == "imagefs usage %d%% is below the high threshold 100%% (variable kubenode_gc_cleanup_high_threshold_percent)" % res["usage_before"]


def test_node_cleanup_fails_with_cri_info_sentence(ansible, runtime, tmp_path):
    res = ansible.module("kubenode.gc.node_cleanup", dict(host="x", cri_endpoint="unix://" + str(tmp_path / "nothing.sock"), cri_timeout=2,
                                                          history_dir=str(tmp_path / "h")))
    assert res.get("failed") and res["status"] == "unreadable" and res["changed"] is False and "nothing.sock" in res["msg"]
    assert not os.path.exists(tmp_path / "h")
