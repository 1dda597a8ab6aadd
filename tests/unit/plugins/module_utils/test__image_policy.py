# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The upstream image GC vectors (shared/docs/kubelet-gc-semantics.md §4.1 IG-1..IG-23, §4.5 D-1..D-6)
restated against the pure planner.

Conventions: times are integer nanoseconds since the epoch; Go's zero time ("Z") is 0; ``T`` is the
test's "now". ``img(n, size)`` is image ``image-n``; ``in_use`` is the set of ids referenced by any
container (the vectors' ``ctr(n)``). "left N" is ``len(images) - len(plan.removals)``.
"""

import pytest

from ansible_collections.kubenode.gc.plugins.module_utils import _kubelet as kubelet
from ansible_collections.kubenode.gc.plugins.module_utils._errors import PolicyError
from ansible_collections.kubenode.gc.plugins.module_utils.gc import _image_policy as policy

SECOND = 10**9
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
Z = 0  # Go's zero time
T = 1_700_000_000 * SECOND
MAX_TIME = 2**63 - 1


def plan(images, records, mode, free_time, capacity, available, high, low, min_age, max_age, tracking_since=0, keep=None, max_removals=None):
    """policy.plan with the vectors' parameters spelled out (the module passes one PlanOptions)."""
    opts = policy.PlanOptions(mode, high, low, min_age, max_age, keep=keep, max_removals=max_removals)
    return policy.plan(images, records, opts, free_time, capacity, available, tracking_since=tracking_since)


def image(image_id, size=1024, **flags):
    img_ = {"id": image_id, "repo_tags": [], "repo_digests": [], "size": size, "pinned": False, "in_use": False, "sandbox_image": False}
    img_.update(flags)
    return img_


def img(n, size=1024, **flags):
    return image("image-%s" % n, size, **flags)


def flag_in_use(images, in_use):
    return [dict(i, in_use=i["id"] in in_use) for i in images]


def ids(images):
    return [i["id"] for i in images]


def freed(images):
    return sum(i["size"] for i in images)


def left(images, result):
    return len(images) - len(result.removals)


def free_space(images, records, in_use, bytes_wanted, free_time, min_age=0):
    """The vectors' freeSpace(b, t): imagesInEvictionOrder(t) (which detects at t), then the space walk.

    plan() derives the bytes to free from the filesystem, so pick one whose amountToFree is exactly b:
    capacity 10**6, Low 0 -> amountToFree = capacity - available; usage 1% >= High 1.
    """
    capacity = 10**6
    assert 0 < bytes_wanted <= 10**4
    unique = policy.dedupe(images)
    records = policy.detect(records, unique, in_use, free_time, free_time)
    result = plan(flag_in_use(unique, in_use), records, "threshold", free_time, capacity, capacity - bytes_wanted,
                  high=1, low=0, min_age=min_age, max_age=0)
    assert result.threshold_hit
    assert result.bytes_to_free == bytes_wanted
    assert result.age == []
    return result


def delete_unused(images, records, in_use, free_time, min_age=0):
    """DeleteUnusedImages: imagesInEvictionOrder(t), then freeSpace(MaxInt64) -- mode prune."""
    unique = policy.dedupe(images)
    records = policy.detect(records, unique, in_use, free_time, free_time)
    return plan(flag_in_use(unique, in_use), records, "prune", free_time, None, None, high=85, low=80, min_age=min_age, max_age=0)


def garbage_collect(images, in_use, capacity, available, high=90, low=80, min_age=0, max_age=0, free_time=T, tracking_since=0,
                    records=None, **kwargs):
    """GarbageCollect at free_time with a fresh detection (mode threshold)."""
    unique = policy.dedupe(images)
    records = policy.detect(records or {}, unique, in_use, free_time, free_time)
    return plan(flag_in_use(unique, in_use), records, "threshold", free_time, capacity, available, high, low, min_age, max_age,
                tracking_since=tracking_since, **kwargs)


# --- §4.1 detectImages ---------------------------------------------------------------------------------------------


def test_ig01_detect_images_initial_detect():
    images = [img(0, 1024), img(1, 2048), img(2, 2048)]
    # the container using image-1 has an empty Image name: in-use matching is by image id only
    records = policy.detect({}, images, {"image-1", "image-2"}, Z, T)
    assert sorted(records) == ["image-0", "image-1", "image-2"]
    assert all(r["first_detected"] == Z for r in records.values())
    assert records["image-0"]["last_used"] == Z
    assert records["image-1"]["last_used"] == T
    assert records["image-2"]["last_used"] == T


def test_ig02_detect_images_with_new_image():
    first = policy.detect({}, [img(0), img(1)], {"image-1"}, Z, T)
    records = policy.detect(first, [img(0), img(1), img(2)], {"image-1"}, Z + SECOND, T + SECOND)
    assert len(records) == 3
    assert records["image-2"] == {"first_detected": Z + SECOND, "last_used": Z, "last_possible_use": Z + SECOND}
    assert records["image-0"] == {"first_detected": Z, "last_used": Z, "last_possible_use": Z}
    assert records["image-1"] == {"first_detected": Z, "last_used": T + SECOND, "last_possible_use": T + SECOND}
    assert first["image-1"]["last_used"] == T  # the earlier records are not modified


def test_ig03_detect_images_container_stopped():
    first = policy.detect({}, [img(0), img(1)], {"image-1"}, Z, T)
    # no pods any more (the container object is gone): image-1 is no longer in use
    records = policy.detect(first, [img(0), img(1)], set(), T + MINUTE, T + MINUTE)
    assert len(records) == 2
    assert records["image-1"]["last_used"] == T  # neither zeroed nor advanced


def test_ig04_detect_images_with_removed_images():
    first = policy.detect({}, [img(0), img(1)], set(), Z, T)
    assert policy.detect(first, [], set(), T, T) == {}


def test_detect_first_seen_hint_is_never_later_than_detect_time():
    records = policy.detect({"image-0": {"first_detected": 5, "last_used": 0}}, [img(0), img(1), img(2)], set(), T, T,
                            first_seen_hints={"image-0": 1, "image-1": T - HOUR, "image-2": T + HOUR})
    assert records["image-0"]["first_detected"] == 5  # hints only apply to images never recorded before
    assert records["image-1"]["first_detected"] == T - HOUR
    assert records["image-2"]["first_detected"] == T


# --- §4.1 freeSpace / DeleteUnusedImages ---------------------------------------------------------------------------


def test_ig05_in_use_images_are_ignored():
    images = [img(0, 1024), img(1, 2048)]
    result = free_space(images, {}, {"image-1"}, 2048, T)
    assert ids(result.space) == ["image-0"]
    assert freed(result.space) == 1024
    assert left(images, result) == 1
    assert result.kept["in_use"] == 1
    # freeSpace itself returns no error; the shortfall is GarbageCollect's FreeDiskSpaceFailed (see IG-13)
    assert result.estimated_short


def test_ig06_delete_unused_images_removes_all_unused_images():
    images = [img(0, 1024), img(1, 2048), img(2, 2048)]
    result = delete_unused(images, {}, {"image-2"}, T)
    assert ids(result.removals) == ["image-0", "image-1"]
    assert left(images, result) == 1
    assert result.kept["in_use"] == 1


def test_ig07_delete_unused_images_limited_by_image_live_time():
    images = [img(0, 1024), img(1, 2048), img(2, 2048)]
    in_use = {"image-2"}
    started = policy.detect({}, images, in_use, T, T)  # Start(): detection at start
    at_once = delete_unused(images, started, in_use, T + 1, min_age=3 * SECOND)
    assert left(images, at_once) == 3
    assert at_once.kept["too_young"] == 2
    later = delete_unused(images, started, in_use, T + 3 * SECOND, min_age=3 * SECOND)  # age == MinAge is eligible
    assert left(images, later) == 1
    assert ids(later.removals) == ["image-0", "image-1"]


def test_ig08_free_space_removes_by_least_recently_used():
    images = [img(0, 1024), img(1, 2048)]
    t1, t2 = T, T + SECOND
    records = policy.detect({}, images, {"image-0", "image-1"}, Z, t1)
    records = policy.detect(records, images, {"image-1"}, t2, t2)
    records = policy.detect(records, images, set(), t2, t2)
    assert ids(policy.eviction_order(images, records)) == ["image-0", "image-1"]
    result = free_space(images, records, set(), 1024, t2 + MINUTE)
    assert ids(result.space) == ["image-0"]
    assert freed(result.space) == 1024
    assert left(images, result) == 1


def test_ig09_free_space_ties_broken_by_detected_time():
    records = policy.detect({}, [img(0, 1024)], {"image-0"}, Z, T)
    images = [img(0, 1024), img(1, 2048)]
    records = policy.detect(records, images, {"image-0"}, T + SECOND, T + SECOND)  # ctr(0) still runs
    records = policy.detect(records, images, set(), T + 2 * SECOND, T + 2 * SECOND)  # pods removed
    assert records["image-1"]["last_used"] == Z  # never used: sorts first
    result = free_space(images, records, set(), 1024, T + 2 * SECOND)
    assert ids(result.space) == ["image-1"]
    assert freed(result.space) == 2048
    assert left(images, result) == 1
    assert result.kept["not_needed"] == 1


# --- §4.1 GarbageCollect -------------------------------------------------------------------------------------------


def test_ig10_garbage_collect_below_low_threshold():
    images = [img(0, 1024)]
    result = garbage_collect(images, set(), capacity=1000, available=600, high=90, low=80)
    assert result.usage_before == 40
    assert not result.threshold_hit
    assert result.removals == []
    assert result.kept["not_needed"] == 1


@pytest.mark.parametrize("capacity", [None, 0])
def test_ig11_garbage_collect_stats_failure(capacity):
    # The stats read (ImageFsStats error) is I/O outside the pure planner; what reaches plan() is an unusable
    # capacity, which fails the run like the kubelet's InvalidDiskCapacity (after the age pass).
    result = garbage_collect([img(0)], set(), capacity=capacity, available=None)
    assert result.error == "invalid capacity 0 on image filesystem"
    assert result.space == [] and not result.threshold_hit


def test_ig12_garbage_collect_below_success():
    result = garbage_collect([img(0, 450)], set(), capacity=1000, available=50, high=90, low=80)
    assert result.usage_before == 95
    assert result.threshold_hit
    assert result.bytes_to_free == 150
    assert ids(result.space) == ["image-0"]
    assert not result.estimated_short  # freed 450 >= 150: no error


def test_ig13_garbage_collect_not_enough_freed():
    # GarbageCollect's FreeDiskSpaceFailed error shows as estimated_short with the bytes wanted and found.
    result = garbage_collect([img(0, 50)], set(), capacity=1000, available=50, high=90, low=80)
    assert result.usage_before == 95
    assert result.bytes_to_free == 150
    assert freed(result.space) == 50
    assert result.estimated_short


def test_ig14_garbage_collect_image_not_old_enough():
    images = [img(0, 1024), img(1, 2048)]
    in_use = {"image-1"}
    records = policy.detect({}, images, in_use, T, T)
    first = free_space(images, records, in_use, 1024, T, min_age=MINUTE)
    assert freed(first.space) == 0
    assert left(images, first) == 2
    assert first.kept["too_young"] == 1
    second = free_space(images, records, in_use, 1024, T + MINUTE, min_age=MINUTE)  # age == MinAge is eligible
    assert freed(second.space) == 1024
    assert left(images, second) == 1


def test_ig15_garbage_collect_image_too_old():
    # "uptime" (beganGC) is the ledger's creation time, tracking_since, here T.
    images = flag_in_use([img(0), img(1)], {"image-1"})
    records = policy.detect({}, images, {"image-1"}, T, T)
    candidates = policy.eviction_order(images, records)
    assert ids(candidates) == ["image-0"]
    candidates[0]["last_used"] = T  # forced, as upstream
    old, rest = policy.age_pass(candidates, T, MINUTE, T)
    assert old == [] and len(rest) == 1
    assert len(images) - len(old) == 2
    old, rest = policy.age_pass(candidates, T + MINUTE + 1, MINUTE, T)
    assert ids(old) == ["image-0"] and rest == []
    assert len(images) - len(old) == 1
    # the same through plan(), below the threshold so only the age pass removes
    records["image-0"]["last_used"] = T
    result = plan(images, records, "threshold", T + MINUTE + 1, 1000, 1000, 90, 80, 0, MINUTE, tracking_since=T)
    assert ids(result.age) == ["image-0"] and result.space == []
    assert left(images, result) == 1


@pytest.mark.parametrize("free_time", [T, MAX_TIME])
def test_ig16_garbage_collect_image_max_age_disabled(free_time):
    images = flag_in_use([img(0), img(1)], {"image-1"})
    records = policy.detect({}, images, {"image-1"}, T, T)
    candidates = policy.eviction_order(images, records)
    old, rest = policy.age_pass(candidates, free_time, 0, T)
    assert old == []
    assert ids(rest) == ["image-0"]


def test_ig17_do_not_delete_pinned_image():
    images = [image("1", 1024, pinned=True), image("2", 1024)]
    result = free_space(images, {}, set(), 4096, T)
    assert ids(result.space) == ["2"]
    assert freed(result.space) == 1024
    assert left(images, result) == 1
    assert result.kept["pinned"] == 1


def test_ig18_delete_unpinned_image():
    images = [image("1", 1024), image("2", 1024)]
    result = free_space(images, {}, set(), 2048, T)
    assert sorted(ids(result.space)) == ["1", "2"]
    assert freed(result.space) == 2048
    assert left(images, result) == 0
    assert not result.estimated_short


def test_ig19_all_pinned_images():
    images = [image("1", 1024, pinned=True), image("2", 1024, pinned=True)]
    result = free_space(images, {}, set(), 2048, T)
    assert freed(result.space) == 0
    assert left(images, result) == 2
    assert result.kept["pinned"] == 2


def test_ig20_delete_unused_images_exempt_sandbox_image():
    images = [image("registry.k8s.io/pause-amd64:latest", 1024, pinned=True, repo_tags=["registry.k8s.io/pause-amd64:latest"])]
    result = delete_unused(images, {}, set(), T)
    assert result.removals == []
    assert left(images, result) == 1
    assert result.kept["pinned"] == 1


def test_sandbox_image_the_runtime_also_pins_is_kept_as_sandbox():
    # containerd 1.7.3+, 2.x and cri-o report their sandbox image pinned: "sandbox" is the truer reason
    images = [image("pause", 1024, pinned=True, sandbox_image=True), image("other", 1024, pinned=True)]
    result = delete_unused(images, {}, set(), T)
    assert result.removals == []
    assert result.kept["sandbox"] == 1 and result.kept["pinned"] == 1


def test_ig21_delete_pinned_image():
    # two ListImages entries with the same id: the last (unpinned) one wins
    images = [img(1, 1024, pinned=True), img(1, 1024, pinned=False)]
    unique = policy.dedupe(images)
    assert len(unique) == 1 and unique[0]["pinned"] is False
    result = delete_unused(images, {}, set(), T)
    assert ids(result.removals) == ["image-1"]
    assert left(images, result) == 1
    # and the other way round the pinned entry wins
    assert delete_unused(list(reversed(images)), {}, set(), T).removals == []


def test_ig22_detect_images_gate_off_keys_by_id():
    # Not applicable: with RuntimeClassInImageCriAPI on the kubelet keys records "<id>,<handler>"; our records are
    # keyed by image id only (the gate-off default). The handler is therefore ignored: the same vector gives id keys.
    images = [img(0, runtime_handler="h"), img(1, runtime_handler="h"), img(2)]
    records = policy.detect({}, images, {"image-1", "image-2"}, Z, T)
    assert sorted(records) == ["image-0", "image-1", "image-2"]
    assert records["image-0"]["last_used"] == Z
    assert records["image-1"]["last_used"] == T
    assert records["image-2"]["last_used"] == T


PREFIX = "invalid configuration: "
HIGH_RANGE = PREFIX + "imageGCHighThresholdPercent (--image-gc-high-threshold) %d must be between 0 and 100, inclusive"
LOW_RANGE = PREFIX + "imageGCLowThresholdPercent (--image-gc-low-threshold) %d must be between 0 and 100, inclusive"
LOW_HIGH = PREFIX + ("imageGCLowThresholdPercent (--image-gc-low-threshold) %d must be less than "
                     "imageGCHighThresholdPercent (--image-gc-high-threshold) %d")


@pytest.mark.parametrize(
    "high, low, message",
    [
        (2, 1, None),
        (-1, 0, HIGH_RANGE % -1),
        (101, 0, HIGH_RANGE % 101),
        (0, -1, LOW_RANGE % -1),
        (0, 101, LOW_RANGE % 101),
        (1, 2, LOW_HIGH % (2, 1)),
        # config validation (§2.2) also rejects Low == High, which NewImageGCManager accepts
        (1, 1, LOW_HIGH % (1, 1)),
        (100, 99, None),
    ],
)
def test_ig23_validate_image_gc_policy(high, low, message):
    # The module validates like the kubelet's config validation (§2.2 VAL texts), not NewImageGCManager's
    # second layer (§1.6): same cases, VAL wording, and equality rejected.
    if message is None:
        kubelet.validate_thresholds(high, low)
    else:
        with pytest.raises(PolicyError) as err:
            kubelet.validate_thresholds(high, low)
        assert str(err.value) == message


@pytest.mark.parametrize(
    "min_age, max_age, message",
    [
        (2 * MINUTE, 0, None),
        (0, 0, None),
        (MINUTE, 2 * MINUTE, None),
        (0, -SECOND, PREFIX + "imageMaximumGCAge -1s must not be negative"),
        (2 * MINUTE, MINUTE, PREFIX + "imageMaximumGCAge 1m0s must be greater than imageMinimumGCAge 2m0s"),
        (2 * MINUTE, 2 * MINUTE, PREFIX + "imageMaximumGCAge 2m0s must be greater than imageMinimumGCAge 2m0s"),
        # not in VAL (which does not check MinAge's sign): the module refuses a negative MinAge too
        (-SECOND, 0, PREFIX + "imageMinimumGCAge -1s must not be negative"),
    ],
)
def test_validate_ages(min_age, max_age, message):
    if message is None:
        kubelet.validate_ages(min_age, max_age)
    else:
        with pytest.raises(PolicyError) as err:
            kubelet.validate_ages(min_age, max_age)
        assert str(err.value) == message


# --- §4.5 derived vectors ------------------------------------------------------------------------------------------


def test_d01_amount_to_free_zero_still_deletes_one_image():
    assert policy.usage_percent(1001, 160) == 85
    assert policy.bytes_to_free(1001, 160, 84) == 0
    result = garbage_collect([img(0, 10), img(1, 10)], set(), capacity=1001, available=160, high=85, low=84)
    assert result.threshold_hit
    assert result.bytes_to_free == 0
    assert len(result.space) == 1
    assert not result.estimated_short


def test_d02_high_100_fires_below_one_percent_free():
    kubelet.validate_thresholds(100, 80)
    assert policy.usage_percent(1000, 9) == 100
    assert policy.bytes_to_free(1000, 9, 80) == 191
    result = garbage_collect([img(0, 500)], set(), capacity=1000, available=9, high=100, low=80, max_age=HOUR, tracking_since=T - MINUTE)
    assert result.usage_before == 100
    assert result.threshold_hit
    assert result.bytes_to_free == 191
    assert ids(result.space) == ["image-0"]
    assert policy.usage_percent(1000, 10) == 99  # 1% free: no space GC at High 100


def test_d03_available_above_capacity_is_clamped():
    assert policy.usage_percent(1000, 1200) == 0
    result = garbage_collect([img(0)], set(), capacity=1000, available=1200, high=90, low=80)
    assert result.usage_before == 0
    assert not result.threshold_hit
    assert result.removals == []


@pytest.mark.parametrize("capacity", [None, 0])
def test_d04_capacity_zero_is_refused(capacity):
    result = garbage_collect([img(0)], set(), capacity=capacity, available=0)
    assert result.error == "invalid capacity 0 on image filesystem"
    assert result.removals == []


def _aged(last_used):
    return [dict(img(0), first_detected=Z, last_used=last_used)]


def test_d05_max_age_is_strict():
    free_time = T
    # uptime (tracking_since) 2m > MaxAge 1m: the pass runs
    old, rest = policy.age_pass(_aged(free_time - MINUTE), free_time, MINUTE, free_time - 2 * MINUTE)
    assert old == [] and ids(rest) == ["image-0"]
    old, rest = policy.age_pass(_aged(free_time - MINUTE - 1), free_time, MINUTE, free_time - 2 * MINUTE)
    assert ids(old) == ["image-0"] and rest == []


def test_d06_uptime_equal_to_max_age_skips_the_age_pass():
    free_time = T
    old, rest = policy.age_pass(_aged(Z), free_time, MINUTE, free_time - MINUTE)
    assert old == [] and ids(rest) == ["image-0"]
    old, rest = policy.age_pass(_aged(Z), free_time, MINUTE, free_time - MINUTE - 1)
    assert ids(old) == ["image-0"]


# --- our own rules ---------------------------------------------------------------------------------------------------


def test_eviction_order_ties_broken_by_image_id():
    # equal last_used and first_detected: the kubelet's order is unspecified; ours is by image id
    images = [image("image-b"), image("image-c"), image("image-a")]
    records = policy.detect({}, images, set(), T, T)
    assert ids(policy.eviction_order(images, records)) == ["image-a", "image-b", "image-c"]
    # last_used and first_detected still come first
    records["image-c"]["first_detected"] = T - 1
    assert ids(policy.eviction_order(images, records)) == ["image-c", "image-a", "image-b"]
    records["image-b"]["last_used"] = T - 1
    assert ids(policy.eviction_order(images, records)) == ["image-c", "image-a", "image-b"]
    result = delete_unused(images, {}, set(), T, min_age=0)
    assert ids(result.space) == ["image-a", "image-b", "image-c"]


def test_max_removals_truncates_prune():
    images = [img(0), img(1), img(2)]
    result = plan(images, policy.detect({}, images, set(), T, T), "prune", T, None, None, 85, 80, 0, 0, max_removals=2)
    assert ids(result.space) == ["image-0", "image-1"]
    assert ids(result.eligible) == ["image-0", "image-1", "image-2"]
    assert result.kept["not_needed"] == 1


def test_max_removals_truncates_age_then_space():
    images = [img(n, 100) for n in range(4)]
    records = policy.detect({}, images, set(), T - 3 * HOUR, T - 3 * HOUR)
    records["image-0"]["last_used"] = T - 2 * HOUR  # old
    records["image-1"]["last_used"] = T - 2 * HOUR  # old
    records["image-2"]["last_used"] = T - 1  # recent, not old
    records["image-3"]["last_used"] = T - 1
    common = dict(mode="threshold", free_time=T, capacity=1000, available=50, high=90, low=80, min_age=0, max_age=HOUR, tracking_since=T - 2 * HOUR)
    full = plan(images, records, **common)
    assert ids(full.age) == ["image-0", "image-1"] and ids(full.space) == ["image-2", "image-3"]
    cases = {
        0: ([], []),
        1: (["image-0"], []),
        2: (["image-0", "image-1"], []),
        3: (["image-0", "image-1"], ["image-2"]),
        4: (["image-0", "image-1"], ["image-2", "image-3"]),
    }
    for limit, (age, space) in cases.items():
        result = plan(images, records, max_removals=limit, **common)
        assert (ids(result.age), ids(result.space)) == (age, space), limit
        assert result.kept["not_needed"] == 4 - limit
        assert sum(result.kept.values()) == left(images, result)


def _mixed():
    """One image per kept reason (two for in_use), and two eligible images."""
    free_time = T
    images = [
        image("a-used", in_use=True),
        image("b-used-pinned", in_use=True, pinned=True),  # first reason wins: in_use
        image("c-pinned", pinned=True),
        image("d-pause", sandbox_image=True),
        image("e-kept", repo_tags=["registry.example/keep/tool:1"]),
        image("f-young"),
        image("g-recent"),
        image("h-old", size=200),
        image("i-older", size=200),
    ]
    records = {i["id"]: {"first_detected": free_time - HOUR, "last_used": free_time - 30 * MINUTE} for i in images}
    records["f-young"] = {"first_detected": free_time - 30 * SECOND, "last_used": Z}
    records["g-recent"]["last_used"] = free_time  # the ledger saw it in use at free_time
    records["i-older"]["last_used"] = free_time - 40 * MINUTE

    def keep(img_):
        return any(t.startswith("registry.example/keep/") for t in img_["repo_tags"])

    return images, records, dict(free_time=free_time, min_age=MINUTE, keep=keep)


def test_kept_reasons_on_a_mixed_example():
    images, records, common = _mixed()
    # cap 1000, avail 50: usage 95 >= 90, 150 bytes to free; i-older (200) is enough, h-old is not needed
    result = plan(images, records, "threshold", capacity=1000, available=50, high=90, low=80, max_age=0, **common)
    assert ids(result.space) == ["i-older"]
    assert ids(result.eligible) == ["i-older", "h-old"]
    assert result.kept == {"in_use": 2, "pinned": 1, "sandbox": 1, "keep_list": 1, "too_young": 1, "recently_used": 1, "not_needed": 1}
    assert sum(result.kept.values()) == left(images, result) == 8


@pytest.mark.parametrize(
    "mode, available, max_age, max_removals",
    [
        ("prune", None, 0, None),
        ("prune", None, 0, 1),
        ("threshold", 50, 0, None),
        ("threshold", 900, 0, None),
        ("threshold", 900, 20 * MINUTE, None),
        ("threshold", 50, 20 * MINUTE, None),
        ("threshold", 50, 20 * MINUTE, 1),
        ("threshold", 50, 20 * MINUTE, 0),
        ("threshold", 0, 35 * MINUTE, 2),
        ("threshold", 0, 0, 1),
    ],
)
def test_kept_reasons_add_up(mode, available, max_age, max_removals):
    images, records, common = _mixed()
    capacity = None if mode == "prune" else 1000
    result = plan(images, records, mode, capacity=capacity, available=available, high=90, low=80, max_age=max_age,
                  tracking_since=T - 2 * HOUR, max_removals=max_removals, **common)
    assert set(result.kept) == set(policy.KEPT_REASONS)
    assert sum(result.kept.values()) == left(images, result)
    assert len(set(ids(result.removals))) == len(result.removals)
    if max_removals is not None:
        assert len(result.removals) <= max_removals


# --- issue 12: the kubelet's behaviour where it differed ---------------------------------------------------------------


def test_high_100_and_no_max_age_disable_threshold_mode_even_at_full_usage():
    # StartGarbageCollection never starts image GC with HighThresholdPercent 100 and MaxAge 0
    result = garbage_collect([img(0), img(1)], set(), capacity=1000, available=0, high=100, low=80)
    assert result.disabled
    assert result.removals == [] and not result.threshold_hit
    assert result.kept["not_needed"] == 2
    # with a max age, GC runs (and at 100 % usage the threshold pass too)
    result = garbage_collect([img(0), img(1)], set(), capacity=1000, available=0, high=100, low=80, max_age=HOUR, min_age=0)
    assert not result.disabled and result.threshold_hit
    # prune (DeleteUnusedImages) is not affected
    assert ids(delete_unused([img(0)], {}, set(), T, min_age=0).space) == ["image-0"]


def test_capacity_zero_still_plans_the_age_pass():
    records = {"image-0": {"first_detected": Z, "last_used": Z, "last_possible_use": Z}}
    result = plan([img(0)], records, "threshold", T, 0, 0, 85, 80, 0, HOUR, tracking_since=T - 2 * HOUR)
    assert ids(result.age) == ["image-0"]
    assert result.error == "invalid capacity 0 on image filesystem"


def test_last_possible_use_is_the_first_run_that_saw_the_image_unused():
    run1, run2, run3 = T, T + HOUR, T + 5 * HOUR
    r1 = policy.detect({}, [img(0)], {"image-0"}, run1, run1)
    assert r1["image-0"]["last_used"] == run1 and r1["image-0"]["last_possible_use"] == run1
    # the container went away just before run 2: the image may have been used until then
    r2 = policy.detect(r1, [img(0)], set(), run2, run2)
    assert r2["image-0"]["last_used"] == run1  # the kubelet's last_used, for the LRU order
    assert r2["image-0"]["last_possible_use"] == run2
    r3 = policy.detect(r2, [img(0)], set(), run3, run3)
    assert r3["image-0"]["last_possible_use"] == run2  # later unused sightings do not move it
    order = policy.eviction_order([img(0)], r3)
    # max age 4h: 5h since run 1 (the kubelet's last_used would let it go) but only 4h since run 2: kept
    old, rest = policy.age_pass(order, run3, 4 * HOUR, T - 10 * HOUR)
    assert old == [] and ids(rest) == ["image-0"]
    old, rest = policy.age_pass(order, run3 + 1, 4 * HOUR, T - 10 * HOUR)
    assert ids(old) == ["image-0"]


def test_an_image_first_seen_unused_may_have_been_used_just_before():
    records = policy.detect({}, [img(0)], set(), T, T)
    assert records["image-0"]["last_used"] == Z and records["image-0"]["last_possible_use"] == T
    order = policy.eviction_order([img(0)], records)
    assert policy.age_pass(order, T + HOUR, HOUR, T - 10 * HOUR)[0] == []
    assert ids(policy.age_pass(order, T + HOUR + 1, HOUR, T - 10 * HOUR)[0]) == ["image-0"]


def test_records_without_last_possible_use_count_their_last_sighting_as_in_use():
    old = {"image-0": {"first_detected": Z, "last_used": T}, "image-1": {"first_detected": T - HOUR, "last_used": Z}}
    records = policy.detect(old, [img(0), img(1)], set(), T + HOUR, T + HOUR)
    assert records["image-0"]["last_possible_use"] == T + HOUR
    assert records["image-1"]["last_possible_use"] == T - HOUR


# -- the inode pass (no kubelet equivalent) ------------------------------------------------------


def inode_plan(images, records, total, free, inodes_high=90, inodes_low=50, high=85, low=80, available=10**6, max_removals=None):
    opts = policy.PlanOptions("threshold", high, low, 0, 0, max_removals=max_removals, inodes_high=inodes_high, inodes_low=inodes_low)
    return policy.plan(images, records, opts, T, 10**6, available, inodes=(total, free))


def test_inode_targets_use_the_kubelet_usage_formula_over_inodes():
    # usage = 100 - floor(free*100/total) <= low  <=>  free >= ceil(total*(100-low)/100)
    assert policy.target_inodes_free(1000, 50) == 500
    assert policy.target_inodes_free(999, 50) == 500  # 499 free would floor to 49 %: usage 51
    assert policy.inodes_to_free(1000, 100, 50) == 400
    assert policy.inode_estimate(1000, 8) == 125 and policy.inode_estimate(10, 0) == 0


def test_inode_pass_plans_the_byte_eviction_order_after_the_byte_pass():
    images = [img(n, 10) for n in range(8)] + [img("used", 10, in_use=True), img("young", 10)]
    records = {i["id"]: {"first_detected": Z, "last_used": Z} for i in images}
    records["image-3"] = {"first_detected": Z, "last_used": T - HOUR}  # used an hour ago: evicted last
    records["image-young"] = {"first_detected": T, "last_used": Z}
    opts = policy.PlanOptions("threshold", 85, 80, MINUTE, 0, inodes_high=90, inodes_low=50)
    result = policy.plan(images, records, opts, T, 10**6, 10**6, inodes=(1000, 50))
    assert not result.threshold_hit and result.inode_hit
    assert result.inodes_usage_before == 95 and result.inodes_to_free == 450
    assert result.inode_estimate == 95  # 950 used / 10 images
    # 5 x 95 >= 450; in eviction order: never used (by id), then image-3; in use and too young never
    assert ids(result.inode_space) == ["image-0", "image-1", "image-2", "image-4", "image-5"]
    assert result.kept["in_use"] == 1 and result.kept["too_young"] == 1 and result.kept["not_needed"] == 3
    assert not result.inodes_estimated_short and ids(result.removals) == ids(result.inode_space)


def test_inode_pass_off_below_the_high_mark_without_thresholds_and_in_prune_mode():
    images = [img(n, 10) for n in range(4)]
    records = {i["id"]: {"first_detected": Z, "last_used": Z} for i in images}
    below = inode_plan(images, records, 1000, 110)  # 89 %
    assert below.inodes_usage_before == 89 and not below.inode_hit and below.removals == []
    off = inode_plan(images, records, 1000, 0, inodes_high=None, inodes_low=None)
    assert off.inodes_usage_before == 100 and not off.inode_hit and off.removals == []
    opts = policy.PlanOptions("prune", 85, 80, 0, 0, inodes_high=90, inodes_low=50)
    prune = policy.plan(images, records, opts, T, 10**6, 10**6, inodes=(1000, 0))
    assert not prune.inode_hit and ids(prune.space) == ids(images) and prune.inode_space == []


def test_inode_pass_takes_images_the_byte_pass_left_and_caps_and_shortfalls():
    images = [img(n, 100) for n in range(4)]
    records = {i["id"]: {"first_detected": Z, "last_used": Z} for i in images}
    # bytes: 10**6 capacity, 150000 available (85 %) -> 50000 to free: image-0 alone is not enough, all four are planned
    both = inode_plan(images, records, 100, 0, available=150000)
    assert both.threshold_hit and both.estimated_short and ids(both.space) == ids(images)
    assert both.inode_hit and both.inode_space == [] and both.inodes_estimated_short
    capped = inode_plan(images, records, 100, 0, max_removals=1)
    assert ids(capped.inode_space) == ["image-0"] and capped.kept["not_needed"] == 3
    # high 100 without max age turns the byte pass off, not the inode pass
    disabled = inode_plan(images, records, 100, 0, high=100, low=99)
    assert disabled.disabled and ids(disabled.inode_space) == ["image-0", "image-1"]  # 25 each, 50 to free
