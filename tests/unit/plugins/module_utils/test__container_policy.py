# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The upstream container, sandbox and pod-log GC vectors (shared/docs/kubelet-gc-semantics.md §4.2 CG-1..CG-14,
§4.3 SB-1..SB-8, §4.4) restated against the pure planner, plus the §3.6 legacy symlink rules.

Conventions: times are integer nanoseconds since the epoch. ``NOW`` is the test's "now"; the vectors' small
creation times (0, 1, 2, ...) are taken literally as ns since the epoch, i.e. decades before ``NOW`` (as in the
upstream test), and "created = now" is ``NOW``. A container template is (pod uid, name, created, state); the pod
names in the upstream tables are the pod uids. "remain" is the template indexes not in the planned removals.

Pod state follows the upstream fake pod-state provider: the ``removed`` set maps to ``deleted`` (the pod named
"deleted"), the ``terminated`` set (every pod not named "running") to ``terminated``, and evictTerminatingPods /
evictNonDeletedPods to ``evict_terminated``.
"""

import itertools

import pytest

from ansible_collections.kubenode.gc.plugins.module_utils.gc import _container_policy as policy

SECOND = 10**9
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
NOW = 10**18

EXITED, RUNNING, CREATED, UNKNOWN = "exited", "running", "created", "unknown"
READY, NOTREADY = "ready", "notready"

# the default policy of TestContainerGC: MinAge 1h, MaxPerPodContainer 2, MaxContainers 6
DEFAULT_POLICY = {"min_age": HOUR, "max_per_pod_container": 2, "max_containers": 6}


def removed_pod(uid):
    """The upstream ``removed`` set: only the pod called "deleted"."""
    return uid == "deleted"


def terminated_pod(uid):
    """The upstream ``terminated`` set: every pod not called "running"."""
    return uid != "running"


def never(uid):
    return False


def container(index, pod_uid, name, created, state=EXITED, sandbox_id="s0"):
    return {"id": "c%d" % index, "name": name, "pod_uid": pod_uid, "state": state, "created_at_ns": created, "sandbox_id": sandbox_id}


def containers_of(templates):
    return [container(index, *template) for index, template in enumerate(templates)]


def plan_cg(templates, min_age=HOUR, max_per_pod_container=2, max_containers=6, deleted=removed_pod, terminated=terminated_pod,
            evict_terminated=False):
    """Plan one evictContainers run over the templates; return (remain indexes, removals, kept counts)."""
    containers = containers_of(templates)
    removals, kept = policy.plan_containers(containers, NOW, min_age, max_per_pod_container, max_containers,
                                            deleted=deleted, terminated=terminated, evict_terminated=evict_terminated)
    gone = [r["id"] for r in removals]
    assert len(set(gone)) == len(gone), "a container is planned for removal twice"
    assert set(gone) <= {c["id"] for c in containers}
    assert len(containers) == len(removals) + sum(kept.values())
    assert set(kept) == set(policy.KEPT_CONTAINER_REASONS)
    assert all("reason" not in c for c in containers), "the input records were modified"
    return [i for i, c in enumerate(containers) if c["id"] not in gone], removals, kept


# --- §4.2 Container GC (TestContainerGC) -------------------------------------------------------------------------


def test_cg01_all_removed_when_max_containers_is_zero():
    remain, removals, kept = plan_cg([("foo", "bar", 0, EXITED)], min_age=MINUTE, max_per_pod_container=1, max_containers=0)
    assert remain == []
    assert [r["reason"] for r in removals] == ["node_limit"]
    assert kept["within_limits"] == 0


def test_cg02_max_containers_without_per_pod_limit():
    templates = [("foo", "bar", created, EXITED) for created in (4, 3, 2, 1, 0)]
    remain, removals, dummy = plan_cg(templates, min_age=MINUTE, max_per_pod_container=-1, max_containers=4)
    assert remain == [0, 1, 2, 3]
    assert [(r["id"], r["reason"]) for r in removals] == [("c4", "node_limit")]


def test_cg03_no_limits_remove_nothing():
    templates = [("foo", "bar", created, EXITED) for created in (2, 1, 0)]
    remain, removals, kept = plan_cg(templates, min_age=MINUTE, max_per_pod_container=-1, max_containers=-1)
    assert remain == [0, 1, 2]
    assert removals == []
    assert kept["within_limits"] == 3


def test_cg04_recently_created_containers_are_kept():
    templates = [("foo", "bar", NOW, EXITED) for dummy in range(3)]
    remain, dummy, kept = plan_cg(templates)
    assert remain == [0, 1, 2]
    assert kept["too_young"] == 3


def test_cg05_oldest_removed_over_per_pod_limit():
    templates = [("foo", "bar", created, EXITED) for created in (2, 1, 0)]
    remain, removals, dummy = plan_cg(templates)
    assert remain == [0, 1]
    assert [(r["id"], r["reason"]) for r in removals] == [("c2", "per_container_limit")]


def test_cg06_running_containers_are_kept():
    templates = [("foo", "bar", 2, EXITED), ("foo", "bar", 1, EXITED), ("foo", "bar", 0, RUNNING)]
    remain, dummy, kept = plan_cg(templates)
    assert remain == [0, 1, 2]
    assert kept == {"running": 1, "too_young": 0, "within_limits": 2}


def test_cg07_nothing_removed_within_limits():
    remain, removals, dummy = plan_cg([("foo", "bar", 1, EXITED), ("foo", "bar", 0, EXITED)])
    assert remain == [0, 1]
    assert removals == []


def test_cg08_per_pod_limit_applies_per_uid_and_name():
    templates = [(pod, name, created, EXITED) for pod, name in (("foo", "bar"), ("foo1", "baz"), ("foo2", "bar")) for created in (2, 1, 0)]
    remain, removals, dummy = plan_cg(templates)
    assert remain == [0, 1, 3, 4, 6, 7]
    assert {r["reason"] for r in removals} == {"per_container_limit"}


def test_cg09_max_limit_keeps_one_from_every_unit():
    units = [("foo", "bar"), ("foo1", "bar1"), ("foo2", "bar2"), ("foo3", "bar3"), ("foo4", "bar4")]
    templates = [(pod, name, created, EXITED) for pod, name in units for created in (1, 0)]
    remain, removals, dummy = plan_cg(templates)
    # perUnit = max(1, 6 // 5) = 1 leaves 5 <= 6, so the global pass removes nothing
    assert remain == [0, 2, 4, 6, 8]
    assert {r["reason"] for r in removals} == {"node_limit"}


def test_cg10_oldest_removed_globally_when_limit_still_exceeded():
    templates = [
        ("foo", "bar", 2, EXITED),
        ("foo", "bar", 1, EXITED),
        ("foo1", "bar1", 2, EXITED),
        ("foo1", "bar1", 1, EXITED),
        ("foo2", "bar2", 1, EXITED),
        ("foo3", "bar3", 0, EXITED),
        ("foo4", "bar4", 1, EXITED),
        ("foo5", "bar5", 0, EXITED),
        ("foo6", "bar6", 2, EXITED),
        ("foo7", "bar7", 1, EXITED),
    ]
    remain, removals, dummy = plan_cg(templates)
    # perUnit = max(1, 6 // 8) = 1 removes indexes 1 and 3; 8 > 6 remain, so the 2 oldest (created 0) go globally
    assert remain == [0, 2, 4, 6, 8, 9]
    assert sorted(r["id"] for r in removals) == ["c1", "c3", "c5", "c7"]


def test_cg11_evict_terminated_pods_removes_all_non_running():
    templates = [
        ("foo", "bar", 2, EXITED),
        ("foo", "bar", 1, EXITED),
        ("foo1", "bar1", 2, EXITED),
        ("foo1", "bar1", 1, EXITED),
        ("running", "bar2", 1, EXITED),
        ("foo3", "bar3", 0, RUNNING),
    ]
    remain, removals, dummy = plan_cg(templates, evict_terminated=True)
    assert remain == [4, 5]
    assert {r["reason"] for r in removals} == {"pod_terminated"}


def test_cg12_deleted_pod_containers_removed_but_min_age_holds():
    templates = [
        ("foo", "bar", 1, EXITED),
        ("foo", "bar", 0, EXITED),
        ("deleted", "bar1", NOW, EXITED),  # younger than MinAge: survives although its pod is deleted
        ("deleted", "bar1", 1, EXITED),
        ("deleted", "bar1", 0, EXITED),
    ]
    remain, removals, kept = plan_cg(templates)
    assert remain == [0, 1, 2]
    assert [(r["id"], r["reason"]) for r in removals] == [("c4", "pod_deleted"), ("c3", "pod_deleted")]
    assert kept["too_young"] == 1


def test_cg13_sources_not_ready_keeps_deleted_pod_containers():
    # allSourcesReady = false has no parameter: the kubelet then skips the whole deleted/terminated pass, so it is
    # modelled by predicates that know no pod as deleted -- deleted = lambda uid: False -- and, because upstream
    # skips the terminated check too (evictTerminatingPods = true in this vector), no pod as terminated either.
    remain, removals, dummy = plan_cg([("deleted", "bar1", 0, EXITED)], deleted=never, terminated=never, evict_terminated=True)
    assert remain == [0]
    assert removals == []


def test_cg13_planner_has_no_sources_ready_gate():
    # The planner applies the predicates it is given: a caller that neutralises only `deleted` while keeping a
    # terminated predicate and evict_terminated=True still evicts the container. Modelling allSourcesReady = false
    # therefore needs both predicates to be neutral.
    remain, removals, dummy = plan_cg([("deleted", "bar1", 0, EXITED)], deleted=never, evict_terminated=True)
    assert remain == []
    assert [r["reason"] for r in removals] == ["pod_terminated"]


def test_cg14_unknown_state_container_is_removed():
    # TestUnknownStateContainerGC: the planner only decides the removal and keeps the state, so the executor can
    # StopContainer before RemoveContainer; that stop-then-remove sequence is tested with the executor (_container_gc).
    remain, removals, dummy = plan_cg([("foo", "bar", 0, UNKNOWN)], min_age=HOUR, max_per_pod_container=0, max_containers=0)
    assert remain == []
    assert [(r["id"], r["state"]) for r in removals] == [("c0", UNKNOWN)]


# --- container GC: further rules of §3.3 ---------------------------------------------------------------------------


def test_cg_min_age_boundary_is_evictable():
    # createdAt <= now - MinAge is evictable; one ns younger is not
    templates = [("foo", "bar", NOW - HOUR, EXITED), ("foo", "bar", NOW - HOUR + 1, EXITED)]
    remain, removals, kept = plan_cg(templates, max_per_pod_container=0)
    assert remain == [1]
    assert [r["id"] for r in removals] == ["c0"]
    assert kept["too_young"] == 1


def test_cg_no_limits_keep_everything_old_and_exited():
    templates = [(pod, name, created, state) for pod, name in (("foo", "bar"), ("foo", "baz"), ("foo1", "bar"), ("", "orphan"))
                 for created, state in ((3, EXITED), (2, EXITED), (1, CREATED), (0, UNKNOWN))]
    remain, removals, kept = plan_cg(templates, min_age=0, max_per_pod_container=-1, max_containers=-1)
    assert remain == list(range(len(templates)))
    assert removals == []
    assert kept == {"running": 0, "too_young": 0, "within_limits": len(templates)}


def test_cg_created_state_is_evictable():
    templates = [("foo", "bar", 2, CREATED), ("foo", "bar", 1, CREATED), ("foo", "bar", 0, CREATED)]
    remain, dummy, dummy_kept = plan_cg(templates)
    assert remain == [0, 1]


def test_cg_missing_pod_uid_forms_the_empty_uid_unit():
    templates = [(None, "bar", 2, EXITED), ("", "bar", 1, EXITED), (None, "bar", 0, EXITED)]
    remain, dummy, dummy_kept = plan_cg(templates, max_per_pod_container=1)
    assert remain == [0]


@pytest.mark.parametrize("order", list(itertools.permutations(range(3))))
def test_cg_ties_broken_by_id_per_unit(order):
    # same creation time: the higher id counts as newer (as for sandboxes), whatever the listing order
    base = [container(index, "foo", "bar", 5) for index in range(3)]
    removals, kept = policy.plan_containers([base[i] for i in order], NOW, 0, 1, -1)
    assert [r["id"] for r in removals] == ["c0", "c1"]
    assert kept["within_limits"] == 1


@pytest.mark.parametrize("order", list(itertools.permutations(range(4))))
def test_cg_ties_broken_by_id_globally(order):
    base = [container(index, "pod%d" % index, "bar", 5) for index in range(4)]
    removals, kept = policy.plan_containers([base[i] for i in order], NOW, 0, -1, 2)
    assert [r["id"] for r in removals] == ["c0", "c1"]
    assert {r["reason"] for r in removals} == {"node_limit"}
    assert kept["within_limits"] == 2


def test_cg_kept_counts_add_up():
    templates = [
        ("foo", "bar", NOW, EXITED),
        ("foo", "bar", 3, RUNNING),
        ("foo", "bar", 2, EXITED),
        ("foo", "bar", 1, EXITED),
        ("foo", "bar", 0, EXITED),
        ("deleted", "bar", 0, EXITED),
        ("running", "bar", 0, UNKNOWN),
    ]
    containers = containers_of(templates)
    removals, kept = policy.plan_containers(containers, NOW, HOUR, 1, 6, deleted=removed_pod, terminated=terminated_pod)
    assert len(containers) == len(removals) + sum(kept.values())
    assert kept == {"running": 1, "too_young": 1, "within_limits": 2}
    assert sorted((r["id"], r["reason"]) for r in removals) == [("c3", "per_container_limit"), ("c4", "per_container_limit"), ("c5", "pod_deleted")]


# --- §4.3 Sandbox GC (TestSandboxGC) -------------------------------------------------------------------------------

P0, P1, PD = "1234", "5678", "9012"  # pods foo1, foo2 and "deleted"


def sandbox(index, uid, created, state):
    return {"id": "s%d" % index, "uid": uid, "state": state, "created_at_ns": created}


def plan_sb(templates, in_sandboxes=(), terminating=(), evict_terminated=False):
    """Plan one evictSandboxes run; in_sandboxes: template indexes of sandboxes holding one EXITED container."""
    sandboxes = [sandbox(index, *template) for index, template in enumerate(templates)]
    containers = [container(n, sandboxes[i]["uid"], "bar%d" % n, 0, EXITED, sandbox_id=sandboxes[i]["id"]) for n, i in enumerate(in_sandboxes)]
    removals, kept = policy.plan_sandboxes(sandboxes, containers, deleted=lambda uid: uid == PD, terminated=lambda uid: uid in terminating,
                                           evict_terminated=evict_terminated)
    gone = [r["id"] for r in removals]
    assert len(set(gone)) == len(gone), "a sandbox is planned for removal twice"
    assert len(sandboxes) == len(removals) + sum(kept.values())
    assert set(kept) == set(policy.KEPT_SANDBOX_REASONS)
    return [i for i, s in enumerate(sandboxes) if s["id"] not in gone], removals, kept


def test_sb01_notready_sandbox_of_deleted_pod_removed():
    remain, removals, dummy = plan_sb([(PD, 0, NOTREADY)])
    assert remain == []
    assert [r["reason"] for r in removals] == ["pod_deleted"]


def test_sb02_ready_sandbox_of_deleted_pod_kept():
    remain, dummy, kept = plan_sb([(PD, 0, READY)])
    assert remain == [0]
    assert kept["ready"] == 1


def test_sb03_sandboxes_of_existing_pods_kept():
    remain, dummy, kept = plan_sb([(P0, 0, READY), (P1, 0, NOTREADY)])
    assert remain == [0, 1]
    # one reason per sandbox, strongest first: p0's is ready, p1's is only the newest
    assert kept == {"ready": 1, "in_use": 0, "newest": 1}


def test_sb04_older_notready_sandbox_removed():
    remain, removals, dummy = plan_sb([(P0, 1, NOTREADY), (P0, 0, NOTREADY)])
    assert remain == [0]
    assert [(r["id"], r["reason"]) for r in removals] == [("s1", "superseded")]


def test_sb05_older_sandbox_with_container_kept():
    remain, dummy, kept = plan_sb([(P0, 1, NOTREADY), (P0, 0, NOTREADY)], in_sandboxes=[1])
    assert remain == [0, 1]
    assert kept == {"ready": 0, "in_use": 1, "newest": 1}


def test_sb06_evict_terminated_removes_notready_sandboxes():
    remain, removals, kept = plan_sb([(P0, 0, READY), (P1, 0, NOTREADY)], terminating={P0, P1}, evict_terminated=True)
    assert remain == [0]
    assert [(r["id"], r["reason"]) for r in removals] == [("s1", "pod_terminated")]
    assert kept["ready"] == 1


def test_sb07_sandbox_with_container_kept():
    remain, dummy, dummy_kept = plan_sb([(P0, 0, NOTREADY)], in_sandboxes=[0])
    assert remain == [0]


def test_sb08_multiple_sandboxes():
    templates = [(P0, 1, READY), (P0, 0, NOTREADY), (P1, 1, NOTREADY), (P1, 0, NOTREADY), (PD, 0, NOTREADY)]
    remain, removals, dummy = plan_sb(templates, in_sandboxes=[2])
    assert remain == [0, 2]
    assert sorted((r["id"], r["reason"]) for r in removals) == [("s1", "superseded"), ("s3", "superseded"), ("s4", "pod_deleted")]


# --- sandbox GC: further rules of §3.5 -----------------------------------------------------------------------------


def test_sb_active_sandbox_in_remove_position_is_not_replaced():
    # toRemove = 2 for a live pod with 3 sandboxes; the oldest is in use and is skipped, not replaced by the newest
    remain, removals, kept = plan_sb([(P0, 2, NOTREADY), (P0, 1, NOTREADY), (P0, 0, NOTREADY)], in_sandboxes=[2])
    assert remain == [0, 2]
    assert [r["id"] for r in removals] == ["s1"]
    assert kept == {"ready": 0, "in_use": 1, "newest": 1}


def test_sb_removals_oldest_first_per_pod():
    remain, removals, dummy = plan_sb([(PD, 1, NOTREADY), (PD, 3, NOTREADY), (PD, 0, NOTREADY), (PD, 2, NOTREADY)])
    assert remain == []
    assert [r["id"] for r in removals] == ["s2", "s0", "s3", "s1"]


def test_sb_terminated_pod_kept_without_evict_terminated():
    remain, removals, dummy = plan_sb([(P1, 0, NOTREADY)], terminating={P1})
    assert remain == [0]
    assert removals == []


@pytest.mark.parametrize("order", list(itertools.permutations(range(3))))
def test_sb_ties_broken_by_id(order):
    # same creation time: oldest-first order is by id, so the highest id counts as the newest and is kept
    base = [sandbox(index, P0, 5, NOTREADY) for index in range(3)]
    removals, kept = policy.plan_sandboxes([base[i] for i in order], [])
    assert [r["id"] for r in removals] == ["s0", "s1"]
    assert kept["newest"] == 1


def test_sb_kept_counts_add_up():
    templates = [(P0, 3, NOTREADY), (P0, 2, READY), (P0, 1, NOTREADY), (P0, 0, NOTREADY), (PD, 1, READY), (PD, 0, NOTREADY), (P1, 0, NOTREADY)]
    remain, removals, kept = plan_sb(templates, in_sandboxes=[2])
    assert kept == {"ready": 2, "in_use": 1, "newest": 2}
    assert len(templates) == len(removals) + sum(kept.values())
    assert remain == [0, 1, 2, 4, 6]


# --- §4.4 Pod log directory GC (TestPodLogDirectoryGC) -------------------------------------------------------------

POD_LOG_ENTRIES = ["123", "456", "789", "012", "name_namespace_321", "name_namespace_654"]
POD_LOG_REMOVED = {"012", "789", "654"}


def test_pod_log_dirs_all_sources_ready():
    planned = policy.plan_pod_log_dirs(POD_LOG_ENTRIES, lambda uid: uid in POD_LOG_REMOVED)
    assert ["/var/log/pods/" + name for name in planned] == ["/var/log/pods/789", "/var/log/pods/012", "/var/log/pods/name_namespace_654"]


def test_pod_log_dirs_sources_not_ready():
    # allSourcesReady = false: callers pass a predicate that knows no pod as deleted (deleted = lambda uid: False)
    assert policy.plan_pod_log_dirs(POD_LOG_ENTRIES, never) == []


@pytest.mark.parametrize(
    "name, uid",
    [
        ("123", "123"),
        ("name_namespace_654", "654"),
        ("kube-system_coredns-5d78c9869d-abcde_0f0e3c1a-2b4d-4c6e-8f10-112233445566", "0f0e3c1a-2b4d-4c6e-8f10-112233445566"),
    ],
)
def test_pod_log_dirs_uid_after_last_underscore(name, uid):
    assert policy.pod_uid_of_log_dir(name) == uid


# --- §3.6 item 2: dangling legacy container log symlinks -----------------------------------------------------------


@pytest.mark.parametrize(
    "name, expected",
    [
        ("web_default_nginx-0123456789ab.log", "0123456789ab"),
        ("my-pod_my-ns_my-ctr-abcdef.log", "abcdef"),  # exactly 6 characters, after the last "-"
        ("abcdef0123.log", "abcdef0123"),  # no "-": the whole name
        ("web_default_nginx-abcde.log", None),  # shorter than 6: unparsable
        ("web_default_nginx-.log", None),
        ("web_default_nginx-0123456789ab", None),  # no .log suffix
        ("web_default_nginx-0123456789ab.log.1", None),
    ],
)
def test_container_id_of_log_link(name, expected):
    assert policy.container_id_of_log_link(name) == expected


def log_link(cid):
    return "web_default_app-%s.log" % cid


def test_container_log_links():
    ids = {state: (state * 4)[:6] + "0123456789" for state in (RUNNING, CREATED, UNKNOWN, EXITED)}
    containers = [dict(container(n, "uid", "app", 0, state), id=cid) for n, (state, cid) in enumerate(ids.items())]
    dangling = [
        log_link("abc"),  # unparsable: removed
        log_link(ids[RUNNING]),  # kept (log rotation race, kubernetes#52172)
        log_link("ffffff999999"),  # container gone: removed
        log_link(ids[CREATED]),  # kept
        log_link(ids[EXITED]),  # removed
        log_link(ids[UNKNOWN]),  # kept
    ]
    assert policy.plan_container_log_links(dangling, containers) == [dangling[0], dangling[2], dangling[4]]


def test_container_log_links_nothing_dangling():
    assert policy.plan_container_log_links([], [container(0, "uid", "app", 0, EXITED)]) == []


def test_container_log_links_truncated_id_resolves_by_unique_prefix():
    # a long pod name cuts the id at the 251-byte name limit; the runtime's ContainerStatus resolves a unique prefix
    running = dict(container(0, "uid", "app", 0, RUNNING), id="aaaaaa1111" + "0" * 54)
    exited = dict(container(1, "uid", "app", 0, EXITED), id="bbbbbb2222" + "0" * 54)
    twins = [dict(container(n, "uid", "app", 0, RUNNING), id="cccccc" + str(n) * 58) for n in (2, 3)]
    dangling = [log_link("aaaaaa11"), log_link("bbbbbb22"), log_link("cccccc"), log_link("dddddd")]
    # running prefix kept; exited prefix removed; ambiguous prefix (runtime error) removed; unknown prefix removed
    assert policy.plan_container_log_links(dangling, [running, exited] + twins) == dangling[1:]


def test_container_without_pod_uid_label_belongs_to_no_pod():
    # evictableContainers reads the uid from the labels only: an unlabelled container is uid "", not its sandbox's pod
    old = NOW - 2 * HOUR
    containers = [dict(container(0, "p1", "app", old), label_pod_uid="p1"),
                  dict(container(1, "p1", "app", old + 1), label_pod_uid=""),
                  dict(container(2, "p1", "app", old + 2), label_pod_uid="p1")]
    live = {"p1"}
    removals, kept = policy.plan_containers(containers, NOW, 0, 1, -1, deleted=lambda uid: uid not in live)
    # uid "" is no live pod: c1 goes as pod_deleted; p1 keeps its newest (c2) and loses c0 - c1 is not p1's newer container
    assert [(r["id"], r["reason"]) for r in removals] == [("c1", "pod_deleted"), ("c0", "per_container_limit")]
    assert kept["within_limits"] == 1
    # without the list of live pods, uid "" is a unit of its own and keeps its newest dead container
    removals, kept = policy.plan_containers(containers, NOW, 0, 1, -1)
    assert [r["id"] for r in removals] == ["c0"]
