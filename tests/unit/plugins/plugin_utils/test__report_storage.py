# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The audit report's storage view: per-node breakdown, findings, the fleet's top consumers (through audit_report)."""

from ansible_collections.kubenode.gc.plugins.filter import audit_report as ar
from ansible_collections.kubenode.gc.plugins.plugin_utils import _report_storage as rs

MiB = 1 << 20


def disk_usage(used, **bytes_by_category):
    names = ("k8s_images", "unpacked_layer_blobs", "other_namespace_images", "writable_layers", "container_logs", "stale_ingests", "leased",
             "unreferenced_snapshots", "unaccounted")
    cats = {name: {"bytes": 0, "objects": []} for name in names}
    for name, value in bytes_by_category.items():
        cats[name] = value if isinstance(value, dict) else {"bytes": value, "objects": []}
    return {"changed": False, "used_bytes": used, "categories": cats, "nodefs": None}


def test_breakdown_findings_and_top():
    leased = {"bytes": 2 * MiB, "objects": [{"namespace": "default", "id": "old", "bytes": 2 * MiB, "expired": True}]}
    others = {"bytes": 50 * MiB, "objects": [{"namespace": "moby", "name": "golang:1", "bytes": 50 * MiB}]}
    raw = [
        {"host": "a", "disk_usage": disk_usage(100 * MiB, k8s_images=40 * MiB, stale_ingests=3 * MiB, leased=leased, other_namespace_images=others,
                                               unreferenced_snapshots=MiB, unaccounted=4 * MiB)},
        {"host": "b", "disk_usage": disk_usage(100 * MiB, k8s_images=60 * MiB, unaccounted=40 * MiB)},
        {"host": "c", "disk_usage": {"failed": True, "msg": "boom"}},
    ]
    nodes = [{"host": r["host"], "findings": []} for r in raw]
    top = rs.add(nodes, raw)
    by = {n["host"]: n for n in nodes}
    assert by["a"]["storage"]["categories"]["other_namespace_images"] == 50 * MiB and by["c"]["storage"] is None
    assert sorted(f["code"] for f in by["a"]["findings"]) == ["expired_leases", "other_namespace_images", "stale_ingests", "unreferenced_snapshots"]
    assert "moby" in [f for f in by["a"]["findings"] if f["code"] == "other_namespace_images"][0]["message"]
    assert [f["code"] for f in by["b"]["findings"]] == ["large_unaccounted"]
    assert top["k8s_images"] == [{"host": "b", "bytes": 60 * MiB}, {"host": "a", "bytes": 40 * MiB}]
    assert "writable_layers" not in top


def test_crio_null_categories_are_kept_null():
    result = disk_usage(10 * MiB, k8s_images=5 * MiB)
    result["categories"]["leased"] = None
    assert rs.breakdown(result)["categories"]["leased"] is None


def test_audit_report_carries_storage():
    report = ar.audit_report([{"host": "n1", "disk_usage": disk_usage(10 * MiB, k8s_images=9 * MiB, stale_ingests=MiB)}])
    node = report["nodes"][0]
    assert node["storage"]["categories"]["stale_ingests"] == MiB
    assert "stale_ingests" in [f["code"] for f in node["findings"]]
    assert report["summary"]["findings"]["warning"] >= 1
    assert report["storage_top"]["k8s_images"] == [{"host": "n1", "bytes": 9 * MiB}]


def test_markdown_shows_breakdown_and_top():
    from ansible_collections.kubenode.gc.plugins.plugin_utils import _report_md

    report = ar.audit_report([{"host": "n1", "disk_usage": disk_usage(10 * MiB, k8s_images=9 * MiB, stale_ingests=MiB)}])
    text = _report_md.render(report)
    assert "## Disk use by category" in text and "| k8s_images | n1 9.0 MiB |" in text.replace("9 MiB", "9.0 MiB")
    assert "- Disk use of 10" in text and "stale_ingests 1" in text


