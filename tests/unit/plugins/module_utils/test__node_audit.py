# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""node_audit's options: each part's options checked by that module's own argument spec and options(), before any read."""

import pytest

from ansible_collections.kubenode.gc.plugins.module_utils._common import params_for
from ansible_collections.kubenode.gc.plugins.module_utils._errors import OptionError
from ansible_collections.kubenode.gc.plugins.module_utils.config import _runtime_config
from ansible_collections.kubenode.gc.plugins.module_utils.node import _node_audit as na


def opts(**kw):
    return na.options(params_for(na.ARGUMENT_SPEC, **kw))


def test_defaults_are_each_module_s_defaults():
    o = opts()
    assert o["container_gc"]["max_per_pod_container"] == 1 and o["container_gc"]["pod_logs_dir"] == "/var/log/pods"
    assert o["image_gc_prune"]["mode"] == "prune" and o["image_gc_prune"]["min_age"] == "0s"
    assert o["image_gc_policy"]["ledger_path"] == o["image_gc_prune"]["ledger_path"] == "/var/lib/kubenode-gc/image-ledger.json"
    assert o["kubelet_drift"] is None and o["runtimes"]["containerd"][1] is None and o["image_pin"] is None
    assert o["cri_info"]["gather"] == ["runtime", "imagefs", "images", "containers"]


def test_null_and_empty_mean_unset_and_the_prune_plan_shares_only_ledger_and_lock():
    o = opts(image_gc=dict(ledger_path="/x/ledger.json", free_bytes_high="10Gi", inodes_high_threshold_percent=None, lock_timeout=""),
             kubelet_config=dict(path="", settings={"imageGCHighThresholdPercent": 85}), keep_images=["a:*"], cri_endpoint="unix:///x.sock")
    assert o["image_gc_policy"]["free_bytes_high"] == "10Gi" and o["image_gc_policy"]["inodes_high_threshold_percent"] is None
    assert o["image_gc_prune"]["free_bytes_high"] is None and o["image_gc_prune"]["ledger_path"] == "/x/ledger.json"
    assert o["image_gc_policy"]["lock_timeout"] == 300.0
    assert o["kubelet"]["path"] is None and o["kubelet_drift"]["settings"] == {"imageGCHighThresholdPercent": 85}
    assert o["image_pin"]["images"] == ["a:*"] and o["image_pin"]["cri_endpoint"] == "unix:///x.sock"
    assert o["container_gc"]["cri_endpoint"] == "unix:///x.sock"


def test_runtime_drift_follows_the_running_runtime_without_a_cri_query(monkeypatch):
    """The drift pass reads the running runtime's command line (as the read pass) and makes no CRI call in run()."""
    daemon = dict(runtime="containerd", pid=7, what="the running containerd (pid 7)", who="the running containerd (pid 7) runs with",
                  flags={"config": "/srv/odd.toml", "root": "/data/ctrd"})
    monkeypatch.setattr(_runtime_config, "running_runtime", lambda o, untrusted=None: daemon)
    o = opts(runtime_config=dict(containerd=dict(settings={"snapshotter": "native"})))
    read, drift = o["runtimes"]["containerd"]
    assert read["query_runtime"] is True and drift["query_runtime"] is True  # options() reads the running process
    d = na.RUNTIME_DRIFT.options(drift)
    assert d["query_runtime"] is False and d["path"] == "/srv/odd.toml" and d["command_line"] is daemon
    assert _runtime_config.command_line_settings(d)["root"] == "/data/ctrd"


def test_types_are_converted_as_the_module_would():
    o = opts(container_gc=dict(max_per_pod_container="3", active_pod_uids=[]), disk_usage=dict(walk_limit="10"))
    assert o["container_gc"]["max_per_pod_container"] == 3 and o["container_gc"]["active_pod_uids"] == []
    assert o["disk_usage"]["walk_limit"] == 10


@pytest.mark.parametrize("kw, words", [
    (dict(image_gc=dict(min_age="1h")), ["image_gc.min_age", "node_audit itself"]),
    (dict(runtime_config=dict(crio=dict(query_runtime=True))), ["runtime_config.crio.query_runtime"]),
    (dict(runtime_config=dict(podman={})), ["podman", "containerd, crio and docker"]),
    (dict(runtime_config=dict(containerd="x")), ["runtime_config.containerd", "dict"]),
    (dict(container_gc=dict(bogus=1)), ["container_gc", "bogus"]),
    (dict(container_gc=dict(max_containers="many")), ["container_gc", "max_containers"]),
    (dict(container_gc=dict(min_age="two minutes")), ["two minutes"]),
    (dict(prune_min_age="soon"), ["soon"]),
    (dict(image_gc=dict(cri_endpoint="unix:///y")), ["image_gc.cri_endpoint"]),
])
def test_bad_options_fail_with_one_sentence_naming_them(kw, words):
    with pytest.raises(OptionError) as err:
        opts(**kw)
    assert all(w in str(err.value) for w in words), str(err.value)


