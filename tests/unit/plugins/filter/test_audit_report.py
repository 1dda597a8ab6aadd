# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The fleet audit filters and the HTML/Markdown report templates, from realistic per-node dicts."""

import copy
import json
import os
import re
from html.parser import HTMLParser

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.kubenode.gc.plugins.filter import audit_render
from ansible_collections.kubenode.gc.plugins.filter import audit_report as ar
from ansible_collections.kubenode.gc.plugins.plugin_utils import _report_fleet as report_fleet

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
GiB = 1024 ** 3
MiB = 1024 ** 2


# ---------------------------------------------------------------------------------------------- realistic inputs
def cri_info(usage, capacity=50 * GiB, images=None, containers=3, kind="image"):
    available = capacity * (100 - usage) // 100
    return {
        "changed": False,
        "runtime": {"name": "containerd", "version": "1.6.20~ds1", "api_version": "v1",
                    "endpoint": "unix:///run/containerd/containerd.sock", "sandbox_image": "registry.k8s.io/pause:3.6"},
        "imagefs": [{"kind": kind, "mountpoint": "/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs",
                     "used_bytes": capacity - available - GiB, "capacity_bytes": capacity, "available_bytes": available,
                     "inodes_total": 3276800, "inodes_free": 3000000, "inodes_used": 276800, "usage_percent": usage}],
        "split_imagefs": False,
        "images": images if images is not None else [
            {"id": "sha256:aaa", "repo_tags": ["registry.k8s.io/pause:3.6"], "size": 300000, "pinned": True, "sandbox_image": True,
             "in_use": True, "used_by": []},
            {"id": "sha256:bbb", "repo_tags": ["docker.io/library/app:1"], "size": 700 * MiB, "pinned": False,
             "sandbox_image": False, "in_use": False, "used_by": []},
            {"id": "sha256:ccc", "repo_tags": ["docker.io/library/app:2"], "size": 710 * MiB, "pinned": False,
             "sandbox_image": False, "in_use": True, "used_by": ["c1"]},
        ],
        "containers": [{"id": "c%d" % i, "state": "running"} for i in range(containers)],
        "sandboxes": [],
        "rpc_calls": {"Version": 1},
    }


def kubelet_config(high=85, low=80, findings=()):
    return {"changed": False, "effective": {"imageGCHighThresholdPercent": high, "imageGCLowThresholdPercent": low,
                                            "imageMinimumGCAge": "2m0s", "imageMaximumGCAge": "0s",
                                            "evictionHard": {"imagefs.available": "15%"}},
            "findings": list(findings)}


def runtime_config(findings=()):
    return {"changed": False, "runtime": "containerd", "current": {"root": "/var/lib/containerd"}, "findings": list(findings)}


def image_gc(removed_sizes, usage_before=50, insufficient=False, bytes_to_free=0):
    removed = [{"id": "sha256:%02d" % i, "repo_tags": ["docker.io/library/x:%d" % i], "size": size, "reason": "space",
                "first_detected": "2026-11-01T10:00:00.000000000Z", "last_used": None} for i, size in enumerate(removed_sizes)]
    return {"changed": True, "removed": removed, "kept": {"in_use": 2}, "usage_before": usage_before, "usage_after": usage_before,
            "bytes_to_free": bytes_to_free, "bytes_freed_estimated": sum(removed_sizes), "bytes_freed_measured": None,
            "target_reached": not insufficient, "insufficient": insufficient, "errors": []}


def container_gc(containers=0, sandboxes=0):
    return {"changed": bool(containers or sandboxes), "removed_containers": [{"id": "x%d" % i} for i in range(containers)],
            "removed_sandboxes": [{"id": "s%d" % i} for i in range(sandboxes)], "removed_log_paths": [], "kept": {}, "errors": []}


def node(host, **kw):
    out = dict(host=host, error=None, cri_info=None, kubelet_config=None, runtime_config=None, image_gc_policy=None,
               image_gc_prune=None, container_gc=None, drift=[], metrics_file=None)
    out.update(kw)
    return out


def fleet():
    return [
        # over its high threshold (usage 91 >= 85), kubelet GC cannot free enough
        node("node-c", cri_info=cri_info(91), kubelet_config=kubelet_config(),
             runtime_config=runtime_config([{"severity": "info", "code": "config_version_1", "message": "Old format."}]),
             image_gc_policy=image_gc([700 * MiB], usage_before=91, insufficient=True, bytes_to_free=5 * GiB),
             image_gc_prune=image_gc([700 * MiB, 20 * MiB], usage_before=91),
             container_gc=container_gc(4, 2), metrics_file="/var/lib/node_exporter/textfile/kubenode_gc.prom"),
        # under its (custom) threshold
        node("node-a", cri_info=cri_info(40), kubelet_config=kubelet_config(90, 70), runtime_config=runtime_config(),
             image_gc_policy=image_gc([]), image_gc_prune=image_gc([700 * MiB]), container_gc=container_gc()),
        # drifted, and a warning from the kubelet config
        node("node-b", cri_info=cri_info(60), runtime_config=runtime_config(),
             kubelet_config=kubelet_config(findings=[
                 {"severity": "warning", "code": "eviction_before_gc", "message": "evictionHard imagefs.available 15% evicts pods first."},
                 {"severity": "error", "code": "low_not_below_high", "message": "imageGCLowThresholdPercent 90 must be less than 85."}]),
             image_gc_policy=image_gc([]), image_gc_prune=image_gc([]), container_gc=container_gc(1),
             drift=[{"component": "kubelet", "key": "imageMaximumGCAge", "desired": "168h", "actual": "0s"},
                    {"component": "containerd", "key": "sandbox_image", "desired": "registry.k8s.io/pause:3.10",
                     "actual": "registry.k8s.io/pause:3.6"}]),
        # unreachable
        node("node-e", error="Failed to connect to the host via ssh: ssh: connect to host node-e port 22: No route to host",
             cri_info={"unreachable": True, "msg": "unreachable"}, kubelet_config={"skipped": True, "skip_reason": "unreachable"}),
        # cri_info failed, runtime_config skipped, the rest fine
        node("node-d", cri_info={"failed": True, "msg": "CRI endpoint unix:///run/containerd/containerd.sock does not exist."},
             kubelet_config=kubelet_config(), runtime_config={"skipped": True, "skip_reason": "Conditional result was False"},
             image_gc_policy=None, image_gc_prune={"failed": True, "msg": "boom"}, container_gc=container_gc()),
    ]


def build(nodes=None, **kw):
    return ar.audit_report(fleet() if nodes is None else nodes, generated_at="2026-11-22T10:00:00Z",
                           policy=kw.get("policy", {"image_gc_high_threshold_percent": 85, "image_max_age": "168h"}))