def test_html_shows_each_nodes_breakdown_with_its_largest_objects_and_the_fleets_top():
    from ansible_collections.kubenode.gc.plugins.plugin_utils import _report_html

    others = {"bytes": 50 * MiB, "objects": [{"namespace": "moby", "name": "golang:<1>", "id": "sha256:g", "bytes": 30 * MiB},
                                             {"namespace": "default", "id": "sha256:d", "bytes": 20 * MiB}]}
    k8s = {"bytes": 40 * MiB, "objects": [{"namespace": "k8s.io", "name": "app:%d" % n, "bytes": (10 - n) * MiB} for n in range(10)]}
    raw = [{"host": "a", "disk_usage": disk_usage(100 * MiB, k8s_images=k8s, other_namespace_images=others, unaccounted=10 * MiB)},
           {"host": "b", "disk_usage": disk_usage(100 * MiB, k8s_images=60 * MiB, unaccounted=40 * MiB)}]
    report = ar.audit_report(raw)
    a = report["nodes"][0]["storage"]
    # the report keeps the largest objects of each category (three), as strings and bytes
    assert a["objects"]["other_namespace_images"] == [{"namespace": "moby", "name": "golang:<1>", "id": "sha256:g", "bytes": 30 * MiB},
                                                      {"namespace": "default", "name": None, "id": "sha256:d", "bytes": 20 * MiB}]
    assert [o["name"] for o in a["objects"]["k8s_images"]] == ["app:0", "app:1", "app:2"]
    html = _report_html.render(report)
    detail = html[html.index('id="node-a"'):html.index("</details>", html.index('id="node-a"'))]
    assert "Disk use of the image filesystem: 100.0 MiB used" in detail.replace("100 MiB", "100.0 MiB")
    assert ('<tr><td>other_namespace_images</td><td class="num">50.0 MiB</td><td class="num">50%</td>'
            '<td>moby/golang:&lt;1&gt; 30.0 MiB, default/sha256:d 20.0 MiB</td></tr>') in detail
    assert "k8s.io/app:2 8.0 MiB" in detail and "app:3" not in detail
    assert "stale_ingests" not in detail  # categories without bytes are left out
    top = html[html.index('<section class="panel" id="storage">'):]
    top = top[:top.index("</section>")]
    assert ('<tr data-category="k8s_images"><td><code>k8s_images</code></td><td class="num">2</td><td class="num">100.0 MiB</td>'
            '<td><a class="host" href="#node-b">b</a> 60.0 MiB, <a class="host" href="#node-a">a</a> 40.0 MiB</td></tr>') in top
    assert 'data-category="other_namespace_images"' in top and 'data-category="leased"' not in top
    # cri-o: a category it cannot see reads "not visible"; a report without disk_usage says so
    crio = disk_usage(10 * MiB, k8s_images=5 * MiB)
    crio["categories"]["leased"] = None
    html = _report_html.render(ar.audit_report([{"host": "c", "disk_usage": crio}]))
    assert '<tr><td>leased</td><td class="num"><span class="muted">not visible</span></td><td class="num">-</td><td>-</td></tr>' in html
    assert "No node's disk use was attributed (kubenode.gc.disk_usage)." in _report_html.render(ar.audit_report([{"host": "d"}]))


