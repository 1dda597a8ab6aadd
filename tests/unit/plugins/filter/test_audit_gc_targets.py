# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The audit report's byte targets (headroom above free_bytes_high, under_free_bytes_high) and GC timer (gc_timer, gc_timer_failed)."""

import json

from ansible_collections.kubenode.gc.plugins.filter import audit_report as ar
from tests.unit.plugins.filter.test_audit_report import GiB, cri_info, image_gc, kubelet_config, node


def one(**kw):
    report = ar.audit_report([node("n1", cri_info=cri_info(60), kubelet_config=kubelet_config(), image_gc_policy=image_gc([]), **kw)])
    return report["nodes"][0]


def codes(n):
    return [f["code"] for f in n["findings"]]


def test_without_byte_targets_or_timer_every_value_is_null():
    n = one()
    assert n["thresholds"]["free_bytes_high"] is None and n["headroom"]["free_bytes_high_bytes"] is None
    assert n["gc_timer"] == {"installed": None, "finished_at": None, "result": None, "observe": None, "removed_images": None,
                             "removed_containers": None, "bytes_freed": None, "message": None}
    assert "under_free_bytes_high" not in codes(n) and "gc_timer_failed" not in codes(n)


def test_headroom_in_bytes_above_free_bytes_high_and_a_finding_below_it():
    # 60 % of 50 GiB used: 20 GiB available
    n = one(free_bytes_targets={"high": "15Gi", "low": "25Gi"})
    assert (n["thresholds"]["free_bytes_high"], n["thresholds"]["free_bytes_low"]) == (15 * GiB, 25 * GiB)
    assert n["headroom"]["free_bytes_high_bytes"] == 5 * GiB and "under_free_bytes_high" not in codes(n)
    n = one(free_bytes_targets={"high": str(30 * GiB), "low": "40Gi"})
    assert n["headroom"]["free_bytes_high_bytes"] == -10 * GiB
    finding = next(f for f in n["findings"] if f["code"] == "under_free_bytes_high")
    assert finding["severity"] == "warning"
    assert finding["message"] == ("The image filesystem /var/lib/containerd/io.containerd.snapshotter.v1.overlayfs has 20.0 GiB available, below the "
                                  "byte target free_bytes_high 30.0 GiB: image GC under the policy frees up to free_bytes_low 40.0 GiB.")


def test_gc_timer_installed_with_its_last_run_and_a_finding_when_it_failed():
    state = {"finished_at": "2026-11-23T23:00:00Z", "result": "ok", "observe": False, "removed_images": 2, "removed_containers": 1,
             "bytes_freed": 1234, "message": "removed 2 image(s)"}
    n = one(gc_timer={"installed": True, "state": json.dumps(state)})
    assert n["gc_timer"] == dict(state, installed=True)
    assert "gc_timer_failed" not in codes(n)
    failed = dict(state, result="failed", message="CRI endpoint unix:///run/containerd/containerd.sock does not exist.")
    n = one(gc_timer={"installed": True, "state": json.dumps(failed)})
    finding = next(f for f in n["findings"] if f["code"] == "gc_timer_failed")
    assert finding["message"] == ("The node's GC timer (kubenode.gc.gc_timer) failed on its last run at 2026-11-23T23:00:00Z: "
                                  "CRI endpoint unix:///run/containerd/containerd.sock does not exist.")
    # installed, never ran (no state file) or an unreadable one: no result
    assert one(gc_timer={"installed": True, "state": ""})["gc_timer"]["result"] is None
    assert one(gc_timer={"installed": True, "state": "{not json"})["gc_timer"]["result"] is None
    assert one(gc_timer={"installed": False, "state": ""})["gc_timer"]["installed"] is False
