# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""kubenode.gc.node_audit: every read the audit playbook needs from one node, in one execution (issue 25).

Each part is one of the collection's modules run in check mode through its own ``options()`` and ``run()`` (the
argument spec beside them checks and completes its options as AnsibleModule would), so a part's result is what a
task registering that module would hold: its return keys, ``warnings``, and ``failed``/``msg`` when it failed.
The parts that were tasks of their own (the nodefs ``stat -f``, the credential records ``find``, the GC timer's
``stat``/``slurp``) are plain reads here, returned in the shape the report already reads.

Each source is read once for all the parts (issue 43): one CRI client whose reads are each sent once
(_cri_backend.SharedClient, scope ``node``: nothing changes the node during an audit), /proc once (_daemons.once), each
configuration text parsed once (_toml_edit.data, the redactions). A part's ``rpc_calls`` are the calls it made itself.
"""

from __future__ import annotations

import os
from types import SimpleNamespace

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.kubenode.gc.plugins.module_utils import _daemons
from ansible_collections.kubenode.gc.plugins.module_utils._common import CRI_COMMON_ARGS, run_logic
from ansible_collections.kubenode.gc.plugins.module_utils._errors import KubenodeGcError, OptionError
from ansible_collections.kubenode.gc.plugins.module_utils.config import _kubelet_config, _runtime_config
from ansible_collections.kubenode.gc.plugins.module_utils.config._config_io import config_files
from ansible_collections.kubenode.gc.plugins.module_utils.config._runtime_config_policy import detect_runtime
from ansible_collections.kubenode.gc.plugins.module_utils.cri import _cri_info
from ansible_collections.kubenode.gc.plugins.module_utils.cri._cri_backend import SharedClient
from ansible_collections.kubenode.gc.plugins.module_utils.cri._image_pin_policy import runtime_kind as pin_kind
from ansible_collections.kubenode.gc.plugins.module_utils.gc import _container_gc, _gc_policy, _image_gc, _image_pin
from ansible_collections.kubenode.gc.plugins.module_utils.node._audit_summary import summarise
from ansible_collections.kubenode.gc.plugins.module_utils.storage import _disk_usage

RUNTIMES = ("containerd", "crio", "docker")
IMAGE_GC_SPEC = dict(CRI_COMMON_ARGS, **_image_gc.OWN_ARGUMENT_SPEC)
CONTAINER_GC_SPEC = dict(CRI_COMMON_ARGS, **_container_gc.OWN_ARGUMENT_SPEC)
DEFAULT_TIMER_UNIT = "/etc/systemd/system/kubenode-gc.timer"
TIMER_STATE_FILE = "gc-timer-state.json"
TIMER_STATE_MAX = 1 << 20
SKIPPED = "Conditional result was False"

ARGUMENT_SPEC = dict(
    CRI_COMMON_ARGS,
    kubelet_config=dict(type="dict", default={}),
    runtime_config=dict(type="dict", default={}),
    image_gc=dict(type="dict", default={}),
    image_gc_overrides=dict(type="dict", default={}),
    prune_min_age=dict(type="str", default="0s"),
    container_gc=dict(type="dict", default={}),
    disk_usage=dict(type="dict", default={}),
    keep_images=dict(type="list", elements="str", default=[]),
    remove_images=dict(type="list", elements="str", default=[]),
    kubelet_root_dir=dict(type="path", default="/var/lib/kubelet"),
    gc_timer_unit=dict(type="path", default=DEFAULT_TIMER_UNIT),
    detail=dict(type="str", default="full", choices=["full", "summary"]),
)

# The options node_audit sets itself in each part (a user's value there would contradict the audit).
OWN = {
    "kubelet_config": ("content", "backup", "validate"),
    "runtime_config": ("content", "storage_content", "runtime", "query_runtime", "backup", "validate"),
    "image_gc": ("mode", "high_threshold_percent", "low_threshold_percent", "min_age", "max_age", "keep_images", "images"),
    "container_gc": (),
    "disk_usage": (),
}


def _given(value):
    """A part's options without the ones set to null or to an empty string: both mean unset, so that a playbook can pass
    a variable that may be undefined (ansible-core before 2.19 renders a null inside a dict as an empty string)."""
    return {key: item for key, item in (value or {}).items() if item is not None and item != ""}


def cri_params(params):
    """The CRI options every part gets; unset ones are left out, so that each part's own default applies."""
    return {key: params[key] for key in CRI_COMMON_ARGS if params.get(key) is not None}


