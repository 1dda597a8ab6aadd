# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""kubenode_gc_remove_images on four real node containers, one per runtime: the audit shows the listed image on every
node; the cleanup (its --check first) removes it where no pod uses it; the second audit shows it only where pods still
use it.

node-a  cri-o 1.37 (containerd 1.6 without its binaries), a running pod shop/web uses the image
node-b  containerd 1.6, the image unused (and under a second tag)
node-c  containerd 2.x, a running pod shop/web uses the image
node-d  containerd 1.7, the image unused; a pod of the batch namespace whose exited container used it is gone from the
        API (kubenode_gc_active_pod_uids does not name it), so container GC frees the image first
Every node is far below its thresholds: the listed removal runs whatever the usage.
"""

import json
import os

import pytest

from devtools.images import ImageSpec
from devtools.nodes import node_images, remove_leftover_nodes
from tests.fleet.test_fleet import RUNTIMES, Fleet, add_node, image_ids

MIB = 1 << 20
VULN = "registry.example/vuln:1"
ALIAS = "registry.example/vuln-alias:7"
SAFE = "registry.example/safe:1"
USED_ON = ("node-a", "node-c")
VARS = ["-e", json.dumps({"kubenode_gc_remove_images": ["registry.example/vuln:*"], "kubenode_gc_active_pod_uids": ["uid-web"]})]


def tags(node):
    return {t for img in node.client.list_images() for t in img.repo_tags}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory, collections_path):
    images = node_images(sorted(set(RUNTIMES.values())))
    remove_leftover_nodes("listed")
    fleet = Fleet(str(tmp_path_factory.mktemp("listed")), collections_path)
    try:
        for name, runtime in RUNTIMES.items():
            if runtime == "cri-dockerd":
                continue  # the Docker node is test_fleet.py's
            node = add_node(fleet, name, "kgc-listed-" + name, images[runtime], runtime, "listed")
            node.pull_images([ImageSpec([VULN, ALIAS] if name == "node-b" else VULN, size=MIB), ImageSpec(SAFE, size=MIB)])
            if name in USED_ON:
                node.add_container(node.run_pod("web", namespace="shop", uid="uid-web"), "app", VULN, "running")
            if name == "node-d":
                node.add_container(node.run_pod("batch", namespace="jobs", uid="uid-batch"), "step", VULN, "exited")
        fleet.write_inventory()
        proc = fleet.playbook("configure")
        assert proc.returncode == 0, proc.stdout[-3000:]
        yield fleet
    finally:
        for node in fleet.nodes.values():
            node.stop()


def audit(fleet):
    proc = fleet.playbook("audit", *VARS)
    assert proc.returncode == 0, proc.stdout[-3000:]
    report_dir = os.path.join(fleet.workdir, "report")
    with open(os.path.join(report_dir, "report.json"), encoding="utf-8") as f:
        report = json.load(f)
    with open(os.path.join(report_dir, "report.md"), encoding="utf-8") as f:
        markdown = f.read()
    with open(os.path.join(report_dir, "report.html"), encoding="utf-8") as f:
        page = f.read()
    return report, markdown, page


def where(report):
    """{host: (state, [namespace/name of the pods])} of the listed image in the report (named by its first tag: on node-b,
    ALIAS)."""
    assert [i["ref"] for i in report["listed_images"]["images"]] in ([ALIAS, VULN], [VULN])
    return {n["host"]: (n["state"], ["%s/%s" % (p["namespace"], p["name"]) for p in n["pods"]])
            for image in report["listed_images"]["images"] for n in image["nodes"]}


@pytest.fixture(scope="module")
def first_audit(fleet):
    return audit(fleet)


def test_the_audit_shows_the_listed_image_on_every_node_with_its_pods(first_audit):
    report, markdown, page = first_audit
    assert where(report) == {"node-a": ("in_use", ["shop/web"]), "node-b": ("unused", []), "node-c": ("in_use", ["shop/web"]),
                             "node-d": ("in_use", ["jobs/batch"])}
    assert report["listed_images"]["nodes_with"] == 4 and report["listed_images"]["nodes_in_use"] == 3
    for node in report["nodes"]:
        assert [f["code"] for f in node["findings"] if f["code"] == "listed_image_present"] == ["listed_image_present"], node["host"]
        assert SAFE not in json.dumps(node["listed_images"])
    assert "## Listed images" in markdown and "| %s | node-a | in_use | used by shop/web (app, running) |" % VULN in markdown
    assert 'id="listed"' in page


@pytest.fixture(scope="module")
def cleanup(fleet, first_audit):
    before = {name: image_ids(node) for name, node in fleet.nodes.items()}
    plan = fleet.playbook("cleanup", "--check", *VARS)
    assert plan.returncode == 0, plan.stdout[-4000:]
    assert {name: image_ids(node) for name, node in fleet.nodes.items()} == before  # --check changed nothing
    proc = fleet.playbook("cleanup", *VARS, env={"ANSIBLE_CALLBACKS_ENABLED": "kubenode.gc.gc_summary"})
    assert proc.returncode == 0, proc.stdout[-4000:]
    return plan, proc


def test_the_cleanup_removes_it_where_unused_and_check_mode_listed_exactly_that(fleet, cleanup):
    plan, proc = cleanup
    for name, node in fleet.nodes.items():
        left = tags(node)
        assert SAFE in left and node.sandbox_image in left
        assert (VULN in left) is (name in USED_ON), name
        assert ALIAS not in left
        record = json.loads(node.exec("sh", "-c", "cat /var/lib/kubenode-gc/history/*.json"))
        assert record["status"] == "cleaned" and record["images"] == []  # below the thresholds: no threshold image GC
        removed = {t for i in record["listed_images"]["removed"] for t in i["repo_tags"]}
        present = {t: [(c["pod_namespace"], c["pod_name"]) for c in i["containers"]]
                   for i in record["listed_images"]["present"] if i["reason"] == "in_use" for t in i["repo_tags"]}
        if name in USED_ON:
            assert removed == set() and present == {VULN: [("shop", "web")]}
            assert "%s: listed images still present: %s: shop/web (app, running)." % (name, VULN) in proc.stdout
            assert "%s: listed images would remove: none." % name in plan.stdout
        else:
            assert removed == ({VULN, ALIAS} if name == "node-b" else {VULN}) and present == {}
            named = ALIAS if name == "node-b" else VULN  # an image is named by its first tag
            assert "%s: listed images removed: %s." % (name, named) in proc.stdout
            assert "%s: listed images would remove: %s." % (name, named) in plan.stdout
    assert "GC SUMMARY" in proc.stdout  # the callback's table says it too
    assert proc.stdout.count("node-a: listed images still present: %s" % VULN) >= 2


def test_the_second_audit_shows_it_only_where_pods_still_use_it(fleet, cleanup):
    report, markdown, _page = audit(fleet)
    assert where(report) == {"node-a": ("in_use", ["shop/web"]), "node-c": ("in_use", ["shop/web"])}
    assert report["listed_images"]["nodes_with"] == 2 and report["listed_images"]["nodes_in_use"] == 2
    nodes = {n["host"]: n for n in report["nodes"]}
    assert [h for h, n in sorted(nodes.items()) if any(f["code"] == "listed_image_present" for f in n["findings"])] == list(USED_ON)
    assert "| %s | node-b |" % VULN not in markdown
