# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""kubenode.gc.container_gc against every real runtime: which containers, sandboxes and log paths remain."""

import os

import pytest

from ansible_collections.kubenode.gc.plugins.module_utils.cri._snapshot import RUNTIME_BACK_WAIT
from devtools.faults import CrashAfter, RestartAfter, back_in_time, until_decided
from devtools.images import ImageSpec
from tests.integration.expectations import expect

pytestmark = pytest.mark.runtimes("every")


def containers_left(runtime):
    return {c.id: c for c in runtime.client.list_containers()}


def sandboxes_left(runtime):
    return {s.id for s in runtime.client.list_pod_sandbox()}


def cgc(ansible, runtime, links, check=False, interpreter=None, **args):
    args.setdefault("cri_endpoint", runtime.endpoint)
    args.setdefault("min_age", "0s")
    args.setdefault("pod_logs_dir", runtime.pod_logs)
    args.setdefault("container_logs_dir", links)
    kwargs = {"check": check, "diff": True}
    if interpreter:
        kwargs["interpreter"] = interpreter
    return ansible.module("kubenode.gc.container_gc", args, **kwargs)


@pytest.fixture
def links(runtime):
    path = os.path.join(runtime.workdir, "containers-%d" % len(os.listdir(runtime.workdir)))
    os.makedirs(path)
    return path


@pytest.fixture
def node(runtime, links):
    """Pod web: app exited x3 (attempts 0-2), side running, init created. Pod job: task exited x2."""
    runtime.pull_images([ImageSpec("img:1")])
    web = runtime.run_pod("web", uid="uid-web")
    job = runtime.run_pod("job", uid="uid-job")
    ids = {}
    for attempt in range(3):
        ids["app%d" % attempt] = runtime.add_container(web, "app", "img:1", "exited", attempt=attempt, link_dir=links)
    ids["side"] = runtime.add_container(web, "side", "img:1", "running", link_dir=links)
    ids["init"] = runtime.add_container(web, "init", "img:1", "created")
    for attempt in range(2):
        ids["task%d" % attempt] = runtime.add_container(job, "task", "img:1", "exited", attempt=attempt, link_dir=links)
    return {"ids": ids, "web": web, "job": job}


def log_file(runtime, pod, name, attempt):
    return os.path.join(pod[1]["log_directory"], name, "%d.log" % attempt)


def test_defaults_keep_the_last_dead_container_of_every_container(ansible, runtime, links, node, interpreter):
    ids = node["ids"]
    before = set(containers_left(runtime))
    plan = cgc(ansible, runtime, links, check=True, interpreter=interpreter)
    assert not plan.get("failed"), plan.get("msg")
    assert set(containers_left(runtime)) == before  # check mode changed nothing
    assert os.path.exists(log_file(runtime, node["web"], "app", 0))

    res = cgc(ansible, runtime, links, interpreter=interpreter)
    assert not res.get("failed"), res.get("msg")
    assert [c["id"] for c in res["removed_containers"]] == [c["id"] for c in plan["removed_containers"]]
    assert res["removed_log_paths"] == plan["removed_log_paths"]
    # oldest first within each (pod, name) unit; units in uid order
    assert [c["id"] for c in res["removed_containers"]] == [ids["task0"], ids["app0"], ids["app1"]]
    assert {c["reason"] for c in res["removed_containers"]} == {"per_container_limit"}
    first = res["removed_containers"][0]
    assert (first["pod_uid"], first["pod_name"], first["name"], first["state"]) == ("uid-job", "job", "task", "exited")
    left = containers_left(runtime)
    assert set(left) == {ids["app2"], ids["side"], ids["init"], ids["task1"]}
    assert res["kept"] == {"running": 1, "too_young": 0, "within_limits": 3, "sandbox_ready": 2, "sandbox_in_use": 0, "sandbox_newest": 0}
    # logs of removed containers went before them, the others stay
    for key, pod, name, attempt in (("app0", "web", "app", 0), ("app1", "web", "app", 1), ("task0", "job", "task", 0)):
        assert not os.path.lexists(log_file(runtime, node[pod], name, attempt))
        assert not os.path.lexists(os.path.join(links, "%s_default_%s-%s.log" % (pod, name, ids[key])))
    assert os.path.exists(log_file(runtime, node["web"], "app", 2))
    assert os.path.lexists(os.path.join(links, "web_default_app-%s.log" % ids["app2"]))
    # log paths: every runtime writes <log_directory>/<name>/<attempt>.log; cri-o creates it at CreateContainer
    assert os.path.exists(log_file(runtime, node["web"], "init", 0)) is expect(runtime).log_at_create
    assert set(res["diff"]["before"]["containers"]) - set(res["diff"]["after"]["containers"]) == {ids["app0"], ids["app1"], ids["task0"]}
    assert res["rpc_calls"] == {"ListPodSandbox": 1, "ListContainers": 2, "RemoveContainer": 3}
    assert sandboxes_left(runtime) == {node["web"][0], node["job"][0]}

    again = cgc(ansible, runtime, links, interpreter=interpreter)
    assert again["changed"] is False and again["removed_containers"] == [] and again["removed_log_paths"] == []
    assert set(containers_left(runtime)) == set(left)


