# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The container_gc executor's removal order and error handling, with a recording stand-in for the CRI client.

A container in UNKNOWN state cannot be produced on demand in a real containerd, so its
stop-before-remove rule (CG-14) is proven here; everything else runs against the real runtime
in tests/integration/test_container_gc.py.
"""

import os

import pytest

from ansible_collections.kubenode.gc.plugins.module_utils._common import params_for
from ansible_collections.kubenode.gc.plugins.module_utils._errors import GcError
from ansible_collections.kubenode.gc.plugins.module_utils.cri._cri import CriError
from ansible_collections.kubenode.gc.plugins.module_utils.gc import _container_gc as gc
from ansible_collections.kubenode.gc.plugins.modules import container_gc


class RecordingClient:
    def __init__(self, fail=()):
        self.calls = []
        self.fail = set(fail)

    def _do(self, method, target):
        self.calls.append((method, target))
        if (method, target) in self.fail:
            raise CriError("CRI endpoint unix:///x failed %s: boom (UNKNOWN)." % method)
        if (method, "*") in self.fail:
            code = self.code if hasattr(self, "code") else "UNKNOWN"
            raise CriError("CRI endpoint unix:///x failed %s: boom (%s)." % (method, code), code=code)

    def stop_container(self, cid, timeout=0):
        self._do("StopContainer", cid)

    def remove_container(self, cid):
        self._do("RemoveContainer", cid)

    def call_async(self, method, **fields):
        """The pipelined calls: made at once, answered by a future, as the CRI client's call_async does."""
        try:
            if method == "RemoveContainer":
                self.remove_container(fields["container_id"])
            else:
                assert method in ("StopPodSandbox", "RemovePodSandbox")
                self._do(method, fields["pod_sandbox_id"])
        except CriError as exc:
            return _Answered(exc)
        return _Answered(None)


class _Answered:
    def __init__(self, error):
        self.error = error

    def done(self):
        return True

    def result(self):
        if self.error is not None:
            raise self.error


def _remove_one(client, c, opts, result):
    """Remove one container through the pipeline; True when it was removed."""
    result.setdefault("removed_containers", [])
    gc._remove_containers(client, [c], opts, result)  # pylint: disable=protected-access
    removed = [e["id"] for e in result.pop("removed_containers")]
    return removed == [c["id"]]


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


def test_unknown_container_is_stopped_then_removed_then_its_logs(tmp_path):
    c, opts = _container(tmp_path, "abcdef123456", "unknown")
    client, result = RecordingClient(), {"errors": [], "removed_log_paths": [], "already_removed": []}
    assert _remove_one(client, c, opts, result) is True
    assert client.calls == [("StopContainer", "abcdef123456"), ("RemoveContainer", "abcdef123456")]
    assert len(result["removed_log_paths"]) == 3 and not any(os.path.lexists(p) for p in result["removed_log_paths"])


def test_unknown_container_that_cannot_be_stopped_is_kept_with_its_logs(tmp_path):
    c, opts = _container(tmp_path, "abcdef123456", "unknown")
    client, result = RecordingClient(fail={("StopContainer", "abcdef123456")}), {"errors": [], "removed_log_paths": [], "already_removed": []}
    assert _remove_one(client, c, opts, result) is False
    assert client.calls == [("StopContainer", "abcdef123456")]
    assert result["removed_log_paths"] == [] and os.path.exists(tmp_path / "pods" / "ns_web_u1" / "app" / "0.log")
    assert result["errors"][0]["msg"].startswith("Container abcdef123456 is in unknown state and could not be stopped, so it was kept: ")


def test_exited_container_is_not_stopped(tmp_path):
    c, opts = _container(tmp_path, "fedcba654321", "exited")
    client, result = RecordingClient(), {"errors": [], "removed_log_paths": [], "already_removed": []}
    assert _remove_one(client, c, opts, result) is True
    assert client.calls == [("RemoveContainer", "fedcba654321")]


def test_log_link_name_is_truncated_like_the_kubelet():
    c = {"pod_name": "p" * 300, "pod_namespace": "ns", "name": "c", "id": "0123456789"}
    name = gc.log_link_name(c)
    assert name == "p" * 251 + ".log"


def test_minimum_age_defaults_to_the_kubelets_zero_and_evicted_pods_are_accepted():
    opts = gc.options(params_for(container_gc.ARGUMENT_SPEC, evicted_pod_uids=["u1"]))
    assert opts["min_age"] == 0
    assert opts["evicted_pod_uids"] == ["u1"]


