#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: container_gc
short_description: Garbage-collect dead containers, pod sandboxes and container logs with the kubelet's semantics over the CRI
version_added: 0.1.0
description:
  - Does what the kubelet's container garbage collector does, on demand, as a first-class policy (the kubelet's knobs are
    deprecated command-line flags with no configuration-file equivalent).
  - Dead containers (any state but running) created at least O(min_age) ago are grouped by pod uid and container name.
    Containers of deleted pods go first; then each group keeps its newest O(max_per_pod_container); then, when more than
    O(max_containers) are left on the node, each group keeps C(max(1, max_containers / groups)) and the oldest go,
    node-wide, until O(max_containers) are left.
  - By default the last dead container of every pod survives, so C(kubectl logs --previous) and restart counts keep
    working, unlike C(crictl rm $(crictl ps -a -q --state exited)).
  - Running containers and ready sandboxes are never touched. A container in unknown state is stopped before removal
    and kept when the stop fails. A container's log files and its C(/var/log/containers) symlink are removed before
    the container.
  - Differences from the kubelet, on purpose.
    The kubelet knows which pods exist from the API server; this module knows only what O(active_pod_uids) says.
    Without it, no pod is treated as deleted (only the limits, the keep-newest-sandbox rule and O(evicted_pod_uids)
    apply), which is safe without API access. Evicted and terminating pods are known only from O(evicted_pod_uids).
    A container without the C(io.kubernetes.pod.uid) label belongs to no pod (uid V("")), as in the kubelet, so with
    O(active_pod_uids) it counts as a container of a deleted pod.
    A pod counts as terminated (for O(evict_terminated_pods)) when it has no ready sandbox and no running container left,
    or is deleted.
    Log files are located from the kubelet's directory layout instead of one C(ContainerStatus) call per container, and
    dangling symlinks are judged from one container list, so the number of CRI calls does not grow with the node.
    Ties the kubelet leaves to an unstable sort are broken by id.
    Log files of containers that no longer exist in the runtime (C(<pod dir>/<container>/<attempt>.log) and its rotated
    copies, with no container of that pod, name and attempt) are removed too - the kubelet removes a container's logs
    only when it removes the container itself, so logs of a removal whose answer was lost would otherwise stay forever.
    The files are listed before the containers, so a container created meanwhile is never mistaken for a gone one.
  - Log removal never leaves O(pod_logs_dir) and O(container_logs_dir). Both are followed when they are symbolic links
    themselves (they are the configured directories), but nothing below them is, for a deletion - directories are opened
    one by one relative to their parent with C(O_NOFOLLOW). A symbolic link found where the kubelet keeps a directory (a
    pod log directory, or a C(<container>/) directory of a live or deleted pod) is removed as a link, never through it,
    listed in RV(removed_symlinks) and warned about; the files it points to are not touched.
  - After a runtime outage (a restart, for example by a package upgrade) a removal whose answer was lost may still have
    happened. The module waits up to 10 seconds for the runtime to answer again, lists the containers (or sandboxes)
    and reports each such removal as removed (its logs go then) or, when the object is still there, as not done. When the
    runtime is not back in time they are listed in RV(unconfirmed), and the next run removes the logs of those that are
    gone.
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
      - Returns the exact plan (what would be removed, in order) and changes nothing.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check mode), when in diff mode.
    support: full
    details:
      - Before and after lists of container and sandbox ids.
  idempotent:
    description: When run twice in a row outside check mode, with the same arguments, the second run indicates no change.
    support: full