def refuse_own(where, value, own, by):
    """OptionError naming the first of ``own`` that a part's options (``value``) set: ``by`` (the module) sets it itself."""
    clash = sorted(set(_given(value)) & set(own))
    if clash:
        raise OptionError("%s%s is set by %s itself and cannot be given." % (where, clash[0], by))


def part_params(name, argument_spec, given):
    """The options of one part as its module would get them: checked and completed by its argument spec."""
    result = ArgumentSpecValidator(argument_spec).validate(dict(given))
    if result.error_messages:
        raise OptionError("%s: %s" % (name, "; ".join(str(m).rstrip(".") for m in result.error_messages)))
    return result.validated_parameters


def options(params):
    """node_audit's own options, checked: every part's options are checked here, before anything is read."""
    for name, own in OWN.items():
        given = [("%s." % name, params.get(name))]
        if name == "runtime_config":
            given = [("%s.%s." % (name, kind), value) for kind, value in (params.get(name) or {}).items() if isinstance(value, dict)]
        for where, value in given:
            refuse_own(where, value, own + tuple(CRI_COMMON_ARGS), "node_audit")
    cri = cri_params(params)
    kubelet = _given(params.get("kubelet_config"))
    kubelet_settings = kubelet.pop("settings", None)
    runtimes = params.get("runtime_config") or {}
    unknown = sorted(set(runtimes) - set(RUNTIMES))
    if unknown:
        raise OptionError("runtime_config has options for %s; its keys are containerd, crio and docker." % unknown[0])
    runtime_parts = {}
    for kind in RUNTIMES:
        if not isinstance(runtimes.get(kind) or {}, dict):
            raise OptionError("runtime_config.%s must be a dict of kubenode.gc.runtime_config options, not %s." % (kind, type(runtimes[kind]).__name__))
        given = _given(runtimes.get(kind))
        settings = given.pop("settings", None)
        read = part_params("runtime_config.%s" % kind, _runtime_config.ARGUMENT_SPEC, dict(given, runtime=kind, **cri))
        drift = None
        if settings is not None:  # query_runtime stays true for its options(): see RUNTIME_DRIFT
            drift = part_params("runtime_config.%s" % kind, _runtime_config.ARGUMENT_SPEC, dict(given, runtime=kind, settings=settings, **cri))
        runtime_parts[kind] = (read, drift)
    gc_common = _given(params.get("image_gc"))
    keep = list(params.get("keep_images") or [])
    # the policy plan: image_gc's options as given, the thresholds and ages from the node's policy (at run time)
    policy = part_params("image_gc", IMAGE_GC_SPEC, dict(gc_common, keep_images=keep, **cri))
    # the prune plan: every unused image, so only the ledger (image ages) and the lock are shared with the policy plan
    shared = {key: gc_common[key] for key in ("ledger_path", "lock_timeout") if key in gc_common}
    prune = part_params("image_gc", IMAGE_GC_SPEC, dict(shared, mode="prune", min_age=params["prune_min_age"], keep_images=keep, **cri))
    _image_gc.options(prune)  # checked now, before anything is read
    # the listed plan (kubenode_gc_remove_images): where each listed image is, and who uses it; the ledger and lock shared too
    listed = None
    if params.get("remove_images"):
        listed = part_params("image_gc", IMAGE_GC_SPEC, dict(shared, mode="listed", images=list(params["remove_images"]), keep_images=keep, **cri))
        _image_gc.options(listed)
    out = dict(
        cri_info=part_params("cri_info", _cri_info.ARGUMENT_SPEC, dict(gather=["runtime", "imagefs", "images", "containers"], **cri)),
        kubelet=part_params("kubelet_config", _kubelet_config.ARGUMENT_SPEC, kubelet),
        kubelet_drift=None if kubelet_settings is None else part_params(
            "kubelet_config", _kubelet_config.ARGUMENT_SPEC, dict(kubelet, settings=kubelet_settings)),
        runtimes=runtime_parts,
        overrides=dict(params.get("image_gc_overrides") or {}),
        image_gc_policy=policy,
        image_gc_prune=prune,
        image_listed=listed,
        container_gc=part_params("container_gc", CONTAINER_GC_SPEC, dict(_given(params.get("container_gc")), **cri)),
        disk_usage=part_params("disk_usage", _disk_usage.ARGUMENT_SPEC, dict(_given(params.get("disk_usage")), **cri)),
        image_pin=part_params("image_pin", _image_pin.ARGUMENT_SPEC, dict(images=keep, **cri)) if keep else None,
        kubelet_root_dir=params["kubelet_root_dir"],
        gc_timer_unit=params["gc_timer_unit"],
        detail=params.get("detail") or "full",
    )
    # every part's own checks now, before anything is read (their options() do no I/O)
    for name, module in (("container_gc", _container_gc), ("disk_usage", _disk_usage), ("cri_info", _cri_info)):
        module.options(out[name])
    return out


