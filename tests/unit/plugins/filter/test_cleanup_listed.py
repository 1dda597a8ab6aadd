# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""kubenode_gc_remove_images in the cleanup's history record, its summary table and the gc_summary callback's table."""

from ansible_collections.kubenode.gc.plugins.filter.fleet import cleanup_record, cleanup_summary
from ansible_collections.kubenode.gc.plugins.plugin_utils._gc_table import apply_result, new_row, render_table

LISTED = {
    "changed": True,
    "removed": [{"id": "sha256:aa", "repo_tags": ["docker.io/library/vuln:1"], "size": 100, "reason": "listed"}],
    "listed_kept": [
        {"id": "sha256:bb", "repo_tags": ["docker.io/library/vuln:run"], "patterns": ["*/vuln:*"], "reason": "in_use",
         "containers": [{"pod_namespace": "shop", "pod_name": "web", "container": "app", "state": "running", "running": True},
                        {"pod_namespace": "jobs", "pod_name": "batch", "container": "step", "state": "exited", "running": False}]},
        {"id": "sha256:cc", "repo_tags": ["registry.k8s.io/pause:3.10"], "patterns": ["registry.k8s.io/*"], "reason": "sandbox", "containers": []},
    ],
    "usage_after": 40, "bytes_freed_estimated": 100, "bytes_freed_measured": 4096, "errors": [], "unconfirmed": [],
}


def test_the_record_keeps_what_the_listed_removal_removed_and_what_is_still_present_with_its_pods():
    record = cleanup_record(None, {"removed_containers": [], "errors": []}, None, LISTED, host="n1", status="cleaned", check_mode=False,
                            usage_before=41)
    assert record["listed_images"]["removed"] == LISTED["removed"]
    assert record["listed_images"]["present"] == LISTED["listed_kept"]
    assert record["listed_images"]["bytes_freed_measured"] == 4096
    assert record["usage_after"] == 40  # below its thresholds: only the listed removal ran
    assert record["images"] == []
    assert cleanup_record({"removed": []}, None, None, None, host="n2")["listed_images"] is None


def test_the_summary_names_each_image_removed_and_each_still_present_with_its_pods():
    record = cleanup_record({"removed": [], "usage_after": 40, "target_reached": True}, None, None, LISTED, host="n1", status="cleaned",
                            check_mode=False, usage_before=41)
    lines = cleanup_summary([[record, "n1"], [cleanup_record({"removed": []}, host="n2", status="cleaned"), "n2"]])
    assert "n1: listed images removed: docker.io/library/vuln:1." in lines
    assert ("n1: listed images still present: docker.io/library/vuln:run: shop/web (app, running), jobs/batch (step, exited); "
            "registry.k8s.io/pause:3.10: the runtime's sandbox image.") in lines
    assert not [line for line in lines if line.startswith("n2: listed")]  # no listed removal ran there
    row = [line for line in lines if line.startswith("n1 ")][0]
    assert row.split()[4] == "1"  # the listed removal counts in IMAGES


def test_the_callback_table_names_them_from_an_image_gc_result_in_check_mode():
    row = new_row("n1", check_mode=True)
    apply_result(row, "image", dict(LISTED, bytes_freed_measured=None, listed_kept=[]))
    text = render_table([row])
    assert "n1: listed images would remove: docker.io/library/vuln:1." in text.splitlines()
    threshold = new_row("n2")
    apply_result(threshold, "image", {"removed": [{"id": "x", "repo_tags": ["a:1"], "reason": "space"}], "listed_kept": None})
    assert "listed" not in render_table([threshold])
