# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""The kubelet's image garbage collection as pure functions (no I/O, no clock, no Ansible).

Follows pkg/kubelet/images/image_gc_manager.go:

* ``detect``            = detectImages: per-image first_detected / last_used records;
* ``eviction_order``    = imagesInEvictionOrder: unprotected images, last_used then first_detected
                          ascending, then image id (the kubelet leaves that tie unspecified);
* ``age_pass``          = freeOldImages (MaxAge, strict ``>``, gated on "uptime" > MaxAge);
* ``space_eligible``    = freeSpace's filter (skip used-this-run, skip first_detected younger than
                          MinAge); ``plan`` takes eligible images in order until freed >= bytes to free;
* ``plan``              = GarbageCollect (mode threshold) or DeleteUnusedImages (mode prune); mode listed (no kubelet
                          equivalent, see listed_pass) removes the images named by patterns that nothing protects;
* ``space_targets``     = no kubelet equivalent for the byte targets: which of the percent and byte targets are hit,
                          and the available bytes the threshold pass frees up to (the stricter target wins);
* ``inode_pass``        = no kubelet equivalent: with inode thresholds, the eligible images the byte
                          pass left, in the same order, until the estimated inodes freed reach the need.

Times are integer nanoseconds since the epoch; 0 means "never" (Go's zero time).
"""

from __future__ import annotations

from ansible_collections.kubenode.gc.plugins.module_utils.cri._snapshot import usage_percent

KEPT_REASONS = ("in_use", "pinned", "sandbox", "keep_list", "too_young", "recently_used", "not_needed")


def dedupe(images):
    """One entry per image id, the last listed one winning (detectImages overwrites size/pinned)."""
    by_id = {}
    for img in images:
        by_id.pop(img["id"], None)
        by_id[img["id"]] = img
    return list(by_id.values())


def detect(records, images, in_use, detect_time, now, first_seen_hints=None):
    """detectImages: return the new records for ``images``.

    records: {id: {"first_detected": ns, "last_used": ns}} from before (not modified).
    in_use: ids referenced by any container. ``now`` (>= detect_time) becomes their last_used.
    first_seen_hints: {id: ns} an earlier first_detected for images never recorded before (for
    example the creation time of the oldest container using it); never later than detect_time.
    Records of images no longer listed are dropped.

    Each record also gets ``last_possible_use``: the latest time the image could have been used, given
    that it is seen only at runs. In use now: now. Seen unused for the first time after a run that saw it
    in use (or at its first detection): this run, since its container may have gone just before it.
    Otherwise it stays. The max-age pass judges by it, so it never removes an image that could have been
    used within max_age; ``last_used`` (the kubelet's, for the LRU order) keeps the earlier bound.
    """
    hints = first_seen_hints or {}
    new = {}
    for img in images:
        rec = records.get(img["id"])
        if rec is None:
            first = min(detect_time, hints.get(img["id"], detect_time))
            rec = {"first_detected": first, "last_used": 0, "last_possible_use": detect_time}
        else:
            rec = dict(rec)
            if rec.get("last_possible_use") is None:
                # a record from before last_possible_use was kept: assume its last sighting was in use
                rec["last_possible_use"] = rec["last_used"] or rec["first_detected"]
        if img["id"] in in_use:
            rec["last_used"] = rec["last_possible_use"] = now
        elif rec["last_used"] and rec["last_possible_use"] <= rec["last_used"]:
            rec["last_possible_use"] = detect_time
        new[img["id"]] = rec
    return new


def protection(img, keep):
    """Why an image may never be removed (first reason wins), or None.

    The sandbox image is ``sandbox`` even when the runtime also reports it pinned (containerd 1.7.3+,
    2.x and cri-o do): that is the truer reason."""
    if img.get("in_use"):
        return "in_use"
    if img.get("sandbox_image"):
        return "sandbox"
    if img.get("pinned"):
        return "pinned"
    if keep is not None and keep(img):
        return "keep_list"
    return None


def eviction_order(images, records, keep=None, kept=None):
    """imagesInEvictionOrder: unprotected images sorted by (last_used, first_detected, id).

    Protected images are counted into ``kept`` by reason.
    """
    out = []
    for img in images:
        reason = protection(img, keep)
        if reason:
            if kept is not None:
                kept[reason] += 1
            continue
        rec = records[img["id"]]
        out.append(dict(img, first_detected=rec["first_detected"], last_used=rec["last_used"],
                        last_possible_use=max(rec["last_used"], rec.get("last_possible_use") or 0)))
    out.sort(key=lambda i: (i["last_used"], i["first_detected"], i["id"]))
    return out


def age_pass(candidates, free_time, max_age, tracking_since):
    """freeOldImages: (to remove for age, the rest in order).

    The pass runs only when max_age > 0 and last-use tracking (the kubelet's uptime; here the
    ledger's age) is strictly older than max_age. An image goes when free_time - last_possible_use >
    max_age (the kubelet's last_used, bounded by what runs could see; see detect). first_detected and
    min_age are not consulted, as upstream.
    """
    if max_age <= 0 or free_time - tracking_since <= max_age:
        return [], list(candidates)
    old, rest = [], []
    for img in candidates:
        (old if free_time - img.get("last_possible_use", img["last_used"]) > max_age else rest).append(img)
    return old, rest


def _sort_eligible(result, images, free_time, min_age):
    """Append each of ``images`` freeSpace may delete to ``result.eligible``; count the others by their kept reason."""
    for img in images:
        reason = space_eligible(img, free_time, min_age)
        if reason:
            result.kept[reason] += 1
            if reason == "too_young":
                result.too_young.append(img)
        else:
            result.eligible.append(img)


def space_eligible(img, free_time, min_age):
    """None when freeSpace may delete the image, else the kept reason."""
    if img["last_used"] >= free_time:
        return "recently_used"
    if free_time - img["first_detected"] < min_age:
        return "too_young"
    return None


def target_available(capacity, low):
    """Available bytes at which usage is down to ``low``: floor(capacity*(100-low)/100)."""
    return (capacity * (100 - low)) // 100


def bytes_to_free(capacity, available, low):
    """amountToFree = floor(capacity*(100-low)/100) - available (may be <= 0)."""
    return target_available(capacity, low) - min(available, capacity)


def space_targets(capacity, available, high, low, free_bytes_high=None, free_bytes_low=None):
    """The threshold pass's targets: (triggered, target, target_available).

    ``triggered`` lists the targets hit, in the order ``percent`` (usage at or above ``high``; ``high`` None: no percent
    target) and ``bytes`` (available bytes strictly below ``free_bytes_high``; None: no byte target). Each target hit asks
    for its low mark: ``target_available(capacity, low)`` available bytes, or ``free_bytes_low``. The stricter wins: the
    one that asks for more available bytes (percent on a tie) is ``target``, and ``target_available`` is what it asks.
    Nothing hit: ([], None, None)."""
    avail = min(available, capacity)
    asks = []
    if high is not None and usage_percent(capacity, available) >= high:
        asks.append(("percent", target_available(capacity, low)))
    if free_bytes_high is not None and avail < free_bytes_high:
        asks.append(("bytes", free_bytes_low))
    if not asks:
        return [], None, None
    target, wanted = asks[0]
    for name, amount in asks[1:]:
        if amount > wanted:
            target, wanted = name, amount
    return [a[0] for a in asks], target, wanted


def target_inodes_free(total, low):
    """Free inodes at which inode usage (the kubelet's usage formula over inodes) is down to ``low``: ceil(total*(100-low)/100)."""
    return -((-total * (100 - low)) // 100)


def inodes_to_free(total, free, low):
    """Inodes still to free for inode usage to be at or below ``low`` (may be <= 0)."""
    return target_inodes_free(total, low) - min(free, total)


def inode_estimate(inodes_used, image_count):
    """Estimated inodes one image holds: the filesystem's used inodes shared evenly among the listed images.

    The CRI reports no per-image inode count; the runtime's own files count in, so this over-estimates
    what one removal frees and the plan under-removes; the real run measures."""
    return inodes_used // image_count if image_count > 0 else 0


class Plan:
    """What a run would remove, in order, and why the rest is kept."""

    def __init__(self):
        self.age = []  # removed by the age pass
        self.space = []  # removed by the space pass (threshold) or prune, in order
        self.eligible = []  # every space-eligible image in order (unmeasured, the kubelet goes past a failed removal)
        self.too_young = []  # candidates kept only because image_gc first saw them less than min_age ago
        self.kept = dict.fromkeys(KEPT_REASONS, 0)
        self.usage_before = None
        self.available_before = None  # available bytes of the image filesystem (clamped to its capacity), None without capacity
        self.bytes_to_free = 0
        self.threshold_hit = False
        self.triggered_by = []  # the space targets hit: "percent", "bytes" (space_targets())
        self.target = None  # the target whose low mark sets bytes_to_free: "percent" or "bytes", None when none was hit
        self.target_available = None  # available bytes the threshold pass frees up to, None when no target was hit
        self.estimated_short = False  # the sizes of every eligible image do not reach bytes_to_free
        self.disabled = False  # threshold mode with high 100 and no max age: the kubelet never starts image GC
        self.error = None  # the kubelet's error after the age pass (invalid capacity), or None
        self.inodes_usage_before = None  # inode usage percent, None when the filesystem reports no inodes
        self.inodes_to_free = 0
        self.inode_hit = False  # inode thresholds set and inode usage at or above the high one
        self.inode_estimate = 0  # estimated inodes per image (inode_estimate())
        self.inode_space = []  # planned by the inode pass, in order, after the byte pass's choice
        self.inodes_estimated_short = False
        self.listed_kept = []  # mode listed: (image, reason) for each image a pattern names that is protected

    @property
    def removals(self):
        return self.age + self.space + self.inode_space


class PlanOptions:
    """The policy a plan applies: ``mode`` (threshold or prune), ``high``/``low`` threshold percents (None: no percent
    target), ``min_age`` and ``max_age`` in ns, ``keep`` (a predicate over images, or None), ``max_removals`` (None: no
    cap), ``inodes_high``/``inodes_low`` inode threshold percents (None: no inode pass) and
    ``free_bytes_high``/``free_bytes_low`` byte targets in available bytes (None: no byte target); ``listed`` (a
    predicate over images, mode listed only) names the images to remove."""

    __slots__ = ("mode", "high", "low", "min_age", "max_age", "keep", "max_removals", "inodes_high", "inodes_low", "free_bytes_high",
                 "free_bytes_low", "listed")

    def __init__(self, mode, high, low, min_age, max_age, keep=None, max_removals=None, inodes_high=None, inodes_low=None,
                 free_bytes_high=None, free_bytes_low=None, listed=None):
        self.mode, self.high, self.low, self.min_age, self.max_age = mode, high, low, min_age, max_age
        self.keep, self.max_removals, self.listed = keep, max_removals, listed
        self.inodes_high, self.inodes_low = inodes_high, inodes_low
        self.free_bytes_high, self.free_bytes_low = free_bytes_high, free_bytes_low


def plan(images, records, opts, free_time, capacity, available, tracking_since=0, inodes=None):
    """GarbageCollect (``threshold``) or DeleteUnusedImages (``prune``) without side effects.

    images: deduplicated snapshot images with in_use / pinned / sandbox_image flags.
    records: detect()'s output for free_time. opts: a PlanOptions. Returns a Plan.
    When the image filesystem capacity is 0 the age pass is still planned and ``error`` holds the
    kubelet's invalid-capacity error (the run fails after the age pass). With ``high`` 100 (or no
    percent target) and no ``max_age`` in threshold mode the percent target is off, as the kubelet's
    StartGarbageCollection never starts image GC then; without a byte target the byte pass is not
    planned (``disabled``); the inode pass, which the kubelet lacks, still is.
    The threshold pass starts when any space target is hit and frees to the stricter one (space_targets()).
    ``inodes`` is (total, free) of the image filesystem (statvfs), or None; with the inode thresholds
    set, threshold mode plans the inode pass after the byte pass (see inode_pass()).
    """
    mode, high, low, min_age, max_age = opts.mode, opts.high, opts.low, opts.min_age, opts.max_age
    keep, max_removals = opts.keep, opts.max_removals
    result = Plan()
    candidates = eviction_order(images, records, keep, result.kept)
    if capacity:
        result.available_before = min(available, capacity)
    if mode == "listed":
        return _cap(listed_pass(result, images, candidates, opts.listed, keep, capacity, available), max_removals)

    total, free = inodes if inodes else (0, 0)
    if total:
        result.inodes_usage_before = usage_percent(total, free)
    inode_gc = mode != "prune" and opts.inodes_high is not None and total > 0
    bytes_on = opts.free_bytes_high is not None
    if mode != "prune" and (high is None or high >= 100) and max_age <= 0:
        high = None  # the kubelet never starts image GC: no percent target
    if mode != "prune" and high is None and not bytes_on and max_age <= 0:
        result.disabled = True
        if capacity:
            result.usage_before = usage_percent(capacity, available)
        if not inode_gc:
            result.kept["not_needed"] += len(candidates)
            return result
        _sort_eligible(result, candidates, free_time, min_age)
        inode_pass(result, opts, total, free, len(images), inodes_used=total - free)
        return _cap(result, max_removals)
    if mode == "prune":
        _sort_eligible(result, candidates, free_time, min_age)
        result.space = list(result.eligible)
        if capacity:
            result.usage_before = usage_percent(capacity, available)
    else:
        old, rest = age_pass(candidates, free_time, max_age, tracking_since)
        result.age = old
        if not capacity:
            result.error = "invalid capacity 0 on image filesystem"
            result.kept["not_needed"] += len(rest)
            return _cap(result, max_removals)
        result.usage_before = usage_percent(capacity, available)
        triggered, target, wanted = space_targets(capacity, available, high, low, opts.free_bytes_high, opts.free_bytes_low)
        if triggered:
            result.threshold_hit = True
            result.triggered_by, result.target, result.target_available = triggered, target, wanted
            result.bytes_to_free = wanted - min(available, capacity)
            freed = 0
            done = False
            for img in rest:
                reason = space_eligible(img, free_time, min_age)
                if reason:
                    result.kept[reason] += 1
                    continue
                result.eligible.append(img)
                if done:
                    continue
                result.space.append(img)
                freed += img["size"]
                if freed >= result.bytes_to_free:
                    done = True
            result.estimated_short = freed < result.bytes_to_free
        else:
            _sort_eligible(result, rest, free_time, min_age)  # not chosen: _cap counts them as not needed
        if inode_gc:
            inode_pass(result, opts, total, free, len(images), inodes_used=total - free)

    return _cap(result, max_removals)


def listed_pass(result, images, candidates, listed, keep, capacity, available):
    """Mode listed (no kubelet equivalent): every image ``listed`` names that nothing protects goes, in eviction order,
    whatever the usage, the thresholds and the ages. A named image that is protected (protection(): in use by a container in
    any state, sandbox, pinned, keep list) stays and is in ``listed_kept`` with its reason; images no pattern names are not
    needed."""
    if capacity:
        result.usage_before = usage_percent(capacity, available)
    result.listed_kept = [(img, protection(img, keep)) for img in images if listed(img) and protection(img, keep)]
    result.eligible = [img for img in candidates if listed(img)]
    result.space = list(result.eligible)
    result.kept["not_needed"] += len(candidates) - len(result.eligible)
    return result


def inode_pass(result, opts, total, free, image_count, inodes_used):
    """The inode pass (no kubelet equivalent): when inode usage is at or above ``opts.inodes_high``, plan the
    space-eligible images the byte pass did not choose, in the same eviction order, until their estimated
    inodes (inode_estimate() each) reach the inodes to free down to ``opts.inodes_low``."""
    result.inodes_usage_before = usage_percent(total, free)
    if result.inodes_usage_before < opts.inodes_high:
        return
    result.inode_hit = True
    result.inodes_to_free = inodes_to_free(total, free, opts.inodes_low)
    result.inode_estimate = inode_estimate(inodes_used, image_count)
    chosen = {i["id"] for i in result.space}
    freed = 0
    for img in result.eligible:
        if freed >= result.inodes_to_free:
            break
        if img["id"] in chosen:
            continue
        result.inode_space.append(img)
        freed += result.inode_estimate
    result.inodes_estimated_short = freed < result.inodes_to_free


def _cap(result, max_removals):
    """Apply max_removals; eligible images past the stop point (or the cap) are kept as not needed."""
    over_age = []
    if max_removals is not None:
        result.age, over_age = result.age[:max_removals], result.age[max_removals:]
        result.space = result.space[: max(0, max_removals - len(result.age))]
        result.inode_space = result.inode_space[: max(0, max_removals - len(result.age) - len(result.space))]
    chosen = {i["id"] for i in result.space + result.inode_space}
    result.kept["not_needed"] += len(over_age) + sum(1 for i in result.eligible if i["id"] not in chosen)
    return result