def _skipped(reason=SKIPPED):
    return {"changed": False, "skipped": True, "skip_reason": reason}


def run_part(module, part, params, backend, check_mode=True):
    """One module's logic (``part``: its module_utils, with options() and run()), as its task would register it: its
    result, or ``failed`` and the one sentence with what it did before."""
    result, error = run_logic(module, part.options, part.run, backend, params, check_mode)
    if error is not None:
        result.update(failed=True, msg=str(error))
    result.setdefault("changed", False)
    result.pop("diff", None)
    result["warnings"] = list(result.get("warnings") or [])
    return result


def warn_parts(module, parts):
    """Warn each part's warnings once, prefixed with the part's name (``parts``: name -> result, or None where it did not run)."""
    for name, result in parts.items():
        warnings = result.get("warnings") if isinstance(result, dict) else None
        for warning in warnings or []:
            module.warn("%s: %s" % (name, warning))


def rpc_totals(results):
    """The CRI calls of several parts' results, summed per method."""
    total = {}
    for result in results:
        for method, count in ((result.get("rpc_calls") if isinstance(result, dict) else None) or {}).items():
            total[method] = total.get(method, 0) + count
    return total


def _ok(result):
    return isinstance(result, dict) and not result.get("failed") and not result.get("skipped")


def nodefs(path):
    """The nodefs measure as ``stat -f -c '%S %b %a %c %d'`` prints it (block size, blocks, available, inodes, free), or None."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return "%d %d %d %d %d" % (st.f_frsize, st.f_blocks, st.f_bavail, st.f_files, st.f_ffree)


def credential_records(kubelet):
    """The kubelet's pulled-image credential records (read only): ``{files: [{path}]}``; none when the directory is absent."""
    root = (kubelet or {}).get("root_dir") if _ok(kubelet) else None
    directory = os.path.join(root or "/var/lib/kubelet", "image_manager", "pulled")
    if not os.path.isdir(directory):
        return {"changed": False, "files": []}
    files = []
    for top, _dirs, names in os.walk(directory):
        files.extend({"path": os.path.join(top, name)} for name in sorted(names) if os.path.isfile(os.path.join(top, name)))
    return {"changed": False, "files": files}


def gc_timer(unit, ledger_path):
    """Whether kubenode.gc.gc_timer is installed, and its state file's text (empty when there is none)."""
    installed = os.path.exists(unit)
    state = ""
    if installed:
        path = os.path.join(os.path.dirname(ledger_path), TIMER_STATE_FILE)
        try:
            with open(path, "rb") as f:
                state = f.read(TIMER_STATE_MAX + 1)
            state = "" if len(state) > TIMER_STATE_MAX else state.decode("utf-8", "replace")
        except OSError:
            state = ""
    return {"installed": installed, "state": state}


# The parts: the modules' module_utils, each with its options() and run().
PARTS = {"cri_info": _cri_info, "kubelet_config": _kubelet_config, "runtime_config": _runtime_config, "image_gc": _image_gc,
         "image_pin": _image_pin, "container_gc": _container_gc, "disk_usage": _disk_usage}


def runtime_drift_options(params):
    """runtime_config's options for the drift pass: the running runtime's files and command line, read from /proc as the
    read pass reads them (query_runtime true), so both passes judge the file and the flags the daemon uses; but no CRI
    query in run(), which the read pass has made."""
    return dict(_runtime_config.options(params), query_runtime=False)


RUNTIME_DRIFT = SimpleNamespace(options=runtime_drift_options, run=_runtime_config.run)


def asking(part, shared):
    """``part`` (runtime_config's logic) querying the runtime through the execution's one client (SharedClient)."""
    return SimpleNamespace(options=lambda params: dict(part.options(params), client=shared.target), run=part.run)


