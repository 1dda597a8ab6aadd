#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: image_gc
short_description: Garbage-collect unused container images with the kubelet's semantics over the CRI
version_added: 0.1.0
description:
  - Does what the kubelet's image garbage collector does, on demand. With O(mode=threshold) (the kubelet's periodic GC),
    a max-age pass first removes images not used for longer than O(max_age); then, when the image filesystem usage is at
    or above O(high_threshold_percent), least-recently-used images are removed until usage is down to
    O(low_threshold_percent). With O(mode=prune) (the kubelet's C(DeleteUnusedImages)), every eligible unused image goes,
    whatever the disk usage.
  - Usage is the kubelet's C(100 - floor(available * 100 / capacity)) over C(statvfs) of the image filesystem the runtime
    reports, so GC starts exactly when usage equals the high threshold.
  - Eviction order is C(last_used) ascending, then C(first_detected), then image id (the kubelet leaves the last tie
    unspecified; here it is deterministic).
  - Never removed, whatever the options, images that any container in any state references (by image id, image ref,
    tag or repo digest); pinned images; the runtime's sandbox (pause) image even when the runtime reports it unpinned
    (containerd 1.6 does); images matching O(keep_images); and images found in use during the run. The sandbox image
    counts as C(sandbox) in RV(kept) also where the runtime reports it pinned (containerd 1.7.3+, 2.x, cri-o).
  - Differences from the kubelet, on purpose.
    The kubelet keeps C(first_detected) and C(last_used) in memory and loses them on restart; this module keeps them in a
    ledger file (O(ledger_path)) across runs, so O(min_age) and O(max_age) mean the same after any restart.
    The max-age pass waits until last-use tracking (the ledger) is older than O(max_age), as the kubelet waits for its
    own uptime; without a ledger it therefore never runs, exactly like a freshly started kubelet.
    For an image seen for the first time while a container uses it, C(first_detected) is the creation time of the oldest
    such container rather than now (the image must have existed then).
    The kubelet sees images every 5 minutes; this module only at its runs, so an image's last use may lie anywhere before
    the first run that sees it unused. The max-age pass therefore judges an image by the latest time it could have been
    used - the run that saw it in use, or else the first run that saw it unused after that (or that first detected it) -
    and never removes an image that could have been used within O(max_age). Unlike the kubelet's, it thus keeps a
    freshly pulled, never used image for O(max_age) after the first run that sees it. The least-recently-used order of
    the threshold pass keeps the kubelet's C(last_used) (the last run that saw the image in use).
    The kubelet stops when the summed image sizes reach the amount to free, which over-counts layers shared between
    images; with O(measure_freed=true) the filesystem is measured again after each batch and the run stops when the
    measured usage is at or below the low threshold. It never goes past the size-based plan, the list check mode returns,
    so every image a real run removes is in that plan; when the measured usage is still above the low threshold at its
    end, the run says so (RV(insufficient)). A batch that frees no measurable space ends the pass with a warning (the
    runtime frees space lazily, or the layers are shared with images in use), so it never removes more than needed.
    Containers are listed again right before each batch of at most O(parallelism) new removals; an image that came into
    use since the plan is kept and reported (the kubelet has this race, kubernetes/kubernetes#123631). The window in
    which a new container could start using an image unnoticed is therefore bounded by O(parallelism) removals (see
    there).
    The keep list has no kubelet equivalent (kubernetes/kubernetes#109936).
    The inode pass (O(inodes_high_threshold_percent)) has none either; the kubelet's image GC looks only at bytes
    (kubernetes/kubernetes issues 41033 and 32400), and only its eviction manager reacts to C(imagefs.inodesFree), by
    evicting pods.
  - Byte targets (O(free_bytes_high) and O(free_bytes_low), no kubelet setting - kubernetes/enhancements#4739). Percent
    thresholds fire late on large disks (at 85 % of 2 TB, 300 GB are still free); with byte targets the threshold pass also
    starts when fewer than O(free_bytes_high) bytes are available on the image filesystem (C(statvfs) C(f_bavail), strictly
    below), and frees until O(free_bytes_low) bytes are available. They work alone (set neither percent option and no
    percent target applies) or with the percentages; then each target whose start mark is crossed asks for its low mark,
    and the stricter wins - the one that asks for more available bytes (the percent target on a tie). RV(triggered_by)
    names the targets that were crossed and RV(target) the one the run freed to. The same measured stop and
    no-over-deletion rule apply (O(measure_freed)).
  - Inode pass (O(mode=threshold) with O(inodes_high_threshold_percent) and O(inodes_low_threshold_percent) set). Inode usage
    is the kubelet's usage formula over C(statvfs) inodes of the image filesystem, C(100 - floor(f_ffree * 100 / f_files)).
    When it is at or above O(inodes_high_threshold_percent) at the start of the run, after the max-age and byte threshold
    passes the eligible images they left (the same eligibility and eviction order as the byte pass) are removed in measured
    batches until C(statvfs) shows inode usage at or below O(inodes_low_threshold_percent). The CRI reports no inode count
    per image, so the first batch is one image and later batches are sized by the inodes measured so far; a batch that
    frees no inodes ends the pass with a warning. The inode pass always measures, whatever O(measure_freed), and runs
    also when O(high_threshold_percent=100) turns the byte pass off.
  - "Docker Engine (cri-dockerd): Docker runs containers the CRI does not list (C(docker run), compose, CI jobs). Their images
    are in use too (RV(kept) C(in_use); in RV(listed_kept) each such container is named by its Docker name, with no pod and
    C(outside_kubernetes=true)): the module lists every container of the engine the running cri-dockerd's
    C(--docker-endpoint) names (else C(DOCKER_HOST), else C(unix:///var/run/docker.sock)), with the node read and again
    before each batch, and uses that engine only when its data root is the image filesystem cri-dockerd reports. Without
    that list no image is judged unused: the run fails before removing anything. When Docker still refuses a removal
    because a container it started since the last list uses the image (its C(conflict ... must force) answer), the image
    is kept and reported as one that came into use during the run, never a failure; Docker removes the image's other tags
    before it refuses on the last one, which the warning says."
  - A removal is confirmed from the image list, never from the runtime's answer alone (cri-dockerd answers success for a
    name it removes nothing of). After the removals the images are listed once more, and an image the runtime answered
    for that is still listed is a failed removal (RV(errors)), not a removed one.
  - Every image name is reported in full (C(docker.io/library/busybox:1.36)), also where the runtime lists docker.io's
    images by their short names (Docker); Docker's C(<none>:<none>) placeholder is no name.
  - Images mounted as volumes (KEP-4639, C(ContainerStatus.mounts[].image)) by any container in any state are in use
    too (RV(kept) C(in_use)); containerd 2.x would remove them when asked, and the pod would break at its next restart.
    ListContainers does not carry mounts, so on runtimes that can mount images (containerd 2.1+, cri-o 1.31+, and any
    runtime not known to lack them; not containerd 1.x or cri-dockerd) the run makes one C(ContainerStatus) call per
    container (at most 32 in flight at once), and before each batch one per container created since the last look (a
    container's mounts never change). Cost per run - C(Version), C(Status), C(ImageFsInfo), C(ListPodSandbox) (where
    the sandbox image is not in C(Status)), C(ListImages) once, and once more after removals through C(RemoveImage) to
    confirm them; C(ListContainers) once plus once per batch (on Docker Engine also Docker's C(GET /info) once and
    C(GET /containers/json) once plus once per batch);
    C(ContainerStatus) once per container where image volumes exist; one C(RemoveImage) per removal, or, on the native
    removal path below, one containerd C(images.Delete) per image name, one lease C(Create) and C(Delete), and one more
    C(ListImages).
  - Native removal path (containerd 1.6, 1.7, 2.1, 2.2 and 2.3). The CRI's C(RemoveImage) deletes an image's records
    with one synchronous garbage collection per image. On these containerd versions, a max-age or prune pass of at least
    32 images instead deletes each image's records (its tags, digests and id) through containerd's own images API on the
    same socket, without a collection, then runs one synchronous collection for the whole pass (a transient lease
    deleted with C(sync), as M(kubenode.gc.storage_gc) does), then waits (5 seconds at most) until the CRI's
    C(ListImages) lists none of them; an image the CRI still lists then goes through C(RemoveImage). The containers are
    listed again before each batch, the plan, the ledger, the node lock and the results are the same as through the CRI.
    The CRI's image cache follows containerd's image events on these versions; the collection's integration tests prove
    it on each with images pulled through the CRI (C(tests/integration/test_image_gc_native.py) - the CRI stops listing
    the images at once, containerd keeps no record of them, lists them again when they are pulled again and a container
    starts from one, C(ImageFsInfo) reflects the freed bytes, the sandbox image and images in use are intact). Other
    containerd versions (2.0, and release lines after 2.3 until they are tested), cri-o, other runtimes, smaller passes
    and the measured threshold and inode passes (which measure after each batch) use the CRI.
  - The kubelet's pulled-image credential records (KEP-2535, C(<kubelet root>/image_manager/)) are never touched by any
    module of this collection; the kubelet prunes stale records itself. Deleting them would open preloaded images to
    every pod. The audit playbook reports their number and the C(KubeletEnsureSecretPulledImages) feature gate.
author:
  - kubenode.gc contributors (@kubenode)
extends_documentation_fragment:
  - kubenode.gc.node_cache
  - kubenode.gc.cri
  - kubenode.gc.cri.ACTIONGROUP_CRI
attributes:
  check_mode:
    description: Can run in check mode and return changed status prediction without modifying the target.
    support: full
    details:
      - Returns the plan (RV(removed) lists what would be removed, in order) and changes nothing, the ledger included.
      - A plan that cannot reach the low threshold returns RV(insufficient=true) and RV(target_reached=false) without the
        C(FreeDiskSpaceFailed) warning, since nothing has failed; the real run warns. The fleet audit turns the planned
        shortfall into a report finding (C(gc_insufficient)).
      - With O(measure_freed=true) the real run measures the disk after each batch, so it may stop earlier or go further
        than the size-based estimate check mode can give.
      - The inode pass in check mode is an estimate, since the CRI reports no inode count per image, so every image is taken to
        hold the filesystem's used inodes divided by the number of images listed (the runtime's own files included), and
        RV(inodes_usage_after) is estimated the same way. The real run measures with C(statvfs) and decides.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check mode), when in diff mode.
    support: full
    details:
      - Before and after lists of image ids with their tags.
  idempotent:
    description: When run twice in a row outside check mode, with the same arguments, the second run indicates no change.
    support: full
options:
  mode:
    description:
      - V(threshold) is the kubelet's periodic image GC (max-age pass, then the high/low threshold pass).
      - V(prune) is the kubelet's C(DeleteUnusedImages) (used under disk pressure) - every unused image older than
        O(min_age) goes, whatever the disk usage; O(max_age) and the thresholds are not used.
      - V(listed) removes the images O(images) names, from a node whatever its usage (a vulnerable or retired image that must
        go from every node; no kubelet equivalent). Every image a pattern matches goes unless a container in any state
        uses it (running or exited, the kubelet's rule; run M(kubenode.gc.container_gc) first to free images held only by
        dead containers), it is the sandbox image, pinned, or matched by O(keep_images). Thresholds, O(min_age) and
        O(max_age) do not matter. RV(listed_kept) says, for each matching image that stays, why - the containers using it
        (pod namespace and name, container name, running or not) or the rule; a pattern that matches a sandbox, pinned or
        keep-listed image is named in a warning. Check mode, diff, the ledger, the node lock and O(max_removals) work as in
        the other modes.
      - For a fleet, set C(kubenode_gc_remove_images) to the same patterns and run the playbooks - C(kubenode.gc.audit) shows
        per node and fleet-wide where each image is and which pods use it (finding C(listed_image_present), section
        C(listed_images) of the report), C(kubenode.gc.cleanup) (C(--check) first lists exactly what it removes) removes it
        after container GC wherever no container uses it, and a second audit shows the nodes where pods still run it.
    type: str
    choices: [threshold, prune, listed]
    default: threshold
  high_threshold_percent:
    description:
      - Image filesystem usage at or above which the threshold pass runs (kubelet C(imageGCHighThresholdPercent)).
      - Valid only when C(0 <= low < high <= 100).
      - When neither this nor O(low_threshold_percent) is set, the kubelet's defaults apply (V(85) and V(80)), unless
        O(free_bytes_high) is set; then there is no percent target. When only one of them is set, the other takes the
        kubelet's default.
      - V(100) with O(max_age=0s) turns O(mode=threshold) off, as it turns off the kubelet's image GC - nothing is removed,
        even at 100 % usage (the ledger still records what it sees). O(mode=prune) is not affected.
      - When the runtime reports an image filesystem capacity of 0, the max-age pass still runs and the task then fails with
        the kubelet's C(invalid capacity 0 on image filesystem).
    type: int
  low_threshold_percent:
    description:
      - Usage the threshold pass frees down to (kubelet C(imageGCLowThresholdPercent)).
      - Default as described under O(high_threshold_percent) (V(80) unless only byte targets are set).
    type: int
  free_bytes_high:
    description:
      - Start the threshold pass when fewer than this many bytes are available on the image filesystem (see the description).
      - A number of bytes, or a Kubernetes quantity that is a whole number of bytes such as V(50Gi) or V(80G), written in
        ASCII; at most 2^63-1 bytes (V(9223372036854775807)). A float, a negative amount or more than that fails naming the
        option and the value.
      - Set it together with O(free_bytes_low), or neither (the default, no byte target). Not used by O(mode=prune).
    type: raw
  free_bytes_low:
    description:
      - Available bytes the threshold pass frees up to when a byte target started it; must be at least O(free_bytes_high).
      - A number of bytes, or a quantity such as V(80Gi), as O(free_bytes_high).
    type: raw
  inodes_high_threshold_percent:
    description:
      - Inode usage of the image filesystem at or above which the inode pass runs (no kubelet setting; see the description).
      - Set it together with O(inodes_low_threshold_percent), or neither (the default, no inode pass). Valid only when
        C(0 <= low < high <= 100). Not used by O(mode=prune), which removes every eligible image anyway.
    type: int
  inodes_low_threshold_percent:
    description: Inode usage the inode pass frees down to.
    type: int
  min_age:
    description:
      - Images first detected less than this long ago are not removed by the threshold pass or by O(mode=prune)
        (kubelet C(imageMinimumGCAge)); an age equal to O(min_age) is old enough.
      - The age counts from the first time this module saw the image on the node (its ledger, O(ledger_path)). On a node
        it never saw every image is first seen now, so a run with the default O(min_age) removes nothing; such a run, and
        any run that removes nothing only because every candidate is younger than O(min_age), warns, naming O(min_age)
        and the first sightings.
      - A Go duration such as V(90s), V(2m) or V(1h30m).
    type: str
    default: 2m
  max_age:
    description:
      - Images not used for strictly longer than this are removed by the max-age pass of O(mode=threshold), whatever the
        disk usage (kubelet C(imageMaximumGCAge)). V(0s) turns the pass off. When set it must exceed O(min_age).
    type: str
    default: 0s
  keep_images:
    description:
      - Images never removed. Each entry is a full image id (V(sha256:...)), a short id (at least 12 hex digits), or a
        glob over tags and repo digests such as V(registry.k8s.io/*), V(*/coredns:*) or V(docker.io/library/busybox:1.36).
        Short names are matched in their normalised form too (V(busybox) is V(docker.io/library/busybox:latest)).
    type: list
    elements: str
    default: []
  images:
    description:
      - The images O(mode=listed) removes, written like O(keep_images) - a full image id, a short id (at least 12 hex
        digits), a reference with or without a registry (V(busybox:1.36) is V(docker.io/library/busybox:1.36); a name
        without a tag means V(:latest)), a repo digest (V(registry.example.com/app@sha256:...)) or a glob such as
        V(registry.example.com/app:*). An image matched through any of its tags or digests goes with all its tags.
      - Required with O(mode=listed) (at least one pattern, none empty); refused with the other modes.
    type: list
    elements: str
  ledger_path:
    description:
      - File (mode 0600) holding each image's C(first_detected) and C(last_used) across runs.
      - The empty string disables it; every image is then first detected now, like after a kubelet restart.
      - Must be absolute. A ledger that is a symbolic link, or in a directory that is one, is refused; a ledger that is not
        UTF-8 JSON of the expected shape fails the task with one sentence naming the file (it is never replaced silently);
        records with impossible timestamps are dropped with a warning. A ledger whose path goes through a directory or
        symbolic link another user owns (or a directory group or others may write) is refused, before anything is
        removed; check mode reads it with a warning. See the collection's Guarantees page.
    type: path
    default: /var/lib/kubenode-gc/image-ledger.json
  measure_freed:
    description:
      - Measure the image filesystem after each batch and stop the threshold pass when the measured usage is at or below
        O(low_threshold_percent). It never removes an image outside the size-based plan (what check mode returns); a
        batch that frees no measurable space ends the pass with a warning. With V(false), stop as the kubelet does, when
        the summed image sizes reach the amount to free (and, as the kubelet, go on past a removal that failed).
    type: bool
    default: true
  fail_on_insufficient:
    description:
      - When the threshold pass cannot reach the low threshold, fail the task instead of returning RV(insufficient=true)
        with a warning (both carry the kubelet's C(FreeDiskSpaceFailed) wording).
      - In check mode the shortfall is planned, not met, so there is no warning; RV(insufficient=true) says it, and this
        option fails the task all the same.
    type: bool
    default: false
  max_removals:
    description: Remove at most this many images in this run (a safety valve for waves). Unlimited when not set.
    type: int
  parallelism:
    description:
      - RemoveImage calls (images on the native removal path) in flight at most, and the most removals between two
        listings of the containers (the race re-check). containerd runs one content GC per RemoveImage and shares it among the calls waiting for it, so many
        calls in flight are much faster than a few. The prune and max-age passes keep the pipeline full (no pause between
        batches) and list the containers again before each O(parallelism) new calls, while earlier calls are still in
        flight.
      - 512 was chosen by measurement (C(benchmarks/image_gc_prune.py), C(benchmarks/gc_scale.py)). On containerd 1.6,
        500 unused images are pruned in-module in 0.19 s against 0.24 s with 256 and 0.39 s with 64; 2,000 in 1.3 s
        against 1.8 s with 256. containerd 2.x behaves the same, cri-o removes about 540 images a second at any setting.
      - The race window is bounded in removals - an image's RemoveImage starts at most O(parallelism) calls after the
        container list that found it unused, and at most 2 x O(parallelism) calls are ahead of it - which is about 0.2 s
        on containerd 1.6 with 500 to 2,000 images. Batches in the measured threshold and inode passes are sized to the
        remaining need and measured one after the other.
    type: int
    default: 512
  lock_timeout:
    description:
      - Seconds to wait for another kubenode.gc run (image_gc or container_gc) on the same node and runtime endpoint to
        finish before failing. A finite number, 0 or more.
      - The node lock is C(<sha256 of the socket's resolved path, 16 hex digits>.lock) in V(/run/kubenode-gc), a directory only
        root can create (made 0700 without following links, and used only when root owns it and neither group nor others may
        write it, so no other user can hold, remove or recreate the lock), or in the directory named by the environment
        variable E(KUBENODE_GC_LOCK_DIR) (for tests) when it passes the same checks - else the lock is taken in
        V(/run/kubenode-gc), with a warning. It does not depend on O(ledger_path).
    type: float
    default: 300
seealso:
  - module: kubenode.gc.cri_info
  - name: Kubernetes garbage collection of unused containers and images
    description: The kubelet behaviour this module follows.
    link: https://kubernetes.io/docs/concepts/architecture/garbage-collection/#containers-images
"""

EXAMPLES = r"""
- name: Run the kubelet's image GC now, with its default policy
  kubenode.gc.image_gc:
  become: true

- name: Free down to 70 % once usage reaches 80 %, keeping platform images
  kubenode.gc.image_gc:
    high_threshold_percent: 80
    low_threshold_percent: 70
    keep_images:
      - registry.k8s.io/*
      - "*/coredns:*"
  become: true

- name: Show what a prune of every unused image would remove
  kubenode.gc.image_gc:
    mode: prune
  check_mode: true
  become: true
  register: plan

- name: Start when less than 50 GiB are free and stop at 80 GiB (large disks), keeping the kubelet's percentages too
  kubenode.gc.image_gc:
    high_threshold_percent: 85
    low_threshold_percent: 80
    free_bytes_high: 50Gi
    free_bytes_low: 80Gi
  become: true

- name: Byte targets alone
  kubenode.gc.image_gc:
    free_bytes_high: 20Gi
    free_bytes_low: 30Gi
  become: true

- name: Also free inodes, for nodes with many small images (the kubelet only evicts pods on imagefs.inodesFree)
  kubenode.gc.image_gc:
    inodes_high_threshold_percent: 85
    inodes_low_threshold_percent: 75
  become: true

- name: Remove a vulnerable image from the node wherever no container uses it, and show where it still runs
  kubenode.gc.image_gc:
    mode: listed
    images:
      - registry.example.com/payments/api:1.4.2
      - "registry.example.com/legacy-base:*"
  become: true
  register: listed

- name: Pods still using a listed image
  ansible.builtin.debug:
    msg: "{{ item.repo_tags }} stays: {{ item.containers | map(attribute='pod_name') | list or item.reason }}"
  loop: "{{ listed.listed_kept }}"

- name: Remove images unused for a week, at most 50 per node
  kubenode.gc.image_gc:
    max_age: 168h
    max_removals: 50
  become: true
"""

RETURN = r"""
removed:
  description: Images removed (in check mode, that would be removed), in removal order.
  returned: always
  type: list
  elements: dict
  contains:
    id:
      description: Image id.
      type: str
    repo_tags:
      description: Tags the image had.
      type: list
      elements: str
    size:
      description: Size the runtime reported.
      type: int
    reason:
      description: V(age) (max-age pass), V(space) (threshold pass), V(inodes) (inode pass), V(prune) or V(listed).
      type: str
    first_detected:
      description: When the image was first seen (RFC 3339, UTC).
      type: str
    last_used:
      description: When a container last used it (RFC 3339, UTC), V(null) if never seen in use.
      type: str
  sample: [{"id": "sha256:00435ba0", "repo_tags": ["docker.io/library/app:1"], "size": 3052621, "reason": "space",
            "first_detected": "2026-11-01T10:00:00.000000000Z", "last_used": null}]
listed_kept:
  description:
    - O(mode=listed) only (V(null) otherwise) - each image O(images) matches that stays, with why.
    - An image that came into use during the run is here too (C(in_use)), with an empty C(containers) (a warning names it).
  returned: always
  type: list
  elements: dict
  contains:
    id:
      description: Image id.
      type: str
    repo_tags:
      description: Its tags.
      type: list
      elements: str
    patterns:
      description: The patterns of O(images) that match it, as written.
      type: list
      elements: str
    reason:
      description: V(in_use) (a container in any state uses it), V(sandbox), V(pinned) or V(keep_list).
      type: str
    containers:
      description: With V(in_use), the containers using it - C(pod_namespace), C(pod_name), C(container) (its name),
        C(state) (V(running), V(exited), V(created) or V(unknown)), C(running) (a boolean) and C(outside_kubernetes) (a
        container Docker Engine runs that the CRI does not list, with V(null) pod and its Docker name).
      type: list
      elements: dict
  sample: [{"id": "sha256:00435ba0", "repo_tags": ["registry.example.com/payments/api:1.4.2"], "patterns": ["registry.example.com/payments/api:1.4.2"],
            "reason": "in_use", "containers": [{"pod_namespace": "shop", "pod_name": "api-7d9c", "container": "api", "state": "running",
                                                "running": true, "outside_kubernetes": false}]}]
kept:
  description:
    - Images not removed, counted by the first reason that applies.
    - With O(mode=listed), images no pattern matches count as V(not_needed).
  returned: always
  type: dict
  sample: {"in_use": 12, "pinned": 1, "sandbox": 1, "keep_list": 2, "too_young": 0, "recently_used": 0, "not_needed": 30}
usage_before:
  description: Image filesystem usage percent before the run (kubelet formula).
  returned: always
  type: int
  sample: 87
usage_after:
  description: Usage after the run (measured; in check mode, estimated from the image sizes).
  returned: always
  type: int
  sample: 79
bytes_to_free:
  description:
    - What the threshold pass had to free (kubelet C(amountToFree)) to reach the stricter target (RV(target)), 0 when no
      target was crossed.
  returned: always
  type: int
triggered_by:
  description:
    - The space targets that started the threshold pass - V(percent) (usage at or above O(high_threshold_percent)) and
      V(bytes) (fewer than O(free_bytes_high) bytes available) - in that order; empty when none was crossed (and in
      O(mode=prune)).
  returned: always
  type: list
  elements: str
  sample: ["bytes"]
target:
  description: The target whose low mark the run freed to (V(percent) or V(bytes), the stricter of RV(triggered_by)); V(null) when none was crossed.
  returned: always
  type: str
  sample: bytes
available_before:
  description: Available bytes on the image filesystem before the run (C(statvfs), at most its capacity).
  returned: always
  type: int
available_after:
  description: Available bytes after the run (measured; in check mode, estimated from the image sizes).
  returned: always
  type: int
bytes_freed_estimated:
  description: Sum of the removed images' sizes (what the kubelet would count).
  returned: always
  type: int
bytes_freed_measured:
  description: Growth of the filesystem's available bytes over the run; V(null) in check mode.
  returned: always
  type: int
target_reached:
  description:
    - Whether usage is at or below the low threshold, or the available bytes at or above O(free_bytes_low), as RV(target)
      asked (or no threshold pass was needed), and, when the inode pass ran, inode usage
      at or below O(inodes_low_threshold_percent).
  returned: always
  type: bool
insufficient:
  description:
    - The threshold pass could not reach the low threshold (the kubelet's C(FreeDiskSpaceFailed)); the real run also warns
      with the kubelet's wording.
    - In check mode, the plan cannot reach it; no warning then.
    - The inode pass's shortfall counts too, with a warning C(Insufficient free inodes on the node's image filesystem ...).
  returned: always
  type: bool
inodes_usage_before:
  description: Inode usage percent of the image filesystem before the run (C(statvfs)); V(null) when it reports no inodes.
  returned: always
  type: int
  sample: 91
inodes_usage_after:
  description: Inode usage after the run (measured; in check mode, estimated as described under check mode).
  returned: always
  type: int
  sample: 74
inodes_to_free:
  description: Inodes the inode pass had to free to reach O(inodes_low_threshold_percent), 0 when it did not run.
  returned: always
  type: int
inodes_freed_measured:
  description: Growth of the filesystem's free inodes over the run; V(null) in check mode.
  returned: always
  type: int
errors:
  description:
    - Removals that failed, each with the image id and one sentence from the runtime; the task then fails with the
      kubelet's error.
    - A failure in the max-age pass ends the run before the threshold pass (C(wanted to free images older than <max_age>,
      encountered errors in image deletion - ...)); failures in the threshold pass give C(wanted to free <N> bytes, but
      freed <M> bytes space with errors in image deletion - ...) instead of the C(FreeDiskSpaceFailed) warning.
    - The first removal that finds the runtime unavailable, or a failed container re-list before a batch, stops the run
      (that outage is one entry with an empty C(id)); it fails with C(The run stopped after <N> image(s) were removed - ...),
      C(changed=true) when anything was removed, and every other key filled with what was really done. An image that is
      really gone is never listed here.
  returned: always
  type: list
  elements: dict
unconfirmed:
  description:
    - IDs of images whose C(RemoveImage) answer was lost (C(UNAVAILABLE), C(DEADLINE_EXCEEDED) or C(CANCELLED)), for example
      in a restart of the runtime by a package upgrade, and that a list of images could not confirm. After an outage the
      module waits up to 10 seconds for the runtime to answer again and lists its images - an image gone is then in
      RV(removed) (and its ledger record dropped), one still there is not removed (an error of its own unless the runtime
      was away). Only when the runtime is not back in time are they listed here; their ledger records stay until the next
      run, which drops the records of images that are gone.
    - Not empty makes C(changed=true).
  returned: always
  type: list
  elements: str
ledger:
  description:
    - The image ledger after the run. It is saved after the removals also when the run failed, without the records of
      removed images.
    - When it cannot be written, the old ledger stays as it was and the task fails naming it (C(Removed <N> image(s), but
      cannot write the image ledger <path> - ...)), with C(changed=true) and RV(removed) when images were removed.
  returned: always
  type: dict
  contains:
    path:
      description: O(ledger_path), V("") without a ledger.
      type: str
    saved:
      description: Whether this run wrote the ledger (never in check mode).
      type: bool
    records:
      description: How many images the saved (or unsaved) ledger tracks.
      type: int
  sample: {"path": "/var/lib/kubenode-gc/image-ledger.json", "saved": true, "records": 42}
rpc_calls:
  description:
    - CRI calls made, per method. Lists are read once; containers once more before each batch of removals; images once
      more after removals through C(RemoveImage).
    - On Docker Engine, Docker's Engine API calls as C(docker.<Operation>) (C(docker.SystemInfo), C(docker.ContainerList)).
    - C(ContainerStatus) once per container, and before each batch once per new container, on runtimes with image
      volumes (see the notes in the description); absent elsewhere.
  returned: always
  type: dict
"""

# first: each file imported from the module's zip is compiled once, not twice (see _zipimport)
from ansible_collections.kubenode.gc.plugins.module_utils import _zipimport  # noqa: F401  pylint: disable=unused-import
from ansible.module_utils.basic import AnsibleModule

from ansible_collections.kubenode.gc.plugins.module_utils._common import CRI_COMMON_ARGS, execute
from ansible_collections.kubenode.gc.plugins.module_utils.cri._cri_backend import cri_client
from ansible_collections.kubenode.gc.plugins.module_utils.gc._image_gc import OWN_ARGUMENT_SPEC, options, run

ARGUMENT_SPEC = dict(CRI_COMMON_ARGS, **OWN_ARGUMENT_SPEC)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    execute(module, options, run, cri_client)


if __name__ == "__main__":
    main()