def test_a_failed_removal_keeps_the_logs(tmp_path):
    c, opts = _container(tmp_path, "abcdef123456", "exited")
    client = RecordingClient(fail={("RemoveContainer", "abcdef123456")})
    result = {"errors": [], "removed_log_paths": [], "already_removed": []}
    assert _remove_one(client, c, opts, result) is False
    assert result["removed_log_paths"] == [] and len(result["errors"]) == 1
    assert (tmp_path / "pods" / "ns_web_u1" / "app" / "0.log").read_text() == "x"
    assert len(os.listdir(tmp_path / "links")) == 1


def test_not_found_is_already_removed_not_an_error(tmp_path):
    c, opts = _container(tmp_path, "abcdef123456", "exited")
    client = RecordingClient(fail={("RemoveContainer", "*")})
    client.code = "NOT_FOUND"
    result = {"errors": [], "removed_log_paths": [], "already_removed": []}
    assert _remove_one(client, c, opts, result) is False
    assert result == {"errors": [], "removed_log_paths": [], "already_removed": ["abcdef123456"], "unconfirmed": []}


class NodeClient(RecordingClient):
    """A node of dead containers in one pod and one running container in another; list calls answer from it."""

    def __init__(self, containers, sandboxes, fail=(), code="UNKNOWN"):
        super().__init__(fail)
        self.code = code
        self.containers, self.sandboxes = containers, sandboxes
        self.endpoint = "unix:///unit-test/%d.sock" % id(self)

    def remove_container(self, cid):
        self._do("RemoveContainer", cid)
        self.containers = [c for c in self.containers if c["id"] != cid]


def _run(monkeypatch, tmp_path, client, **params):
    def fake_read_node(_client, _what):
        return {"containers": list(client.containers), "sandboxes": list(client.sandboxes)}

    def fake_read_containers(_client, _sandboxes):
        if ("ListContainers", "*") in client.fail:
            client._do("ListContainers", "*")  # pylint: disable=protected-access
        return list(client.containers)

    monkeypatch.setenv("KUBENODE_GC_LOCK_DIR", str(tmp_path / "locks"))
    monkeypatch.setattr(gc, "read_node", fake_read_node)
    monkeypatch.setattr(gc, "read_containers", fake_read_containers)
    params.setdefault("pod_logs_dir", str(tmp_path / "pods"))
    params.setdefault("container_logs_dir", str(tmp_path / "links"))
    opts = gc.options(params_for(container_gc.ARGUMENT_SPEC, min_age="0s", sandboxes=False, **params))
    return gc.run(client, opts, now=10**19)


def _dead(i, uid="u1", state="exited"):
    return {"id": "c%02d" % i, "name": "app%d" % i, "attempt": 0, "pod_uid": uid, "pod_name": "web-" + uid, "pod_namespace": "ns",
            "state": state, "created_at": i, "created_at_ns": i, "reason": "", "sandbox_id": "s-" + uid, "image_ref": "sha256:x", "log_path": ""}


def test_the_first_unavailable_error_stops_the_run_with_the_partial_result(monkeypatch, tmp_path):
    (tmp_path / "pods").mkdir()
    (tmp_path / "links").mkdir()
    containers = [_dead(i) for i in range(5)]
    client = NodeClient(containers, [], code="UNAVAILABLE")
    real = client._do  # pylint: disable=protected-access
    done = []

    def die_after_two(method, target):
        if method == "RemoveContainer" and len(done) >= 2:
            client.fail.add(("RemoveContainer", "*"))
        real(method, target)
        done.append(target)

    client._do = die_after_two  # pylint: disable=protected-access
    with pytest.raises(GcError, match="^The runtime became unavailable after 2 container") as info:
        _run(monkeypatch, tmp_path, client, max_per_pod_container=0, max_containers=-1, parallelism=1)
    partial = info.value.result
    assert partial["changed"] is True and len(partial["removed_containers"]) == 2 and len(partial["errors"]) == 1
    assert [m for m, _t in client.calls].count("RemoveContainer") == 3  # nothing more after the runtime went away


