# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""One runtime_config run: read the files, plan with the pure _runtime_config, query the runtime, write. Ansible glue."""

from __future__ import annotations

import os

from ansible.module_utils.basic import missing_required_lib

from ansible_collections.kubenode.gc.plugins.module_utils import _config_io, _cri, _runtime_config as rc, _snapshot
from ansible_collections.kubenode.gc.plugins.module_utils._common import INSTALL_HINT

CRIO_ONLY = ("storage_path", "storage_content", "dropin_dir")


def query_runtime(module, endpoint_option, timeout, rpc_calls):
    """(runtime info, image filesystems), or (None, a runtime_unreachable finding); counts the calls in ``rpc_calls``."""
    try:
        endpoint = _cri.resolve_endpoint(endpoint_option)[0]
        problem = _cri.probe_socket(_cri.endpoint_to_path(endpoint))
    except _cri.CriError as exc:
        return None, rc.finding("info", "runtime_unreachable", "The runtime was not queried: %s" % exc)
    if problem:
        return None, rc.finding("info", "runtime_unreachable", "The runtime at %s was not queried: %s." % (endpoint, problem))
    if not (_cri.HAS_GRPC and _cri.HAS_PROTOBUF):
        module.fail_json(
            msg=missing_required_lib("grpcio and protobuf") + " They are needed to query the runtime; set query_runtime to false to skip it." + INSTALL_HINT,
            exception=_cri.GRPC_IMPORT_ERROR or _cri.PROTOBUF_IMPORT_ERROR,
        )
    client = _cri.CriClient(endpoint, timeout=timeout)
    try:
        return (_snapshot.read_runtime(client), _snapshot.read_imagefs(client)), None
    except _cri.CriError as exc:
        return None, rc.finding("info", "runtime_unreachable", "The runtime at %s was not queried: %s" % (endpoint, exc))
    finally:
        rpc_calls.update(client.rpc_calls)
        client.close()


def plan(runtime, p, texts):
    """Run the pure planner on ``texts`` (path -> text or None); returns (plan, {path: new text}, main path)."""
    if runtime == "containerd":
        path = p["path"] or rc.CONTAINERD_PATH
        result = rc.plan_containerd(texts[path], path, p["settings"])
        return result, {path: result["after"]}, path
    cpath, spath = p["path"] or rc.CRIO_PATH, p["storage_path"] or rc.STORAGE_PATH
    dropins = [(f, t) for f, t in texts.items() if f not in (cpath, spath)]
    result = rc.plan_crio((spath, texts[spath]), (cpath, texts[cpath]), dropins, p["settings"])
    return result, {cpath: result["after"]["crio"], spath: result["after"]["storage"]}, cpath


def read_files(runtime, p):
    """path -> text on disk (None when missing), in the order the runtime reads them."""
    if runtime == "containerd":
        paths = [p["path"] or rc.CONTAINERD_PATH]
    else:
        dropin_dir = p["dropin_dir"] or rc.DROPIN_DIR
        dropins = sorted(f for f in _listdir(dropin_dir) if f.endswith(".conf"))
        paths = [p["storage_path"] or rc.STORAGE_PATH, p["path"] or rc.CRIO_PATH] + [os.path.join(dropin_dir, f) for f in dropins]
    texts = {path: _config_io.read_text(path) for path in paths}
    return {path: text for path, text in texts.items() if text is not None or path not in paths[2:]}


def _listdir(path):
    try:
        return os.listdir(path)
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise _config_io.ConfigFileError("Cannot read the drop-in directory %s: %s." % (path, exc.strerror or exc))


def run(module):
    """Everything runtime_config does after argument parsing; exits the module."""
    if not rc.HAS_TOMLKIT:
        module.fail_json(msg=missing_required_lib("tomlkit"), exception=rc.TOMLKIT_IMPORT_ERROR)
    p = module.params
    try:
        mode = _config_io.file_mode(p["mode"])
    except _config_io.ConfigFileError as exc:
        module.fail_json(msg=str(exc))
    if p["cri_timeout"] <= 0:
        module.fail_json(msg="cri_timeout must be a positive number of seconds, got %s." % p["cri_timeout"])
    if p["validate"] and "%s" not in p["validate"]:
        module.fail_json(msg="validate must contain %%s (the file to check), got %r." % p["validate"])
    crio_options = [k for k in CRIO_ONLY if p[k] is not None]
    try:
        runtime = p["runtime"] or rc.detect_runtime(p["path"], crio_options)
        if runtime == "containerd" and crio_options:
            raise rc.ConfigError("%s appl%s only to runtime crio." % (" and ".join(crio_options), "ies" if len(crio_options) == 1 else "y"))
        disk = read_files(runtime, p)
        base = dict(disk)
        main_path = p["path"] or (rc.CONTAINERD_PATH if runtime == "containerd" else rc.CRIO_PATH)
        if p["content"] is not None:
            base[main_path] = p["content"]
        if p["storage_content"] is not None:
            base[p["storage_path"] or rc.STORAGE_PATH] = p["storage_content"]
        result, after, main_path = plan(runtime, p, base)
    except (rc.ConfigError, _config_io.ConfigFileError) as exc:
        module.fail_json(msg=str(exc))
    try:
        previous = plan(runtime, dict(p, settings=None), disk)[0]["current"]
    except rc.ConfigError:
        previous = {}
    changed_keys = [k for k, v in result["current"].items() if previous.get(k) != v]

    findings, rpc_calls = list(result["findings"]), {}
    if p["query_runtime"]:
        reported, problem = query_runtime(module, p["cri_endpoint"], p["cri_timeout"], rpc_calls)
        findings += [problem] if problem else rc.runtime_findings(runtime, result["current"], changed_keys, *reported)

    writes = []
    for path, text in after.items():
        new = text if text is not None else base[path]
        if new is not None and new != disk[path]:
            writes.append((path, new))
    backups, done = {}, []
    if not module.check_mode:
        for path, text in writes:
            try:
                backup = _config_io.write_text(module, path, text, backup=p["backup"], validate=p["validate"] if path == main_path else None, mode=mode)
            except _config_io.ConfigFileError as exc:
                module.fail_json(msg=str(exc), changed=bool(done), files=done, backup_files=backups)
            done.append(path)
            if backup:
                backups[path] = backup
    out = dict(
        changed=bool(writes),
        runtime=runtime,
        files=[path for path, text in writes],
        backup_files=backups,
        current=result["current"],
        changes=[dict(key=k, before=previous.get(k), after=result["current"][k]) for k in changed_keys if k != "config_version"],
        findings=rc.sort_findings(findings),
        rpc_calls=rpc_calls,
    )
    if module._diff:
        out["diff"] = [_config_io.unified_diff_dict(path, disk[path], text) for path, text in writes]
    module.exit_json(**out)