@pytest.mark.runtimes("one")
def test_default_min_age_is_the_kubelets_zero(ansible, runtime, links, node):
    ids = node["ids"]
    res = ansible.module("kubenode.gc.container_gc", {"cri_endpoint": runtime.endpoint, "pod_logs_dir": runtime.pod_logs, "container_logs_dir": links})
    assert not res.get("failed"), res.get("msg")
    # MinimumGCAge 0: fresh dead containers go at once; the newest of each (pod, name) stays by max_per_pod_container
    assert {c["id"] for c in res["removed_containers"]} == {ids["app0"], ids["app1"], ids["task0"]}
    assert res["kept"]["too_young"] == 0 and res["kept"]["running"] == 1
    assert set(containers_left(runtime)) == {ids["app2"], ids["side"], ids["init"], ids["task1"]}


@pytest.mark.runtimes("one")
def test_evicted_pods_lose_containers_sandboxes_and_log_dirs_while_still_in_the_api(ansible, runtime, links, node):
    ids = node["ids"]
    runtime.client.stop_pod_sandbox(node["job"][0])  # the job pod was evicted: its sandbox is stopped, its API object stays
    res = cgc(ansible, runtime, links, active_pod_uids=["uid-web", "uid-job"], evicted_pod_uids=["uid-job"])
    assert not res.get("failed"), res.get("msg")
    reasons = {c["id"]: c["reason"] for c in res["removed_containers"]}
    assert reasons == {ids["task0"]: "pod_deleted", ids["task1"]: "pod_deleted", ids["app0"]: "per_container_limit", ids["app1"]: "per_container_limit"}
    assert set(containers_left(runtime)) == {ids["app2"], ids["side"], ids["init"]}
    assert [(s["id"], s["reason"]) for s in res["removed_sandboxes"]] == [(node["job"][0], "pod_deleted")]
    assert sandboxes_left(runtime) == {node["web"][0]}
    assert not os.path.exists(node["job"][1]["log_directory"])
    assert os.path.isdir(node["web"][1]["log_directory"])


@pytest.mark.runtimes("one")
def test_container_without_pod_uid_label_belongs_to_no_pod(ansible, runtime, links, node):
    ids = node["ids"]
    sandbox_id, pod = node["web"]
    config = {
        "metadata": {"name": "app", "attempt": 9},
        "image": runtime.container_image("img:1"),
        "command": ["/bin/true"],
        "log_path": "app/9.log",
        "labels": {"io.kubernetes.pod.name": "web", "io.kubernetes.pod.namespace": "default", "io.kubernetes.container.name": "app"},
        "linux": {"security_context": {"namespace_options": runtime.namespace_options()}},
    }
    orphan = runtime.client.create_container(sandbox_id, config, pod)
    runtime.client.start_container(orphan)
    runtime.wait_for_state(orphan, "CONTAINER_EXITED")
    # every pod is live; the unlabelled container is not web's (no sandbox inheritance): uid "" is no live pod
    res = cgc(ansible, runtime, links, active_pod_uids=["uid-web", "uid-job"])
    assert not res.get("failed"), res.get("msg")
    reasons = {c["id"]: c["reason"] for c in res["removed_containers"]}
    assert reasons == {orphan: "pod_deleted", ids["task0"]: "per_container_limit", ids["app0"]: "per_container_limit",
                       ids["app1"]: "per_container_limit"}
    # web's own newest dead app container is still kept: the orphan did not count as web's newer one
    assert ids["app2"] in containers_left(runtime) and orphan not in containers_left(runtime)


@pytest.mark.runtimes("one")
def test_no_limits_keep_everything(ansible, runtime, links, node):
    res = cgc(ansible, runtime, links, max_per_pod_container=-1, max_containers=-1)
    assert res["removed_containers"] == [] and len(containers_left(runtime)) == 7


@pytest.mark.runtimes("one")
def test_node_limit_keeps_the_newest_globally(ansible, runtime, links):
    runtime.pull_images([ImageSpec("img:1")])
    made = []
    for n in range(3):
        pod = runtime.run_pod("p%d" % n, uid="uid-p%d" % n)
        made.append([runtime.add_container(pod, "c", "img:1", "exited", attempt=a) for a in range(2)])
    res = cgc(ansible, runtime, links, max_per_pod_container=-1, max_containers=2)
    # per unit max(1, 2 // 3) = 1 keeps the newest of each pod, then the oldest of those goes
    assert set(containers_left(runtime)) == {made[1][1], made[2][1]}
    assert {c["reason"] for c in res["removed_containers"]} == {"node_limit"} and len(res["removed_containers"]) == 4


