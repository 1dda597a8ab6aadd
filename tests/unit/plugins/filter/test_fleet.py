# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The fleet playbooks' glue filters: audit_node, audit_nodes and cleanup_summary."""

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.kubenode.gc.plugins.filter.fleet import audit_node, audit_nodes, cleanup_record, cleanup_summary

MIB = 1 << 20


def test_audit_nodes_keeps_records_and_fills_in_missing_hosts():
    nodes = audit_nodes([[{"host": "a", "error": None}, "a"], [None, "b"]])
    assert nodes[0] == {"host": "a", "error": None, "drift": []}
    assert nodes[1]["host"] == "b" and "before it could read the node" in nodes[1]["error"]


AUDIT = {"cri_info": {"runtime": {"name": "containerd"}}, "kubelet_config": {"findings": []}, "disk_usage": {"categories": {}},
         "summary": {"image_columns": ["id", "ref", "size", "marks"], "images": []}, "gc_timer": {"installed": True, "state": "ok"}}


def test_audit_node_builds_the_record_from_the_hosts_result_and_variables():
    variables = {"inventory_hostname": "node-1", "kubenode_gc_audit_result": {"changed": False, "audit": AUDIT},
                 "kubenode_gc_remove_images": ["old:1"], "kubenode_gc_audit_metrics_dir": "/var/lib/node_exporter",
                 "kubenode_gc_inodes_high_threshold_percent": 90, "kubenode_gc_inodes_low_threshold_percent": 80}
    record = audit_node(variables)
    assert record["host"] == "node-1" and record["error"] is None
    assert record["cri_info"] == AUDIT["cri_info"] and record["summary"] == AUDIT["summary"] and record["gc_timer"] == AUDIT["gc_timer"]
    assert record["image_gc_policy"] is None and record["nodefs"] is None  # parts the result does not have
    assert record["remove_images"] == ["old:1"] and record["keep_images"] == []
    assert record["metrics_file"] == "/var/lib/node_exporter/kubenode_gc.prom"
    assert record["inodes_thresholds"] == {"high_percent": 90, "low_percent": 80}
    assert record["free_bytes_targets"] == {"high": None, "low": None}
    # the report reads it as it read the fact the playbook collected before
    (node,) = audit_nodes([[record, "node-1"]])
    assert node["host"] == "node-1" and node["drift"] == [] and "error" in node


def test_audit_node_of_a_failed_or_unreachable_host_carries_its_error():
    failed = audit_node({"inventory_hostname": "n", "kubenode_gc_audit_result": {"failed": True, "msg": "no CRI socket"}})
    assert failed["error"] == "no CRI socket" and failed["cri_info"] is None and failed["gc_timer"] == {"installed": None, "state": ""}
    unreachable = {"unreachable": True, "msg": "ssh: connection refused", "changed": False}
    record = audit_node({"inventory_hostname": "n", "kubenode_gc_audit_result": unreachable})
    assert record["error"] == "ssh: connection refused" and record["cri_info"] == unreachable
    assert audit_node({"inventory_hostname": "n", "kubenode_gc_audit_result": {"failed": True}})["error"] == "failed"
    # a host that never reached the node audit has no record: audit_nodes makes it a failed node
    assert audit_node({"inventory_hostname": "n"}) is None
    with pytest.raises(AnsibleFilterError, match=r"^audit_node expects a host's variables"):
        audit_node(["n"])


def test_audit_nodes_rejects_bad_input():
    with pytest.raises(AnsibleFilterError, match="pairs"):
        audit_nodes([{"host": "a"}])


