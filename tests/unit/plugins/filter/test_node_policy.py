# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The per-node decisions the playbooks and roles take through filters: image GC policy, runtime, imagefs, severity gate."""

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.kubenode.gc.plugins.filter.node_policy import can_pin, findings_at_or_above, image_filesystem, image_gc_policy, runtime_kind

NODE = {"path": "/var/lib/kubelet/config.yaml", "config": {"imageGCHighThresholdPercent": 70, "imageGCLowThresholdPercent": 60},
        "flag_overrides": [], "effective": {"imageGCHighThresholdPercent": 70, "imageGCLowThresholdPercent": 60, "imageMinimumGCAge": "2m0s",
                                            "imageMaximumGCAge": "0s"}}


def test_image_gc_policy_takes_the_nodes_kubelet_config_and_says_so():
    policy = image_gc_policy(NODE, {"kubenode_gc_cleanup_high_threshold_percent": None})
    assert (policy["high_threshold_percent"], policy["low_threshold_percent"], policy["min_age"], policy["max_age"]) == (70, 60, "2m0s", "0s")
    assert policy["described"] == ("high_threshold_percent 70%, low_threshold_percent 60% from node's kubelet config /var/lib/kubelet/config.yaml; "
                                   "min_age 2m0s, max_age 0s from kubelet default")


def test_image_gc_policy_variables_override_the_node():
    policy = image_gc_policy(NODE, {"kubenode_gc_cleanup_high_threshold_percent": "90", "kubenode_gc_cleanup_image_min_age": "1m"})
    assert (policy["high_threshold_percent"], policy["low_threshold_percent"], policy["min_age"]) == (90, 60, "1m0s")
    assert policy["sources"]["high_threshold_percent"] == {"kind": "variable", "from": "variable kubenode_gc_cleanup_high_threshold_percent"}


def test_image_gc_policy_without_a_readable_node_takes_the_kubelet_defaults():
    expected = (85, 80, "2m0s", "0s")
    for kubelet in (None, {"failed": True, "msg": "no file"}, {"skipped": True}):
        policy = image_gc_policy(kubelet)
        assert (policy["high_threshold_percent"], policy["low_threshold_percent"], policy["min_age"], policy["max_age"]) == expected
        assert policy["described"] == "high_threshold_percent 85%, low_threshold_percent 80%, min_age 2m0s, max_age 0s from kubelet default"


def test_image_gc_policy_errors_name_the_variable():
    with pytest.raises(AnsibleFilterError, match="^kubenode_gc_cleanup_low_threshold_percent must be below imageGCHighThresholdPercent: "
                                                 "the low threshold 75% .variable .* is not below the high threshold 70% .node's kubelet config"):
        image_gc_policy(NODE, {"kubenode_gc_cleanup_low_threshold_percent": 75})
    assert image_gc_policy(NODE, {"kubenode_gc_cleanup_high_threshold_percent": 150}, errors="return") == {
        "error": "kubenode_gc_cleanup_high_threshold_percent must be an integer percent between 0 and 100, got 150."}
    with pytest.raises(AnsibleFilterError, match="expects a kubenode.gc.kubelet_config result"):
        image_gc_policy("85")


@pytest.mark.parametrize(
    "value, existing, expected",
    [
        ({"runtime": {"name": "cri-o"}}, [], "crio"),
        ({"runtime": {"name": "containerd"}}, ["/etc/crio/crio.conf"], "containerd"),  # the running runtime wins over files
        ("cri-o", [], "crio"),
        (None, ["/etc/containerd/config.toml"], "containerd"),
        (None, ["/etc/crio/crio.conf"], "crio"),
        (None, ["/etc/containers/storage.conf"], "crio"),
        (None, ["/etc/containerd/config.toml", "/etc/crio/crio.conf"], "containerd"),  # both: containerd, as configure always chose
        (None, [], "fallback"),
        ({"failed": True, "msg": "down"}, [], "fallback"),  # cri_info failed: nothing says
    ],
)
def test_runtime_kind(value, existing, expected):
    assert runtime_kind(value, existing=existing, default="fallback") == expected


def test_runtime_kind_without_default_gives_none():
    assert runtime_kind(None) is None
    with pytest.raises(AnsibleFilterError):
        runtime_kind(42)