def test_deleted_pods_lose_containers_sandboxes_and_log_dirs(ansible, runtime, links, node):
    ids = node["ids"]
    runtime.client.stop_pod_sandbox(node["job"][0])  # the job pod is gone from the API: its sandbox is stopped
    ancient = os.path.join(runtime.pod_logs, "default_ancient_uid-ancient")
    os.makedirs(os.path.join(ancient, "c"))
    res = cgc(ansible, runtime, links, active_pod_uids=["uid-web"])
    assert not res.get("failed"), res.get("msg")
    reasons = {c["id"]: c["reason"] for c in res["removed_containers"]}
    assert reasons == {ids["task0"]: "pod_deleted", ids["task1"]: "pod_deleted", ids["app0"]: "per_container_limit", ids["app1"]: "per_container_limit"}
    assert set(containers_left(runtime)) == {ids["app2"], ids["side"], ids["init"]}
    assert [s["id"] for s in res["removed_sandboxes"]] == [node["job"][0]]
    assert res["removed_sandboxes"][0]["reason"] == "pod_deleted" and res["removed_sandboxes"][0]["pod_uid"] == "uid-job"
    assert sandboxes_left(runtime) == {node["web"][0]}
    assert not os.path.exists(node["job"][1]["log_directory"]) and not os.path.exists(ancient)
    assert os.path.isdir(node["web"][1]["log_directory"])
    assert node["job"][1]["log_directory"] in res["removed_log_paths"] and ancient in res["removed_log_paths"]


@pytest.mark.runtimes("one")
def test_evict_terminated_pods_clears_stopped_pods(ansible, runtime, links, node):
    ids = node["ids"]
    runtime.client.stop_pod_sandbox(node["job"][0])  # job: still in the API, but no ready sandbox and nothing running
    live = ["uid-web", "uid-job"]
    normal = cgc(ansible, runtime, links, check=True, active_pod_uids=live)
    assert {c["id"] for c in normal["removed_containers"]} == {ids["task0"], ids["app0"], ids["app1"]}
    assert normal["removed_sandboxes"] == []
    res = cgc(ansible, runtime, links, active_pod_uids=live, evict_terminated_pods=True)
    reasons = {c["id"]: c["reason"] for c in res["removed_containers"]}
    assert reasons == {ids["task0"]: "pod_terminated", ids["task1"]: "pod_terminated", ids["app0"]: "per_container_limit", ids["app1"]: "per_container_limit"}
    assert [(s["id"], s["reason"]) for s in res["removed_sandboxes"]] == [(node["job"][0], "pod_terminated")]
    assert set(containers_left(runtime)) == {ids["app2"], ids["side"], ids["init"]}
    assert sandboxes_left(runtime) == {node["web"][0]}
    # terminated is not deleted: the job pod's log directory stays
    assert os.path.isdir(node["job"][1]["log_directory"])


@pytest.mark.runtimes("one")
def test_without_active_pods_no_pod_is_deleted(ansible, runtime, links, node):
    runtime.client.stop_pod_sandbox(node["job"][0])
    res = cgc(ansible, runtime, links)
    # the job pod's newest dead container and its only sandbox stay
    assert node["ids"]["task1"] in containers_left(runtime)
    assert sandboxes_left(runtime) == {node["web"][0], node["job"][0]}
    # the stopped job sandbox is still referenced by its kept dead container
    assert res["kept"]["sandbox_in_use"] == 1 and res["kept"]["sandbox_ready"] == 1
    assert os.path.isdir(node["job"][1]["log_directory"])


def test_superseded_sandbox_goes_unless_referenced(ansible, runtime, links):
    runtime.pull_images([ImageSpec("img:1")])
    old = runtime.run_pod("web", uid="uid-w", attempt=0)
    runtime.client.stop_pod_sandbox(old[0])
    older_with_ctr = runtime.run_pod("api", uid="uid-a", attempt=0)
    kept_ctr = runtime.add_container(older_with_ctr, "c", "img:1", "exited")
    runtime.client.stop_pod_sandbox(older_with_ctr[0])
    new = runtime.run_pod("web", uid="uid-w", attempt=1)
    new_api = runtime.run_pod("api", uid="uid-a", attempt=1)
    res = cgc(ansible, runtime, links)
    assert [(s["id"], s["reason"]) for s in res["removed_sandboxes"]] == [(old[0], "superseded")]
    assert sandboxes_left(runtime) == {new[0], older_with_ctr[0], new_api[0]}
    assert kept_ctr in containers_left(runtime)
    assert res["kept"]["sandbox_in_use"] == 1 and res["kept"]["sandbox_ready"] == 2 and res["kept"]["sandbox_newest"] == 0