options:
  min_age:
    description:
      - Containers created less than this long ago are never removed (kubelet C(--minimum-container-ttl-duration)).
        A Go duration such as V(1m) or V(1h30m). The kubelet's default, V(0s), lets any dead container go; the newest
        dead container of every pod and container name is still kept by O(max_per_pod_container).
    type: str
    default: 0s
  max_per_pod_container:
    description:
      - Dead containers kept per pod and container name (kubelet C(--maximum-dead-containers-per-container)).
        A negative number means no limit.
    type: int
    default: 1
  max_containers:
    description: Dead containers kept on the node (kubelet C(--maximum-dead-containers)). A negative number means no limit.
    type: int
    default: -1
  sandboxes:
    description:
      - Remove pod sandboxes that are not ready and that no container references, keeping the newest sandbox of every
        pod that still exists (all of them go for deleted pods).
    type: bool
    default: true
  logs:
    description:
      - Remove dangling C(*.log) symlinks in O(container_logs_dir) whose container is gone or exited, the log files in
        O(pod_logs_dir) of containers that no longer exist in the runtime, and, when O(active_pod_uids) is given, the
        log directories of deleted pods in O(pod_logs_dir).
    type: bool
    default: true
  pod_logs_dir:
    description: The kubelet's pod log directory (C(podLogsDir)).
    type: path
    default: /var/log/pods
  container_logs_dir:
    description: The directory of the kubelet's legacy container log symlinks.
    type: path
    default: /var/log/containers
  active_pod_uids:
    description:
      - The uids of the pods that still exist, for example from C(kubernetes.core.k8s_info) with a
        C(spec.nodeName=<node>) field selector. Every pod seen on the node but missing from this list is deleted - all its
        dead containers, its sandboxes and its pod log directory go.
      - When not given, no pod is treated as deleted (except those in O(evicted_pod_uids)).
    type: list
    elements: str
  evicted_pod_uids:
    description:
      - The uids of pods that still exist in the API but whose content the kubelet removes (C(ShouldPodContentBeRemoved)) -
        evicted pods (C(status.phase=Failed), C(status.reason=Evicted)), and terminating pods (C(metadata.deletionTimestamp)
        set) with no running container. They are treated as deleted - all their dead containers, their not-ready sandboxes
        and their pod log directories go - even when they are also in O(active_pod_uids).
      - A pod with a running container is never treated as deleted, whatever O(active_pod_uids) or this list says (a list
        that misses such pods usually comes from a failed API query); the module then warns. This differs from the kubelet,
        which trusts its pod sources.
    type: list
    elements: str
  evict_terminated_pods:
    description:
      - The kubelet's eviction-time behaviour (C(evictNonDeletedPods)) - dead containers and not-ready sandboxes of
        terminated pods go too. Takes effect only with O(active_pod_uids).
    type: bool
    default: false
  parallelism:
    description:
      - RemoveContainer calls in flight at most; pod sandboxes are stopped, then removed, through pipelines of the same
        width. Answers are collected as they come, with no pause between batches.
      - How much the pipeline gains is set by the runtime. cri-o spends most of a removal waiting, so 64 calls in flight
        remove about 6 to 7 times as many containers a second as one call at a time. containerd (1.6 to 2.x) spends
        milliseconds of CPU per removal, most of it reading and parsing the node's whole mount table twice (before it
        deletes the container's two state directories), so the cost grows with the pods running on the node and on a
        machine with few cores the pipeline is bounded by those cores - about twice the serial rate on 2 cores.
        C(benchmarks/gc_scale.py) prints that bound next to the measured rates.
      - Keep O(parallelism) divided by the runtime's removal rate well below O(cri_timeout) - calls queue in the runtime,
        and each one's timeout runs from the moment it is made.
      - A container's logs are removed only after its own RemoveContainer succeeded (or a list of containers shows it
        gone). After an C(UNAVAILABLE) answer no new call is made; the calls already in flight are collected and count.
    type: int
    default: 64
  lock_timeout:
    description:
      - Seconds to wait for another kubenode.gc run (image_gc or container_gc) on the same node and runtime endpoint to
        finish before failing. A finite number, 0 or more.
      - The node lock is C(<sha256 of the socket's resolved path, 16 hex digits>.lock) in V(/run/kubenode-gc), a directory only
        root can create (made 0700 without following links, and used only when root owns it and neither group nor others may
        write it), or in the directory named by the environment variable E(KUBENODE_GC_LOCK_DIR) (for tests) when it passes
        the same checks - else the lock is taken in V(/run/kubenode-gc), with a warning. Check mode takes no lock.
    type: float
    default: 300
seealso:
  - module: kubenode.gc.image_gc
  - module: kubenode.gc.cri_info
"""

EXAMPLES = r"""
- name: Run the kubelet's container GC with its default policy
  kubenode.gc.container_gc:
  become: true

- name: List this node's pods from the API server
  kubernetes.core.k8s_info:
    kind: Pod
    field_selectors:
      - spec.nodeName={{ inventory_hostname }}
  delegate_to: localhost
  register: node_pods

- name: Remove everything left of deleted and evicted pods, keep two dead containers per container otherwise
  kubenode.gc.container_gc:
    active_pod_uids: "{{ node_pods.resources | map(attribute='metadata.uid') | list }}"
    evicted_pod_uids: >-
      {{ node_pods.resources | selectattr('status.reason', 'defined') | selectattr('status.phase', 'eq', 'Failed')
         | selectattr('status.reason', 'eq', 'Evicted') | map(attribute='metadata.uid') | list }}
    max_per_pod_container: 2
  become: true

- name: Show what would go, without changing anything
  kubenode.gc.container_gc:
    max_containers: 100
  check_mode: true
  become: true
"""

RETURN = r"""
removed_containers:
  description: Containers removed (in check mode, that would be removed), in removal order.
  returned: always
  type: list
  elements: dict
  contains:
    id:
      description: Container id.
      type: str
    pod_uid:
      description: Pod uid.
      type: str
    pod_name:
      description: Pod name.
      type: str
    name:
      description: Container name.
      type: str
    state:
      description: State before removal (V(exited), V(created) or V(unknown)).
      type: str
    created_at:
      description: Creation time, RFC 3339 in UTC.
      type: str
    reason:
      description: V(pod_deleted), V(pod_terminated), V(per_container_limit) or V(node_limit).
      type: str
removed_sandboxes:
  description: Pod sandboxes removed, oldest first per pod, with C(id), C(pod_uid), C(pod_name), C(pod_namespace), C(state), C(created_at) and
    C(reason) (V(pod_deleted), V(pod_terminated) or V(superseded)).
  returned: always
  type: list
  elements: dict
removed_log_paths:
  description:
    - Log files, symlinks and pod log directories removed (in check mode, that would be removed), the log files of
      containers that are gone from the runtime included.
  returned: always
  type: list
  elements: str
removed_symlinks:
  description:
    - Symbolic links found where the kubelet keeps a directory (a pod log directory, or a C(<container>/) directory in
      one), removed as links; nothing they point to was touched. Each is also in RV(removed_log_paths) and a warning.
  returned: always
  type: list
  elements: str
  sample: ["/var/log/pods/default_web_0d9c7a4e-7b1b-4c1e-9d7e-2f4a5b6c7d8e/app"]
kept:
  description:
    - Containers kept by reason (V(running), V(too_young), V(within_limits)) and sandboxes kept by reason
      (V(sandbox_ready), V(sandbox_in_use), V(sandbox_newest)).
  returned: always
  type: dict
  sample: {"running": 10, "too_young": 0, "within_limits": 4, "sandbox_ready": 10, "sandbox_in_use": 4, "sandbox_newest": 2}
errors:
  description:
    - Objects that could not be removed, each with C(id) and one sentence C(msg); the task then fails, with C(changed=true)
      and every other key filled when something was removed before.
    - The first C(UNAVAILABLE) error (the runtime went away) stops the run; nothing more is attempted. That outage is one
      entry with an empty C(id). A container or sandbox that is really gone is never listed here.
  returned: always
  type: list
  elements: dict
unconfirmed:
  description:
    - IDs of containers and sandboxes whose removal was asked but whose answer was lost (C(UNAVAILABLE),
      C(DEADLINE_EXCEEDED) or C(CANCELLED)), and that a list of the runtime could not confirm - after an outage the
      module waits up to 10 seconds for the runtime to come back. They may or may not be gone; their logs stay, and the
      next run removes the logs of those that are gone. A removal the list confirms is in RV(removed_containers) or
      RV(removed_sandboxes) instead; one still there is not removed (an error of its own unless the runtime was away).
    - Not empty makes C(changed=true).
  returned: always
  type: list
  elements: str
already_removed:
  description:
    - IDs of containers and sandboxes that were gone (C(NOT_FOUND)) when this run tried to remove them, for example removed
      by another run; neither an error nor counted in RV(removed_containers) or RV(removed_sandboxes).
  returned: always
  type: list
  elements: str
rpc_calls:
  description: CRI calls made, per method.
  returned: always
  type: dict
"""

# first: each file imported from the module's zip is compiled once, not twice (see _zipimport)
from ansible_collections.kubenode.gc.plugins.module_utils import _zipimport  # noqa: F401  pylint: disable=unused-import
from ansible.module_utils.basic import AnsibleModule

from ansible_collections.kubenode.gc.plugins.module_utils._common import CRI_COMMON_ARGS, execute
from ansible_collections.kubenode.gc.plugins.module_utils.cri._cri_backend import cri_client
from ansible_collections.kubenode.gc.plugins.module_utils.gc._container_gc import OWN_ARGUMENT_SPEC, options, run

ARGUMENT_SPEC = dict(CRI_COMMON_ARGS, **OWN_ARGUMENT_SPEC)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    execute(module, options, run, cri_client)


if __name__ == "__main__":
    main()
