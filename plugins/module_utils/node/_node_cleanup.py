# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""kubenode.gc.node_cleanup: one node's part of a kubenode.gc.cleanup run, in one execution (issue 25).

In the order the cleanup playbook took them as tasks: read the runtime (cri_info), complete the history records of
interrupted runs, read the node's kubelet configuration and decide its image GC policy (_gc_policy, the one source),
skip a node below its high thresholds (unless remove_images), write the provisional history record, pin the keep-listed
images, container GC, the listed removal (image_gc mode=listed, remove_images), image GC, storage GC. Each GC step is that
module's own code with that module's options, so its result is what a task registering the module would hold. Pure
decisions (the skip sentence, the interrupted record) are functions here that the playbook's filters share.

The steps share one CRI client (_cri_backend.SharedClient) and one reading of /proc (_daemons.once). In check mode
nothing changes the node, so every read is sent once for all the steps (scope ``node``, as node_audit); a real run
shares only what the runtime says of itself (its Version and Status): each step reads the node after the steps before it
changed it, and the removals list containers again before each batch.
"""

from __future__ import annotations

import datetime
import json
import os
import re
from types import SimpleNamespace

from ansible_collections.kubenode.gc.plugins.module_utils import _daemons
from ansible_collections.kubenode.gc.plugins.module_utils._common import CRI_COMMON_ARGS, selinux_relabel
from ansible_collections.kubenode.gc.plugins.module_utils._errors import KubenodeGcError
from ansible_collections.kubenode.gc.plugins.module_utils._files import atomic_write, open_directory
from ansible_collections.kubenode.gc.plugins.module_utils.config import _kubelet_config
from ansible_collections.kubenode.gc.plugins.module_utils.config._config_io import config_files
from ansible_collections.kubenode.gc.plugins.module_utils.cri import _cri_info
from ansible_collections.kubenode.gc.plugins.module_utils.cri._cri_backend import SharedClient
from ansible_collections.kubenode.gc.plugins.module_utils.gc import _container_gc, _gc_policy, _image_gc, _image_pin
from ansible_collections.kubenode.gc.plugins.module_utils.storage import _storage_gc
from ansible_collections.kubenode.gc.plugins.module_utils.node._node_audit import (
    CONTAINER_GC_SPEC,
    IMAGE_GC_SPEC,
    PARTS,
    _given,
    cri_params,
    logs_scanned,
    part_params,
    refuse_own,
    rpc_totals,
    run_part,
    warn_parts,
)
from ansible_collections.kubenode.gc.plugins.module_utils.node._cleanup_policy import (
    complete_interrupted,
    images_seen,
    iso,
    pressure_reasons,
    record_name,
    skip_reason,
)
from ansible_collections.kubenode.gc.plugins.module_utils.cri._snapshot import image_filesystem

DEFAULT_HISTORY_DIR = "/var/lib/kubenode-gc/history"
STEPS = ("image_pin", "container_gc", "image_listed", "image_gc", "storage_gc")  # the steps that may change the node, in order
IN_PROGRESS = re.compile(r'\s*"in_progress": true')
RECORD_MAX = 16 << 20

ARGUMENT_SPEC = dict(
    CRI_COMMON_ARGS,
    host=dict(type="str", required=True),
    history_dir=dict(type="path", default=DEFAULT_HISTORY_DIR),
    kubelet_config=dict(type="dict", default={}),
    image_gc_overrides=dict(type="dict", default={}),
    image_mode=dict(type="str", choices=["threshold", "prune"], default="threshold"),
    only_over_threshold=dict(type="bool", default=True),
    image_gc=dict(type="dict", default={}),
    keep_images=dict(type="list", elements="str", default=[]),
    remove_images=dict(type="list", elements="str", default=[]),
    pin=dict(type="bool", default=False),
    containers=dict(type="bool", default=True),
    container_gc=dict(type="dict", default={}),
    storage=dict(type="bool", default=False),
    storage_gc=dict(type="dict", default={}),
)
OWN = {
    "image_gc": ("mode", "high_threshold_percent", "low_threshold_percent", "min_age", "max_age", "keep_images", "images", "cri_endpoint",
                 "cri_timeout"),
    "storage_gc": ("keep_images", "cri_endpoint", "cri_timeout"),
    "container_gc": ("cri_endpoint", "cri_timeout"),
    "kubelet_config": ("settings", "content", "backup", "validate"),
}


# -- the run ---------------------------------------------------------------------------------------------------------

def options(params):
    """node_cleanup's options, checked with each step's own spec and checks before anything is read or changed."""
    for name, own in OWN.items():
        refuse_own(name + ".", params.get(name), own, "node_cleanup")
    cri = cri_params(params)
    keep = list(params.get("keep_images") or [])
    gc = dict(_given(params.get("image_gc")), keep_images=keep, mode=params["image_mode"], **cri)
    image_gc = part_params("image_gc", IMAGE_GC_SPEC, gc)
    # free_bytes_high in bytes, for the skip decision (checked now, before anything is read)
    free_high = None if image_gc["free_bytes_high"] in (None, "") else _image_gc.byte_amount("free_bytes_high", image_gc["free_bytes_high"])
    container_gc = part_params("container_gc", CONTAINER_GC_SPEC, dict(_given(params.get("container_gc")), **cri))
    _container_gc.options(container_gc)
    listed = None
    if params.get("remove_images"):
        given = dict(_given(params.get("image_gc")), keep_images=keep, mode="listed", images=list(params["remove_images"]), **cri)
        listed = part_params("image_gc", IMAGE_GC_SPEC, given)
        _image_gc.options(listed)  # the patterns checked before anything is read
    storage_gc = part_params("storage_gc", _storage_gc.ARGUMENT_SPEC, dict(_given(params.get("storage_gc")), keep_images=keep, **cri))
    if params["storage"]:
        _storage_gc.options(storage_gc)
    return dict(
        params,
        cri_info=part_params("cri_info", _cri_info.ARGUMENT_SPEC, dict(gather=["runtime", "imagefs", "images"], **cri)),
        kubelet=part_params("kubelet_config", _kubelet_config.ARGUMENT_SPEC, _given(params.get("kubelet_config"))),
        overrides=dict(params.get("image_gc_overrides") or {}),
        image_gc=image_gc,
        image_listed=listed,
        free_high=free_high,
        container_gc=container_gc,
        storage_gc=storage_gc,
        image_pin=part_params("image_pin", _image_pin.ARGUMENT_SPEC, dict(images=keep, **cri)),
    )


def complete_interrupted_records(module, history_dir, images, now, warnings):
    """Complete the records interrupted runs left (``"in_progress": true`` at a line's start); return their paths."""
    done = []
    try:
        names = sorted(n for n in os.listdir(history_dir) if n.endswith(".json"))
    except OSError:
        return done
    for name in names:
        path = os.path.join(history_dir, name)
        try:
            if not os.path.isfile(path) or os.path.getsize(path) > RECORD_MAX:
                continue
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError):
            continue
        if not any(IN_PROGRESS.match(line) for line in text.splitlines()):
            continue
        try:
            record = json.loads(text)
        except ValueError:
            warnings.append("The history record %s of an interrupted run is not JSON; it is left as it is." % path)
            continue
        if not isinstance(record, dict):
            continue
        completed = complete_interrupted(record, images, iso(now))
        atomic_write(path, json.dumps(completed, indent=2, sort_keys=True) + "\n", mode=0o600, before_replace=selinux_relabel(module))
        done.append(path)
    return done