@pytest.mark.runtimes("one")
def test_dangling_log_symlinks(ansible, runtime, links):
    runtime.pull_images([ImageSpec("img:1")])
    pod = runtime.run_pod("p")
    running = runtime.add_container(pod, "r", "img:1", "running")
    exited = runtime.add_container(pod, "e", "img:1", "exited")
    target = os.path.join(runtime.workdir, "missing-target.log")
    names = {
        "gone": "p_default_x-%s.log" % ("f" * 64),
        "running": "p_default_r-%s.log" % running,
        "exited": "p_default_e-%s.log" % exited,
        "short": "p_default_y-abc.log",
    }
    for name in names.values():
        os.symlink(target, os.path.join(links, name))
    live = os.path.join(links, "p_default_z-%s.log" % ("e" * 64))
    os.symlink(os.path.join(pod[1]["log_directory"], "e", "0.log"), live)
    res = cgc(ansible, runtime, links, max_per_pod_container=-1)
    # (log files of earlier tests' containers, gone from the runtime, may go too: only the links are compared here)
    removed = {os.path.basename(p) for p in res["removed_log_paths"] if os.path.dirname(p) == links}
    assert removed == {names["gone"], names["exited"], names["short"]}
    assert set(os.listdir(links)) == {names["running"], os.path.basename(live)}
    assert set(containers_left(runtime)) == {running, exited}


@pytest.mark.runtimes("one")
def test_bad_min_age_fails_and_changes_nothing(ansible, runtime, links, node):
    res = cgc(ansible, runtime, links, min_age="soon")
    assert res["failed"] is True
    assert res["msg"] == "min_age 'soon' is not a Go duration such as 1m or 1h30m: time: invalid duration \"soon\"."
    assert len(containers_left(runtime)) == 7


@pytest.mark.runtimes("one")
def test_pod_logs_dir_that_is_a_file_fails_in_one_sentence(ansible, runtime, links, node, tmp_path):
    pods = tmp_path / "pods-file"
    pods.write_text("not a directory\n")
    res = cgc(ansible, runtime, links, pod_logs_dir=str(pods), active_pod_uids=[])
    assert res["failed"] is True
    assert res["msg"] == "pod_logs_dir %s exists but is not a directory." % pods
    assert len(containers_left(runtime)) == 7 and pods.read_text() == "not a directory\n"


@pytest.mark.runtimes("one")
def test_overflowing_min_age_fails_and_changes_nothing(ansible, runtime, links, node):
    res = cgc(ansible, runtime, links, min_age="2562047h47m16.854775808s")
    assert res["failed"] is True
    assert res["msg"] == "min_age '2562047h47m16.854775808s' is not a Go duration such as 1m or 1h30m: time: invalid duration \"2562047h47m16.854775808s\"."
    assert len(containers_left(runtime)) == 7


@pytest.mark.runtimes("one")
def test_empty_active_pod_uids_never_deletes_a_pod_with_a_running_container(ansible, runtime, links, node):
    """Issue 11, item 11: web has a running container, so it stays live whatever active_pod_uids says."""
    ids = node["ids"]
    runtime.client.stop_pod_sandbox(node["job"][0])
    res = cgc(ansible, runtime, links, active_pod_uids=[])
    assert not res.get("failed"), res.get("msg")
    assert res["warnings"] == ["active_pod_uids does not list 1 pod(s) that have running containers (uid-web); they are treated as live "
                               "and nothing of theirs is removed."]
    assert {c["id"]: c["reason"] for c in res["removed_containers"]} == {
        ids["task0"]: "pod_deleted", ids["task1"]: "pod_deleted", ids["app0"]: "per_container_limit", ids["app1"]: "per_container_limit"}
    assert set(containers_left(runtime)) == {ids["app2"], ids["side"], ids["init"]}
    assert sandboxes_left(runtime) == {node["web"][0]}
    assert os.path.isdir(node["web"][1]["log_directory"]) and not os.path.exists(node["job"][1]["log_directory"])
    assert res["already_removed"] == [] and res["errors"] == []


def _records(root):
    """{relative path: bytes} of every file under a directory (a symbolic link: its target, never followed)."""
    out = {}
    for base, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(base, name)
            if os.path.islink(path):
                out[os.path.relpath(path, root)] = "-> " + os.readlink(path)
                continue
            with open(path, "rb") as f:
                out[os.path.relpath(path, root)] = f.read()
    return out


