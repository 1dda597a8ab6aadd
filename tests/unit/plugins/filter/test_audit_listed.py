# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The audit report's listed images (kubenode_gc_remove_images): per node and fleet-wide where each is and which pods use it,
the finding listed_image_present, and the section of report.json, report.md and report.html."""

import json

from tests.unit.plugins.filter.test_audit_report import build, by_host, check_html, cri_info, image_gc, kubelet_config, node, render

PATTERNS = ["*/vuln:*"]
WEB = {"pod_namespace": "shop", "pod_name": "web", "container": "app", "state": "running", "running": True}
BATCH = {"pod_namespace": "jobs", "pod_name": "batch", "container": "step", "state": "exited", "running": False}


def listed(removed=(), kept=()):
    gone = [{"id": "sha256:" + t, "repo_tags": ["docker.io/library/" + t], "size": 1024, "reason": "listed"} for t in removed]
    return {"changed": bool(removed), "errors": [], "removed": gone,
            "listed_kept": [{"id": "sha256:" + t, "repo_tags": ["docker.io/library/" + t], "patterns": PATTERNS, "reason": reason,
                             "containers": containers} for t, reason, containers in kept]}


def audited(host, result, patterns=tuple(PATTERNS)):
    return node(host, cri_info=cri_info(40), kubelet_config=kubelet_config(), image_gc_policy=image_gc([]), image_gc_prune=image_gc([]),
                image_listed=result, remove_images=list(patterns))


def fleet():
    return [
        audited("node-a", listed(removed=["vuln:1"], kept=[("vuln:run", "in_use", [WEB])])),
        audited("node-b", listed(removed=["vuln:1"], kept=[("vuln:exited", "in_use", [BATCH])])),
        audited("node-c", listed()),
        audited("node-d", {"failed": True, "msg": "images pattern 'x[' is not a valid glob."}),
    ]


def test_each_node_says_which_listed_images_it_holds_and_which_pods_use_them():
    report = build(fleet())
    nodes = by_host(report)
    a = nodes["node-a"]["listed_images"]
    assert a["patterns"] == PATTERNS and a["error"] is None
    assert [(i["ref"], i["state"], i["removable"], i["pods"]) for i in a["images"]] == [
        ("docker.io/library/vuln:1", "unused", True, []),
        ("docker.io/library/vuln:run", "in_use", False,
         [{"namespace": "shop", "name": "web", "container": "app", "state": "running", "running": True, "outside_kubernetes": False}])]
    (finding,) = [f for f in nodes["node-a"]["findings"] if f["code"] == "listed_image_present"]
    assert finding["severity"] == "warning" and finding["source"] == "image_gc"
    assert finding["message"] == ("2 listed image(s) (kubenode_gc_remove_images) on this node: docker.io/library/vuln:1 (unused: the cleanup "
                                  "removes it); docker.io/library/vuln:run (used by shop/web (app, running)).")
    assert nodes["node-c"]["listed_images"]["images"] == []
    assert not [f for f in nodes["node-c"]["findings"] if f["code"].startswith("listed")]
    assert nodes["node-d"]["listed_images"]["images"] is None
    assert [f["code"] for f in nodes["node-d"]["findings"] if f["code"].startswith("listed")] == ["listed_plan_failed"]


def test_fleet_wide_each_listed_image_names_its_nodes_and_pods():
    fleet_view = build(fleet())["listed_images"]
    assert fleet_view["patterns"] == PATTERNS and fleet_view["nodes_with"] == 2 and fleet_view["nodes_in_use"] == 2
    assert [(i["ref"], i["node_count"], i["in_use_nodes"], [n["host"] for n in i["nodes"]]) for i in fleet_view["images"]] == [
        ("docker.io/library/vuln:1", 2, 0, ["node-a", "node-b"]),
        ("docker.io/library/vuln:exited", 1, 1, ["node-b"]),
        ("docker.io/library/vuln:run", 1, 1, ["node-a"])]
    json.dumps(fleet_view)


def test_no_listed_images_no_section():
    report = build([audited("node-a", None, patterns=[])])
    assert report["listed_images"] is None and by_host(report)["node-a"]["listed_images"] is None
    assert "Listed images" not in render("md", report) and 'id="listed"' not in render("html", report)


def test_markdown_and_html_sections_name_each_image_node_and_pod():
    report = build(fleet())
    md = render("md", report)
    assert "## Listed images" in md
    assert "| docker.io/library/vuln:run | node-a | in_use | used by shop/web (app, running) |" in md
    assert "| docker.io/library/vuln:exited | node-b | in_use | used by jobs/batch (step, exited) |" in md
    assert "| docker.io/library/vuln:1 | node-b | unused | unused: the cleanup removes it |" in md
    html = render("html", report)
    checker = check_html(html)
    assert "listed" in checker.ids
    assert "used by shop/web (app, running)" in "".join(checker.text)
