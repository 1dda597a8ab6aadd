# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""The kubenode.gc.gc_timer runner: one GC run on the node, without Ansible (the role's systemd service calls main()).

Reads the JSON configuration the role writes, then, with the same options, ledger and node lock as the modules:
container GC (_container_gc.run), then image GC in threshold mode (_image_gc.run), or, when ``observe`` is set, only the
ledger's sightings and the plan a run would carry out (_image_gc.observe), nothing removed. Prints one line for the journal, writes the state file the
audit reads (``gc-timer-state.json`` next to the ledger) and exits 1 when the run failed, so ``systemctl status`` shows it.

Imports only module_utils that need no Ansible (and grpcio/protobuf for the CRI).
"""

from __future__ import annotations

import json
import os
import sys
import time

from ansible_collections.kubenode.gc.plugins.module_utils._errors import KubenodeGcError, OptionError
from ansible_collections.kubenode.gc.plugins.module_utils._files import PathError, atomic_write
from ansible_collections.kubenode.gc.plugins.module_utils.cri import _cri
from ansible_collections.kubenode.gc.plugins.module_utils.gc import _container_gc, _image_gc

STATE_VERSION = 1
STATE_NAME = "gc-timer-state.json"
# What the timer runs with besides the configured policy: the modules' own defaults for these, and the threshold mode.
IMAGE_RUN = dict(mode="threshold", measure_freed=True, fail_on_insufficient=False, max_removals=None, parallelism=512)
CONTAINER_RUN = dict(sandboxes=True, logs=True, active_pod_uids=None, evicted_pod_uids=None, evict_terminated_pods=False, parallelism=64)
IMAGE_KEYS = ("high_threshold_percent", "low_threshold_percent", "inodes_high_threshold_percent", "inodes_low_threshold_percent", "free_bytes_high",
              "free_bytes_low", "min_age", "max_age", "keep_images", "ledger_path")
CONTAINER_KEYS = ("min_age", "max_per_pod_container", "max_containers", "pod_logs_dir", "container_logs_dir")
TOP_KEYS = ("cri_endpoint", "cri_timeout", "lock_timeout", "observe", "containers", "image", "container")


def state_path(ledger_path):
    """The state file next to the ledger."""
    return os.path.join(os.path.dirname(ledger_path), STATE_NAME)


def load_config(path):
    """The role's configuration file, parsed; OptionError naming the file when it is not what the role writes."""
    try:
        with open(path, "rb") as f:
            config = json.loads(f.read().decode("utf-8"))
    except (OSError, ValueError) as exc:
        raise OptionError("Cannot read the gc_timer configuration %s: %s." % (path, getattr(exc, "strerror", None) or exc))
    if not isinstance(config, dict) or not isinstance(config.get("image"), dict) or not isinstance(config.get("container"), dict):
        raise OptionError("The gc_timer configuration %s is not a JSON object with image and container objects." % path)
    unknown = sorted(set(config) - set(TOP_KEYS)) + sorted("image." + k for k in set(config["image"]) - set(IMAGE_KEYS)) \
        + sorted("container." + k for k in set(config["container"]) - set(CONTAINER_KEYS))
    if unknown:
        raise OptionError("The gc_timer configuration %s has unknown keys: %s." % (path, ", ".join(unknown)))
    return config


def options(config):
    """(image options, container options) checked by image_gc's and container_gc's own options()."""
    common = dict(cri_endpoint=config.get("cri_endpoint") or None, cri_timeout=float(config.get("cri_timeout", 30.0)),
                  lock_timeout=float(config.get("lock_timeout", 300.0)))
    image = dict(IMAGE_RUN, **common)
    image.update({k: config["image"].get(k) for k in IMAGE_KEYS})
    image["keep_images"] = list(image["keep_images"] or [])
    image["min_age"] = image["min_age"] or "2m"
    image["max_age"] = image["max_age"] or "0s"
    if not image["ledger_path"]:
        raise OptionError("The gc_timer needs image.ledger_path: its state file and the modules' sightings live there.")
    container = dict(CONTAINER_RUN, **common)
    container.update({k: config["container"].get(k) for k in CONTAINER_KEYS})
    return _image_gc.options(image), _container_gc.options(container)