def test_pipelined_removals_stop_once_the_runtime_went_away(monkeypatch, tmp_path):
    """Up to 64 calls in flight: answers already in are collected before each new call, so no call follows the first
    UNAVAILABLE answer; the calls in flight are collected (their successes count, one error for the outage)."""
    (tmp_path / "pods").mkdir()
    (tmp_path / "links").mkdir()
    client = NodeClient([_dead(i) for i in range(200)], [], code="UNAVAILABLE")
    real = client._do  # pylint: disable=protected-access
    done = []

    def die_after_seventy(method, target):
        if method == "RemoveContainer" and len(done) >= 70:
            client.fail.add(("RemoveContainer", "*"))
        real(method, target)
        done.append(target)

    client._do = die_after_seventy  # pylint: disable=protected-access
    with pytest.raises(GcError, match="^The runtime became unavailable after 70 container") as info:
        _run(monkeypatch, tmp_path, client, max_per_pod_container=0, max_containers=-1)
    partial = info.value.result
    assert partial["changed"] is True and len(partial["removed_containers"]) == 70 and len(partial["errors"]) == 1
    assert [m for m, _t in client.calls].count("RemoveContainer") == 71  # the 71st answered UNAVAILABLE: no 72nd
    assert {c["id"] for c in client.containers} == {c["id"] for c in [_dead(i) for i in range(200)]} - {c["id"] for c in partial["removed_containers"]}


def test_running_pods_are_never_deleted_whatever_active_pod_uids_says(monkeypatch, tmp_path):
    pods = tmp_path / "pods"
    for uid in ("live", "gone"):
        (pods / ("ns_web-%s_%s" % (uid, uid)) / "app").mkdir(parents=True)
    (tmp_path / "links").mkdir()
    client = NodeClient([_dead(1, "live"), _dead(2, "live", "running"), _dead(3, "gone")], [])
    result = _run(monkeypatch, tmp_path, client, active_pod_uids=[])
    assert [c["id"] for c in result["removed_containers"]] == ["c03"]
    assert sorted(os.listdir(pods)) == ["ns_web-live_live"]
    assert len(result["warnings"]) == 1 and "live" in result["warnings"][0] and "running containers" in result["warnings"][0]


class _Pending:
    def __init__(self, client, key, error):
        self.client, self.key, self.error, self._done = client, key, error, False

    def done(self):
        return self._done

    def result(self):
        if not self._done:
            self._done = True
            self.client.in_flight -= 1
        if self.error is not None:
            raise self.error


class PendingClient:
    """Answers arrive only when waited for; records how many calls were in flight at each new call."""

    def __init__(self, fail=None):
        self.fail = fail or {}  # {(method, id): code}
        self.in_flight = self.max_in_flight = 0
        self.calls = []

    def call_async(self, method, **fields):
        key = fields.get("container_id") or fields.get("pod_sandbox_id")
        self.calls.append((method, key, self.in_flight))
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        code = self.fail.get((method, key))
        return _Pending(self, key, None if code is None else CriError("CRI endpoint unix:///x failed %s: boom (%s)." % (method, code), code=code))

    def stop_container(self, cid, timeout=0):
        code = self.fail.get(("StopContainer", cid))
        if code:
            raise CriError("CRI endpoint unix:///x is unavailable for StopContainer: gone.", code=code)


def test_the_container_pipeline_keeps_parallelism_calls_in_flight_without_batches(tmp_path):
    containers = [_dead(i) for i in range(10)]
    client = PendingClient()
    result = {"removed_containers": [], "removed_log_paths": [], "errors": [], "already_removed": []}
    opts = {"parallelism": 4, "pod_logs_dir": str(tmp_path / "pods"), "container_logs_dir": str(tmp_path / "links")}
    gc._remove_containers(client, containers, opts, result)  # pylint: disable=protected-access
    # the first four go out at once, then each new call waits for one answer: always four in flight, never a drained batch
    assert [in_flight for _m, _k, in_flight in client.calls] == [0, 1, 2, 3] + [3] * 6
    assert client.max_in_flight == 4
    assert [c["id"] for c in result["removed_containers"]] == [c["id"] for c in containers]


def test_an_unknown_container_that_cannot_be_stopped_for_an_outage_keeps_the_removals_in_flight(tmp_path):
    containers = [_dead(i) for i in range(3)] + [_dead(3, state="unknown")] + [_dead(i) for i in range(4, 6)]
    client = PendingClient(fail={("StopContainer", "c03"): "UNAVAILABLE"})
    result = {"removed_containers": [], "removed_log_paths": [], "errors": [], "already_removed": []}
    opts = {"parallelism": 8, "pod_logs_dir": str(tmp_path / "pods"), "container_logs_dir": str(tmp_path / "links")}
    outage = gc._remove_containers(client, containers, opts, result)  # pylint: disable=protected-access
    assert outage.code == "UNAVAILABLE"
    # the three calls already in flight are collected and count; nothing is called after the outage (the run reports it)
    assert [c["id"] for c in result["removed_containers"]] == ["c00", "c01", "c02"]
    assert [k for _m, k, _n in client.calls] == ["c00", "c01", "c02"]
    assert result["errors"] == [] and result["unconfirmed"] == []


