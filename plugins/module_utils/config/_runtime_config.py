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
import json
import os
import re

from ansible_collections.kubenode.gc.plugins.module_utils import _daemons
from ansible_collections.kubenode.gc.plugins.module_utils._common import CONFIG_FILE_ARGS, CRI_COMMON_ARGS, calls_since, require_library
from ansible_collections.kubenode.gc.plugins.module_utils._errors import ConfigError, KubenodeGcError, OptionError
from ansible_collections.kubenode.gc.plugins.module_utils._redact import scrub_all, scrub_error
from ansible_collections.kubenode.gc.plugins.module_utils.config import _config_io, _runtime_config_policy as rc
from ansible_collections.kubenode.gc.plugins.module_utils.config import _node_layouts as layouts
from ansible_collections.kubenode.gc.plugins.module_utils.config._config_io import ConfigFileError, file_mode, redact_texts, redacted_diff
from ansible_collections.kubenode.gc.plugins.module_utils.config._findings import finding, sort_findings, untrusted_findings
from ansible_collections.kubenode.gc.plugins.module_utils.config._toml_edit import HAS_TOMLKIT, TOMLKIT_IMPORT_ERROR, data as toml_data, redact_text
from ansible_collections.kubenode.gc.plugins.module_utils.cri import _cri, _snapshot
from ansible_collections.kubenode.gc.plugins.module_utils.cri._cri_backend import cri_options, require_cri_libraries

CRIO_ONLY = ("storage_path", "storage_content", "dropin_dir")


def options(params):
    """The module's parameters, checked; the runtime and its files from the running runtime (command_line), else detected.

    ``command_line`` is what the runtime's command line says (None when nothing does): dict(runtime, what, who, flags,
    pid) of the runtime listening on the CRI socket (with query_runtime), else of MicroK8s's arguments file or the
    systemd unit (files only). tomlkit must be installed."""
    require_library(HAS_TOMLKIT, "tomlkit", TOMLKIT_IMPORT_ERROR)
    opts = dict(params, mode=file_mode(params["mode"]), **cri_options(params))
    if params["validate"] and "%s" not in params["validate"]:
        raise OptionError("validate must contain %%s (the file to check), got %r." % params["validate"])
    crio_options = [k for k in CRIO_ONLY if params[k] is not None]
    opts["untrusted_daemons"] = []  # untrusted_daemon_process findings: a listener on the socket that is not root's
    daemon = running_runtime(opts, opts["untrusted_daemons"]) if params["query_runtime"] else None
    if daemon and params["runtime"] and daemon["runtime"] != params["runtime"]:
        daemon = None
    if not (params["runtime"] or daemon):
        unit = unit_command_line("containerd")  # Flatcar's and MicroK8s's containerd read a file of no default path
        opts["runtime"] = "containerd" if unit and unit["flags"].get("config") and not crio_options else rc.detect_runtime(params["path"], crio_options)
    else:
        opts["runtime"] = params["runtime"] or daemon["runtime"]
    if opts["runtime"] in ("containerd", "docker") and crio_options:
        raise ConfigError("%s appl%s only to runtime crio." % (" and ".join(crio_options), "ies" if len(crio_options) == 1 else "y"))
    if opts["runtime"] == "docker":
        return docker_options(opts, params, daemon)
    line = daemon or unit_command_line(opts["runtime"])
    opts["command_line"] = line
    flags = line["flags"] if line else {}
    if opts["runtime"] == "containerd":
        opts["path"] = params["path"] or flags.get("config") or (rc.CONTAINERD_PATH if daemon else rc.containerd_path())
    else:
        opts["path"] = params["path"] or flags.get("config")
        opts["dropin_dir"] = params["dropin_dir"] or flags.get("config-dir")
        opts["storage_path"] = params["storage_path"] or flags.get("storage-conf")
    return opts


def running_runtime(opts, untrusted=None):
    """The runtime listening on the CRI socket in use, as options() describes it; None when none can be read or the
    listener is not trusted (_daemons.find_runtime: root's, from a root-owned executable): then an
    untrusted_daemon_process finding naming it is added to ``untrusted`` (a list), and the files are read as when no
    runtime runs."""
    try:
        path = _cri.endpoint_to_path(_cri.resolve_endpoint(opts["cri_endpoint"])[0])
    except _cri.CriError:
        return None
    runtime, proc, ignored = _daemons.find_runtime(path)
    if untrusted is not None:
        untrusted += untrusted_findings(ignored, "the runtime listening on %s" % path)
    if runtime is None:
        return None
    flags = _daemons.runtime_flags(runtime, proc.argv[1:], proc.environ, proc)
    if runtime == "cri-dockerd":
        return dict(runtime="docker", pid=proc.pid, what="the running cri-dockerd (pid %d)" % proc.pid, who="the running cri-dockerd (pid %d) runs with"
                    % proc.pid, flags=flags)
    name = rc.RUNTIME_NAMES[runtime]
    return dict(runtime=runtime, pid=proc.pid, what="the running %s (pid %d)" % (name, proc.pid), who="the running %s (pid %d) runs with" % (
        name, proc.pid), flags=flags)


