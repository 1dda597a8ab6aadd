# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The container_gc executor's removal order and error handling, with a recording stand-in for the CRI client.

A container in UNKNOWN state cannot be produced on demand in a real containerd, so its
stop-before-remove rule (CG-14) is proven here; everything else runs against the real runtime
in tests/integration/test_container_gc.py.
"""

import os

from ansible_collections.kubenode.gc.plugins.module_utils import _container_gc as gc
from ansible_collections.kubenode.gc.plugins.module_utils._common import params_for
from ansible_collections.kubenode.gc.plugins.module_utils._cri import CriError
from ansible_collections.kubenode.gc.plugins.modules import container_gc


class RecordingClient:
    def __init__(self, fail=()):
        self.calls = []
        self.fail = set(fail)

    def _do(self, method, target):
        self.calls.append((method, target))
        if (method, target) in self.fail:
            raise CriError("CRI endpoint unix:///x failed %s: boom (UNKNOWN)." % method)

    def stop_container(self, cid, timeout=0):
        self._do("StopContainer", cid)

    def remove_container(self, cid):
        self._do("RemoveContainer", cid)


def _container(tmp_path, cid, state):
    c = {"id": cid, "name": "app", "attempt": 0, "pod_uid": "u1", "pod_name": "web", "pod_namespace": "ns", "state": state,
         "created_at": None, "reason": "per_container_limit"}
    log = tmp_path / "pods" / "ns_web_u1" / "app" / "0.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("x")
    (tmp_path / "pods" / "ns_web_u1" / "app" / "0.log.20261122-010101").write_text("rotated")
    links = tmp_path / "links"
    links.mkdir(exist_ok=True)
    os.symlink(str(log), str(links / ("web_ns_app-%s.log" % cid)))
    return c, gc.options(params_for(container_gc.ARGUMENT_SPEC, pod_logs_dir=str(tmp_path / "pods"), container_logs_dir=str(links)))


def test_unknown_container_is_stopped_then_logs_then_removed(tmp_path):
    c, opts = _container(tmp_path, "abcdef123456", "unknown")
    client, result = RecordingClient(), {"errors": [], "removed_log_paths": []}
    assert gc._remove_container(client, c, opts, result) is True  # pylint: disable=protected-access
    assert client.calls == [("StopContainer", "abcdef123456"), ("RemoveContainer", "abcdef123456")]
    assert len(result["removed_log_paths"]) == 3 and not any(os.path.lexists(p) for p in result["removed_log_paths"])


def test_unknown_container_that_cannot_be_stopped_is_kept_with_its_logs(tmp_path):
    c, opts = _container(tmp_path, "abcdef123456", "unknown")
    client, result = RecordingClient(fail={("StopContainer", "abcdef123456")}), {"errors": [], "removed_log_paths": []}
    assert gc._remove_container(client, c, opts, result) is False  # pylint: disable=protected-access
    assert client.calls == [("StopContainer", "abcdef123456")]
    assert result["removed_log_paths"] == [] and os.path.exists(tmp_path / "pods" / "ns_web_u1" / "app" / "0.log")
    assert result["errors"][0]["msg"].startswith("Container abcdef123456 is in unknown state and could not be stopped, so it was kept: ")


def test_exited_container_is_not_stopped(tmp_path):
    c, opts = _container(tmp_path, "fedcba654321", "exited")
    client, result = RecordingClient(), {"errors": [], "removed_log_paths": []}
    assert gc._remove_container(client, c, opts, result) is True  # pylint: disable=protected-access
    assert client.calls == [("RemoveContainer", "fedcba654321")]


def test_log_link_name_is_truncated_like_the_kubelet():
    c = {"pod_name": "p" * 300, "pod_namespace": "ns", "name": "c", "id": "0123456789"}
    name = gc.log_link_name(c)
    assert name == "p" * 251 + ".log"


def test_minimum_age_defaults_to_the_kubelets_zero_and_evicted_pods_are_accepted():
    opts = gc.options(params_for(container_gc.ARGUMENT_SPEC, evicted_pod_uids=["u1"]))
    assert opts["min_age"] == 0
    assert opts["evicted_pod_uids"] == ["u1"]