def test_sandboxes_are_stopped_then_removed_through_pipelines():
    sandboxes = [{"id": "s%d" % i, "uid": "u%d" % i, "name": "p%d" % i, "namespace": "ns", "state": "notready", "created_at": i, "reason": "pod_deleted"}
                 for i in range(6)]
    client = PendingClient(fail={("StopPodSandbox", "s1"): "NOT_FOUND", ("StopPodSandbox", "s2"): "UNKNOWN", ("RemovePodSandbox", "s3"): "UNKNOWN"})
    result = {"removed_sandboxes": [], "errors": [], "already_removed": []}
    assert gc._remove_sandboxes(client, sandboxes, 4, result) is None  # pylint: disable=protected-access
    assert [m for m, _k, _n in client.calls] == ["StopPodSandbox"] * 6 + ["RemovePodSandbox"] * 4
    assert [k for m, k, _n in client.calls if m == "RemovePodSandbox"] == ["s0", "s3", "s4", "s5"]  # never one whose stop failed
    assert [s["id"] for s in result["removed_sandboxes"]] == ["s0", "s4", "s5"]
    assert result["already_removed"] == ["s1"] and [e["id"] for e in result["errors"]] == ["s2", "s3"]
    assert client.max_in_flight == 4


def test_sandbox_removal_stops_at_an_outage_and_keeps_what_was_done():
    sandboxes = [{"id": "s%d" % i, "uid": "u%d" % i, "name": "p%d" % i, "namespace": "ns", "state": "notready", "created_at": i, "reason": "pod_deleted"}
                 for i in range(4)]
    client = PendingClient(fail={("RemovePodSandbox", "s1"): "UNAVAILABLE", ("RemovePodSandbox", "s2"): "UNAVAILABLE"})
    result = {"removed_sandboxes": [], "errors": [], "already_removed": []}
    pending = {}
    outage = gc._remove_sandboxes(client, sandboxes, 2, result, pending)  # pylint: disable=protected-access
    assert outage.code == "UNAVAILABLE"
    # two in flight: s2 starts while s1's answer is not in yet; s1's UNAVAILABLE is seen before s3, so no s3; both
    # answers were lost: unconfirmed until a list of sandboxes says, no error of their own
    assert [s["id"] for s in result["removed_sandboxes"]] == ["s0"]
    assert [k for m, k, _n in client.calls if m == "RemovePodSandbox"] == ["s0", "s1", "s2"]
    assert result["errors"] == [] and result["unconfirmed"] == ["s1", "s2"] and sorted(pending) == ["s1", "s2"]
    # the runtime came back: s1 is gone (removed after all), s2 is still there (not removed, and not an error of its own)
    gc._confirm_sandboxes(result, [{"id": "s2"}, {"id": "s3"}], pending)  # pylint: disable=protected-access
    assert [s["id"] for s in result["removed_sandboxes"]] == ["s0", "s1"] and result["unconfirmed"] == [] and result["errors"] == []


def test_log_paths_come_from_one_listing_per_directory_and_match_only_their_attempt(tmp_path, monkeypatch):
    app = tmp_path / "pods" / "ns_web_u1" / "app"
    app.mkdir(parents=True)
    for name in ("1.log", "1.log.20261122-010101", "1.log.20261122-010101.gz", "10.log", "10.log.20261122-020202", "1.logx", "2.log"):
        (app / name).write_text("x")
    links = tmp_path / "links"
    links.mkdir()
    opts = {"pod_logs_dir": str(tmp_path / "pods"), "container_logs_dir": str(links)}
    c1 = dict(_dead(1), attempt=1, name="app", pod_name="web")
    c10 = dict(_dead(10), attempt=10, name="app", pod_name="web")
    os.symlink(str(app / "1.log"), str(links / gc.log_link_name(c1)))
    listed = []
    real_listdir = os.listdir
    monkeypatch.setattr(gc.os, "listdir", lambda d: listed.append(d) or real_listdir(d))
    index = gc.LogIndex()
    assert gc.container_log_paths(c1, opts, index) == [str(app / n) for n in ("1.log", "1.log.20261122-010101", "1.log.20261122-010101.gz")] + [
        str(links / gc.log_link_name(c1))]
    assert gc.container_log_paths(c10, opts, index) == [str(app / "10.log"), str(app / "10.log.20261122-020202")]
    # each directory listed once for both containers (the pod's through a descriptor opened without following links)
    assert len(listed) == 2 and str(links) in listed
    # a container of a pod whose log directory does not exist has no logs (and no error)
    assert gc.container_log_paths(dict(c1, pod_uid="nope"), opts, index) == [str(links / gc.log_link_name(c1))]


