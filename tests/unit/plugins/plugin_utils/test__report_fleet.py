# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The fleet view of the audit report: headroom, health, the fleet's images, groups, history points and the SVG."""

import re

import pytest

from ansible_collections.kubenode.gc.plugins.module_utils.cri._snapshot import usage_percent
from ansible_collections.kubenode.gc.plugins.plugin_utils import _report_fleet as rf
from ansible_collections.kubenode.gc.plugins.plugin_utils._report_svg import line_chart, sparkline

GiB = 1 << 30


@pytest.mark.parametrize("capacity", [1000, 1001, 50 * GiB + 7, 12345679])
@pytest.mark.parametrize("high", [1, 50, 85, 100])
def test_high_headroom_is_exact_against_the_kubelet_formula(capacity, high):
    for available in (0, 1, capacity // 7, capacity // 2, capacity * 15 // 100, capacity - 1, capacity):
        room = rf.high_headroom(available, capacity, high)
        if room > 0:
            # writing room - 1 bytes stays under the threshold, writing room bytes reaches it
            assert usage_percent(capacity, available - room + 1) < high
            assert usage_percent(capacity, available - room) >= high or available - room < 0
        else:
            assert usage_percent(capacity, available) >= high
            # freeing 1 - room bytes gets just under it
            if available + 1 - room <= capacity:
                assert usage_percent(capacity, available + 1 - room) < high
                assert usage_percent(capacity, available - room) >= high


def test_high_headroom_unknown():
    assert rf.high_headroom(None, 100, 85) is None and rf.high_headroom(5, 0, 85) is None


@pytest.mark.parametrize("value, capacity, expected", [
    ("15%", 1000, 150), ("10.5%", 1000, 105), ("2Gi", 50 * GiB, 2 * GiB), ("500M", 10, 500 * 10**6), ("x", 1000, None),
    (None, 1000, None), ("15%", None, None),
])
def test_eviction_bytes(value, capacity, expected):
    assert rf.eviction_bytes(value, capacity) == expected


def test_split_ref_keeps_registry_ports():
    assert rf.split_ref("registry.example:5000/app:1.2") == ("registry.example:5000/app", "1.2")
    assert rf.split_ref("registry.example:5000/app") == ("registry.example:5000/app", "")


def test_fleet_images_rollup():
    per_node = [
        ("n1", [("a:1", 100, True, False), ("b:1", 300, False, True), ("c:<none>", 50, False, True)]),
        ("n2", [("a:1", 100, False, True), ("b:1", 300, False, True)]),
        ("n3", [("a:1", 100, True, False)]),
    ]
    images, refs = rf.fleet_images(per_node, top=2)
    assert refs == 3
    assert images == [
        dict(ref="b:1", repository="b", tag="1", nodes=2, in_use_nodes=0, bytes=600, reclaimable_bytes=600, reclaimable_nodes=2),
        dict(ref="a:1", repository="a", tag="1", nodes=3, in_use_nodes=2, bytes=300, reclaimable_bytes=100, reclaimable_nodes=1),
    ]


def test_image_key_untagged_and_multi_tagged():
    assert rf._image_key({"repo_tags": ["z:2", "a:1"]}) == "a:1"
    assert rf._image_key({"repo_tags": [], "repo_digests": ["reg/x@sha256:ab"]}) == "reg/x:<none>"
    assert rf._image_key({}) == "<none>:<none>"


def _node(host, findings=(), drift=(), health="ok", usage=50):
    return dict(host=host, health=health, findings=[dict(severity=s, source="audit", code=c, message=m) for s, c, m in findings],
                drift=list(drift), imagefs=dict(usage_percent=usage), headroom=dict(eviction_bytes=None))


def test_findings_grouped_by_code_with_scope():
    nodes = [_node("n%d" % i, findings=[("info", "common", "same")] + ([("error", "rare", "boom %d" % i)] if i == 3 else []))
             for i in range(4)]
    nodes[0]["findings"].append(dict(severity="warning", source="audit", code="half", message="a"))
    nodes[1]["findings"].append(dict(severity="warning", source="audit", code="half", message="b"))
    groups = rf.findings_by_code(nodes)
    assert [(g["code"], g["nodes"], g["scope"]) for g in groups] == [("rare", 1, "one-off"), ("half", 2, "fleet-wide"), ("common", 4, "every node")]
    assert groups[1]["hosts"] == ["n0", "n1"] and groups[1]["distinct_messages"] == 2


def test_drift_grouped_by_key_then_value():
    def d(k, desired, actual):
        return dict(component="kubelet", key=k, desired=desired, actual=actual)

    nodes = [_node("a", drift=[d("x", 1, 2)]), _node("b", drift=[d("x", 1, 2)]), _node("c", drift=[d("x", 1, None), d("y", "s", "t")])]
    groups = rf.drift_by_key(nodes)
    assert [(g["key"], g["nodes"]) for g in groups] == [("x", 3), ("y", 1)]
    assert [(v["desired"], v["actual"], v["hosts"]) for v in groups[0]["values"]] == [("1", "2", ["a", "b"]), ("1", "-", ["c"])]


def test_rank_worst_first():
    nodes = [_node("ok-high", usage=80), _node("warn", health="warning", usage=86), _node("crit", health="critical", usage=70),
             _node("failed", health="failed", usage=None), _node("ok-low", usage=10), _node("ok-unknown", usage=None)]
    assert [n["host"] for n in sorted(nodes, key=rf.rank_key)] == ["crit", "failed", "warn", "ok-high", "ok-low", "ok-unknown"]


def test_history_point_and_trend_order():
    report = dict(generated_at="2026-11-22T10:00:00Z", summary=dict(reclaimable_bytes_policy=5, reclaimable_bytes_prune=9, nodes_over_high_threshold=1),
                  nodes=[dict(host="a", status="ok", imagefs=dict(usage_percent=40)), dict(host="b", status="ok", imagefs=dict(usage_percent=61)),
                         dict(host="c", status="failed", imagefs=dict(usage_percent=None))])
    point = rf.history_point(report)
    assert point == dict(generated_at="2026-11-22T10:00:00Z", nodes=3, audited=2, usage_mean=50.5, usage_max=61, reclaimable_policy=5,
                         reclaimable_prune=9, over_high=1, usage={"a": 40, "b": 61}, reclaimable={})
    assert rf.history_point({"nope": 1}) is None
    older = dict(point, generated_at="2026-11-20T10:00:00Z")
    newer_copy = dict(point)   # the same report already in the history: not counted twice
    points = rf.trend([newer_copy, older], report)
    assert [p["generated_at"] for p in points] == ["2026-11-20T10:00:00Z", "2026-11-22T10:00:00Z"]


def test_sparkline_and_chart_are_plain_svg():
    spark = sparkline([10, None, 30, 40], high=85, label="a <b>")
    assert spark.startswith('<svg class="spark"') and spark.endswith("</svg>")
    assert spark.count("<polyline") == 1          # the gap splits the line; a lone point draws no line
    assert "a &lt;b&gt;" in spark
    assert sparkline([None, None]) == ""
    chart = line_chart(["a", "b", "c"], [("mean", "s1", [1, 2, None])], "t", y_max=100)
    assert chart.count("<circle") == 2 and "http" not in chart
    assert re.search(r'<polyline class="line s1" points="[0-9., ]+"/>', chart)


def _report(at, nodes):
    """A report of (host, status, usage, reclaimable bytes) nodes, its summary as audit_report sums it."""
    out = [dict(host=h, status=st, imagefs=dict(usage_percent=u), images=dict(reclaimable_policy=dict(count=1, bytes=r))) for h, st, u, r in nodes]
    return dict(generated_at=at, nodes=out, summary=dict(reclaimable_bytes_policy=sum(r or 0 for _h, st, _u, r in nodes if st != "failed"),
                                                         reclaimable_bytes_prune=0, nodes_over_high_threshold=0))


def test_trends_and_since_last_leave_failed_audits_out():
    """Issue 22, item 3: a failed audit is not 0 bytes: not in the trend, not in "since last"."""
    first = _report("2026-11-20T10:00:00Z", [("a", "ok", 50, 100), ("b", "ok", 70, 900)])
    all_failed = _report("2026-11-21T10:00:00Z", [("a", "failed", None, None), ("b", "failed", None, None)])
    now = _report("2026-11-22T10:00:00Z", [("a", "ok", 52, 150), ("b", "failed", None, None)])
    assert rf.history_point(all_failed)["audited"] == 0 and rf.history_point(all_failed)["reclaimable_policy"] is None
    points = rf.trend([rf.history_point(first), rf.history_point(all_failed)], now)
    assert [p["generated_at"] for p in points] == ["2026-11-20T10:00:00Z", "2026-11-22T10:00:00Z"]
    # since last: node a only (b failed now): +2 points and +50 bytes, not -48 points and -850 bytes
    assert rf.since_last(points) == dict(since="2026-11-20T10:00:00Z", usage_mean=(52.0, 50.0), reclaimable_policy=(150, 100))
    assert "mean usage +2.0 points since 2026-11-20T10:00:00Z" in rf.summary_line(
        dict(now, summary=dict(now["summary"], nodes=2, nodes_over_high_threshold=0, usage_percent_mean=52.0, usage_percent_max=52)),
        [rf.history_point(first), rf.history_point(all_failed)])