def threshold_keys(node):
    return {k: node["thresholds"][k] for k in ("high_percent", "low_percent", "source")}


def by_host(report):
    return {n["host"]: n for n in report["nodes"]}


# ---------------------------------------------------------------------------------------------- the report
NODE_KEYS = {"host", "status", "health", "error", "runtime", "imagefs", "container_filesystems", "thresholds", "headroom",
             "over_high_threshold", "images", "containers", "findings", "drift", "parts_failed", "metrics_file", "eviction_signals", "near_eviction"}
NODE_KEYS |= {"credential_records", "pinning", "storage"}
NODE_KEYS |= {"gc_timer"}
NODE_KEYS |= {"listed_images"}


def test_schema_fields_and_types():
    report = build()
    assert set(report) == {"schema_version", "generated_at", "policy", "summary", "nodes", "images", "storage_top", "listed_images"}
    assert report["listed_images"] is None  # no kubenode_gc_remove_images
    assert report["schema_version"] == 2
    assert report["generated_at"] == "2026-11-22T10:00:00Z"
    assert report["policy"] == {"image_gc_high_threshold_percent": 85, "image_max_age": "168h"}
    assert set(report["summary"]) == {"nodes", "nodes_ok", "nodes_failed", "nodes_over_high_threshold", "nodes_with_drift", "findings",
                                      "reclaimable_bytes_policy", "reclaimable_bytes_prune", "nodes_by_health", "usage_percent_mean",
                                      "usage_percent_max", "image_refs", "nodes_near_eviction", "unpacked_layer_blob_bytes"}
    assert set(report["summary"]["findings"]) == {"error", "warning", "info"}
    for n in report["nodes"]:
        assert set(n) == NODE_KEYS
        assert set(n["runtime"]) == {"name", "version", "endpoint", "sandbox_image"}
        assert set(n["imagefs"]) == {"mountpoint", "capacity_bytes", "used_bytes", "available_bytes", "usage_percent", "inodes_usage_percent"}
        assert set(n["thresholds"]) == {"high_percent", "low_percent", "source", "eviction_available", "eviction_available_bytes",
                                        "eviction_source", "inodes_high_percent", "inodes_low_percent", "free_bytes_high", "free_bytes_low"}
        assert [s["signal"] for s in n["eviction_signals"]] == ["imagefs.available", "imagefs.inodesFree", "nodefs.available", "nodefs.inodesFree"]
        for sig in n["eviction_signals"]:
            assert set(sig) == {"signal", "threshold", "source", "free_percent", "threshold_percent", "state"}
            assert sig["state"] in ("reached", "near", "ok", "off", "unknown")
        assert isinstance(n["near_eviction"], bool)
        assert set(n["headroom"]) == {"high_threshold_bytes", "eviction_bytes", "free_bytes_high_bytes"}
        assert n["health"] in ("critical", "failed", "warning", "ok")
        assert set(n["images"]) == {"total", "in_use", "reclaimable_policy", "reclaimable_prune"}
        assert set(n["images"]["reclaimable_prune"]) == {"count", "bytes"}
        assert set(n["containers"]) == {"total", "reclaimable", "sandboxes"}
        assert n["status"] in ("ok", "failed")
        assert isinstance(n["over_high_threshold"], bool)
        for f in n["findings"]:
            assert set(f) == {"source", "severity", "code", "message"}
            assert f["source"] in ("kubelet_config", "runtime_config", "image_gc", "container_gc", "audit", "disk_usage")
    # JSON-serialisable as it is
    json.dumps(report)


def test_summary():
    s = build()["summary"]
    assert s["nodes"] == 5
    assert s["nodes_ok"] == 4
    assert s["nodes_failed"] == 1
    assert s["nodes_over_high_threshold"] == 1
    assert s["nodes_with_drift"] == 1
    assert s["reclaimable_bytes_policy"] == 700 * MiB
    assert s["reclaimable_bytes_prune"] == 720 * MiB + 700 * MiB
    # node-c: info + over_high_threshold + gc_insufficient + eviction_threshold_reached; node-b: warning + error;
    # node-d: part_failed x2, part_skipped
    assert s["findings"] == {"error": 4, "warning": 4, "info": 1}


def test_node_over_threshold():
    n = by_host(build())["node-c"]
    assert n["status"] == "ok" and n["error"] is None
    assert n["over_high_threshold"] is True
    assert n["thresholds"] == {"high_percent": 85, "low_percent": 80, "source": "kubelet_config", "eviction_available": "15%",
                               "eviction_available_bytes": 50 * GiB * 15 // 100, "eviction_source": "kubelet_config",
                               "inodes_high_percent": None, "inodes_low_percent": None, "free_bytes_high": None, "free_bytes_low": None}
    assert n["imagefs"]["usage_percent"] == 91
    assert n["imagefs"]["capacity_bytes"] == 50 * GiB
    assert n["runtime"]["name"] == "containerd"
    assert n["images"] == {"total": 3, "in_use": 2, "reclaimable_policy": {"count": 1, "bytes": 700 * MiB},
                           "reclaimable_prune": {"count": 2, "bytes": 720 * MiB}}
    assert n["containers"] == {"total": 3, "reclaimable": 4, "sandboxes": 2}
    assert n["metrics_file"] == "/var/lib/node_exporter/textfile/kubenode_gc.prom"
    codes = [(f["severity"], f["source"], f["code"]) for f in n["findings"]]
    assert codes == [("error", "audit", "eviction_threshold_reached"), ("warning", "audit", "over_high_threshold"),
                     ("warning", "image_gc", "gc_insufficient"), ("info", "runtime_config", "config_version_1")]
    assert "91%" in n["findings"][1]["message"] and "85%" in n["findings"][1]["message"]
    assert n["findings"][0]["message"] == ("The image filesystem /var/lib/containerd/io.containerd.snapshotter.v1.overlayfs has 4.5 GiB available, "
                                           "below the kubelet's hard eviction threshold imagefs.available 15% (kubelet_config): "
                                           "the kubelet evicts pods to reclaim it.")
    assert n["health"] == "critical" and n["headroom"]["eviction_bytes"] == 50 * GiB * 9 // 100 - 50 * GiB * 15 // 100


def test_node_under_threshold_uses_kubelet_thresholds():
    n = by_host(build())["node-a"]
    assert n["over_high_threshold"] is False
    assert threshold_keys(n) == {"high_percent": 90, "low_percent": 70, "source": "kubelet_config"}
    assert n["findings"] == []
    assert n["images"]["reclaimable_policy"] == {"count": 0, "bytes": 0}
    assert n["parts_failed"] == {}


def test_threshold_is_inclusive_like_the_kubelet():
    n = by_host(build([node("n", cri_info=cri_info(85), kubelet_config=kubelet_config(85, 80))]))["n"]
    assert n["over_high_threshold"] is True