def docker_options(opts, params, daemon):
    """runtime docker (cri-dockerd in front of dockerd): read only. The dockerd is the one listening on the socket the
    running cri-dockerd's ``--docker-endpoint`` names (Docker's default socket when it names none or none runs), else the
    command line of ``docker.service``; its ``--config-file`` (or /etc/docker/daemon.json) is the file read."""
    if params["settings"] or params["content"] is not None:
        raise ConfigError("runtime_config does not edit dockerd's configuration (daemon.json and dockerd's flags are out of its scope); set "
                          "dockerd's data-root with your own tooling, then runtime_config reports it. Nothing was changed.")
    endpoint = (daemon or {}).get("flags", {}).get("docker-endpoint") or "unix:///var/run/docker.sock"
    opts["docker_endpoint"] = endpoint
    line = None
    if endpoint.startswith("unix://"):
        proc = _daemons.dockerd_process(endpoint[len("unix://"):])
        if proc is not None:
            line = dict(runtime="docker", pid=proc.pid, what="the running dockerd (pid %d)" % proc.pid,
                        who="the running dockerd (pid %d) runs with" % proc.pid, flags=_daemons.runtime_flags("dockerd", proc.argv[1:], proc.environ, proc))
    if line is None:
        files = _daemons.unit_files("docker.service", _daemons.SYSTEMD_UNIT_DIRS)
        words, _used = _daemons.unit_command(files, functools.partial(_read_quietly, _config_io))
        flags = _daemons.runtime_flags("dockerd", words[1:]) if words else {}
        if flags:
            line = dict(runtime="docker", pid=None, what="dockerd as its systemd unit starts it (%s)" % files[0],
                        who="dockerd's systemd unit (%s) starts it with" % files[0], flags=flags)
    opts["command_line"] = line
    opts["path"] = params["path"] or (line["flags"].get("config-file") if line else None) or rc.DOCKER_CONFIG_PATH
    return opts


def unit_command_line(runtime):
    """The command line the node's files give a runtime that does not run: MicroK8s's arguments file, else its systemd
    unit (and drop-ins), when it passes any flag we read; None otherwise."""
    if runtime == "containerd" and os.path.isfile(layouts.MICROK8S_CONTAINERD_ARGS):
        words = _daemons.args_file_words(_read_quietly(_config_io, layouts.MICROK8S_CONTAINERD_ARGS),
                                         layouts.microk8s_variables(layouts.MICROK8S_CONTAINERD_ARGS))
        return dict(runtime=runtime, pid=None, what="containerd as MicroK8s starts it (%s)" % layouts.MICROK8S_CONTAINERD_ARGS,
                    who="MicroK8s runs containerd with", flags=_daemons.runtime_flags(runtime, words))
    unit = "containerd.service" if runtime == "containerd" else "crio.service"
    files = _daemons.unit_files(unit, _daemons.SYSTEMD_UNIT_DIRS)
    words, _used = _daemons.unit_command(files, functools.partial(_read_quietly, _config_io))
    flags = _daemons.runtime_flags(runtime, words[1:]) if words else {}
    if not flags:
        return None
    name = rc.RUNTIME_NAMES[runtime]
    return dict(runtime=runtime, pid=None, what="%s as its systemd unit starts it (%s)" % (name, files[0]),
                who="%s's systemd unit (%s) starts it with" % (name, files[0]), flags=flags)


def command_line_settings(opts):
    """What the command line says about the settings: dict(who, <setting>: value) for the planners, or None."""
    line = opts.get("command_line")
    if not line:
        return None
    flags = line["flags"]
    if opts["runtime"] == "containerd":
        return dict(who=line["who"], root=flags.get("root"), state=flags.get("state"))
    return dict(who=line["who"], **{key: flags.get(flag) for key, flag in rc.CRIO_FLAG_OF.items()})


