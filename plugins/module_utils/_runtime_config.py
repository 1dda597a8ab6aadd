# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""One runtime_config run: read the files, plan (_runtime_config_policy), query the runtime, write.

``options()`` checks the module's parameters, ``run()`` takes the config-file backend
(_config_io.ConfigFiles) and returns the module's result, or raises a ConfigError whose
result says which files were already written.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re

from ansible_collections.kubenode.gc.plugins.module_utils import _cri, _runtime_config_policy as rc, _snapshot
from ansible_collections.kubenode.gc.plugins.module_utils._common import CONFIG_FILE_ARGS, CRI_COMMON_ARGS, cri_options, require_cri_libraries, require_library
from ansible_collections.kubenode.gc.plugins.module_utils._config_io import ConfigFileError, file_mode, redact_texts, redacted_diff
from ansible_collections.kubenode.gc.plugins.module_utils._errors import ConfigError, KubenodeGcError, OptionError
from ansible_collections.kubenode.gc.plugins.module_utils._findings import finding, sort_findings
from ansible_collections.kubenode.gc.plugins.module_utils._redact import scrub_all, scrub_error
from ansible_collections.kubenode.gc.plugins.module_utils._toml_edit import HAS_TOMLKIT, TOMLKIT_IMPORT_ERROR, redact_text

CRIO_ONLY = ("storage_path", "storage_content", "dropin_dir")


def options(params):
    """The module's parameters, checked; the runtime detected when not given. tomlkit must be installed."""
    require_library(HAS_TOMLKIT, "tomlkit", TOMLKIT_IMPORT_ERROR)
    opts = dict(params, mode=file_mode(params["mode"]), **cri_options(params))
    if params["validate"] and "%s" not in params["validate"]:
        raise OptionError("validate must contain %%s (the file to check), got %r." % params["validate"])
    crio_options = [k for k in CRIO_ONLY if params[k] is not None]
    opts["runtime"] = params["runtime"] or rc.detect_runtime(params["path"], crio_options)
    if opts["runtime"] == "containerd" and crio_options:
        raise ConfigError("%s appl%s only to runtime crio." % (" and ".join(crio_options), "ies" if len(crio_options) == 1 else "y"))
    if opts["runtime"] == "containerd" and not opts["path"]:
        opts["path"] = rc.containerd_path()
    return opts


def query_runtime(opts, rpc_calls):
    """(runtime info, image filesystems), or (None, a runtime_unreachable finding); counts the calls in ``rpc_calls``."""
    try:
        endpoint = _cri.resolve_endpoint(opts["cri_endpoint"])[0]
        problem = _cri.probe_socket(_cri.endpoint_to_path(endpoint))
    except _cri.CriError as exc:
        return None, finding("info", "runtime_unreachable", "The runtime was not queried: %s" % exc)
    if problem:
        return None, finding("info", "runtime_unreachable", "The runtime at %s was not queried: %s." % (endpoint, problem))
    require_cri_libraries(" They are needed to query the runtime; set query_runtime to false to skip it.")
    client = _cri.CriClient(endpoint, timeout=opts["cri_timeout"])
    try:
        return (_snapshot.read_runtime(client), _snapshot.read_imagefs(client)), None
    except _cri.CriError as exc:
        return None, finding("info", "runtime_unreachable", "The runtime at %s was not queried: %s" % (endpoint, exc))
    finally:
        rpc_calls.update(client.rpc_calls)
        client.close()


def plan(runtime, opts, texts, read_text=None):
    """Run the pure planner on ``texts`` (path -> text or None); returns (plan, {path: new text}, main path).

    containerd's imports are read with ``read_text`` (path -> text or None).
    """
    if runtime == "containerd":
        path = opts["path"] or rc.CONTAINERD_PATH
        imports = rc.load_containerd_imports(path, rc.parse(texts[path] or "", path).unwrap(), read_text, go_glob)
        result = rc.plan_containerd(texts[path], path, opts["settings"], imports)
        return result, {path: result["after"]}, path
    cpath, spath = opts["path"] or rc.CRIO_PATH, opts["storage_path"] or rc.STORAGE_PATH
    dropins = [(f, t) for f, t in texts.items() if f not in (cpath, spath)]
    result = rc.plan_crio((spath, texts[spath]), (cpath, texts[cpath]), dropins, opts["settings"])
    return result, {cpath: result["after"]["crio"], spath: result["after"]["storage"]}, cpath