def test_drifted_node_and_sorted_findings():
    n = by_host(build())["node-b"]
    assert [(d["component"], d["key"]) for d in n["drift"]] == [("containerd", "sandbox_image"), ("kubelet", "imageMaximumGCAge")]
    assert n["drift"][1] == {"component": "kubelet", "key": "imageMaximumGCAge", "desired": "168h", "actual": "0s"}
    assert [f["severity"] for f in n["findings"]] == ["error", "warning"]
    assert n["containers"]["reclaimable"] == 1


def test_unreachable_node():
    n = by_host(build())["node-e"]
    assert n["status"] == "failed"
    assert n["error"].startswith("Failed to connect to the host via ssh")
    # its parts are recorded, but only the node error counts: no audit findings for them
    assert set(n["parts_failed"]) == {"cri_info", "kubelet_config"}
    assert n["findings"] == []
    # never read from it: no thresholds (not the kubelet's 85/80 "default"), eviction signals or byte targets (issue 32)
    assert set(n["thresholds"].values()) == {None} and "high_percent" in n["thresholds"] and "eviction_source" in n["thresholds"]
    assert [(s["signal"], s["state"], s["threshold"], s["source"]) for s in n["eviction_signals"]] == [
        (name, "unknown", None, None) for name in ("imagefs.available", "imagefs.inodesFree", "nodefs.available", "nodefs.inodesFree")]
    assert n["near_eviction"] is False
    assert n["over_high_threshold"] is False
    assert n["imagefs"]["usage_percent"] is None
    assert n["images"] == {"total": None, "in_use": None, "reclaimable_policy": {"count": None, "bytes": None},
                           "reclaimable_prune": {"count": None, "bytes": None}}
    assert n["containers"] == {"total": None, "reclaimable": None, "sandboxes": None}
    assert n["runtime"] == {"name": None, "version": None, "endpoint": None, "sandbox_image": None}


def test_node_with_failed_and_skipped_parts():
    n = by_host(build())["node-d"]
    assert n["status"] == "ok"
    assert n["parts_failed"] == {
        "cri_info": "CRI endpoint unix:///run/containerd/containerd.sock does not exist.",
        "runtime_config": "skipped: Conditional result was False",
        "image_gc_prune": "boom",
    }
    expected = [("error", "part_failed"), ("error", "part_failed"), ("warning", "part_skipped")]
    assert [(f["severity"], f["code"]) for f in n["findings"]] == expected
    assert "cri_info" in n["findings"][0]["message"] and "image_gc_prune" in n["findings"][1]["message"]
    assert n["imagefs"]["usage_percent"] is None
    assert n["images"]["reclaimable_policy"] == {"count": None, "bytes": None}
    assert n["images"]["reclaimable_prune"] == {"count": None, "bytes": None}
    assert n["thresholds"]["source"] == "kubelet_config"


def test_usage_falls_back_to_image_gc_and_container_fs_only():
    cri = cri_info(70, kind="container")
    del cri["images"]
    n = by_host(build([node("n", cri_info=cri)]))["n"]
    assert n["imagefs"]["usage_percent"] == 70      # the only filesystem reported
    assert n["images"]["total"] is None
    n = by_host(build([node("n", image_gc_policy=image_gc([], usage_before=88))]))["n"]
    assert n["imagefs"]["usage_percent"] == 88
    assert n["over_high_threshold"] is True


def test_odd_inputs_do_not_crash():
    weird = node("w", kubelet_config={"effective": {"imageGCHighThresholdPercent": "90"}},
                 runtime_config={"findings": [{"severity": "CRITICAL", "code": None, "message": "multi\nline"}]},
                 container_gc={"removed_containers": None, "errors": [{"id": "x", "msg": "could not remove x."}]},
                 drift=None)
    n = by_host(build([weird]))["w"]
    assert n["status"] == "ok"
    assert threshold_keys(n) == {"high_percent": 90, "low_percent": 80, "source": "kubelet_config"}
    assert n["thresholds"]["eviction_available"] == "15%" and n["thresholds"]["eviction_source"] == "default"
    assert n["drift"] == []
    assert n["containers"]["reclaimable"] is None
    codes = {(f["source"], f["severity"], f["code"]) for f in n["findings"]}
    assert ("runtime_config", "warning", "unknown") in codes
    assert ("container_gc", "error", "gc_errors") in codes
    assert all("\n" not in f["message"] for f in n["findings"])
    # a record of the wrong shape is one failed node, "malformed result", never a crash
    for bad in (dict(cri_info="oops"), dict(runtime_config={"findings": ["junk"]})):
        n = by_host(build([node("w", **bad)]))["w"]
        assert n["status"] == "failed" and n["error"].startswith("malformed result: ")


def test_nodes_sorted_and_deterministic():
    nodes = fleet()
    report = build(nodes)
    assert [n["host"] for n in report["nodes"]] == ["node-a", "node-b", "node-c", "node-d", "node-e"]
    again = build(list(reversed(copy.deepcopy(nodes))))
    assert json.dumps(report, sort_keys=True) == json.dumps(again, sort_keys=True)
    assert nodes == fleet()     # the input is not modified


def test_empty_fleet_and_defaults():
    report = ar.audit_report([])
    assert report["summary"]["nodes"] == 0
    assert report["generated_at"] is None and report["policy"] == {}
    assert report["summary"]["reclaimable_bytes_prune"] == 0


@pytest.mark.parametrize("nodes", ["x", [{"error": None}], [None], [{"host": ""}]])
def test_bad_input(nodes):
    with pytest.raises(AnsibleFilterError, match="audit_report expects"):
        ar.audit_report(nodes)


# ---------------------------------------------------------------------------------------------- fail_on
def test_fail_on_never():
    assert ar.audit_fail_reason(build(), "never") is None


def test_fail_on_drift():
    reason = ar.audit_fail_reason(build(), "drift")
    assert reason == "The audit fails on drift: 1 node could not be audited (node-e); 1 node drifted from the desired policy (node-b)."
    assert ar.audit_fail_reason(build([node("a", cri_info=cri_info(10))]), "drift") is None


def test_fail_on_failed_the_default_fails_only_on_nodes_that_could_not_be_audited():
    assert ar.audit_fail_reason(build(), "failed") == ("The audit fails: 1 node could not be audited (node-e) "
                                                       "(kubenode_gc_audit_fail_on: never lets it pass).")
    assert ar.audit_fail_reason(build([n for n in fleet() if n["host"] != "node-e"]), "failed") is None


def test_fail_on_error():
    reason = ar.audit_fail_reason(build(), "error")
    assert reason == "The audit fails on error: 1 node could not be audited (node-e); 4 errors on 3 nodes (node-b, node-c, node-d)."