def test_cleanup_summary_rows():
    cleaned = {
        "status": "cleaned",
        "check_mode": False,
        "containers": [{}, {}],
        "sandboxes": [{}],
        "log_paths": ["x"],
        "images": [{}, {}, {}],
        "bytes_freed_estimated": 30 * MIB,
        "bytes_freed_measured": 24 * MIB,
        "usage_before": "88",
        "usage_after": 49,
        "target_reached": True,
        "errors": [],
    }
    skipped = {"status": "skipped", "reason": "imagefs usage 25% is below the high threshold 80%", "usage_before": 25, "usage_after": 25}
    failed = {"status": "failed", "error": "Cannot connect to the CRI endpoint unix:///run/containerd/containerd.sock."}
    lines = cleanup_summary([[cleaned, "node-a"], [skipped, "node-b"], [failed, "node-d"], [None, "node-e"]])
    text = "\n".join(lines)
    (row_a,) = [line for line in lines if line.startswith("node-a")]
    assert row_a.split()[1:6] == ["2", "1", "1", "3", "24.0"]
    assert "88% → 49%" in row_a and " yes " in row_a + " "
    assert "node-b: skipped: imagefs usage 25% is below the high threshold 80%" in text
    assert "node-d: failed: Cannot connect" in text
    assert "node-e: failed: The cleanup stopped on this host" in text
    (total,) = [line for line in lines if line.startswith("TOTAL")]
    assert total.endswith("2 failed")  # node-d and node-e; the skipped node-b is no failure
    assert lines[0] == "kubenode.gc cleanup"


def test_cleanup_summary_marks_check_mode_and_estimates():
    planned = {"status": "planned", "check_mode": True, "images": [{}], "bytes_freed_estimated": 5 * MIB, "bytes_freed_measured": None,
               "usage_before": 90, "usage_after": 90, "target_reached": False, "errors": []}
    lines = cleanup_summary([[planned, "n1"]])
    assert lines[0] == "kubenode.gc cleanup (check mode: planned)"
    assert "~5.0 MiB" in "\n".join(lines)
    assert "Not at target: n1" in lines


def test_audit_nodes_derives_drift_from_the_check_mode_results():
    record = {
        "host": "n",
        "kubelet_config": {"changes": []},
        "kubelet_config_drift": {"changes": [{"key": "imageGCHighThresholdPercent", "before": 95, "after": 80}]},
        "runtime_config": {"runtime": "containerd"},
        "runtime_config_drift": {"runtime": "containerd", "changes": [{"key": "root", "before": "/var/lib/containerd", "after": "/srv/c"}]},
    }
    (node,) = audit_nodes([[record, "n"]])
    assert node["drift"] == [
        {"component": "kubelet", "key": "imageGCHighThresholdPercent", "desired": 80, "actual": 95},
        {"component": "containerd", "key": "root", "desired": "/srv/c", "actual": "/var/lib/containerd"},
    ]
    failed = dict(record, kubelet_config_drift={"failed": True, "msg": "x"}, runtime_config_drift={"skipped": True})
    assert audit_nodes([[failed, "n"]])[0]["drift"] == []


def test_cleanup_record_maps_the_module_results_and_cleanup_summary_reads_them_back():
    images = {"removed": [{"id": "a", "size": 3}], "usage_after": 70, "bytes_to_free": 5, "bytes_freed_estimated": 3, "bytes_freed_measured": 4,
              "target_reached": True, "errors": [{"id": "b", "msg": "x"}]}
    containers = {"removed_containers": [{}, {}], "removed_sandboxes": [{}], "removed_log_paths": ["/l"], "errors": []}
    record = cleanup_record(images, containers, host="n1", status="cleaned", check_mode=False, usage_before=90)
    assert record == {"host": "n1", "status": "cleaned", "check_mode": False, "usage_before": 90, "containers": [{}, {}], "sandboxes": [{}],
                      "log_paths": ["/l"], "images": [{"id": "a", "size": 3}], "usage_after": 70, "bytes_to_free": 5, "bytes_freed_estimated": 3,
                      "bytes_freed_measured": 4, "target_reached": True, "errors": [{"id": "b", "msg": "x"}], "unconfirmed": [],
                      "storage": None, "listed_images": None}
    (row,) = [line for line in cleanup_summary([[record, "n1"]]) if line.startswith("n1")]
    assert row.split()[1:5] == ["2", "1", "1", "1"] and "90% → 70%" in row