def _tree(root):
    out = {}
    for base, _dirs, files in os.walk(str(root)):
        for name in files:
            with open(os.path.join(base, name), "rb") as f:
                out[os.path.relpath(os.path.join(base, name), str(root))] = f.read()
    return out


def _outside(tmp_path, *names):
    out = tmp_path / "outside"
    out.mkdir()
    for name in names:
        (out / name).write_bytes(b"precious " + name.encode())
    return out


def test_symlinks_below_the_log_roots_are_never_followed_for_a_live_pods_container_dir(tmp_path):
    c, opts = _container(tmp_path, "abcdef123456", "exited")
    app = tmp_path / "pods" / "ns_web_u1" / "app"
    for name in os.listdir(app):
        os.unlink(str(app / name))
    app.rmdir()
    outside = _outside(tmp_path, "0.log", "0.log.20261122-010101", "1.log")
    os.symlink(str(outside), str(app))
    before = _tree(outside)
    index = gc.LogIndex()
    # check mode's view: the link is what would go, not the files behind it
    assert gc.container_logs(c, opts, index) == ([str(app), str(tmp_path / "links" / "web_ns_app-abcdef123456.log")], str(app))
    result = {"errors": [], "removed_log_paths": [], "removed_symlinks": []}
    gc._remove_logs(c, opts, result, index)  # pylint: disable=protected-access
    assert result["removed_symlinks"] == [str(app)] and result["errors"] == []
    assert result["removed_log_paths"] == [str(app), str(tmp_path / "links" / "web_ns_app-abcdef123456.log")]
    assert not os.path.lexists(str(app)) and _tree(outside) == before


def test_symlinks_below_the_log_roots_are_never_followed_when_a_pod_directory_goes(tmp_path):
    pods = tmp_path / "pods"
    (pods / "ns_gone_u2" / "app").mkdir(parents=True)
    (pods / "ns_gone_u2" / "app" / "0.log").write_text("mine")
    outside = _outside(tmp_path, "0.log", "secret.txt")
    os.symlink(str(outside), str(pods / "ns_gone_u2" / "task"))  # a <container>/ link inside a deleted pod's directory
    os.symlink(str(outside / "secret.txt"), str(pods / "ns_gone_u2" / "app" / "1.log"))  # a file link
    os.symlink(str(outside), str(pods / "ns_linked_u3"))  # a deleted pod's directory that is a link
    before = _tree(outside)
    assert gc.pod_log_dirs(str(pods)) == ["ns_gone_u2", "ns_linked_u3"]
    result = {"errors": [], "removed_log_paths": [], "removed_symlinks": []}
    assert gc._remove_tree(str(pods), "ns_gone_u2", result) is True  # pylint: disable=protected-access
    assert gc._remove_tree(str(pods), "ns_linked_u3", result) is True  # pylint: disable=protected-access
    assert result["errors"] == [] and result["removed_symlinks"] == [str(pods / "ns_linked_u3")]
    assert os.listdir(str(pods)) == [] and _tree(outside) == before


def test_a_credential_records_directory_below_a_pod_directory_is_refused(tmp_path):
    pods = tmp_path / "pods"
    (pods / "ns_gone_u2" / "x" / "image_manager").mkdir(parents=True)
    result = {"errors": [], "removed_log_paths": [], "removed_symlinks": []}
    assert gc._remove_tree(str(pods), "ns_gone_u2", result) is False  # pylint: disable=protected-access
    assert result["errors"][0]["msg"].startswith("Refused to remove %s: " % (pods / "ns_gone_u2"))
    assert os.path.isdir(str(pods / "ns_gone_u2" / "x" / "image_manager"))