def read_files(files, runtime, opts):
    """(path -> text on disk (None when missing), in the order the runtime reads them; path -> resolved path of the files it may write).

    The files it may write (containerd's config.toml, cri-o's storage.conf and crio.conf) are read at the end of
    their symbolic links (a dangling link fails); drop-ins are only read.
    """
    owned = owned_paths(runtime, opts)
    paths = list(owned)
    if runtime != "containerd":
        dropin_dir = opts["dropin_dir"] or rc.DROPIN_DIR
        paths += crio_dropins(dropin_dir)
    resolved = {path: files.resolve_path(path) for path in owned}
    texts = {path: files.read_text(path) for path in paths}  # at the end of their links (resolved), named as given
    return {path: text for path, text in texts.items() if text is not None or path not in paths[2:]}, resolved


def crio_dropins(directory):
    """The drop-ins CRI-O reads from ``directory``, in its order: filepath.Walk (lexical, subdirectories included), every
    file whatever its name (OpenShift's 00-default has no extension), a symbolic link read at its target."""
    if not os.path.isdir(directory):
        _listdir(directory)  # a directory that cannot be read fails here, a missing one gives no drop-ins
        return []
    found = []
    for root, dirs, names in os.walk(directory, onerror=_walk_error):
        dirs.sort()
        found += [os.path.join(root, name) for name in names]
    return sorted(found, key=lambda p: os.path.relpath(p, directory).split(os.sep))


def _walk_error(exc):
    raise ConfigFileError("Cannot read the drop-in directory %s: %s." % (exc.filename, exc.strerror or exc))


def go_glob(pattern):
    """The paths matching ``pattern`` as Go's filepath.Glob gives them: sorted per directory, '*' matches dot files too."""
    found = ["/" if pattern.startswith("/") else ""]
    parts = [part for part in pattern.split("/") if part]
    for i, part in enumerate(parts):
        if not re.search(r"[*?[]", part):
            found = [os.path.join(d, part) for d in found]
            continue
        matcher = re.compile(fnmatch.translate(part.replace("[^", "[!")))
        found = [os.path.join(d, name) for d in found for name in sorted(_listdir(d or ".", quiet=True)) if matcher.match(name)]
        if i < len(parts) - 1:
            found = [d for d in found if os.path.isdir(d)]
    return [path for path in found if os.path.lexists(path)]


def _listdir(path, quiet=False):
    try:
        return os.listdir(path)
    except FileNotFoundError:
        return []
    except OSError as exc:
        if quiet:
            return []
        raise ConfigFileError("Cannot read the drop-in directory %s: %s." % (path, exc.strerror or exc))


def _read_quietly(files, path):
    try:
        return files.read_text(path)
    except (KubenodeGcError, OSError):
        return None


def run(files, opts, check_mode=False):
    """Read, plan, query the runtime, and (unless check mode) write; returns the module's result with ``diff``.

    Symbolic links are followed for the files it writes: the targets are read and replaced (``resolved_path``,
    ``resolved_files``). Secret values (_redact) are replaced by the marker in ``diff`` and removed from every
    message, including errors. A run that may write holds the lock of the files it may write
    (_config_io.lock_dirs) from its reads to its writes, so concurrent runs both land.
    """
    runtime = opts["runtime"]
    writing = not check_mode and bool(opts["settings"] or opts["content"] is not None or opts["storage_content"] is not None)
    with files.lock([files.resolve_path(p) for p in owned_paths(runtime, opts)] if writing else []):
        return _locked_run(files, opts, check_mode, runtime)