@pytest.fixture
def kubelet_root(tmp_path):
    """A kubelet root with pulled-image credential records (KEP-2535) in image_manager/pulled and pulling."""
    root = tmp_path / "kubelet"
    for sub, name, body in (("pulled", "sha256-" + "a" * 64, b'{"kind":"ImagePulledRecord"}'),
                            ("pulling", "sha256-" + "b" * 64, b'{"kind":"ImagePullIntent"}')):
        (root / "image_manager" / sub).mkdir(parents=True)
        (root / "image_manager" / sub / name).write_bytes(body)
    (root / "default_gone_uid-gone").mkdir()  # looks like the log directory of a deleted pod
    return root


@pytest.mark.runtimes("one")
def test_credential_records_are_never_touched_even_by_a_hostile_config(ansible, runtime, links, node, kubelet_root, tmp_path):
    before = _records(kubelet_root / "image_manager")
    assert len(before) == 2
    # a pod logs dir (or links dir) inside image_manager fails in one sentence and changes nothing
    for name in ("pod_logs_dir", "container_logs_dir"):
        res = cgc(ansible, runtime, links, active_pod_uids=["uid-web"], **{name: str(kubelet_root / "image_manager" / "pulled")})
        assert res.get("failed") and "image_manager directory (pulled-image credential records)" in res["msg"]
        assert res["changed"] is False
    ids = set(containers_left(runtime))
    # the kubelet root given as pod logs dir: every entry whose "uid" is not active is a deleted pod's log dir, image_manager too;
    # the other one goes, image_manager is refused and the run fails saying so
    res = cgc(ansible, runtime, links, pod_logs_dir=str(kubelet_root), active_pod_uids=["uid-web", "uid-job"], max_per_pod_container=-1)
    assert res.get("failed") and "Refused to remove %s" % (kubelet_root / "image_manager") in res["msg"]
    assert res["removed_log_paths"] == [str(kubelet_root / "default_gone_uid-gone")] and res["changed"] is True
    assert set(containers_left(runtime)) == ids
    # image_gc: no ledger inside image_manager, and a prune run leaves the records alone
    res = ansible.module("kubenode.gc.image_gc", {"cri_endpoint": runtime.endpoint, "mode": "prune", "min_age": "0s",
                                                  "ledger_path": str(kubelet_root / "image_manager" / "ledger.json")})
    assert res.get("failed") and "is in the kubelet's image_manager directory" in res["msg"]
    res = ansible.module("kubenode.gc.image_gc", {"cri_endpoint": runtime.endpoint, "mode": "prune", "min_age": "0s",
                                                  "ledger_path": str(tmp_path / "ledger.json")})
    assert not res.get("failed"), res.get("msg")
    assert _records(kubelet_root / "image_manager") == before
    assert sorted(os.listdir(kubelet_root / "image_manager")) == ["pulled", "pulling"]


def test_runtime_killed_mid_run_fails_changed_and_logs_go_only_with_their_containers(ansible, runtime, links):
    """Issue 11, items 1 and 2: the runtime dies (SIGKILL) after 2 RemoveContainer calls. The run stops at the first
    UNAVAILABLE error, says changed with exactly what is gone after a restart on the same root, and every container
    still there keeps its log file and link."""
    runtime.pull_images([ImageSpec("img:1")])
    pod = runtime.run_pod("many", uid="uid-many")
    ids = [runtime.add_container(pod, "app", "img:1", "exited", attempt=a, link_dir=links) for a in range(6)]
    try:
        with CrashAfter(runtime, 2) as proxy:
            res = cgc(ansible, runtime, links, cri_endpoint=proxy.endpoint)
        assert proxy.removed == 2 and proxy.crashed
    finally:
        runtime.restart()
    left = set(containers_left(runtime))
    gone = set(ids) - left
    assert res["failed"] is True and res["changed"] is True
    # "exception": the traceback ansible-core adds to any fail_json
    assert set(res) == {"failed", "changed", "msg", "exception", "removed_containers", "removed_sandboxes", "removed_log_paths", "removed_symlinks",
                        "kept", "errors", "already_removed", "unconfirmed", "diff", "rpc_calls", "warnings"}
    # the five dead attempts (all but the newest) were in flight at once (parallelism 64); the proxy let two through,
    # killed the runtime, and the others' answers were lost: the runtime did not come back within the wait, so they are
    # unconfirmed (not errors, not dropped); the outage is the one error
    unconfirmed = len(res["unconfirmed"])
    assert res["msg"].startswith("The runtime became unavailable after 2 container(s) and 0 sandbox(es) were removed (%d more unconfirmed), so the "
                                 "run stopped: CRI endpoint %s is unavailable for RemoveContainer: " % (unconfirmed, proxy.endpoint))
    assert len(gone) == 2 and gone <= set(ids[:5])
    assert [c["id"] for c in res["removed_containers"]] == [i for i in ids[:5] if i in gone]
    assert [e["id"] for e in res["errors"]] == [""] and 1 <= unconfirmed <= 3 and set(res["unconfirmed"]) <= set(ids[:5]) - gone
    assert res["already_removed"] == [] and res["removed_sandboxes"] == []
    # the pipeline makes no call once it has seen the UNAVAILABLE answer: the three calls past the two removals are
    # made unless that answer came in first; then ListContainers is tried (and refused) while waiting for the runtime
    calls = dict(res["rpc_calls"])
    assert calls.pop("RemoveContainer") == 2 + unconfirmed and calls.pop("ListContainers") >= 1 and calls == {"ListPodSandbox": 1}
    assert set(res["diff"]["before"]["containers"]) - set(res["diff"]["after"]["containers"]) == gone
    expected_logs = []
    for attempt, cid in enumerate(ids):
        log, link = log_file(runtime, pod, "app", attempt), os.path.join(links, "many_default_app-%s.log" % cid)
        assert os.path.exists(log) is os.path.lexists(link) is (cid in left), (attempt, cid in left)
        if cid in gone:
            expected_logs += [log, link]
    assert res["removed_log_paths"] == expected_logs
    # the restarted runtime serves the next run, which removes the rest of the dead attempts
    again = cgc(ansible, runtime, links)
    assert not again.get("failed"), again.get("msg")
    assert [c["id"] for c in again["removed_containers"]] == [i for i in ids[:5] if i not in gone] and set(containers_left(runtime)) == {ids[5]}
    assert again["unconfirmed"] == []