def test_nodefs_is_what_stat_f_prints(tmp_path):
    import os

    def stat_f():
        st = os.statvfs(str(tmp_path))
        return "%d %d %d %d %d" % (st.f_frsize, st.f_blocks, st.f_bavail, st.f_files, st.f_ffree)

    # the free counts move while other processes write to this filesystem: compare a reading taken
    # while they stood still (the same before and after it)
    for _attempt in range(100):
        before, got, after = stat_f(), na.nodefs(str(tmp_path)), stat_f()
        if before == after:
            break
    assert before == after, "the filesystem of %s never stood still" % tmp_path
    assert got == before
    assert na.nodefs(str(tmp_path / "missing")) is None


def test_gc_timer_state_is_read_next_to_the_ledger(tmp_path):
    unit = tmp_path / "kubenode-gc.timer"
    ledger = tmp_path / "state" / "image-ledger.json"
    assert na.gc_timer(str(unit), str(ledger)) == {"installed": False, "state": ""}
    unit.write_text("[Timer]\n")
    assert na.gc_timer(str(unit), str(ledger)) == {"installed": True, "state": ""}
    ledger.parent.mkdir()
    (ledger.parent / "gc-timer-state.json").write_text('{"result": "ok"}')
    assert na.gc_timer(str(unit), str(ledger)) == {"installed": True, "state": '{"result": "ok"}'}


def test_detail_defaults_to_full_and_rejects_other_values():
    assert opts()["detail"] == "full" and opts(detail="summary")["detail"] == "summary"


def _image(i, tags=(), digests=(), **kw):
    return dict({"id": "sha256:%s" % i, "repo_tags": list(tags), "repo_digests": list(digests), "size": 10, "in_use": False,
                 "pinned": False, "sandbox_image": False, "used_by": []}, **kw)


def test_summary_folds_the_image_lists_into_one_line_per_image():
    audit = {
        "cri_info": {"changed": False, "runtime": {"name": "containerd"}, "images": [
            _image("a", ["reg/pause:3.10"], pinned=True, sandbox_image=True, in_use=True, size=320368),
            _image("b", ["z/app:2", "a/app:1"], size=7),
            _image("c", (), ["reg/x@sha256:ff"], size=5),
            _image("d", size=3),
        ], "containers": [{"id": "c1"}]},
        "image_gc_policy": {"changed": True, "removed": [{"id": "sha256:b", "size": 7, "repo_tags": ["z/app:2", "a/app:1"]}], "usage_before": 5},
        "image_gc_prune": {"changed": True, "removed": [
            {"id": "sha256:b", "size": 7}, {"id": "sha256:c", "size": 5}, {"id": "sha256:new", "size": 9, "repo_tags": ["late/pull:1"]}]},
        "container_gc": {"removed_containers": []},
    }
    out = na.summarise(audit)
    assert out["summary"] == {"image_columns": ["id", "ref", "size", "marks"], "images": [
        "sha256:a reg/pause:3.10 320368 ups", "sha256:b a/app:1 7 gr", "sha256:c reg/x:<none> 5 r", "sha256:d <none>:<none> 3 -",
        "sha256:new late/pull:1 9 nr"]}
    assert "images" not in out["cri_info"] and out["cri_info"]["containers"] == [{"id": "c1"}]
    assert "removed" not in out["image_gc_policy"] and out["image_gc_policy"]["usage_before"] == 5 and "removed" not in out["image_gc_prune"]
    assert out["container_gc"] == audit["container_gc"] and "images" in audit["cri_info"]  # the input is left as it was


def test_summary_lines_keep_four_fields_whatever_a_runtime_reports():
    out = na.summarise({"cri_info": {"images": [_image("a b", ["odd name:1"]), _image("", [""])]}})
    assert out["summary"]["images"] == ["sha256:a_b odd_name:1 10 -", "sha256: _ 10 -"]
    assert all(len(line.split(" ")) == 4 for line in out["summary"]["images"])


def test_summary_of_a_failed_audit_is_the_audit():
    failed = {"cri_info": {"changed": False, "failed": True, "msg": "The runtime at unix:///x.sock is unavailable."}}
    assert na.summarise(failed) is failed