def test_cleanup_record_without_container_gc():
    record = cleanup_record({"removed": [], "errors": []}, {"skipped": True, "changed": False})
    assert record["containers"] == record["sandboxes"] == record["log_paths"] == [] and record["errors"] == []
    # removals a runtime outage left unconfirmed are kept in the record (issue 21, item 5)
    record = cleanup_record({"removed": [], "errors": [{"id": "", "msg": "down"}], "unconfirmed": ["sha256:c"]}, {"unconfirmed": ["ctr-1"]})
    assert record["unconfirmed"] == ["ctr-1", "sha256:c"]


def test_cleanup_summary_shows_a_failed_nodes_partial_work_and_its_error():
    images = {"failed": True, "msg": "The run stopped after 2 image(s) were removed: x.", "removed": [{"id": "a", "size": 3}, {"id": "b", "size": 4}],
              "usage_before": 90, "usage_after": 88, "bytes_to_free": 0, "bytes_freed_estimated": 7, "bytes_freed_measured": 5 * MIB,
              "target_reached": True, "errors": [{"id": "c", "msg": "unavailable"}]}
    record = dict(cleanup_record(images, None, host="n1", status="failed", check_mode=False, usage_before=90), error=images["msg"])
    assert record["images"] == images["removed"] and record["errors"] == images["errors"] and record["bytes_freed_measured"] == 5 * MIB
    lines = cleanup_summary([[record, "n1"]])
    (row,) = [line for line in lines if line.startswith("n1 ")]
    assert row.split()[1:6] == ["0", "0", "0", "2", "5.0"] and "90% → 88%" in row and row.endswith("failed (1)")
    assert "n1: failed: The run stopped after 2 image(s) were removed: x." in lines
    (total,) = [line for line in lines if line.startswith("TOTAL")]
    assert total.endswith("1 failed")


STORAGE_PLAN = [{"kind": "lease", "namespace": "k8s.io", "id": "pull-1", "bytes": 0},
                {"kind": "image", "namespace": "moby", "id": "docker.io/library/busybox:1", "bytes": 2 * MIB},
                {"kind": "snapshot", "namespace": "default", "id": "orphan", "bytes": MIB}]


def test_cleanup_record_keeps_what_storage_gc_did_and_the_summary_names_it():
    storage = {"changed": True, "supported": True, "plan": STORAGE_PLAN, "removed": STORAGE_PLAN[1:],
               "already_gone": [{"kind": "lease", "namespace": "k8s.io", "id": "pull-1"}], "freed_bytes": 3 * MIB, "rpc_calls": {"x": 1}}
    record = cleanup_record({"removed": [], "errors": []}, None, storage, host="n1", status="cleaned", check_mode=False)
    assert record["storage"] == {"supported": True, "plan": STORAGE_PLAN, "removed": STORAGE_PLAN[1:],
                                 "already_gone": [{"kind": "lease", "namespace": "k8s.io", "id": "pull-1"}], "freed_bytes": 3 * MIB}
    lines = cleanup_summary([[record, "n1"], [cleanup_record({"removed": []}, host="n2", status="cleaned"), "n2"]])
    assert lines[-2].startswith("Containerd storage the CRI cannot see")
    assert lines[-1] == "n1: storage_gc removed 2 object(s) (1 image, 1 snapshot), freed 3.0 MiB; 1 already gone."
    assert not any(line.startswith("n2: storage_gc") for line in lines)


def test_cleanup_record_storage_gc_check_mode_skipped_and_unsupported():
    planned = cleanup_record({"removed": []}, None, {"supported": True, "plan": STORAGE_PLAN, "removed": [], "freed_bytes": 0}, check_mode=True)
    assert planned["storage"]["plan"] == STORAGE_PLAN and planned["storage"]["removed"] == []
    assert cleanup_summary([[planned, "n1"]])[-1] == "n1: storage_gc would remove 3 object(s) (1 image, 1 lease, 1 snapshot)."
    assert cleanup_record({"removed": []}, None, {"skipped": True, "changed": False})["storage"] is None
    crio = cleanup_record({"removed": []}, None, {"supported": False, "plan": [], "removed": [], "freed_bytes": 0})
    assert cleanup_summary([[crio, "n1"]])[-1] == "n1: storage_gc: not supported on this runtime, nothing changed."
    with pytest.raises(AnsibleFilterError, match="storage_gc result as a dict"):
        cleanup_record({"removed": []}, None, "oops")