def test_sandboxes_go_through_a_pipeline_and_a_runtime_killed_mid_way_loses_nothing(ansible, runtime, links):
    """Deleted pods' stopped sandboxes are stopped and removed through pipelines; the runtime dies after two
    RemovePodSandbox calls: the run fails changed, reports exactly the two sandboxes that are gone after a restart on
    the same root, and the next run removes the rest."""
    pods = [runtime.run_pod("gone-%d" % n, uid="uid-gone-%d" % n) for n in range(5)]
    live = runtime.run_pod("live", uid="uid-live")
    for pod in pods:
        runtime.client.stop_pod_sandbox(pod[0])
    ids = [pod[0] for pod in pods]
    try:
        with CrashAfter(runtime, 2) as proxy:
            res = cgc(ansible, runtime, links, cri_endpoint=proxy.endpoint, active_pod_uids=["uid-live"])
        assert proxy.removed == 2 and proxy.crashed
    finally:
        runtime.restart()
    left = sandboxes_left(runtime)
    gone = set(ids) - left
    assert res["failed"] is True and res["changed"] is True
    assert res["msg"].startswith("The runtime became unavailable after 0 container(s) and 2 sandbox(es) were removed (%d more unconfirmed), so the "
                                 "run stopped: " % len(res["unconfirmed"]))
    assert len(gone) == 2 and [s["id"] for s in res["removed_sandboxes"]] == [i for i in ids if i in gone]
    assert [e["id"] for e in res["errors"]] == [""] and 1 <= len(res["unconfirmed"]) <= 3 and set(res["unconfirmed"]) <= set(ids) - gone
    assert res["rpc_calls"]["StopPodSandbox"] == 5 and 3 <= res["rpc_calls"]["RemovePodSandbox"] <= 5
    again = cgc(ansible, runtime, links, active_pod_uids=["uid-live"])
    assert not again.get("failed"), again.get("msg")
    assert sorted(s["id"] for s in again["removed_sandboxes"]) == sorted(set(ids) - gone)
    assert sandboxes_left(runtime) == {live[0]}


def _outside(runtime, name):
    path = os.path.join(runtime.workdir, "outside-%s-%d" % (name, len(os.listdir(runtime.workdir))))
    os.makedirs(path)
    return path


def _move_out(directory, outside, extra=()):
    """Move ``directory``'s content to ``outside`` (plus ``extra`` files), make ``directory`` a symlink to it; return the bytes there."""
    for name in os.listdir(directory):
        os.rename(os.path.join(directory, name), os.path.join(outside, name))
    for rel in extra:
        os.makedirs(os.path.dirname(os.path.join(outside, rel)), exist_ok=True)
        with open(os.path.join(outside, rel), "wb") as f:
            f.write(b"precious %s\n" % rel.encode())
    os.rmdir(directory)
    os.symlink(outside, directory)
    return _records(outside)


SYMLINK_WARNING = "%s is a symbolic link where the kubelet keeps a directory; it was removed as a link and nothing it points to was touched."


def _runtime_kept(runtime, records, links):
    """``records`` without the removed containers' CRI log paths where the runtime's RemoveContainer may delete them itself,
    through a link in the way (cri-dockerd: its links to Docker's json-file logs; expect().removes_log_link)."""
    if not expect(runtime).removes_log_link:
        return records
    return {k: v for k, v in records.items() if k not in links}