def test_the_second_copy_of_unpacked_images_is_an_info_finding_per_node_and_a_fleet_total():
    from ansible_collections.kubenode.gc.plugins.plugin_utils import _report_html, _report_md

    blobs = {"bytes": 30 * MiB, "objects": [{"namespace": "k8s.io", "id": "sha256:l1", "bytes": 20 * MiB, "images": ["app:1", "app:2"]},
                                            {"namespace": "k8s.io", "id": "sha256:l2", "bytes": 10 * MiB, "images": ["app:1"]}]}
    raw = [{"host": "a", "disk_usage": disk_usage(100 * MiB, k8s_images=60 * MiB, unpacked_layer_blobs=blobs, unaccounted=10 * MiB)},
           {"host": "b", "disk_usage": disk_usage(100 * MiB, k8s_images=80 * MiB, unpacked_layer_blobs=12 * MiB, unaccounted=8 * MiB)},
           {"host": "c", "disk_usage": disk_usage(100 * MiB, k8s_images=90 * MiB, unaccounted=10 * MiB)}]
    report = ar.audit_report(raw)
    by = {n["host"]: n for n in report["nodes"]}
    found = [f for f in by["a"]["findings"] if f["code"] == "unpacked_layer_blobs"]
    assert [(f["source"], f["severity"]) for f in found] == [("disk_usage", "info")]
    assert found[0]["message"].startswith("30.0 MiB in the compressed layer blobs of images containerd has unpacked") or \
        found[0]["message"].startswith("30 MiB in the compressed layer blobs")
    assert "storage_gc discard_unpacked_layers" in found[0]["message"]
    assert not [f for f in by["c"]["findings"] if f["code"] == "unpacked_layer_blobs"]
    assert report["summary"]["unpacked_layer_blob_bytes"] == 42 * MiB
    assert report["storage_top"]["unpacked_layer_blobs"] == [{"host": "a", "bytes": 30 * MiB}, {"host": "b", "bytes": 12 * MiB}]
    assert by["a"]["storage"]["objects"]["unpacked_layer_blobs"][0] == {"namespace": "k8s.io", "name": None, "id": "sha256:l1", "bytes": 20 * MiB}
    text = _report_md.render(report)
    assert "- Compressed layer blobs of unpacked images (storage_gc discard_unpacked_layers): 42" in text
    assert "| unpacked_layer_blobs | a 30" in text
    html = _report_html.render(report)
    assert "second copy of layers" in html and 'data-category="unpacked_layer_blobs"' in html


def test_docker_nodes_have_their_own_categories_and_findings():
    from ansible_collections.kubenode.gc.plugins.module_utils.storage import _docker_storage

    cats = {name: {"bytes": 0, "objects": []} for name in _docker_storage.CATEGORIES}
    cats.update(k8s_images={"bytes": 50 * MiB, "objects": []}, build_cache={"bytes": 7 * MiB, "objects": [{"id": "r1", "bytes": 7 * MiB}]},
                volumes={"bytes": 3 * MiB, "objects": [{"name": "a" * 64, "bytes": 2 * MiB, "in_use": False, "anonymous": True},
                                                       {"name": "data", "bytes": MiB, "in_use": False, "anonymous": False}]},
                non_k8s_containers={"bytes": 4 * MiB, "objects": [{"id": "c1", "name": "ci-runner", "bytes": 4 * MiB, "image": "tools:1",
                                                                   "state": "running"}]},
                unaccounted={"bytes": MiB, "objects": []})
    docker = {"changed": False, "used_bytes": 65 * MiB, "categories": cats, "nodefs": None}
    report = ar.audit_report([{"host": "d1", "disk_usage": docker}, {"host": "c1", "disk_usage": disk_usage(10 * MiB, k8s_images=9 * MiB)}])
    by = {n["host"]: n for n in report["nodes"]}
    assert list(by["d1"]["storage"]["categories"]) == ["k8s_images", "writable_layers", "non_k8s_containers", "container_logs",
                                                       "volumes", "build_cache", "unaccounted"]
    assert "build_cache" not in by["c1"]["storage"]["categories"] and "leased" in by["c1"]["storage"]["categories"]
    codes = {f["code"]: f for f in by["d1"]["findings"]}
    assert set(codes) == {"build_cache", "unused_volumes", "non_k8s_containers"}
    assert codes["non_k8s_containers"]["severity"] == "info" and "ci-runner" in codes["non_k8s_containers"]["message"]
    assert "1 anonymous Docker volume(s)" in codes["unused_volumes"]["message"] and "remove_unused_volumes" in codes["unused_volumes"]["message"]
    assert report["storage_top"]["build_cache"] == [{"host": "d1", "bytes": 7 * MiB}]
    assert report["storage_top"]["k8s_images"] == [{"host": "d1", "bytes": 50 * MiB}, {"host": "c1", "bytes": 9 * MiB}]
    from ansible_collections.kubenode.gc.plugins.plugin_utils import _report_html, _report_md

    text = _report_md.render(report)
    assert "build_cache 7.0 MiB" in text and "non_k8s_containers 4.0 MiB" in text
    html = _report_html.render(report)
    assert '<tr data-category="build_cache">' in html and '<tr data-category="volumes">' in html