def run(module, opts, check_mode):
    """The node's cleanup; returns the result (``status``: unreadable, policy_error, skipped, failed, planned or cleaned).
    The steps share one CRI client: in check mode every read once, in a real run what the runtime says of itself."""
    shared = SharedClient("node" if check_mode else "runtime")
    try:
        with _daemons.once():
            return _run(module, opts, check_mode, shared)
    finally:
        shared.close()


def _run(module, opts, check_mode, cri_client):
    now = datetime.datetime.now(datetime.timezone.utc)
    # a plan reads the node once for every step: container_gc's pod log directory is scanned before that read
    container_gc = logs_scanned(PARTS["container_gc"], opts["container_gc"]) if check_mode and opts["containers"] else PARTS["container_gc"]
    warnings = []
    out = dict(changed=False, status=None, usage_before=None, policy=None, record_file=None, interrupted_records=[],
               image_pin=None, container_gc=None, image_listed=None, image_gc=None, storage_gc=None, warnings=warnings)
    before = run_part(module, PARTS["cri_info"], opts["cri_info"], cri_client)
    if before.get("failed"):
        out.update(status="unreadable", msg=before["msg"])
        return out
    fs = image_filesystem(before.get("imagefs") or []) or ((before.get("imagefs") or [None])[0]) or {}
    out["usage_before"] = fs.get("usage_percent")
    history_dir = opts["history_dir"]
    if not check_mode:
        os.close(open_directory(history_dir, mode=0o700))  # made 0700; refused (PathError) through another user's directory or link
        out["interrupted_records"] = complete_interrupted_records(module, history_dir, before.get("images") or [], now, warnings)
        out["changed"] = bool(out["interrupted_records"])
    kubelet = run_part(module, PARTS["kubelet_config"], opts["kubelet"], config_files)
    try:
        policy = _gc_policy.image_gc_policy(kubelet, opts["overrides"])
    except KubenodeGcError as exc:
        out.update(status="policy_error", msg=str(exc))
        return out
    policy["described"] = _gc_policy.describe_sources(policy)
    out["policy"] = policy
    gc = opts["image_gc"]
    below = None
    if opts["only_over_threshold"] and opts["image_mode"] != "prune" and not pressure_reasons(
            fs, policy["high_threshold_percent"], gc["inodes_high_threshold_percent"], opts["free_high"]):
        below = skip_reason(out["usage_before"], policy["high_threshold_percent"], policy["sources"]["high_threshold_percent"]["from"],
                            gc["inodes_high_threshold_percent"], gc["free_bytes_high"])
        if opts["image_listed"] is None:
            out.update(status="skipped", reason=below)
            return out
        # remove_images: the listed removal runs on every node, whatever its usage; only the threshold image GC is skipped
        out["image_gc_skipped"] = below
    out["record_file"] = record_name(history_dir, now)
    if not check_mode:
        provisional = {"host": opts["host"], "status": "interrupted", "in_progress": True, "check_mode": False, "started_at": iso(now),
                       "usage_before": out["usage_before"], "images_before": images_seen(before.get("images") or [])}
        atomic_write(out["record_file"], json.dumps(provisional, indent=2, sort_keys=True) + "\n", mode=0o600, before_replace=selinux_relabel(module))
        out["changed"] = True
    failed = None
    if opts["pin"]:
        out["image_pin"] = run_part(module, PARTS["image_pin"], opts["image_pin"], cri_client, check_mode)
        failed = out["image_pin"] if out["image_pin"].get("failed") else None
    if failed is None and opts["containers"]:
        out["container_gc"] = run_part(module, container_gc, opts["container_gc"], cri_client, check_mode)
        failed = failed or (out["container_gc"] if out["container_gc"].get("failed") else None)
    if failed is None and opts["image_listed"] is not None:
        out["image_listed"] = run_part(module, _listed_part(out["container_gc"], check_mode), opts["image_listed"], cri_client, check_mode)
        failed = out["image_listed"] if out["image_listed"].get("failed") else None
    if failed is None and below is None:
        params = dict(gc, high_threshold_percent=policy["high_threshold_percent"], low_threshold_percent=policy["low_threshold_percent"],
                      min_age=policy["min_age"], max_age=policy["max_age"])
        part = PARTS["image_gc"]
        if check_mode and out["image_listed"] is not None:
            # the plan of the images the listed removal would have removed first
            part = _assuming(part, images=[r["id"] for r in out["image_listed"].get("removed") or []])
        out["image_gc"] = run_part(module, part, params, cri_client, check_mode)
        failed = out["image_gc"] if out["image_gc"].get("failed") else None
    if failed is None and opts["storage"]:
        out["storage_gc"] = run_part(module, _storage_gc, opts["storage_gc"], cri_client, check_mode)
        failed = out["storage_gc"] if out["storage_gc"].get("failed") else None
    out["changed"] = out["changed"] or any((out[k] or {}).get("changed") for k in STEPS)
    if failed is not None:
        out.update(status="failed", msg=failed["msg"])
    else:
        out["status"] = "planned" if check_mode else "cleaned"
    return out