def test_fail_on_warning():
    reason = ar.audit_fail_reason(build(), "warning")
    assert reason == ("The audit fails on warning: 1 node could not be audited (node-e); "
                      "4 errors and 4 warnings on 3 nodes (node-b, node-c, node-d).")


def test_fail_on_levels():
    clean = build([node("a", cri_info=cri_info(10), kubelet_config=kubelet_config())])
    for level in ar.FAIL_ON:
        assert ar.audit_fail_reason(clean, level) is None
    # 85 %: over the high threshold, and exactly at imagefs.available 15 %, which is not yet below it (no eviction) but near it
    warn_only = build([node("a", cri_info=cri_info(85), kubelet_config=kubelet_config())])
    assert ar.audit_fail_reason(warn_only, "error") is None
    assert ar.audit_fail_reason(warn_only, "warning") == "The audit fails on warning: 2 warnings on 1 node (a)."
    assert [f["code"] for f in warn_only["nodes"][0]["findings"]] == ["near_eviction", "over_high_threshold"]
    info_only = build([node("a", runtime_config=runtime_config([{"severity": "info", "code": "x", "message": "m"}]))])
    assert ar.audit_fail_reason(info_only, "warning") is None
    failed_only = build([node("a", error="unreachable")])
    assert ar.audit_fail_reason(failed_only, "error") == "The audit fails on error: 1 node could not be audited (a)."
    assert ar.audit_fail_reason(failed_only, "drift") == "The audit fails on drift: 1 node could not be audited (a)."
    assert ar.audit_fail_reason(failed_only, "never") is None


def test_fail_on_bad_arguments():
    with pytest.raises(AnsibleFilterError, match="fail_on to be one of never, failed, drift, warning, error"):
        ar.audit_fail_reason(build(), "sometimes")
    with pytest.raises(AnsibleFilterError, match="report dict"):
        ar.audit_fail_reason({"nodes": None}, "error")


