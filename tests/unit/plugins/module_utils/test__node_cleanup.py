# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""node_cleanup's options and the cleanup's pure per-node decisions (_cleanup_policy)."""

import datetime

import pytest

from ansible_collections.kubenode.gc.plugins.module_utils._common import params_for
from ansible_collections.kubenode.gc.plugins.module_utils._errors import KubenodeGcError
from ansible_collections.kubenode.gc.plugins.module_utils.node import _cleanup_policy as cp
from ansible_collections.kubenode.gc.plugins.module_utils.node import _node_cleanup as nc


def opts(**kw):
    return nc.options(params_for(nc.ARGUMENT_SPEC, **dict(dict(host="node-a"), **kw)))


def test_each_step_gets_its_module_s_defaults_and_the_shared_keep_list():
    o = opts(keep_images=["k:*"], image_gc=dict(ledger_path="", free_bytes_high="1Gi"), storage_gc=dict(namespaces=["moby"], lease_max_age=None))
    assert o["image_gc"]["keep_images"] == o["storage_gc"]["keep_images"] == o["image_pin"]["images"] == ["k:*"]
    assert o["image_gc"]["ledger_path"] == "/var/lib/kubenode-gc/image-ledger.json" and o["image_gc"]["free_bytes_high"] == "1Gi"
    assert o["storage_gc"]["ingest_max_age"] == "1h" and o["storage_gc"]["lease_max_age"] is None
    assert o["container_gc"]["min_age"] == "0s" and o["cri_info"]["gather"] == ["runtime", "imagefs", "images"]


@pytest.mark.parametrize("kw, words", [
    (dict(image_gc=dict(min_age="1h")), ["image_gc.min_age", "node_cleanup itself"]),
    (dict(storage_gc=dict(keep_images=["x"])), ["storage_gc.keep_images"]),
    (dict(container_gc=dict(min_age="later")), ["later"]),
    (dict(image_gc=dict(free_bytes_high="lots")), ["free_bytes_high", "lots"]),
    (dict(storage=True, storage_gc=dict(namespaces=["k8s.io"])), ["k8s.io"]),
])
def test_bad_options_fail_before_anything_is_read(kw, words):
    with pytest.raises(KubenodeGcError) as err:
        opts(**kw)
    assert all(w in str(err.value) for w in words), str(err.value)


def test_the_skip_sentence_names_every_threshold_and_where_it_came_from():
    assert cp.skip_reason(73, 85, "kubelet default") == "imagefs usage 73% is below the high threshold 85% (kubelet default)"
    assert cp.skip_reason(73, 85, "variable x", inodes_high=90, free_bytes_high="10Gi") == (
        "imagefs usage 73% is below the high threshold 85% (variable x) and its inode usage below the inode high threshold 90% "
        "and not below free_bytes_high 10Gi available")


def test_pressure_reasons():
    fs = dict(usage_percent=86, available_bytes=100, capacity_bytes=1000, inodes_total=100, inodes_free=5)
    assert len(cp.pressure_reasons(fs, 85, 95, 200)) == 3
    assert cp.pressure_reasons(dict(fs, usage_percent=10, available_bytes=900, inodes_free=50), 85, 95, 200) == []


def test_record_name_and_time_are_utc_to_the_microsecond():
    now = datetime.datetime(2026, 11, 24, 3, 4, 5, 123456, tzinfo=datetime.timezone.utc)
    assert cp.record_name("/h", now) == "/h/20261124T030405.123456Z.json"
    assert cp.iso(now) == "2026-11-24T03:04:05.123456Z"


def test_remove_images_makes_a_listed_step_with_the_shared_keep_list_and_checks_its_patterns_first():
    assert opts()["image_listed"] is None
    o = opts(keep_images=["k:*"], remove_images=["bad:*"], image_gc=dict(ledger_path="/srv/ledger.json"))
    assert o["image_listed"]["mode"] == "listed" and o["image_listed"]["images"] == ["bad:*"]
    assert o["image_listed"]["keep_images"] == ["k:*"] and o["image_listed"]["ledger_path"] == "/srv/ledger.json"
    assert o["image_gc"]["mode"] == "threshold" and o["image_gc"]["images"] is None
    with pytest.raises(KubenodeGcError, match=r"^images must not contain an empty pattern; remove it or name the image to remove\.$"):
        opts(remove_images=["bad:*", ""])


def test_check_mode_plans_the_listed_removal_as_if_container_gc_had_run():
    part = nc._listed_part({"removed_containers": [{"id": "c1"}, {"id": "c2"}]}, check_mode=True)
    o = part.options(params_for(nc.IMAGE_GC_SPEC, mode="listed", images=["bad:*"]))
    assert o["assume_gone"] == {"containers": {"c1", "c2"}, "images": set()}
    assert nc._listed_part({"removed_containers": [{"id": "c1"}]}, check_mode=False) is nc._image_gc
    images = [{"id": "a", "used_by": ["c1"], "in_use": True}, {"id": "b", "used_by": ["c1", "c3"], "in_use": True}, {"id": "z", "used_by": []}]
    nc._image_gc._assume_gone(images, {"containers": {"c1"}, "images": {"z"}})
    assert images == [{"id": "a", "used_by": [], "in_use": False}, {"id": "b", "used_by": ["c3"], "in_use": True}]