def _assuming(part, containers=(), images=()):
    """image_gc's logic planning as if ``containers`` and ``images`` (ids) were gone: what the steps before it would have
    removed in a real run, so that check mode lists what the real run removes."""
    def options(params):
        return dict(_image_gc.options(params), assume_gone={"containers": set(containers), "images": set(images)})
    return SimpleNamespace(options=options, run=part.run)


def _listed_part(container_gc, check_mode):
    """The listed removal's logic; in check mode, planned as if container GC had removed the containers it plans to."""
    if not check_mode or not container_gc:
        return _image_gc
    return _assuming(_image_gc, containers=[c["id"] for c in container_gc.get("removed_containers") or []])


def execute(module):
    """node_cleanup's main(): fails (with what it did, ``changed`` true when it changed something) unless the node was
    cleaned, planned or skipped."""
    try:
        opts = options(module.params)
    except KubenodeGcError as exc:
        module.fail_json(msg=str(exc))
    result = run(module, opts, module.check_mode)
    for warning in result.pop("warnings"):
        module.warn(warning)
    steps = {name: result[name] for name in STEPS}
    warn_parts(module, steps)
    result["rpc_calls"] = rpc_totals(steps.values())
    if result["status"] in ("unreadable", "policy_error", "failed"):
        module.fail_json(**result)
    module.exit_json(**result)