# ---------------------------------------------------------------------------------------------- human_bytes
@pytest.mark.parametrize("value, text", [
    (None, "-"), (0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (1536, "1.5 KiB"), (MiB, "1.0 MiB"),
    (1024 * 1024 - 1, "1.0 MiB"), (int(1.25 * GiB), "1.2 GiB"), (50 * GiB, "50.0 GiB"), (3 * 1024 * GiB, "3.0 TiB"), (-2048, "-2.0 KiB"),
])
def test_human_bytes(value, text):
    assert ar.human_bytes_filter(value) == text


def test_human_bytes_rejects_text():
    with pytest.raises(AnsibleFilterError, match="human_bytes expects a number of bytes"):
        ar.human_bytes_filter("lots")


def test_filter_module():
    assert set(ar.FilterModule().filters()) == {"audit_report", "audit_fail_reason", "human_bytes"}


# ---------------------------------------------------------------------------------------------- renderings
def render(kind, report, history=None):
    filters = audit_render.FilterModule().filters()
    return filters["audit_report_html" if kind == "html" else "audit_report_markdown"](report, history=history)


VOID = {"meta", "br", "hr", "img", "input", "link", "col", "area", "base", "wbr", "source", "track", "embed", "param"}
SVG_VOID = {"line", "polyline", "rect", "circle"}  # self-closed in the SVG the report writes


class Checker(HTMLParser):
    """Fails on any unclosed or mismatched tag; collects ids and data-host values."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.ids, self.hosts, self.errors, self.text = [], [], [], [], []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.append(attrs["id"])
        if "data-host" in attrs:
            self.hosts.append(attrs["data-host"])
        if tag not in VOID:
            self.stack.append((tag, attrs))

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in VOID:
            self.stack.pop()

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1][0] != tag:
            self.errors.append("unexpected </%s> with open %s" % (tag, [t for t, a in self.stack]))
            return
        self.stack.pop()

    def handle_data(self, data):
        if not self.stack or self.stack[-1][0] not in ("script", "style"):
            self.text.append(data)


def check_html(text):
    checker = Checker()
    checker.feed(text)
    checker.close()
    assert checker.errors == []
    assert checker.stack == [], "unclosed: %s" % [t for t, a in checker.stack]
    assert len(checker.ids) == len(set(checker.ids)), "duplicate ids"
    return checker


def table_rows(html, table_id):
    body = html[html.index('id="%s"' % table_id):]
    body = body[:body.index("</table>")]
    return re.findall(r'<tr data-host="([^"]*)" data-health="([^"]*)"', body)


def test_html_report_well_formed_with_every_node():
    report = build()
    html = render("html", report)
    assert html.lstrip().startswith("<!DOCTYPE html>")
    checker = check_html(html)
    for n in report["nodes"]:
        assert 'id="node-%s"' % n["host"] in html
        assert "node-" + n["host"] in checker.ids
        assert n["host"] in checker.hosts
    # self-contained: the only script is inline, nothing is fetched
    assert not re.search(r"<(link|img|iframe)\b", html)
    assert not re.search(r"<script[^>]*\bsrc=", html)
    assert "http://" not in html and "https://" not in html and "@import" not in html and "url(" not in html
    text = "".join(checker.text)
    assert "No route to host" in text
    assert 'class="used over"' in html
    assert html.count('class="bar"') == 3     # node-a, node-b, node-c; node-d has no figures, node-e failed
    # every per-node detail is collapsed
    assert html.count('<details class="node"') == 5 and '<details class="node" open' not in html


def test_html_first_screen_worst_first_groups_and_images():
    report = build()
    html = render("html", report)
    # worst first: node-c is past the eviction threshold (91% used, evictionHard imagefs.available 15%), node-b has an error
    # finding, node-d a failed part (an error finding too, no usage), node-e failed, node-a is fine
    assert table_rows(html, "node-table") == [("node-c", "critical"), ("node-b", "critical"), ("node-d", "critical"), ("node-e", "failed"),
                                              ("node-a", "ok")]
    # counts by health, each a filter of the table
    for health, count in (("critical", 3), ("failed", 1), ("warning", 0), ("ok", 1)):
        assert re.search(r'data-filter-health="%s"><span class="n">%d</span>' % (health, count), html)
    # findings grouped by code, with their nodes behind a <details>
    findings = html[html.index('id="findings"'):html.index('id="drift"')] if html.index('id="findings"') < html.index('id="drift"') else \
        html[html.index('id="findings"'):]
    assert re.search(r'<tr data-code="part_failed">.*?<td class="num">1</td>', findings)
    assert "<details><summary>which</summary>" in findings
    # drift grouped by key and value
    assert "<code>imageMaximumGCAge</code>" in html and "<code>sandbox_image</code>" in html
    # the fleet's images: app:1 (bytes on three nodes), reclaimable where prune planned it
    assert '<code>docker.io/<wbr>library/<wbr>app:1</code></td><td class="num">3</td>' in html
    # the headroom cells: node-c is over its high threshold (negative, red)
    assert 'class="num neg"' in html
    # the script that sorts and filters, and the controls it shows (hidden without JavaScript)
    assert '<div class="controls" id="node-controls" hidden>' in html and "<script>" in html


def test_html_bar_geometry():
    report = build([node("n", cri_info=cri_info(91, capacity=100 * GiB), kubelet_config=kubelet_config(85, 80),
                         image_gc_prune=image_gc([10 * GiB]))])
    html = render("html", report)
    assert 'class="used over" style="width: 81.00%;"' in html
    assert 'style="left: 81.00%; width: 10.00%;"' in html
    assert 'class="mark high" style="left: 85.00%;"' in html
    assert 'class="mark low" style="left: 80.00%;"' in html


def test_html_escapes_everything():
    evil = '<script>alert("x")</script>&'
    nodes = [node("n1", error=evil),
             node("n2<b>", cri_info=cri_info(50), runtime_config=runtime_config([{"severity": "warning", "code": "c<1>", "message": evil}]),
                  drift=[{"component": "kubelet", "key": "k", "desired": evil, "actual": {"a": "<b>"}}])]
    report = build(nodes, policy={"note": evil})
    html = render("html", report)
    assert html.count("<script") == 1   # the report's own
    assert "&lt;script&gt;" in html and "c&lt;1&gt;" in html and "n2&lt;b&gt;" in html
    check_html(html)


def test_html_trends_from_history():
    report = build()
    earlier = copy.deepcopy(report)
    earlier["generated_at"] = "2026-11-21T10:00:00Z"
    for n in earlier["nodes"]:
        if n["imagefs"]["usage_percent"] is not None:
            n["imagefs"]["usage_percent"] -= 10
    history = [report_fleet.history_point(earlier)]
    html = render("html", report, history)
    check_html(html)
    assert html.count('<svg class="chart"') == 2
    assert html.count('<svg class="spark"') == 3     # the audited nodes with a usage in both reports
    assert "+10.0 pts" in html                       # mean usage up since the last audit
    assert "Trends over 2 audits" in html
    # without history: no charts, a sentence instead
    plain = render("html", report)
    assert '<svg class="chart"' not in plain and "No earlier audit to compare with" in plain


def md_table_rows(md):
    lines = md.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| host | health |"))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append(line)
    return lines[start], rows


def split_cells(row):
    return [c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]]


def test_markdown_report_has_one_row_per_node():
    report = build()
    md = render("md", report)
    assert md.startswith("# Kubernetes node disk audit")
    header, rows = md_table_rows(md)
    assert len(split_cells(header)) == 13
    assert len(rows) == len(report["nodes"])
    hosts = [split_cells(r)[0] for r in rows]
    assert hosts == ["node-c", "node-b", "node-d", "node-e", "node-a"]   # worst first
    for row in rows:
        assert len(split_cells(row)) == 13
    c = split_cells(rows[0])
    assert c[1] == "critical" and c[2] == "ok" and c[3] == "containerd 1.6.20~ds1" and c[5] == "91% (over)" and c[6] == "85%/80%"
    assert c[4] == "45.5 GiB / 50.0 GiB"     # filesystem use, as the usage percent counts it
    assert c[7].startswith("over by ") and c[8].startswith("over by ")
    assert c[9] == "1 (700.0 MiB)" and c[10] == "2 (720.0 MiB)" and c[11] == "1/2/1" and c[12] == "0"
    e = split_cells(rows[3])
    assert e[1] == "failed" and e[3] == "-" and e[4] == "-" and e[5] == "-" and e[9] == "-"
    # fleet sections
    assert "## Findings by code" in md and "| error | audit | part_failed | 1 | one-off |" in md
    assert "## Drift by setting" in md and "| kubelet | imageMaximumGCAge | 168h | 0s | 1 | node-b |" in md
    assert "## Images holding the most disk" in md and "| docker.io/library/app:1 | 3 |" in md
    # per-node sections, with findings, drift and errors
    for n in report["nodes"]:
        assert "\n## %s\n" % n["host"] in md
    assert "**Not audited:** Failed to connect to the host via ssh" in md


def test_markdown_escapes_pipes_in_cells():
    report = build([node("n", cri_info=cri_info(50), drift=[{"component": "a|b", "key": "k", "desired": "x\ny", "actual": None}])])
    md = render("md", report)
    header, rows = md_table_rows(md)
    assert len(rows) == 1
    assert "| a\\|b | k | x y | - |" in md


def test_render_filters_reject_other_input():
    filters = audit_render.FilterModule().filters()
    assert set(filters) == {"audit_report_html", "audit_report_markdown", "audit_summary_line"}
    for name, func in filters.items():
        with pytest.raises(AnsibleFilterError, match="expects the report dict"):
            func({"nodes": []})
        with pytest.raises(AnsibleFilterError, match="history"):
            func(build(), history="x")


def test_summary_line():
    line = audit_render.audit_summary_line(build())
    assert line == ("5 nodes, health: 3 critical, 1 failed, 1 ok; 1 over the high threshold; usage mean 63.7%, max 91%; "
                    "reclaimable 700.0 MiB (policy), 1.4 GiB (prune).")
    assert line.endswith(".")


def test_split_image_filesystem_shows_both():
    cri = {"changed": False, "imagefs": [
        {"kind": "image", "mountpoint": "/var/lib/images/overlay-images", "capacity_bytes": 100, "used_bytes": 1, "available_bytes": 40, "usage_percent": 60},
        {"kind": "container", "mountpoint": "/var/lib/containers/overlay-containers", "capacity_bytes": 200, "used_bytes": 2,
         "available_bytes": 150, "usage_percent": 25},
    ]}
    report = ar.audit_report([node("n1", cri_info=cri)])
    out = report["nodes"][0]
    assert out["imagefs"]["mountpoint"] == "/var/lib/images/overlay-images" and out["imagefs"]["usage_percent"] == 60
    assert "Container filesystem (split image filesystem): /var/lib/containers/overlay-containers, 25% used" in render("md", report)
    assert "Container filesystem (split image filesystem): /var/lib/containers/overlay-containers, 25% used" in render("html", report)
    assert out["container_filesystems"] == [
        {"mountpoint": "/var/lib/containers/overlay-containers", "capacity_bytes": 200, "used_bytes": 2, "available_bytes": 150, "usage_percent": 25}
    ]


def test_credential_records_in_json_markdown_and_html():
    nodes = fleet()
    kubelet = dict(kubelet_config(), feature_gates={"KubeletEnsureSecretPulledImages": True}, root_dir="/data/kubelet/")
    found = {"changed": False, "files": [{"path": "/data/kubelet/image_manager/pulled/%d" % i} for i in range(3)], "matched": 3}
    nodes[0] = dict(nodes[0], kubelet_config=kubelet, credential_records=found)
    report = build(nodes)
    hosts = by_host(report)
    assert hosts["node-c"]["credential_records"] == {"feature_gate": True, "directory": "/data/kubelet/image_manager", "pulled_records": 3}
    # the gate unset, no find result (an older playbook), a failed find, a node that failed: all unknown, never a crash
    assert hosts["node-a"]["credential_records"] == {"feature_gate": None, "directory": None, "pulled_records": None}
    kubelet = dict(kubelet_config(), feature_gates={"KubeletEnsureSecretPulledImages": False}, root_dir="/var/lib/kubelet")
    failed = ar.audit_report([node("n", kubelet_config=kubelet,
                                   credential_records={"failed": True, "msg": "Permission denied"})])
    assert failed["nodes"][0]["credential_records"] == {"feature_gate": False, "directory": "/var/lib/kubelet/image_manager", "pulled_records": None}
    json.dumps(report)
    md = render("md", report)
    assert "- Credential records (/data/kubelet/image_manager): 3 pulled-image records; feature gate KubeletEnsureSecretPulledImages enabled" in md
    assert "- Credential records (-): - pulled-image records; feature gate KubeletEnsureSecretPulledImages unset" in md
    html = render("html", report)
    assert "Credential records (/data/kubelet/image_manager): 3 pulled-image records; feature gate KubeletEnsureSecretPulledImages enabled." in html


# ---------------------------------------------------------------------------------------------- pinning (issue 14)
def test_keep_listed_images_not_pinned_and_an_unpinned_sandbox_image_are_findings_in_json_markdown_and_html():
    def containerd17():
        return dict(cri_info(40), runtime=dict(cri_info(40)["runtime"], version="1.7.24~ds1"))

    unpinned_sandbox = containerd17()
    unpinned_sandbox["images"][0]["pinned"] = False
    pin = {"changed": True, "supported": True, "pinned": [{"id": "sha256:bbb", "repo_tags": ["docker.io/library/app:1"]}], "unpinned": []}
    old = dict(cri_info(40), runtime=dict(cri_info(40)["runtime"], version="1.6.20~ds1"))
    report = ar.audit_report([
        node("pinnable", cri_info=unpinned_sandbox, image_pin=pin, keep_images=["docker.io/library/app:*"]),
        node("all-pinned", cri_info=containerd17(), image_pin=dict(pin, changed=False, pinned=[]), keep_images=["docker.io/library/app:*"]),
        node("cannot-pin", cri_info=old, image_pin={"changed": False, "supported": False, "pinned": [], "unpinned": []}, keep_images=["app:*"]),
        node("no-keep-list", cri_info=old, image_pin={"changed": False, "supported": False, "pinned": [], "unpinned": []}, keep_images=[]),
    ])
    hosts = by_host(report)
    codes = {h: sorted(f["code"] for f in n["findings"] if f["source"] in ("image_pin", "audit") and "pin" in f["code"]) for h, n in hosts.items()}
    assert codes == {"pinnable": ["keep_images_not_pinned", "sandbox_image_not_pinned"], "all-pinned": [],
                     "cannot-pin": ["keep_images_not_pinned"], "no-keep-list": []}
    assert hosts["pinnable"]["pinning"] == {"supported": True, "keep_images": 1, "keep_images_unpinned": ["docker.io/library/app:1"],
                                            "sandbox_image_pinned": False}
    assert hosts["cannot-pin"]["pinning"]["supported"] is False and hosts["cannot-pin"]["pinning"]["keep_images_unpinned"] is None
    message = [f["message"] for f in hosts["pinnable"]["findings"] if f["code"] == "keep_images_not_pinned"][0]
    assert message.startswith("1 keep-listed image(s) are not pinned in the runtime") and "docker.io/library/app:1" in message
    assert [f["message"] for f in hosts["cannot-pin"]["findings"] if f["code"] == "keep_images_not_pinned"][0].startswith(
        "The runtime (containerd 1.6.20~ds1) cannot pin images")
    # warnings where pinning would help now, info where the runtime cannot pin (an upgrade would)
    severity = {(h, f["code"]): f["severity"] for h, n in hosts.items() for f in n["findings"] if "pin" in f["code"]}
    assert severity == {("pinnable", "keep_images_not_pinned"): "warning", ("pinnable", "sandbox_image_not_pinned"): "warning",
                        ("cannot-pin", "keep_images_not_pinned"): "info"}
    # no image_pin result (no keep list): nothing is claimed about keep lists; containerd 1.6.20 cannot pin
    assert by_host(build())["node-a"]["pinning"] == {"supported": False, "keep_images": 0, "keep_images_unpinned": None, "sandbox_image_pinned": True}
    # image_pin did not run (the audit skips it where the runtime cannot pin), a keep list: the finding still says so
    skipped = ar.audit_report([node("n", cri_info=old, keep_images=["app:*"])])["nodes"][0]
    assert [f["code"] for f in skipped["findings"] if f["code"] == "keep_images_not_pinned"] == ["keep_images_not_pinned"]
    json.dumps(report)
    for fmt in ("md", "html"):
        text = render(fmt, report)
        assert "keep_images_not_pinned" in text and "sandbox_image_not_pinned" in text


# ---------------------------------------------------------------------------------------------- eviction signals, inodes
def test_near_eviction_on_every_signal_from_the_effective_eviction_hard():
    cri = cri_info(70)  # 30 % available
    cri["imagefs"][0].update(inodes_total=100000, inodes_free=8000)  # 8 % inodes free
    kubelet = kubelet_config()
    kubelet["effective"]["evictionHard"] = {"imagefs.available": "27%", "imagefs.inodesFree": "5%", "nodefs.available": "10%",
                                            "nodefs.inodesFree": "5%"}
    # nodefs: 4096-byte blocks, 1000 of them, 110 available (11 %); 1000 inodes, 40 free (4 %: below 5 %)
    n = build([node("a", cri_info=cri, kubelet_config=kubelet, nodefs="4096 1000 110 1000 40")])["nodes"][0]
    states = {s["signal"]: (s["state"], s["free_percent"], s["threshold_percent"]) for s in n["eviction_signals"]}
    assert states == {"imagefs.available": ("near", 30.0, 27.0), "imagefs.inodesFree": ("near", 8.0, 5.0),
                      "nodefs.available": ("near", 11.0, 10.0), "nodefs.inodesFree": ("reached", 4.0, 5.0)}
    assert n["near_eviction"] is True and n["health"] == "critical"
    codes = [(f["severity"], f["code"]) for f in n["findings"]]
    assert codes == [("error", "eviction_threshold_reached")] + [("warning", "near_eviction")] * 3
    assert n["findings"][0]["message"] == ("The kubelet's root filesystem (nodefs) has 4.0% of its inodes free, below the kubelet's hard "
                                           "eviction threshold nodefs.inodesFree 5% (kubelet_config): the kubelet evicts pods to reclaim it.")
    assert ("The image filesystem /var/lib/containerd/io.containerd.snapshotter.v1.overlayfs has 8.0% of its inodes free, within 5 "
            "percentage points of the kubelet's hard eviction threshold imagefs.inodesFree 5% (kubelet_config).") in [f["message"] for f in n["findings"]]
    # a smaller margin: only what is within it
    narrow = ar.audit_report([node("a", cri_info=cri, kubelet_config=kubelet, nodefs="4096 1000 110 1000 40")], eviction_margin_percent=2)
    assert [s["state"] for s in narrow["nodes"][0]["eviction_signals"]] == ["ok", "ok", "near", "reached"]
    assert narrow["summary"]["nodes_near_eviction"] == 1


def test_eviction_signals_off_unknown_and_defaults():
    # a kubelet map without a signal turns it off; no nodefs measure is unknown; without kubelet_config the kubelet's defaults
    n = build([node("a", cri_info=cri_info(50), kubelet_config=kubelet_config())])["nodes"][0]
    assert [s["state"] for s in n["eviction_signals"]] == ["ok", "off", "off", "off"]
    d = build([node("a", cri_info=cri_info(50), nodefs="garbage")])["nodes"][0]
    assert [(s["state"], s["threshold"], s["source"]) for s in d["eviction_signals"]] == [
        ("ok", "15%", "default"), ("ok", "5%", "default"), ("unknown", "10%", "default"), ("unknown", "5%", "default")]
    assert d["near_eviction"] is False
    failed = build([node("a", error="unreachable")])["nodes"][0]
    assert {s["state"] for s in failed["eviction_signals"]} == {"unknown"} and failed["near_eviction"] is False
    with pytest.raises(AnsibleFilterError, match="eviction_margin_percent to be an integer, 0 or more, got -1"):
        ar.audit_report([], eviction_margin_percent=-1)


def test_inode_thresholds_and_inode_shortfall():
    cri = cri_info(40)
    cri["imagefs"][0].update(inodes_total=1000, inodes_free=80)
    run = image_gc([1 * MiB], usage_before=40, insufficient=True)
    run.update(inodes_usage_before=92, inodes_to_free=420)
    n = build([node("a", cri_info=cri, kubelet_config=kubelet_config(), image_gc_policy=run,
                    inodes_thresholds={"high_percent": 90, "low_percent": 50})])["nodes"][0]
    assert n["imagefs"]["inodes_usage_percent"] == 92
    assert (n["thresholds"]["inodes_high_percent"], n["thresholds"]["inodes_low_percent"]) == (90, 50)
    by_code = {f["code"]: f["message"] for f in n["findings"]}
    assert by_code["over_inodes_high_threshold"] == ("The image filesystem /var/lib/containerd/io.containerd.snapshotter.v1.overlayfs has 92% of "
                                                     "its inodes used, at or above the image GC inode high threshold of 90%.")
    assert by_code["gc_insufficient"].startswith("Image GC under the node's policy would not bring inode usage from 92% down")
    assert n["over_high_threshold"] is False and n["health"] == "warning"


def test_near_eviction_in_markdown_and_html():
    cri = cri_info(50)
    cri["imagefs"][0].update(inodes_total=1000, inodes_free=80)  # 8 % inodes free, default imagefs.inodesFree 5 %
    report = build([node("near-1", cri_info=cri, nodefs="4096 1000 500 1000 900"), node("far-1", cri_info=cri_info(10))])
    assert report["summary"]["nodes_near_eviction"] == 1
    md = render("markdown", report)
    assert "- Near a hard eviction threshold: 1" in md
    assert ("- Eviction signals (**near eviction**): imagefs.available 50% free (threshold 15%, 15%): ok; imagefs.inodesFree 8% free "
            "(threshold 5%, 5%): near; nodefs.available 50% free (threshold 10%, 10%): ok; nodefs.inodesFree 90% free (threshold 5%, 5%): ok") in md
    assert "nodefs.available 10%: not measured" in md  # far-1 has no nodefs measure
    assert "near_eviction" in md
    html = render("html", report)
    check_html(html)
    assert '<span class="n">1</span><span class="l">near eviction</span>' in html
    assert html.count('<span class="badge warning">near eviction</span>') == 1
    assert "imagefs.inodesFree 8% free (threshold 5%, 5%): near" in html and "near_eviction" in html


# ---------------------------------------------------------------------------------------------- hostile nodes (issue 21, item 6)
MALFORMED = [
    ("kubelet_config_drift", {"changed": True, "changes": ["x"]}, "kubelet_config_drift.changes[0] is a str, not a dict"),
    ("cri_info", "a string", "cri_info is a str, not a registered task result"),
    ("kubelet_config", {"effective": "85/80"}, "kubelet_config.effective is a str, not a dict"),
    ("image_gc_policy", {"removed": [{"id": "x", "size": {"a": 1}}]}, "image_gc_policy.removed[0].size is a dict, not a number"),
    ("inodes_thresholds", {"high_percent": "ninety"}, "record.inodes_thresholds.high_percent is the text 'ninety', not a number"),
    ("drift", "none", "record.drift is a str, not a list"),
]


@pytest.mark.parametrize("key, value, where", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_a_malformed_node_is_a_failed_node_and_the_rest_of_the_report_is_built(key, value, where):
    from ansible_collections.kubenode.gc.plugins.filter.fleet import audit_nodes
    nodes = fleet()
    nodes[1][key] = value
    report = ar.audit_report(audit_nodes([[n, n["host"]] for n in nodes]), generated_at="2026-11-22T10:00:00Z")
    bad = by_host(report)["node-a"]
    assert bad["status"] == "failed" and bad["health"] == "failed"
    assert bad["error"] == "malformed result: %s." % where
    assert bad["imagefs"]["usage_percent"] is None and bad["findings"] == [] and bad["drift"] == []
    good = build()
    for host in ("node-b", "node-c", "node-d", "node-e"):
        assert by_host(report)[host] == by_host(good)[host]
    assert report["summary"]["nodes_failed"] == good["summary"]["nodes_failed"] + 1
    # every rendering is written
    assert "malformed result" in audit_render.audit_report_html(report) and "malformed result" in audit_render.audit_report_markdown(report)


@pytest.mark.parametrize("capacity", [float("inf"), float("nan"), 10 ** 400, "1e400", True])
def test_a_capacity_that_is_not_a_plausible_number_is_a_malformed_result(capacity):
    nodes = fleet()
    nodes[1]["cri_info"]["imagefs"][0]["capacity_bytes"] = capacity
    report = ar.audit_report(nodes, generated_at="2026-11-22T10:00:00Z")
    assert by_host(report)["node-a"]["error"].startswith("malformed result: cri_info.imagefs[0].capacity_bytes is ")
    assert by_host(report)["node-c"]["status"] == "ok"


def test_a_record_that_is_not_a_dict_is_a_malformed_result_and_a_missing_one_stopped():
    from ansible_collections.kubenode.gc.plugins.filter.fleet import audit_nodes
    nodes = audit_nodes([["x", "a"], [["y"], "b"], [None, "c"]])
    assert [n["error"] for n in nodes] == ["malformed result: the record is a str, not a dict.", "malformed result: the record is a list, not a dict.",
                                           "The audit stopped on this host before it could read the node."]


def test_a_failed_result_is_read_for_its_message_only():
    nodes = fleet()
    nodes[1]["image_gc_prune"] = {"failed": True, "msg": "boom", "removed": "not a list"}
    report = ar.audit_report(nodes, generated_at="2026-11-22T10:00:00Z")
    assert by_host(report)["node-a"]["status"] == "ok" and by_host(report)["node-a"]["parts_failed"] == {"image_gc_prune": "boom"}


def test_a_failed_node_shows_its_reason_and_nothing_that_reads_as_measured():
    report = build()
    html = audit_render.audit_report_html(report)
    detail = html[html.index('<details class="node" id="node-node-e"'):]
    detail = detail[:detail.index("</details>")]
    assert "Not audited: Failed to connect to the host via ssh" in detail
    assert "threshold" not in detail and "Runtime:" not in detail and "Eviction signals" not in detail
    md = audit_render.audit_report_markdown(report)
    section = md[md.index("## node-e"):]
    section = section[:section.index("\n## ")] if "\n## " in section else section
    assert "**Not audited:** Failed to connect" in section and "threshold" not in section and "Health:" not in section


def test_a_wide_info_finding_is_not_drawn_red():
    nodes = [node(h, cri_info=cri_info(40), runtime_config=runtime_config([{"severity": "info", "code": "x", "message": "m"}]))
             for h in ("a", "b")]
    html = audit_render.audit_report_html(build(nodes))
    assert '<span class="scope wide info">every node, 100%</span>' in html
    assert ".scope.wide.info { color: var(--blue); }" in html and ".scope.wide {" not in html


def test_an_unset_inode_threshold_rendered_empty_by_older_ansible_is_not_malformed():
    # ansible-core before 2.19 renders "{{ x | default(none) }}" as '' in a string template
    nodes = fleet()
    nodes[1]["inodes_thresholds"] = {"high_percent": "", "low_percent": ""}
    report = ar.audit_report(nodes, generated_at="2026-11-22T10:00:00Z")
    assert by_host(report)["node-a"]["status"] == "ok"


def test_a_part_left_out_rendered_empty_by_older_ansible_is_not_malformed():
    from ansible_collections.kubenode.gc.plugins.filter.fleet import audit_nodes
    nodes = fleet()
    nodes[1]["image_pin"] = ""
    report = ar.audit_report(audit_nodes([[n, n["host"]] for n in nodes]), generated_at="2026-11-22T10:00:00Z")
    assert by_host(report)["node-a"]["status"] == "ok"


# ---------------------------------------------------------------------------------------------- node_audit detail=summary
def summarised(record):
    """A record as the audit playbook collects it from kubenode.gc.node_audit with detail=summary."""
    from ansible_collections.kubenode.gc.plugins.module_utils.node._node_audit import summarise

    parts = {k: record[k] for k in ("cri_info", "image_gc_policy", "image_gc_prune") if record.get(k) is not None}
    folded = summarise(copy.deepcopy(parts))
    out = dict(record, **{k: folded[k] for k in parts})
    out["summary"] = folded.get("summary")
    return out


def test_a_summarised_fleet_gives_the_same_report_json_markdown_and_html():
    """The report from node_audit's summary lines is the report from the full lists, every key and figure (issue 25)."""
    full = fleet()
    folded = [summarised(n) for n in full]
    assert any(n.get("summary") for n in folded)
    assert all("images" not in (n["cri_info"] or {}) and "removed" not in (n["image_gc_prune"] or {}) for n in folded if n.get("summary"))
    a, b = build(full), build(folded)
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    assert audit_render.audit_report_markdown(a) == audit_render.audit_report_markdown(b)
    assert audit_render.audit_report_html(a) == audit_render.audit_report_html(b)


@pytest.mark.parametrize("lines, phrase", [
    (["sha256:a x:1 12"], "is not a line <id> <ref> <size> <marks>"),
    (["sha256:a x:1 -3 u"], "is not a line"),
    (["sha256:a x:1 12 uq"], "is not a line"),
    (["sha256:a x:1 ١٢ u"], "is not a line"),
    ([["sha256:a", "x:1", 12, "u"]], "is not a line"),
    ("sha256:a x:1 12 u", "not a list"),
    (["sha256:a x:1 %d u" % (2 ** 70)], "size out of range"),
])
def test_malformed_summary_lines_make_a_failed_node_naming_them(lines, phrase):
    record = summarised(fleet()[0])
    record["summary"] = dict(record["summary"], images=lines)
    out = ar.audit_report([record], generated_at="2026-11-22T10:00:00Z")
    (n,) = out["nodes"]
    assert n["status"] == "failed" and n["error"].startswith("malformed result: record.summary.images") and phrase in n["error"]


def test_summary_columns_must_be_the_documented_ones():
    record = summarised(fleet()[0])
    record["summary"] = dict(record["summary"], image_columns=["id", "size", "ref", "marks"])
    (n,) = ar.audit_report([record], generated_at="2026-11-22T10:00:00Z")["nodes"]
    assert n["status"] == "failed" and "record.summary.image_columns is not id ref size marks" in n["error"]


def test_an_unaudited_node_shows_only_its_error_in_the_markdown_and_html_rows():
    """Issue 32: report.md's and report.html's rows of a node that could not be audited carry no thresholds or usage."""
    from ansible_collections.kubenode.gc.plugins.plugin_utils._report_html import render as render_html
    from ansible_collections.kubenode.gc.plugins.plugin_utils._report_md import render as render_md

    report = build()
    md = render_md(report)
    row = next(line for line in md.splitlines() if line.startswith("| node-e |"))
    assert "85%" not in row and "80%" not in row and "| -/- |" in row, row
    section = md[md.index("## node-e"):]
    section = section[:section.index("\n## ", 3)] if "\n## " in section[3:] else section
    assert "**Not audited:** Failed to connect to the host via ssh" in section and "85" not in section and "default" not in section
    html = render_html(report)
    detail = html[html.index('id="node-node-e"'):]
    detail = detail[:detail.index("</details>")]
    assert "Not audited: Failed to connect to the host via ssh" in detail and "85%" not in detail and "threshold" not in detail