def reads_other_file(opts):
    """(the file given, the file the runtime reads instead, how, what reads it) when an option names another file than
    the runtime's command line does (the template the file is generated from is the one to edit: not another), else None."""
    line = opts.get("command_line")
    if not line:
        return None
    flags = line["flags"]
    if opts["runtime"] == "containerd":
        pairs = [(opts["path"], flags.get("config") or (rc.CONTAINERD_PATH if line["pid"] else None), "--config")]
    else:
        pairs = [(opts["path"], flags.get("config") or rc.CRIO_PATH, "--config"),
                 (opts["storage_path"], flags.get("storage-conf") or rc.STORAGE_PATH, "CONTAINERS_STORAGE_CONF")]
        pairs += [(opts["dropin_dir"], flags.get("config-dir") or rc.DROPIN_DIR, "--config-dir")]
    for given, reads, how in pairs:
        if given and reads and os.path.realpath(given) not in (os.path.realpath(reads), layouts.template_of(os.path.realpath(reads))):
            return given, reads, how, line["what"]
    return None


def query_runtime(opts, rpc_calls, status_info=None):
    """(runtime info, image filesystems), or (None, a runtime_unreachable finding); counts the calls in ``rpc_calls``;
    the runtime's verbose Status info goes into ``status_info``, and for cri-o the configuration its HTTP API gives
    (under rc.CRIO_API_CONFIG; left out when that API does not answer)."""
    try:
        endpoint = _cri.resolve_endpoint(opts["cri_endpoint"])[0]
        problem = _cri.probe_socket(_cri.endpoint_to_path(endpoint))
    except _cri.CriError as exc:
        return None, finding("info", "runtime_unreachable", "The runtime was not queried: %s" % exc)
    if problem:
        return None, finding("info", "runtime_unreachable", "The runtime at %s was not queried: %s." % (endpoint, problem))
    require_cri_libraries(" They are needed to query the runtime; set query_runtime to false to skip it.")
    shared = opts.get("client")  # node_audit's one client for the execution, whose answers its parts share
    client = shared if shared is not None and shared.endpoint == endpoint else _cri.CriClient(endpoint, timeout=opts["cri_timeout"])
    before = dict(client.rpc_calls)
    try:
        reported = (_snapshot.read_runtime(client, status_info=status_info), _snapshot.read_imagefs(client))
    except _cri.CriError as exc:
        return None, finding("info", "runtime_unreachable", "The runtime at %s was not queried: %s" % (endpoint, exc))
    finally:
        rpc_calls.update(calls_since(client.rpc_calls, before))
        if client is not shared:
            client.close()
    if status_info is not None and opts["runtime"] == "crio" and rc.RUNTIME_NAMES["crio"] in (reported[0]["name"] or "").lower():
        # imported here: http.client, which it needs, costs every run on a containerd node an import for nothing
        from ansible_collections.kubenode.gc.plugins.module_utils.cri import _crio_api  # pylint: disable=import-outside-toplevel

        try:
            status_info[rc.CRIO_API_CONFIG] = _crio_api.config(client.path, timeout=opts["cri_timeout"])
        except _crio_api.CrioApiError:
            pass  # no answer: the files and the command line are all there is to compare with
    return reported, None