def run(config, now=time.time):
    """One run; returns the state dict (``result`` ok or failed) the runner writes and logs."""
    started = now()
    state = dict(version=STATE_VERSION, started_at=_rfc3339(started), finished_at=None, result="ok", observe=bool(config.get("observe")),
                 removed_images=0, removed_containers=0, removed_sandboxes=0, bytes_freed=0, usage_before=None, usage_after=None,
                 triggered_by=[], would_remove=[], bytes_would_free=0, message="")
    parts = []
    try:
        image_opts, container_opts = options(config)
        client = _cri.CriClient(_cri.resolve_endpoint(image_opts["cri_endpoint"])[0], timeout=image_opts["cri_timeout"])
        try:
            if state["observe"]:
                seen = _image_gc.observe(client, image_opts)
                state["usage_before"] = state["usage_after"] = seen["usage_before"]
                state["would_remove"] = [{k: i[k] for k in ("id", "repo_tags", "size", "reason")} for i in seen["would_remove"]]
                state["bytes_would_free"] = seen["bytes_would_free"]
                parts.append("observed %d image(s), %d in use; would remove %d image(s) of %d bytes; ledger %d record(s), nothing removed"
                             % (seen["images"], seen["in_use"], len(seen["would_remove"]), seen["bytes_would_free"], seen["ledger"]["records"]))
            else:
                if config.get("containers", True):
                    _containers(state, parts, _container_gc.run(client, container_opts))
                _images(state, parts, _image_gc.run(client, image_opts))
        finally:
            client.close()
    except KubenodeGcError as exc:
        result = exc.result or {}
        if "removed_containers" in result:
            _containers(state, parts, result)
        elif "removed" in result:
            _images(state, parts, result)
        state["result"] = "failed"
        parts.append("FAILED: %s" % exc)
    state["finished_at"] = _rfc3339(now())
    state["message"] = "; ".join(parts)
    return state


def _containers(state, parts, result):
    state["removed_containers"] = len(result.get("removed_containers") or [])
    state["removed_sandboxes"] = len(result.get("removed_sandboxes") or [])
    parts.append("container GC removed %d container(s), %d sandbox(es), %d log path(s)" % (
        state["removed_containers"], state["removed_sandboxes"], len(result.get("removed_log_paths") or [])))


def _images(state, parts, result):
    state["removed_images"] = len(result.get("removed") or [])
    state["bytes_freed"] = result.get("bytes_freed_measured") or 0
    state["usage_before"], state["usage_after"] = result.get("usage_before"), result.get("usage_after")
    state["triggered_by"] = list(result.get("triggered_by") or [])
    text = "image GC removed %d image(s), freed %d bytes (measured), imagefs usage %s%% -> %s%%" % (
        state["removed_images"], state["bytes_freed"], state["usage_before"], state["usage_after"])
    if state["triggered_by"]:
        text += ", started by the %s target, freed to the %s target" % (" and ".join(state["triggered_by"]), result.get("target"))
    if result.get("insufficient"):
        text += ", short of the target"
    parts.append(text)


def _rfc3339(seconds):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def write_state(path, state):
    """The state file, atomically (0644: no secret in it), its missing directories made 0700; refused (PathError)
    through a directory or link another user controls (_files.atomic_write)."""
    atomic_write(path, json.dumps(state, sort_keys=True, indent=1) + "\n", mode=0o644, keep_owner_mode=False, prefix=".gc-timer-state-", mkdir=0o700)


def main(argv=None, out=sys.stdout):
    """``kubenode-gc-timer CONFIG``: one run (exit 1 when it failed); ``kubenode-gc-timer --check-config CONFIG``: check it only."""
    argv = sys.argv[1:] if argv is None else argv
    check = argv[:1] == ["--check-config"]
    args = argv[1:] if check else argv
    if len(args) != 1:
        out.write("usage: kubenode-gc-timer [--check-config] CONFIG\n")
        return 2
    try:
        config = load_config(args[0])
        if check:
            options(config)
            return 0
    except KubenodeGcError as exc:
        out.write("kubenode-gc-timer: %s\n" % exc)
        return 1
    state = run(config)
    try:
        write_state(state_path(config["image"]["ledger_path"]), state)
    except PathError as exc:
        state["result"] = "failed"
        state["message"] += "; %s" % (str(exc)[0].lower() + str(exc)[1:])
    except OSError as exc:
        state["result"] = "failed"
        state["message"] += "; cannot write the state file: %s" % (exc.strerror or exc)
    out.write("kubenode-gc-timer: %s%s: %s\n" % (state["result"], " (observe only)" if state["observe"] else "", state["message"]))
    out.flush()
    return 0 if state["result"] == "ok" else 1