@pytest.mark.runtimes("one")
def test_a_deleted_pods_log_directory_that_is_a_symlink_is_removed_as_a_link(ansible, runtime, links):
    """Issue 21, item 1: nothing outside pod_logs_dir is removed through a symlinked pod log directory."""
    runtime.pull_images([ImageSpec("img:1")])
    gone = runtime.run_pod("gone", uid="uid-gone")
    ids = [runtime.add_container(gone, "app", "img:1", "exited", attempt=a, link_dir=links) for a in range(2)]
    runtime.client.stop_pod_sandbox(gone[0])
    pod_dir = gone[1]["log_directory"]
    outside = _outside(runtime, "pod")
    before = _move_out(pod_dir, outside, extra=("app/0.log.20261122-010101", "other/7.log", "notes.txt"))
    assert set(before) >= {"app/0.log", "app/1.log"}
    plan = cgc(ansible, runtime, links, check=True, active_pod_uids=["uid-other"])
    assert not plan.get("failed"), plan.get("msg")
    assert plan["removed_symlinks"] == [pod_dir] and pod_dir in plan["removed_log_paths"] and os.path.islink(pod_dir)
    res = cgc(ansible, runtime, links, active_pod_uids=["uid-other"])
    assert not res.get("failed"), res.get("msg")
    assert {c["id"] for c in res["removed_containers"]} == set(ids) and [s["id"] for s in res["removed_sandboxes"]] == [gone[0]]
    assert res["removed_symlinks"] == [pod_dir] and pod_dir in res["removed_log_paths"]
    assert not any(p.startswith(outside) for p in res["removed_log_paths"])
    assert SYMLINK_WARNING % pod_dir in res["warnings"]
    # the link is gone, every byte behind it stays (but the removed containers' own log links, which cri-dockerd's
    # RemoveContainer deletes itself, through the link: they were its links to Docker's json-file logs)
    own = ("app/0.log", "app/1.log")
    assert not os.path.lexists(pod_dir) and _runtime_kept(runtime, _records(outside), own) == _runtime_kept(runtime, before, own)
    assert os.listdir(links) == []  # the legacy links of the removed containers went with them
    assert set(containers_left(runtime)) == set()


@pytest.mark.runtimes("one")
def test_a_container_directory_that_is_a_symlink_is_removed_as_a_link_in_deleted_and_live_pods(ansible, runtime, links):
    """Issue 21, item 1: a <container>/ symlink of a deleted pod, and of a live pod whose old attempts go: the outside files
    (the current log and its rotated copy included) stay byte for byte, the link goes and is reported."""
    runtime.pull_images([ImageSpec("img:1")])
    web = runtime.run_pod("web", uid="uid-web")
    old = [runtime.add_container(web, "app", "img:1", "exited", attempt=a, link_dir=links) for a in range(3)]
    side = runtime.add_container(web, "side", "img:1", "running", link_dir=links)
    gone = runtime.run_pod("gone", uid="uid-gone")
    task = runtime.add_container(gone, "task", "img:1", "exited", link_dir=links)
    runtime.client.stop_pod_sandbox(gone[0])
    live_dir = os.path.join(web[1]["log_directory"], "app")
    gone_dir = os.path.join(gone[1]["log_directory"], "task")
    live_out, gone_out = _outside(runtime, "live"), _outside(runtime, "gone")
    live_before = _move_out(live_dir, live_out, extra=("0.log.20261122-010101", "1.log.20261122-020202.gz"))
    gone_before = _move_out(gone_dir, gone_out, extra=("0.log.20261122-030303",))
    assert {"0.log", "1.log", "2.log"} <= set(live_before) and "0.log" in gone_before
    res = cgc(ansible, runtime, links, active_pod_uids=["uid-web"])
    assert not res.get("failed"), res.get("msg")
    assert {c["id"] for c in res["removed_containers"]} == {old[0], old[1], task}
    assert sorted(res["removed_symlinks"]) == sorted([live_dir, gone_dir])
    for path in (live_dir, gone_dir):
        assert SYMLINK_WARNING % path in res["warnings"]
    assert not any(p.startswith((live_out, gone_out)) for p in res["removed_log_paths"])
    assert _runtime_kept(runtime, _records(live_out), ("0.log", "1.log")) == _runtime_kept(runtime, live_before, ("0.log", "1.log"))
    assert _runtime_kept(runtime, _records(gone_out), ("0.log",)) == _runtime_kept(runtime, gone_before, ("0.log",))
    assert not os.path.lexists(live_dir) and not os.path.lexists(gone[1]["log_directory"])
    # the live pod keeps its other container's logs; the kept attempt's legacy link now dangles (its directory was a
    # link) and goes as the kubelet's dangling-link rule says for an exited container; the running one's stays
    assert os.path.isfile(log_file(runtime, web, "side", 0))
    assert set(os.listdir(links)) == {"web_default_side-%s.log" % side}
    assert set(containers_left(runtime)) == {old[2], side}