def test_image_filesystem_is_the_one_reported_as_image_filesystem():
    container = {"kind": "container", "mountpoint": "/var/lib/containers", "usage_percent": 10}
    image = {"kind": "image", "mountpoint": "/var/lib/images", "usage_percent": 40}
    assert image_filesystem({"imagefs": [container, image]}) == image
    assert image_filesystem([container]) == container  # a runtime that reports only one kind
    with pytest.raises(AnsibleFilterError, match="reports no image filesystem"):
        image_filesystem({"imagefs": []})
    with pytest.raises(AnsibleFilterError, match="gathered with imagefs"):
        image_filesystem({"runtime": {}})


FINDINGS = [dict(severity="info", code="a", message="i"), dict(severity="warning", code="b", message="w"),
            dict(severity="error", code="c", message="e")]


@pytest.mark.parametrize("fail_on, codes", [("error", ["c"]), ("warning", ["b", "c"]), ("never", [])])
def test_findings_at_or_above(fail_on, codes):
    assert [f["code"] for f in findings_at_or_above(FINDINGS, fail_on)] == codes


def test_findings_at_or_above_rejects_an_unknown_level():
    assert findings_at_or_above(None, "error") == []
    with pytest.raises(AnsibleFilterError, match="fail_on must be one of error, warning, never, got 'info'"):
        findings_at_or_above(FINDINGS, "info")


def test_imagefs_pressure_triggers_on_bytes_or_inodes():
    from ansible_collections.kubenode.gc.plugins.filter.node_policy import imagefs_pressure
    fs = {"kind": "image", "mountpoint": "/var/lib/containerd", "usage_percent": 40, "inodes_total": 1000, "inodes_free": 80}
    info = {"imagefs": [fs]}
    assert imagefs_pressure(info, 85) == []  # inodes left out without inodes_high
    assert imagefs_pressure(info, 85, inodes_high=92) == ["imagefs inode usage 92% is at or above the inode high threshold 92%"]
    assert imagefs_pressure(info, 85, inodes_high=93) == []
    assert imagefs_pressure(info, "40", inodes_high="") == ["imagefs usage 40% is at or above the high threshold 40%"]
    assert len(imagefs_pressure([fs], 40, inodes_high=90)) == 2
    # a filesystem that reports no inodes (or no usage) is never over on that measure
    assert imagefs_pressure([dict(fs, inodes_total=None, usage_percent=None)], 1, inodes_high=1) == []
    with pytest.raises(AnsibleFilterError, match="inodes_high must be an integer percent, got 'x'"):
        imagefs_pressure(info, 85, inodes_high="x")


@pytest.mark.parametrize("name, version, expected", [
    ("containerd", "1.6.20~ds1", False), ("containerd", "1.7.2", False), ("containerd", "1.7.24~ds1", True), ("containerd", "v2.1.9", True),
    ("cri-o", "1.37.0", True), ("docker", "28.2.2", False),
])
def test_can_pin_is_image_pins_own_decision(name, version, expected):
    assert can_pin({"changed": False, "runtime": {"name": name, "version": version}}) is expected
    assert can_pin({"name": name, "version": version}) is expected


def test_can_pin_needs_a_runtime():
    with pytest.raises(AnsibleFilterError, match="^can_pin expects a cri_info result"):
        can_pin("containerd")


def test_imagefs_pressure_triggers_below_free_bytes_high():
    from ansible_collections.kubenode.gc.plugins.filter.node_policy import imagefs_pressure
    fs = {"kind": "image", "mountpoint": "/var/lib/containerd", "usage_percent": 40, "capacity_bytes": 100 << 30, "available_bytes": 60 << 30}
    assert imagefs_pressure([fs], 85, free_bytes_high="60Gi") == []
    assert imagefs_pressure([fs], 85, free_bytes_high=(60 << 30) + 1) == ["imagefs has 64424509440 bytes available, below free_bytes_high 64424509441"]
    assert imagefs_pressure([fs], 85, free_bytes_high="") == []
    with pytest.raises(AnsibleFilterError, match=r"^imagefs_pressure: free_bytes_high 'lots' is not a number of bytes"):
        imagefs_pressure([fs], 85, free_bytes_high="lots")