def owned_paths(runtime, opts):
    """The files a run may write, as given: containerd's config.toml; cri-o's storage.conf and crio.conf (in that order)."""
    if runtime == "containerd":
        return [opts["path"] or rc.CONTAINERD_PATH]
    return [opts["storage_path"] or rc.STORAGE_PATH, opts["path"] or rc.CRIO_PATH]


def _locked_run(files, opts, check_mode, runtime):
    disk, resolved = read_files(files, runtime, opts)
    redact = functools.partial(redact_text, path="the config file")
    secrets = redact_texts(list(disk.values()) + [opts["content"], opts["storage_content"]], redact)[1]
    try:
        return _run(files, opts, check_mode, runtime, disk, resolved, redact)
    except KubenodeGcError as exc:
        raise scrub_error(exc, secrets)


def _run(files, opts, check_mode, runtime, disk, resolved, redact):
    base = dict(disk)
    main_path = opts["path"] or (rc.CONTAINERD_PATH if runtime == "containerd" else rc.CRIO_PATH)
    if opts["content"] is not None:
        base[main_path] = opts["content"]
    if opts["storage_content"] is not None:
        base[opts["storage_path"] or rc.STORAGE_PATH] = opts["storage_content"]
    result, after, main_path = plan(runtime, opts, base, files.read_text)
    try:
        previous = plan(runtime, dict(opts, settings=None), disk, files.read_text)[0]["current"]
    except ConfigError:
        previous = {}
    changed_keys = [k for k, v in result["current"].items() if previous.get(k) != v]

    findings, rpc_calls = list(result["findings"]), {}
    if opts["query_runtime"]:
        reported, problem = query_runtime(opts, rpc_calls)
        findings += [problem] if problem else rc.runtime_findings(runtime, result["current"], changed_keys, *reported)

    writes = []
    for path, text in after.items():
        new = text if text is not None else base[path]
        if new is not None and new != disk[path]:
            writes.append((path, new))
    mco_paths = rc.mco_files(_read_quietly(files, rc.MCO_CURRENT_CONFIG))
    rc.generated_check(disk, [path for path, text in writes if disk.get(path) is not None], mco_paths)
    findings += rc.generated_findings(disk, mco_paths)
    found, secrets = redact_texts(list(disk.values()) + list(base.values()) + [text for path, text in writes], redact)
    backups, done = {}, []
    if not check_mode:
        for path, text in writes:
            try:
                backup = files.write_text(path, text, backup=opts["backup"], validate=opts["validate"] if path == main_path else None, mode=opts["mode"])
            except ConfigFileError as exc:
                partial = dict(changed=bool(done), files=done, resolved_files={p: resolved[p] for p in done}, backup_files=backups)
                raise ConfigFileError(str(exc), partial)
            done.append(path)
            if backup:
                backups[path] = backup
    return scrub_all(dict(
        changed=bool(writes),
        runtime=runtime,
        files=[path for path, text in writes],
        resolved_path=resolved[main_path],
        resolved_files={path: resolved[path] for path, text in writes},
        backup_files=backups,
        current=result["current"],
        changes=[dict(key=k, before=previous.get(k), after=result["current"][k]) for k in changed_keys if k != "config_version"],
        findings=sort_findings(findings),
        rpc_calls=rpc_calls,
        diff=[redacted_diff(path, disk[path], text, found) for path, text in writes],
    ), secrets)


# The module's options (plugins/modules/runtime_config.py documents them); here so that kubenode.gc.node_audit runs it too.
ARGUMENT_SPEC = dict(
    CRI_COMMON_ARGS,
    **CONFIG_FILE_ARGS,
    runtime=dict(type="str", choices=["containerd", "crio"]),
    storage_path=dict(type="path"),
    dropin_dir=dict(type="path"),
    storage_content=dict(type="str"),
    query_runtime=dict(type="bool", default=True),
)