def _gone_logs(runtime, pod, links, ids, gone):
    """The log files and legacy links of the containers in ``gone`` that still exist."""
    out = []
    for attempt, cid in enumerate(ids):
        if cid in gone:
            for path in (log_file(runtime, pod, "app", attempt), os.path.join(links, "many_default_app-%s.log" % cid)):
                if os.path.lexists(path):
                    out.append(path)
    return out


@pytest.mark.parametrize("down", [0, 14], ids=["back-in-time", "back-late"])
def test_graceful_restart_mid_run_reports_every_removal_that_happened(ansible, runtime, links, down):
    """Issue 21, item 5: the runtime is restarted gracefully (SIGTERM, then started on the same root, as a package upgrade
    does) after 3 RemoveContainer calls, and the answers of the removals it did meanwhile are lost. Back within the
    module's wait: every container really gone is in removed_containers (with its logs), none under errors. Back later:
    the ones not confirmed are unconfirmed (never errors), and the rerun removes their logs and ends with none.

    back-in-time: when the runtime took so long to start again that it was not back within the module's wait (a loaded
    machine), that run is checked for what holds either way and the scenario runs once more on an emptied runtime."""
    def scenario(attempt):
        if attempt:
            runtime.reset()
            for name in os.listdir(links):
                os.unlink(os.path.join(links, name))
        return _restart_mid_run(ansible, runtime, links, down, "uid-many-%d" % attempt)

    until_decided(down, scenario, RUNTIME_BACK_WAIT)


def _restart_mid_run(ansible, runtime, links, down, uid):
    """One run of the scenario above, its pod of ``uid``; returns the proxy (devtools.faults.until_decided)."""
    runtime.pull_images([ImageSpec("img:1")])
    pod = runtime.run_pod("many", uid=uid)
    ids = [runtime.add_container(pod, "app", "img:1", "exited", attempt=a, link_dir=links) for a in range(16)]
    with RestartAfter(runtime, 3, down=down) as proxy:
        res = cgc(ansible, runtime, links, cri_endpoint=proxy.endpoint)
    # when the proxy never restarted the runtime, what the module said and every call it made tell why
    assert proxy.restarted and proxy.removed >= 3, (proxy.removed, proxy.calls, res)
    back = back_in_time(proxy, RUNTIME_BACK_WAIT)
    left = set(containers_left(runtime))
    gone = set(ids) - left
    removed = {c["id"] for c in res["removed_containers"]}
    assert gone <= set(ids[:15]) and len(gone) >= 3
    assert not {e["id"] for e in res["errors"]} & gone  # nothing really gone is under errors
    assert removed <= gone and gone - removed <= set(res["unconfirmed"])
    assert res["changed"] is True
    if res.get("failed"):  # the restart cut the run: the outage is its one error
        assert [e["id"] for e in res["errors"]] == [""] and res["msg"].startswith("The runtime became unavailable after %d container(s)" % len(removed))
    if back:
        assert len(removed) == len(gone) and res["unconfirmed"] == []
    elif back is False:
        assert proxy.lost >= 1 and res["unconfirmed"]  # the lost answers could not be confirmed in time
    # logs went with every container reported removed, and stay with every container still there; but cri-dockerd's
    # RemoveContainer deletes the CRI log path before it asks Docker, so a removal the SIGTERM cut there leaves the
    # container without it (expect().removes_log_link): at most one per removal that never got an answer
    cut = sum(1 for name, code in proxy.calls if name == "RemoveContainer" and code not in ("OK", "LOST"))
    lost_log = []
    for attempt, cid in enumerate(ids):
        log, link = log_file(runtime, pod, "app", attempt), os.path.join(links, "many_default_app-%s.log" % cid)
        if cid in removed:
            assert not os.path.lexists(log) and not os.path.lexists(link)
        elif cid in left:
            assert os.path.lexists(link)
            if not os.path.exists(log):
                lost_log.append(cid)
    assert len(lost_log) <= (cut if expect(runtime).removes_log_link else 0), (lost_log, proxy.calls)
    leftover = _gone_logs(runtime, pod, links, ids, gone)
    if back is not None:
        assert bool(leftover) is not back  # the unconfirmed gone containers' logs are still there after the first run
    again = cgc(ansible, runtime, links)
    assert not again.get("failed"), again.get("msg")
    assert again["unconfirmed"] == [] and again["errors"] == []
    assert set(leftover) <= set(again["removed_log_paths"])
    assert _gone_logs(runtime, pod, links, ids, set(ids) - set(containers_left(runtime))) == []
    assert set(containers_left(runtime)) == {ids[15]}
    assert os.path.exists(log_file(runtime, pod, "app", 15))
    return proxy