def test_orphan_logs_are_the_files_no_listed_container_owns(tmp_path):
    pods = tmp_path / "pods"
    app = pods / "ns_web_u1" / "app"
    app.mkdir(parents=True)
    for name in ("0.log", "0.log.20261122-010101.gz", "1.log", "2.log", "notes.log", "x.txt"):
        (app / name).write_text("x")
    (pods / "ns_web_u1" / "side").mkdir()
    (pods / "ns_web_u1" / "side" / "0.log").write_text("x")
    outside = _outside(tmp_path, "0.log")
    os.symlink(str(outside), str(pods / "ns_web_u1" / "linked"))  # never listed through
    scan = gc.scan_pod_logs(str(pods))
    assert sorted(scan) == [("ns_web_u1", "app"), ("ns_web_u1", "side")]
    live = [dict(_dead(1), name="app", pod_name="web", attempt=2), dict(_dead(2), name="side", pod_name="web", attempt=0)]
    assert gc.orphan_logs(scan, live) == {("ns_web_u1", "app"): ["0.log", "0.log.20261122-010101.gz", "1.log"]}
    assert gc.orphan_logs(scan, live, skip_pods={"ns_web_u1"}) == {}


def test_a_removal_whose_answer_was_lost_is_confirmed_by_the_list_and_its_logs_go(monkeypatch, tmp_path):
    """The runtime removed c00 but its answer was lost (UNAVAILABLE: it restarted); the list read when it is back shows it
    gone: it is removed with its logs, it is no error, nothing is unconfirmed."""
    links = tmp_path / "links"
    links.mkdir()
    app = tmp_path / "pods" / "ns_web-u1_u1"
    containers = [dict(_dead(i), name="app", attempt=i) for i in range(4)]
    for c in containers:
        (app / "app").mkdir(parents=True, exist_ok=True)
        (app / "app" / ("%d.log" % c["attempt"])).write_text("x")
    client = NodeClient(containers, [], code="UNAVAILABLE")
    real = client._do  # pylint: disable=protected-access

    def lose_answers(method, target):
        real(method, target)
        if method == "RemoveContainer" and target == "c00":
            client.containers = [c for c in client.containers if c["id"] != target]
            raise CriError("CRI endpoint unix:///x is unavailable for RemoveContainer: Socket closed.", code="UNAVAILABLE")

    client._do = lose_answers  # pylint: disable=protected-access
    with pytest.raises(GcError, match=r"^The runtime became unavailable after 1 container\(s\) and 0 sandbox\(es\) were removed, so") as info:
        _run(monkeypatch, tmp_path, client, max_per_pod_container=1, max_containers=-1, parallelism=1)
    partial = info.value.result
    assert [c["id"] for c in partial["removed_containers"]] == ["c00"] and partial["unconfirmed"] == []
    assert partial["errors"] == [{"id": "", "msg": "CRI endpoint unix:///x is unavailable for RemoveContainer: Socket closed."}]
    assert sorted(os.listdir(str(app / "app"))) == ["1.log", "2.log", "3.log"]  # c01 was never called (the outage came first)
    assert [t for m, t in client.calls if m == "RemoveContainer"] == ["c00"]


def test_the_next_run_removes_the_logs_of_containers_that_are_gone(monkeypatch, tmp_path):
    links = tmp_path / "links"
    links.mkdir()
    app = tmp_path / "pods" / "ns_web-u1_u1" / "app"
    app.mkdir(parents=True)
    for name in ("0.log", "0.log.20261122-010101", "1.log", "2.log"):
        (app / name).write_text("x")
    os.symlink(str(app / "0.log"), str(links / "web-u1_ns_app-c00.log"))
    os.symlink(str(app / "2.log"), str(links / "web-u1_ns_app-c02.log"))
    # only attempt 2 is still in the runtime: attempts 0 and 1 were removed by a run whose answers were lost
    client = NodeClient([dict(_dead(2), name="app", attempt=2)], [])
    result = _run(monkeypatch, tmp_path, client)
    assert result["removed_containers"] == [] and result["unconfirmed"] == [] and result["changed"] is True
    assert sorted(result["removed_log_paths"]) == sorted([str(app / "0.log"), str(app / "0.log.20261122-010101"), str(app / "1.log"),
                                                          str(links / "web-u1_ns_app-c00.log")])
    assert os.listdir(str(app)) == ["2.log"] and os.listdir(str(links)) == ["web-u1_ns_app-c02.log"]