def logs_scanned(part, params):
    """``part`` (container_gc's logic) with the pod log directory scanned now, before the node's one read: a log file no
    container of a list read after the scan owns is a gone container's, so the scan must come first."""
    try:
        checked = _container_gc.options(params)
    except KubenodeGcError:
        return part  # the part fails with its own sentence when it runs
    scan = _container_gc.scan_pod_logs(checked["pod_logs_dir"]) if checked["logs"] else {}
    return SimpleNamespace(options=lambda given: dict(part.options(given), pod_log_scan=scan), run=part.run)


def run(module, opts):
    """Every part, in the audit's order; a node whose runtime cannot be read fails with cri_info's sentence. Every source
    is read once for all the parts: one CRI client sharing the node's reads, /proc once."""
    shared = SharedClient("node")
    try:
        with _daemons.once():
            return _run(module, opts, shared)
    finally:
        shared.close()


def _run(module, opts, cri_client):
    out = {}
    container_gc = logs_scanned(PARTS["container_gc"], opts["container_gc"])
    cri = run_part(module, PARTS["cri_info"], opts["cri_info"], cri_client)
    out["cri_info"] = cri
    if cri.get("failed"):
        return out
    kubelet = run_part(module, PARTS["kubelet_config"], opts["kubelet"], config_files)
    out["kubelet_config"] = kubelet
    out["credential_records"] = credential_records(kubelet)
    if opts["kubelet_drift"] is None:
        out["kubelet_config_drift"] = None
    elif _ok(kubelet):
        out["kubelet_config_drift"] = run_part(module, PARTS["kubelet_config"], opts["kubelet_drift"], config_files)
    else:
        out["kubelet_config_drift"] = _skipped()
    runtime_name = (cri.get("runtime") or {}).get("name")
    kind = detect_runtime(None, (), set().__contains__, runtime_name=runtime_name, strict=False) or "containerd"
    read, drift = opts["runtimes"][kind]
    runtime = run_part(module, asking(PARTS["runtime_config"], cri_client), read, config_files)
    out["runtime_config"] = runtime
    out["runtime_config_drift"] = None if drift is None else (
        run_part(module, RUNTIME_DRIFT, drift, config_files) if _ok(runtime) else _skipped())
    out["nodefs"] = nodefs(opts["kubelet_root_dir"])
    # the cleanup's policy (the variables the user set, else the node's kubelet configuration, else the kubelet's defaults)
    try:
        policy = _gc_policy.image_gc_policy(kubelet, opts["overrides"])
    except KubenodeGcError as exc:
        out["image_gc_policy"] = {"changed": False, "failed": True, "msg": str(exc)}
    else:
        params = dict(opts["image_gc_policy"], mode="threshold", high_threshold_percent=policy["high_threshold_percent"],
                      low_threshold_percent=policy["low_threshold_percent"], min_age=policy["min_age"], max_age=policy["max_age"])
        out["image_gc_policy"] = run_part(module, PARTS["image_gc"], params, cri_client)
    out["gc_timer"] = gc_timer(opts["gc_timer_unit"], opts["image_gc_prune"]["ledger_path"])
    out["image_gc_prune"] = run_part(module, PARTS["image_gc"], opts["image_gc_prune"], cri_client)
    out["image_listed"] = None if opts["image_listed"] is None else run_part(module, PARTS["image_gc"], opts["image_listed"], cri_client)
    runtime_info = cri.get("runtime") or {}
    if opts["image_pin"] is not None and pin_kind(runtime_info.get("name"), runtime_info.get("version"))[0] is not None:
        out["image_pin"] = run_part(module, PARTS["image_pin"], opts["image_pin"], cri_client)
    else:
        out["image_pin"] = None
    out["container_gc"] = run_part(module, container_gc, opts["container_gc"], cri_client)
    out["disk_usage"] = run_part(module, PARTS["disk_usage"], opts["disk_usage"], cri_client)
    return out


def execute(module):
    """node_audit's main(): the parts' results under ``audit``; the module fails (with cri_info's sentence) only when the
    runtime cannot be read, as the audit counts such a node as failed. Each part's warnings are warned, named by part."""
    try:
        opts = options(module.params)
    except KubenodeGcError as exc:
        module.fail_json(msg=str(exc))
    audit = run(module, opts)
    warn_parts(module, audit)
    calls = rpc_totals(audit.values())
    if opts["detail"] == "summary":
        audit = summarise(audit)
    if audit["cri_info"].get("failed"):
        module.fail_json(msg=audit["cri_info"]["msg"], audit=audit, rpc_calls=calls)
    module.exit_json(changed=False, audit=audit, rpc_calls=calls)
