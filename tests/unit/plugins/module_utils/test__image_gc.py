# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The image_gc executor: when a pass stops, what it reports, with a stand-in CRI whose removals free chosen bytes.

The real-runtime side (shared layers on containerd) is tests/integration/test_image_gc.py.
"""

from concurrent.futures import Future
from types import SimpleNamespace

from ansible_collections.kubenode.gc.plugins.module_utils.cri._cri import CriError
from ansible_collections.kubenode.gc.plugins.module_utils.cri._snapshot import read_after_outage as _snapshot_read_after_outage
from ansible_collections.kubenode.gc.plugins.module_utils.cri._snapshot import usage_percent
from ansible_collections.kubenode.gc.plugins.module_utils.gc import _image_gc as gc
from ansible_collections.kubenode.gc.plugins.module_utils.gc import _image_policy as policy

SECOND = 10**9
HOUR = 3600 * SECOND
T = 1_700_000_000 * SECOND


class FakeNode:
    """RemoveImage frees ``frees[id]`` bytes of the filesystem (default: nothing) or fails for ids in ``fail``."""

    endpoint = "unix:///fake.sock"

    def __init__(self, capacity, available, frees=None, fail=(), inodes_total=0, inodes_free=0, frees_inodes=None, ignore=()):
        self.capacity, self.available = capacity, available
        self.frees = frees or {}
        self.fail = set(fail)
        self.ignore = set(ignore)  # RemoveImage answers success and removes nothing (cri-dockerd given a tag)
        self.removed = []
        self.inodes_total, self.inodes_free = inodes_total, inodes_free
        self.frees_inodes = frees_inodes or {}

    def list_containers(self):
        return []

    def list_images(self):
        """What is still listed of the images RemoveImage was asked for: the ones it ignored."""
        return [SimpleNamespace(id=i, repo_tags=[], repo_digests=[], size=0, pinned=False) for i in sorted(self.ignore)]

    def call_async(self, method, image):
        assert method == "RemoveImage"
        fut = Future()
        if image["image"] in self.fail:
            fut.set_exception(CriError("CRI endpoint unix:///fake.sock failed RemoveImage: boom %s (UNKNOWN)." % image["image"]))
        elif image["image"] in self.ignore:
            fut.set_result(None)
        else:
            self.removed.append(image["image"])
            self.available += self.frees.get(image["image"], 0)
            self.inodes_free += self.frees_inodes.get(image["image"], 0)
            fut.set_result(None)
        return fut

    def statvfs(self, mountpoint):
        return {"available_bytes": self.available, "usage_percent": usage_percent(self.capacity, self.available),
                "inodes_total": self.inodes_total, "inodes_free": self.inodes_free}


def image(n, size):
    return {"id": "sha256:%064d" % n, "repo_tags": ["img:%d" % n], "repo_digests": [], "size": size, "in_use": False, "pinned": False, "sandbox_image": False}


def execute(node, images, high=85, low=80, max_age=0, tracking_since=T, records=None, measure_freed=True, parallelism=64, inodes=(None, None),
            max_removals=None):
    """Plan at T with all images last seen long ago, then run the removals; returns (result, removed ids)."""
    records = records or {i["id"]: {"first_detected": 0, "last_used": 0, "last_possible_use": 0} for i in images}
    opts = {"mode": "threshold", "high": high, "low": low, "min_age": 0, "max_age": max_age, "max_removals": max_removals,
            "measure_freed": measure_freed, "parallelism": parallelism, "inodes_high": inodes[0], "inodes_low": inodes[1]}
    options = policy.PlanOptions("threshold", high, low, 0, max_age, max_removals=max_removals, inodes_high=inodes[0], inodes_low=inodes[1])
    plan = policy.plan(images, records, options,
                       T, node.capacity, node.available, tracking_since=tracking_since, inodes=(node.inodes_total, node.inodes_free))
    state = SimpleNamespace(plan=plan, capacity=node.capacity, available=node.available, mountpoint="/imagefs", images=images,
                            ledger_path="", records=records, inodes_total=node.inodes_total, inodes_free=node.inodes_free)
    result = gc.new_result(plan, False)
    gc._remove(result, state, opts, node, node.statvfs)
    return plan, result


def test_removals_that_free_nothing_stop_the_threshold_pass_within_the_kubelet_plan():
    # six 60-byte candidates, 100 bytes to free: the kubelet's size-based plan removes 2. Their bytes are all in
    # layers shared with images in use, so nothing is freed: the run must not go on through all six.
    images = [image(n, 60) for n in range(6)]
    node = FakeNode(capacity=1000, available=100)
    plan, result = execute(node, images)
    assert len(plan.space) == 2
    assert 1 <= len(node.removed) <= len(plan.space)
    assert [r["id"] for r in result["removed"]] == node.removed
    assert any("freed no measurable space on /imagefs" in w for w in result["warnings"])
    assert result["insufficient"]


def test_measured_freeing_never_goes_past_the_size_based_plan():
    # each removal really frees 25 of its 60 bytes: the plan's 2 images are not enough; the run removes only what check
    # mode planned (issue 22) and says the target was not reached
    images = [image(n, 60) for n in range(6)]
    node = FakeNode(capacity=1000, available=100, frees={i["id"]: 25 for i in images})
    plan, result = execute(node, images)
    assert len(plan.space) == 2
    assert node.removed == [i["id"] for i in plan.space]
    assert node.available == 150
    assert result["insufficient"]


def test_a_removal_is_confirmed_from_the_image_list_not_from_the_answer_alone():
    # RemoveImage answers success for the second image and removes nothing (cri-dockerd given a name it removes nothing
    # of): the list read after the removals still holds it, so it is a failed removal, not a removed one
    images = [image(n, 60) for n in range(3)]
    node = FakeNode(capacity=1000, available=100, frees={i["id"]: 60 for i in images}, ignore={images[1]["id"]})
    plan, result = execute(node, images, measure_freed=False, high=80, low=60)
    assert [i["id"] for i in plan.space] == [i["id"] for i in images]
    assert [r["id"] for r in result["removed"]] == [images[0]["id"], images[2]["id"]]
    assert result["errors"] == [{"id": images[1]["id"], "msg": "The runtime answered RemoveImage of %s with success but still lists the image."
                                 % images[1]["id"]}]
    assert result["bytes_freed_estimated"] == 120


def test_failed_removal_in_the_age_pass_ends_the_run_before_the_threshold_pass():
    images = [image(n, 60) for n in range(4)]
    node = FakeNode(capacity=1000, available=100, frees={i["id"]: 60 for i in images}, fail={images[0]["id"]})
    records = {i["id"]: {"first_detected": 0, "last_used": 0, "last_possible_use": 0} for i in images}
    records[images[2]["id"]] = records[images[3]["id"]] = {"first_detected": 0, "last_used": T, "last_possible_use": T}
    plan, result = execute(node, images, max_age=HOUR, tracking_since=T - 2 * HOUR, records=records)
    assert [i["id"] for i in plan.age] == [images[0]["id"], images[1]["id"]] and plan.threshold_hit
    # the age pass goes on past its failure (freeOldImages), then GarbageCollect returns: no threshold pass
    assert node.removed == [images[1]["id"]]
    assert result["stop_message"] == ("wanted to free images older than 1h0m0s, encountered errors in image deletion: "
                                      "CRI endpoint unix:///fake.sock failed RemoveImage: boom %s (UNKNOWN)." % images[0]["id"])


def test_failed_removals_in_the_threshold_pass_give_the_kubelet_error_not_free_disk_space_failed():
    images = [image(n, 60) for n in range(3)]
    node = FakeNode(capacity=1000, available=100, frees={i["id"]: 60 for i in images}, fail={images[0]["id"], images[1]["id"]})
    plan, result = execute(node, images, measure_freed=False)
    assert plan.bytes_to_free == 100
    msg = result["stop_message"]
    assert msg.startswith("wanted to free 100 bytes, but freed 60 bytes space with errors in image deletion: [CRI endpoint")
    assert images[0]["id"] in msg and images[1]["id"] in msg
    assert not any("Insufficient free disk space" in w for w in result["warnings"])


def test_aggregate_is_apimachinery_style():
    assert gc._aggregate([{"msg": "a"}]) == "a"
    assert gc._aggregate([{"msg": "a"}, {"msg": "b"}, {"msg": "a"}]) == "[a, b]"


def test_high_100_without_max_age_removes_nothing_even_at_full_usage():
    images = [image(n, 60) for n in range(3)]
    node = FakeNode(capacity=1000, available=0, frees={i["id"]: 60 for i in images})
    plan, result = execute(node, images, high=100, low=80)
    assert plan.disabled and plan.removals == []
    assert node.removed == [] and result["removed"] == []


def test_capacity_zero_runs_the_age_pass_then_fails():
    images = [image(n, 60) for n in range(2)]
    node = FakeNode(capacity=0, available=0)
    plan, result = execute(node, images, max_age=HOUR, tracking_since=T - 2 * HOUR)
    assert plan.error == "invalid capacity 0 on image filesystem"
    assert sorted(node.removed) == sorted(i["id"] for i in images)
    assert [r["reason"] for r in result["removed"]] == ["age", "age"]


def test_a_plan_that_frees_less_than_measured_stops_at_the_plan():
    # each removal frees 2 of its 60 bytes (a shared layer holds the rest): the pass stops at the kubelet's 2
    images = [image(n, 60) for n in range(6)]
    node = FakeNode(capacity=1000, available=100, frees={i["id"]: 2 for i in images})
    plan, result = execute(node, images)
    assert len(node.removed) == len(plan.space) == 2
    assert result["insufficient"]


class DyingNode(FakeNode):
    """The runtime dies after ``alive`` removals: every later call fails UNAVAILABLE."""

    def __init__(self, capacity, available, alive):
        super().__init__(capacity, available)
        self.alive = alive
        self.calls = 0

    def _dead(self, method):
        return CriError("CRI endpoint unix:///fake.sock is unavailable for %s: connection refused." % method, code="UNAVAILABLE")

    def list_containers(self):
        if len(self.removed) >= self.alive:
            raise self._dead("ListContainers")
        return []

    def list_images(self):
        raise self._dead("ListImages")  # it does not come back

    def call_async(self, method, image):
        self.calls += 1
        if len(self.removed) >= self.alive:
            fut = Future()
            fut.set_exception(self._dead("RemoveImage"))
            return fut
        return super().call_async(method, image)


def test_the_first_unavailable_error_stops_the_run_with_the_partial_result(monkeypatch):
    monkeypatch.setattr(gc, "RUNTIME_BACK_WAIT", 0)
    images = [image(n, 60) for n in range(6)]
    node = DyingNode(capacity=1000, available=0, alive=2)
    plan, result = execute(node, images, parallelism=3, measure_freed=False)
    # a batch of three: two removed, the third refused UNAVAILABLE; no further call (no re-list, no next batch); the runtime
    # does not come back, so the third is unconfirmed (its answer was lost), and the outage is the run's one error
    assert [r["id"] for r in result["removed"]] == node.removed == [i["id"] for i in images[:2]]
    assert result["errors"] == [{"id": "", "msg": "CRI endpoint unix:///fake.sock is unavailable for RemoveImage: connection refused."}]
    assert result["unconfirmed"] == [images[2]["id"]] and node.calls == 3
    assert result["stop_message"].startswith("The run stopped after 2 image(s) were removed (1 more unconfirmed): CRI endpoint unix:///fake.sock is "
                                             "unavailable for RemoveImage")
    assert not result["insufficient"] and not any("Insufficient" in w for w in result["warnings"])
    assert any(w.startswith("The runtime did not answer 1 removal(s) and was not back within 0 seconds") for w in result["warnings"])
    assert result["kept"]["not_needed"] == 6 - 3


class RestartingNode(FakeNode):
    """A runtime restarted gracefully mid-run: the removals of ``lose`` happen but their answers are lost (UNAVAILABLE), the
    calls after them are refused, and it answers ListImages again ``back_after`` tries later."""

    def __init__(self, capacity, available, images, lose, refuse=(), back_after=0):
        super().__init__(capacity, available)
        self.images, self.lose, self.refuse, self.back_after = images, set(lose), set(refuse), back_after
        self.lists = 0

    def call_async(self, method, image):
        fut = Future()
        if image["image"] in self.lose | self.refuse:
            if image["image"] in self.lose:
                self.removed.append(image["image"])
            fut.set_exception(CriError("CRI endpoint unix:///fake.sock is unavailable for RemoveImage: Socket closed.", code="UNAVAILABLE"))
            return fut
        return super().call_async(method, image)

    def list_images(self):
        self.lists += 1
        if self.lists <= self.back_after:
            raise CriError("CRI endpoint unix:///fake.sock is unusable for ListImages: nothing is listening.", code="UNAVAILABLE")
        return [SimpleNamespace(id=i["id"], repo_tags=i["repo_tags"], repo_digests=[], size=i["size"], pinned=False)
                for i in self.images if i["id"] not in self.removed]


def test_removals_whose_answer_was_lost_are_confirmed_once_the_runtime_is_back(monkeypatch):
    monkeypatch.setattr(gc, "RUNTIME_BACK_WAIT", 5)
    monkeypatch.setattr(gc, "read_after_outage", lambda client, read, wait: _snapshot_read_after_outage(client, read, wait, interval=0.01))
    images = [image(n, 60) for n in range(6)]
    # images 1 and 2 are removed but their answers are lost in the restart; image 3 is refused (never reached the runtime)
    node = RestartingNode(1000, 0, images, lose={images[1]["id"], images[2]["id"]}, refuse={images[3]["id"]}, back_after=3)
    plan, result = execute(node, images, parallelism=6, measure_freed=False)
    assert node.lists == 4  # three tries while it restarts, then the list that confirms
    assert {r["id"] for r in result["removed"]} == set(node.removed) == {images[n]["id"] for n in (0, 1, 2)}
    assert result["unconfirmed"] == []
    # nothing that really went is under errors: the outage is the one error, image 3 (still there) has none of its own
    assert result["errors"] == [{"id": "", "msg": "CRI endpoint unix:///fake.sock is unavailable for RemoveImage: Socket closed."}]
    assert result["stop_message"].startswith("The run stopped after 3 image(s) were removed: ")
    assert result["bytes_freed_estimated"] == 180


def test_a_lost_answer_without_an_outage_is_confirmed_by_a_list_and_ledger_records_of_gone_images_are_dropped(monkeypatch):
    images = [image(n, 60) for n in range(3)]
    node = RestartingNode(1000, 0, images, lose=())
    slow = images[1]["id"]
    real = node.call_async

    def call_async(method, image):  # noqa: F811  the one removal that runs past cri_timeout but happens
        if image["image"] == slow:
            node.removed.append(slow)
            fut = Future()
            fut.set_exception(CriError("CRI endpoint unix:///fake.sock did not answer RemoveImage within 30 seconds (cri_timeout).",
                                       code="DEADLINE_EXCEEDED"))
            return fut
        return real(method, image)

    node.call_async = call_async
    saved = {}
    monkeypatch.setattr(gc._ledger, "save", lambda path, ledger: saved.update(ledger))
    records = {i["id"]: {"first_detected": 0, "last_used": 0, "last_possible_use": 0} for i in images}
    plan = policy.plan(images, records, policy.PlanOptions("prune", 85, 80, 0, 0), T, node.capacity, node.available, tracking_since=T)
    state = SimpleNamespace(plan=plan, capacity=node.capacity, available=node.available, mountpoint="/imagefs", images=images,
                            ledger_path="/state/ledger.json", records=dict(records), ledger={"version": 1, "created": 0, "images": {}},
                            inodes_total=0, inodes_free=0)
    result = gc.new_result(plan, False)
    gc._remove(result, state, {"mode": "prune", "max_age": 0, "max_removals": None, "parallelism": 64}, node, node.statvfs)
    assert {r["id"] for r in result["removed"]} == {i["id"] for i in images} and result["errors"] == [] and result["unconfirmed"] == []
    assert saved["images"] == {} and node.lists == 1


def test_a_failed_container_re_list_stops_the_run():
    images = [image(n, 60) for n in range(6)]
    node = DyingNode(capacity=1000, available=0, alive=2)
    plan, result = execute(node, images, parallelism=1, measure_freed=False)
    # two batches of one, then the re-list before the third fails: recorded without an image id, no RemoveImage after it
    assert node.removed == [i["id"] for i in images[:2]] and node.calls == 2
    assert result["errors"] == [{"id": "", "msg": "CRI endpoint unix:///fake.sock is unavailable for ListContainers: connection refused."}]
    assert result["kept"]["not_needed"] == 6 - 2  # the re-list error counts no image
    assert result["stop_message"].startswith("The run stopped after 2 image(s) were removed: ")


def test_a_ledger_that_cannot_be_written_is_reported_with_the_removals(monkeypatch):
    images = [image(n, 60) for n in range(3)]
    node = FakeNode(capacity=1000, available=0)
    plan = policy.plan(images, {i["id"]: {"first_detected": 0, "last_used": 0, "last_possible_use": 0} for i in images},
                       policy.PlanOptions("prune", 85, 80, 0, 0), T, node.capacity, node.available, tracking_since=T)
    records = {i["id"]: {"first_detected": 0, "last_used": 0} for i in images}
    state = SimpleNamespace(plan=plan, capacity=node.capacity, available=node.available, mountpoint="/imagefs", images=images,
                            ledger_path="/full/ledger.json", records=records, ledger={"version": 1, "created": 0, "images": {}},
                            inodes_total=0, inodes_free=0)

    def save(path, ledger):
        raise gc._ledger.LedgerError("Cannot write the image ledger %s: No space left on device." % path)

    monkeypatch.setattr(gc._ledger, "save", save)
    result = gc.new_result(plan, False)
    gc._remove(result, state, {"mode": "prune", "max_age": 0, "max_removals": None, "parallelism": 64}, node, node.statvfs)
    assert len(result["removed"]) == 3 and result["errors"] == []
    assert result["ledger_message"] == "Removed 3 image(s), but cannot write the image ledger /full/ledger.json: No space left on device."
    assert result["ledger"] == {"path": "", "saved": False, "records": 0}


def test_inode_pass_frees_inodes_to_the_low_mark_in_measured_batches_in_eviction_order():
    # bytes at 10 % (high 85 not reached), inodes at 90 %: ten images, 1000 inodes used of 1000+100, each removal frees 100
    images = [image(n, 10) for n in range(10)]
    node = FakeNode(capacity=1000, available=900, inodes_total=1000, inodes_free=100, frees_inodes={i["id"]: 100 for i in images})
    plan, result = execute(node, images, inodes=(90, 50))
    assert not plan.threshold_hit and plan.inode_hit and plan.inodes_usage_before == 90
    assert plan.inodes_to_free == 400 and plan.inode_estimate == 90
    assert len(plan.inode_space) == 5  # 5 x 90 estimated >= 400
    # measured: 4 removals of 100 inodes reach 50 %; none further; in eviction order (ids ascending here)
    assert node.removed == [i["id"] for i in images[:4]]
    assert [r["reason"] for r in result["removed"]] == ["inodes"] * 4
    assert result["inodes_usage_before"] == 90 and result["inodes_usage_after"] == 50
    assert result["inodes_freed_measured"] == 400 and result["inodes_to_free"] == 400
    assert result["target_reached"] and not result["insufficient"] and result["bytes_to_free"] == 0


def test_inode_pass_goes_after_the_byte_pass_and_skips_when_bytes_freed_enough_inodes():
    images = [image(n, 100) for n in range(6)]
    node = FakeNode(capacity=1000, available=100, frees={i["id"]: 100 for i in images}, inodes_total=1000, inodes_free=400,
                    frees_inodes={i["id"]: 300 for i in images})
    plan, result = execute(node, images, high=85, low=80, inodes=(60, 40))
    assert plan.threshold_hit and plan.inode_hit
    # the byte pass needs 100 bytes: one image, which frees 300 inodes: inode usage 30 % <= 40 %, no inode pass removal
    assert [r["reason"] for r in result["removed"]] == ["space"]
    assert result["inodes_usage_after"] == 30 and result["target_reached"]


def test_inode_removals_that_free_no_inodes_stop_the_pass_with_a_warning():
    images = [image(n, 10) for n in range(6)]
    node = FakeNode(capacity=1000, available=900, inodes_total=1000, inodes_free=100)
    plan, result = execute(node, images, inodes=(90, 50))
    assert len(node.removed) == 1
    assert any("freed no inodes on /imagefs" in w for w in result["warnings"])
    assert result["insufficient"] and not result["target_reached"]
    assert any(w.startswith("Insufficient free inodes on the node's image filesystem (90% of 1000 inodes used)") for w in result["warnings"])


def test_inode_pass_respects_max_removals_and_runs_with_the_byte_pass_disabled():
    images = [image(n, 10) for n in range(6)]
    node = FakeNode(capacity=1000, available=0, inodes_total=1000, inodes_free=0, frees_inodes={i["id"]: 100 for i in images})
    plan, result = execute(node, images, high=100, low=99, inodes=(90, 50), max_removals=2)
    assert plan.disabled and plan.inode_hit
    assert len(node.removed) == 2 and result["insufficient"]


def test_inode_thresholds_are_both_or_neither_and_low_below_high():
    import pytest
    from ansible_collections.kubenode.gc.plugins.module_utils._errors import OptionError
    base = {"mode": "threshold", "high_threshold_percent": 85, "low_threshold_percent": 80, "min_age": "2m", "max_age": "0s", "keep_images": [],
            "ledger_path": "", "measure_freed": True, "fail_on_insufficient": False, "max_removals": None, "parallelism": 64, "lock_timeout": 1.0,
            "cri_endpoint": None, "cri_timeout": 10}
    with pytest.raises(OptionError, match=r"^inodes_high_threshold_percent and inodes_low_threshold_percent must be set together, "
                                          r"got only inodes_high_threshold_percent\.$"):
        gc.options(dict(base, inodes_high_threshold_percent=90, inodes_low_threshold_percent=None))
    with pytest.raises(OptionError, match=r"^inodes_low_threshold_percent 90 must be less than inodes_high_threshold_percent 90\.$"):
        gc.options(dict(base, inodes_high_threshold_percent=90, inodes_low_threshold_percent=90))
    with pytest.raises(OptionError, match=r"^inodes_high_threshold_percent 101 must be between 0 and 100, inclusive\.$"):
        gc.options(dict(base, inodes_high_threshold_percent=101, inodes_low_threshold_percent=90))
    opts = gc.options(dict(base, inodes_high_threshold_percent=90, inodes_low_threshold_percent=80))
    assert (opts["inodes_high"], opts["inodes_low"]) == (90, 80)
    assert gc.options(base)["inodes_high"] is None


class _Pending:
    """A RemoveImage answer that arrives only when the executor waits for it."""

    def __init__(self, node, image_id):
        self.node, self.image_id, self._done = node, image_id, False

    def done(self):
        return self._done

    def result(self):
        if not self._done:
            self._done = True
            self.node.answered.append(self.image_id)
            self.node.in_flight -= 1


class PipelineNode(FakeNode):
    """Records, for each call, how many calls were in flight; a container re-list may bring an image into use."""

    def __init__(self, start_using=None):
        super().__init__(capacity=1000, available=0)
        self.in_flight = self.max_in_flight = 0
        self.answered, self.events = [], []
        self.start_using = start_using or {}  # {re-list number: image id a new container uses from then on}
        self.users = []

    def list_containers(self):
        n = sum(1 for e in self.events if e[0] == "list")
        self.events.append(("list", len(self.removed), len(self.answered)))
        if n in self.start_using:
            self.users.append(SimpleNamespace(id="c%d" % n, labels={}, metadata=SimpleNamespace(name="new", attempt=0), pod_sandbox_id="",
                                              state=0, created_at=T, image_id=self.start_using[n], image_ref=self.start_using[n],
                                              image=SimpleNamespace(image=self.start_using[n])))
        return list(self.users)

    def call_async(self, method, image):
        assert method == "RemoveImage"
        self.removed.append(image["image"])
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        self.events.append(("call", image["image"]))
        return _Pending(self, image["image"])


def test_prune_keeps_the_pipeline_full_and_re_lists_containers_before_each_parallelism_new_calls():
    images = [image(n, 10) for n in range(10)]
    # the third re-list (before calls 9 and 10) sees a new container using image 8
    node = PipelineNode(start_using={2: images[8]["id"]})
    records = {i["id"]: {"first_detected": 0, "last_used": 0, "last_possible_use": 0} for i in images}
    plan = policy.plan(images, records, policy.PlanOptions("prune", 85, 80, 0, 0), T, node.capacity, node.available, tracking_since=T)
    state = SimpleNamespace(plan=plan, capacity=node.capacity, available=node.available, mountpoint="/imagefs", images=images,
                            ledger_path="", records=records, inodes_total=0, inodes_free=0)
    result = gc.new_result(plan, False)
    gc._remove(result, state, {"mode": "prune", "max_age": 0, "max_removals": None, "parallelism": 4}, node, node.statvfs)
    lists = [e for e in node.events if e[0] == "list"]
    # one re-list before each run of 4 new calls: 0, 4 and 8 calls made by then
    assert [removed for _l, removed, _answered in lists] == [0, 4, 8]
    # no barrier: the second and third re-lists happen while calls are still in flight (not all answered)
    assert [removed - answered for _l, removed, answered in lists] == [0, 4, 4]
    assert node.max_in_flight == 4
    # an image a container started using before its own run of calls is kept, the others removed
    assert images[8]["id"] not in node.removed and len(node.removed) == 9
    assert [r["id"] for r in result["removed"]] == [i["id"] for i in images if i is not images[8]]
    assert result["kept"]["in_use"] == 1 and any("came into use during the run" in w for w in result["warnings"])


def _young_state(young, eligible=()):
    plan = SimpleNamespace(too_young=young, eligible=list(eligible))
    return SimpleNamespace(plan=plan, ledger_path="/var/lib/kubenode-gc/image-ledger.json")


def test_a_run_that_min_age_holds_back_entirely_warns_naming_min_age_and_the_first_sightings():
    young = [dict(image(n, 60), first_detected=T + n * SECOND) for n in range(2)]
    result = {"removed": [], "errors": [], "warnings": []}
    gc._warn_too_young(result, _young_state(young), {"min_age": 120 * SECOND}, check_mode=False)
    assert result["warnings"] == [
        "Removed no image: all 2 candidate(s) are younger than min_age 2m0s, counted from when image_gc first saw them on this node "
        "(first sightings 2023-11-14T22:13:20Z to 2023-11-14T22:13:21Z, by the ledger /var/lib/kubenode-gc/image-ledger.json); the first "
        "becomes eligible at 2023-11-14T22:15:20Z. On a node image_gc never saw, set min_age (kubenode_gc_cleanup_image_min_age in "
        "kubenode.gc.cleanup) to 0s to free space now."]
    # check mode says it too (the audit's plan), and nothing is said when something was eligible or removed
    planned = {"removed": [], "errors": [], "warnings": []}
    gc._warn_too_young(planned, _young_state(young[:1]), {"min_age": 120 * SECOND}, check_mode=True)
    assert planned["warnings"][0].startswith("Would remove no image: all 1 candidate(s)") and "(first sighting 2023-11-14T22:13:20Z," in planned["warnings"][0]
    for state, removed in ((_young_state(young, eligible=[image(9, 1)]), []), (_young_state(young), [{"id": "x"}]), (_young_state([]), [])):
        quiet = {"removed": removed, "errors": [], "warnings": []}
        gc._warn_too_young(quiet, state, {"min_age": 120 * SECOND}, check_mode=False)
        assert quiet["warnings"] == []


def test_native_removal_only_on_the_proven_containerd_lines():
    def native(name, version):
        return gc.native_removal({"name": name, "version": version})

    for version in ("1.6.20~ds1", "v1.7.24", "2.1.9", "v2.2.7", "2.3.4"):
        assert native("containerd", version), version
    # only the lines tests/integration/test_image_gc_native.py runs on: not 2.0, not a release line after 2.3
    for version in ("1.5.18", "1.4.0", "v0.2", "", None, "devel", "v2.0.0", "2.0.7", "2.4.0", "3.0.0"):
        assert not native("containerd", version), version
    assert not native("cri-o", "1.37.0") and not native("docker", "2.1.0") and not native(None, None)


def test_record_names_are_tags_digests_and_id_once_each():
    img = dict(image(1, 10), repo_tags=["a:1", "b:1"], repo_digests=["a@sha256:%064d" % 5])
    assert gc.record_names(img) == ["a:1", "b:1", "a@sha256:%064d" % 5, img["id"]]
    assert gc.record_names(dict(image(2, 10), repo_tags=[], repo_digests=[])) == [image(2, 10)["id"]]


def test_a_small_pass_keeps_remove_image_where_the_native_path_is_proven():
    # a native executor below NATIVE_MIN_IMAGES removes through the CRI (the fake accepts RemoveImage only)
    images = [dict(image(n, 10), first_detected=0, last_used=None) for n in range(gc.NATIVE_MIN_IMAGES - 1)]
    node = FakeNode(capacity=1000, available=100)
    result = gc.new_result(SimpleNamespace(kept={}, usage_before=0, bytes_to_free=0, inodes_usage_before=0, inodes_to_free=0, triggered_by=[],
                                           target="percent", available_before=0), False)
    executor = gc._Executor(node, {"parallelism": 64}, result, native=True)
    executor.remove(images, "prune")
    assert node.removed == [i["id"] for i in images] and len(result["removed"]) == len(images)
