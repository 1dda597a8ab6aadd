# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The one image GC policy of a node (issue 22, item 1): node's kubelet config + the variables the user set -> thresholds
and ages with their source."""

import pytest

from ansible_collections.kubenode.gc.plugins.module_utils._errors import PolicyError
from ansible_collections.kubenode.gc.plugins.module_utils.gc import _gc_policy as p

EFFECTIVE = {"imageGCHighThresholdPercent": 70, "imageGCLowThresholdPercent": 60, "imageMinimumGCAge": "5m0s", "imageMaximumGCAge": "0s"}


def node(config=None, flags=()):
    return {"path": "/etc/kubernetes/kubelet.yaml", "config": config or {}, "flag_overrides": list(flags), "effective": dict(EFFECTIVE)}


def test_each_value_says_where_it_came_from():
    kubelet = node({"imageGCLowThresholdPercent": 60, "imageMinimumGCAge": "5m"},
                   [{"flag": "--image-gc-high-threshold", "value": "70", "file": "/var/lib/kubelet/kubeadm-flags.env", "key": "imageGCHighThresholdPercent"}])
    policy = p.image_gc_policy(kubelet)
    assert (policy["high_threshold_percent"], policy["low_threshold_percent"], policy["min_age"], policy["max_age"]) == (70, 60, "5m0s", "0s")
    assert policy["sources"] == {
        "high_threshold_percent": {"kind": "node", "from": "node's kubelet flag --image-gc-high-threshold in /var/lib/kubelet/kubeadm-flags.env"},
        "low_threshold_percent": {"kind": "node", "from": "node's kubelet config /etc/kubernetes/kubelet.yaml"},
        "min_age": {"kind": "node", "from": "node's kubelet config /etc/kubernetes/kubelet.yaml"},
        "max_age": {"kind": "default", "from": "kubelet default"}}


def test_a_value_the_node_sets_elsewhere_counts_as_the_nodes():
    # a drop-in or a layout the module reads without naming the key in ``config``: the effective value still rules
    policy = p.image_gc_policy(node())
    assert policy["high_threshold_percent"] == 70 and policy["sources"]["high_threshold_percent"] == {"kind": "node", "from": "node's kubelet config"}


def test_variables_win_and_unset_ones_do_not():
    policy = p.image_gc_policy(node(), {"kubenode_gc_cleanup_low_threshold_percent": "40", "kubenode_gc_cleanup_image_max_age": "",
                                        "kubenode_gc_cleanup_image_min_age": None})
    assert (policy["low_threshold_percent"], policy["max_age"], policy["min_age"]) == (40, "0s", "5m0s")
    assert policy["sources"]["low_threshold_percent"]["kind"] == "variable"


@pytest.mark.parametrize("overrides, message", [
    ({"kubenode_gc_cleanup_low_threshold_percent": 70}, "kubenode_gc_cleanup_low_threshold_percent must be below imageGCHighThresholdPercent: "
                                                        "the low threshold 70% (variable kubenode_gc_cleanup_low_threshold_percent) is not below "
                                                        "the high threshold 70% (node's kubelet config)."),
    ({"kubenode_gc_cleanup_high_threshold_percent": 101}, "kubenode_gc_cleanup_high_threshold_percent must be an integer percent between 0 and 100, got 101."),
    ({"kubenode_gc_cleanup_image_min_age": "2 minutes"}, "kubenode_gc_cleanup_image_min_age must be a Go duration the kubelet accepts"),
    ({"kubenode_gc_cleanup_image_max_age": "1m"}, "kubenode_gc_cleanup_image_max_age must be greater than imageMinimumGCAge: the maximum image age 1m0s"),
    ({"kubenode_gc_keep_images": []}, "image_gc_policy: unknown override kubenode_gc_keep_images"),
])
def test_wrong_values_name_the_variable(overrides, message):
    with pytest.raises(PolicyError) as exc:
        p.image_gc_policy(node(), overrides)
    assert str(exc.value).startswith(message)


def test_over_high_threshold_is_the_kubelets_trigger():
    assert p.over_high_threshold(70, 70) and p.over_high_threshold(73, 70)
    assert not p.over_high_threshold(69, 70) and not p.over_high_threshold(None, 70)


def test_other_variable_names_are_named_in_sources_and_errors():
    names = ("gc_timer_high_threshold_percent", "gc_timer_low_threshold_percent", "gc_timer_min_age", "gc_timer_max_age")
    policy = p.image_gc_policy(None, {"gc_timer_high_threshold_percent": 90, "gc_timer_low_threshold_percent": None}, names)
    assert policy["high_threshold_percent"] == 90 and policy["sources"]["high_threshold_percent"]["from"] == "variable gc_timer_high_threshold_percent"
    with pytest.raises(PolicyError, match="gc_timer_high_threshold_percent must be an integer percent"):
        p.image_gc_policy(None, {"gc_timer_high_threshold_percent": 150}, names)