def plan(runtime, opts, texts, read_text=None):
    """Run the pure planner on ``texts`` (path -> text or None); returns (plan, {path: new text}, main path).

    containerd's imports are read with ``read_text`` (path -> text or None).
    """
    if runtime == "containerd":
        path = opts["path"] or rc.CONTAINERD_PATH
        imports = rc.load_containerd_imports(path, toml_data(texts[path] or "", path), read_text, go_glob)
        result = rc.plan_containerd(texts[path], path, opts["settings"], imports, command_line_settings(opts))
        return result, {path: result["after"]}, path
    cpath, spath = opts["path"] or rc.CRIO_PATH, opts["storage_path"] or rc.STORAGE_PATH
    dropins = [(f, t) for f, t in texts.items() if f not in (cpath, spath)]
    result = rc.plan_crio((spath, texts[spath]), (cpath, texts[cpath]), dropins, opts["settings"], command_line_settings(opts))
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
    (_config_io.lock_dirs) from its reads to its writes, so concurrent runs both land; that lock refuses, before
    anything is written, a file whose path goes through a directory or link another user controls (read, such a file
    gives an ``untrusted_path`` warning). A listener on the socket that is not root's gives ``untrusted_daemon_process``.
    """
    runtime = opts["runtime"]
    if runtime == "docker":
        return _docker_run(files, opts)
    writing = not check_mode and bool(opts["settings"] or opts["content"] is not None or opts["storage_content"] is not None)
    with files.lock(owned_paths(runtime, opts) if writing else []):  # refuses a path through another user's directory or link
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
    other = reads_other_file(opts)
    if other and (opts["settings"] or opts["content"] is not None or opts["storage_content"] is not None):
        raise ConfigError("Not editing %s: %s reads %s (its %s), not %s, so the edit would not take effect; nothing was changed." % (
            other[0], other[3], other[1], other[2], other[0]))
    base = dict(disk)
    main_path = opts["path"] or (rc.CONTAINERD_PATH if runtime == "containerd" else rc.CRIO_PATH)
    mco_paths = rc.mco_files(_read_quietly(files, rc.MCO_CURRENT_CONFIG))
    os_name = layouts.os_id(functools.partial(_read_quietly, files))
    line = command_line_settings(opts) or (rc.distro_containerd(main_path) if runtime == "containerd" else None)
    if runtime == "containerd" and (opts["settings"] or opts["content"] is not None) and disk.get(main_path) is not None and not \
            rc.fixed_by_command_line(rc.check_settings(runtime, opts["settings"]), line):
        rc.generated_check(disk, [main_path], mco_paths, os_name)  # before the imports: no edit of it can last
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

    findings, rpc_calls, info = list(result["findings"]), {}, {}
    if other:
        findings.append(finding("warning", "daemon_reads_other_file", "%s reads %s (its %s), not %s, so the values reported for that file are "
                                "not the ones it uses." % (other[3], other[1], other[2], other[0])))
    if opts["query_runtime"]:
        reported, problem = query_runtime(opts, rpc_calls, info)
        findings += [problem] if problem else rc.runtime_findings(runtime, result["current"], changed_keys, *reported)
        findings += rc.status_findings(runtime, result["current"], changed_keys, info, reported[0]["endpoint"] if reported else None)
        if reported and rc.runtime_of_name(reported[0]["name"]) == "containerd" and rc.major_version(reported[0]["version"]) >= 2:
            # what containerd 2.x drops from this version 2 file is dropped now, not after an upgrade
            findings = [dict(f, severity="warning") if f["code"] == rc.DROPPED_CODE else f for f in findings]

    writes = []
    for path, text in after.items():
        new = text if text is not None else base[path]
        if new is not None and new != disk[path]:
            writes.append((path, new))
    rc.generated_check(disk, [path for path, text in writes if disk.get(path) is not None], mco_paths, os_name)
    findings += rc.generated_findings(disk, mco_paths, os_name) + opts.get("untrusted_daemons", []) + files.path_findings()
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
        daemon=dict(pid=opts["command_line"]["pid"], flags=opts["command_line"]["flags"]) if opts.get("command_line") and opts["command_line"]["pid"] else None,
        diff=[redacted_diff(path, disk[path], text, found) for path, text in writes],
    ), secrets)


def _docker_run(files, opts):
    """runtime docker: dockerd's data root (its ``--data-root``, else its daemon.json's ``data-root``, else the default) as
    the image filesystem's root, and a finding when the image filesystem cri-dockerd reports is another; nothing is written."""
    path = opts["path"]
    text = files.read_text(path)
    config = {}
    if text is not None and text.strip():
        try:
            config = json.loads(text)
        except ValueError as exc:
            raise ConfigError("dockerd's configuration %s is not valid JSON: %s." % (path, exc)) from None
        if not isinstance(config, dict):
            raise ConfigError("dockerd's configuration %s is not a JSON object." % path)
    line = opts.get("command_line")
    flags = line["flags"] if line else {}
    root, source = rc.docker_data_root(flags, config)
    current = dict(data_root=root, data_root_source=source, config_file=path, config_file_exists=text is not None,
                   docker_endpoint=opts.get("docker_endpoint"))
    findings, rpc_calls = [], {}
    if opts["query_runtime"]:
        reported, problem = query_runtime(opts, rpc_calls)
        findings += [problem] if problem else rc.docker_findings(current, *reported)
    return dict(changed=False, runtime="docker", files=[], resolved_path=os.path.realpath(path), resolved_files={}, backup_files={},
                current=current, changes=[], findings=sort_findings(findings), rpc_calls=rpc_calls,
                daemon=dict(pid=line["pid"], flags=flags) if line and line["pid"] else None, diff=[])


# The module's options (plugins/modules/runtime_config.py documents them); here so that kubenode.gc.node_audit runs it too.
ARGUMENT_SPEC = dict(
    CRI_COMMON_ARGS,
    **CONFIG_FILE_ARGS,
    runtime=dict(type="str", choices=["containerd", "crio", "docker"]),
    storage_path=dict(type="path"),
    dropin_dir=dict(type="path"),
    storage_content=dict(type="str"),
    query_runtime=dict(type="bool", default=True),
)
