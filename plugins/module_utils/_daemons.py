# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""The running daemons of a node, read from /proc, and the command lines their files give them: I/O, no Ansible.

* ``kubelet_process``: the kubelet (a process named ``kubelet``, or MicroK8s's ``kubelite``, whose kubelet flags are
  in the file of its ``--kubelet-args-file``); ``runtime_process``: the process listening on a CRI socket (its inode
  in /proc/net/unix, then the ``socket:[inode]`` links of /proc/<pid>/fd): containerd, cri-o or cri-dockerd;
  ``dockerd_process``: the dockerd listening on a Docker Engine socket (the one cri-dockerd's ``--docker-endpoint``
  names). Each is a ``Process``: pid, name, the
  command line (/proc/<pid>/cmdline, which holds the values systemd expanded from the unit's Environment= and
  EnvironmentFile=) and the environment (/proc/<pid>/environ).
* ``go_flags``: the values of a Go daemon's flags (containerd and cri-o use urfave/cli on Go's flag package):
  ``-name value``, ``--name value``, ``-name=value``, the last one wins.
* ``unit_command``: the command line a systemd unit and its drop-ins give, with $VAR and ${VAR} expanded from
  their Environment= and EnvironmentFile= (used when the daemon does not run, as when a node image is built);
  ``args_file_words``: the words of a one-flag-per-line arguments file (MicroK8s's ``args/``).
* A value that still holds a ``$VAR`` placeholder after expansion is no value (``unexpanded``).

Nothing here raises for an unreadable /proc entry: a process that cannot be read (another user's, gone) is skipped.
"""

from __future__ import annotations

import collections
import glob
import os
import re
import shlex

PROC = "/proc"
KUBELET_NAMES = ("kubelet",)
KUBELITE = "kubelite"  # MicroK8s runs the kubelet inside kubelite, its flags in --kubelet-args-file
KUBELITE_ARGS_FLAG = "kubelet-args-file"
RUNTIME_NAMES = {"containerd": "containerd", "crio": "crio", "cri-dockerd": "cri-dockerd"}  # process name -> runtime

Process = collections.namedtuple("Process", "pid name argv environ cwd")

_PLACEHOLDER = re.compile(r"\$(\{[A-Za-z_][A-Za-z0-9_]*\}|[A-Za-z_][A-Za-z0-9_]*)")


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def read_process(pid):
    """The Process of ``pid``, or None when it cannot be read."""
    base = os.path.join(PROC, str(pid))
    cmdline = _read(os.path.join(base, "cmdline"))
    comm = _read(os.path.join(base, "comm"))
    if not cmdline or comm is None:
        return None
    argv = [a.decode("utf-8", "replace") for a in cmdline.rstrip(b"\0").split(b"\0")]
    environ = {}
    for item in (_read(os.path.join(base, "environ")) or b"").split(b"\0"):
        name, sep, value = item.decode("utf-8", "replace").partition("=")
        if sep:
            environ[name] = value
    try:
        cwd = os.readlink(os.path.join(base, "cwd"))
    except OSError:
        cwd = "/"
    return Process(int(pid), comm.decode("utf-8", "replace").strip(), argv, environ, cwd)


def _pids():
    try:
        return sorted(int(p) for p in os.listdir(PROC) if p.isdigit())
    except OSError:
        return []


def _name_of(proc):
    """The program name: /proc/<pid>/comm, or the base name of argv[0] (comm is cut at 15 characters)."""
    return proc.name if proc.name in KUBELET_NAMES + (KUBELITE,) else os.path.basename(proc.argv[0])


def _pid_namespace(pid):
    try:
        return os.readlink(os.path.join(PROC, str(pid), "ns", "pid"))
    except OSError:
        return None


def kubelet_process():
    """The running kubelet (or MicroK8s's kubelite) as a Process, or None; with several, the one of the lowest pid.

    Only a process of this process's pid namespace counts: a kubelet in a container (a kind node on this host) reads
    the files of its own container, not the node's."""
    own = _pid_namespace("self")
    for pid in _pids():
        if pid == os.getpid():
            continue
        proc = read_process(pid)
        if proc and _name_of(proc) in KUBELET_NAMES + (KUBELITE,):
            theirs = _pid_namespace(pid)
            if own is None or theirs is None or theirs == own:
                return proc
    return None


def listener_pid(socket_path):
    """Pid of the process listening on a unix socket (through /proc), or None.

    /proc/net/unix names the path the socket was bound to, which may go through a symlink (cri-o's default
    /var/run/crio/crio.sock is /run/crio/crio.sock), so paths of the same name are compared resolved.
    """
    inodes = set()
    target = os.path.realpath(socket_path)
    try:
        with open(os.path.join(PROC, "net", "unix"), encoding="utf-8") as f:
            next(f)
            for line in f:
                fields = line.split()
                if len(fields) >= 8 and int(fields[3], 16) & 0x10000 and (  # __SO_ACCEPTCON
                    fields[7] == socket_path
                    or (os.path.basename(fields[7]) == os.path.basename(socket_path) and os.path.realpath(fields[7]) == target)
                ):
                    inodes.add("socket:[%s]" % fields[6])
    except (OSError, ValueError, StopIteration):
        return None
    if not inodes:
        return None
    for pid in _pids():
        fd_dir = os.path.join(PROC, str(pid), "fd")
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(os.path.join(fd_dir, fd)) in inodes:
                    return pid
            except OSError:
                continue
    return None


# cri-dockerd's CRI socket when its command line names none
CRI_DOCKERD_SOCKET = "/var/run/cri-dockerd.sock"


def cri_dockerd_serving(socket_path):
    """The Process of the cri-dockerd whose ``--container-runtime-endpoint`` is ``socket_path`` (resolved), or None.

    cri-dockerd binds its listener to a temporary name and renames it into place, so /proc/net/unix names the temporary
    path, never the socket: its command line is what says which socket it serves."""
    target = os.path.realpath(socket_path)
    for pid in _pids():
        proc = read_process(pid)
        if proc is None or "cri-dockerd" not in (proc.name, os.path.basename(proc.argv[0])):
            continue
        endpoint = go_flags(proc.argv[1:], (("container-runtime-endpoint",),)).get("container-runtime-endpoint") or "unix://" + CRI_DOCKERD_SOCKET
        path = endpoint[len("unix://"):] if endpoint.startswith("unix://") else endpoint
        if path.startswith("/") and os.path.realpath(in_process(proc, path)) == target:
            return proc
    return None


def runtime_process(socket_path):
    """(runtime, Process) of the containerd, cri-o or cri-dockerd listening on ``socket_path``; (None, None) when none does."""
    pid = listener_pid(socket_path)
    proc = read_process(pid) if pid else None
    if proc is None:
        proc = cri_dockerd_serving(socket_path)
        return ("cri-dockerd", proc) if proc is not None else (None, None)
    for name in (proc.name, os.path.basename(proc.argv[0])):
        if name in RUNTIME_NAMES:
            return RUNTIME_NAMES[name], proc
    return None, proc


DOCKER_SOCKET = "/var/run/docker.sock"


def _is_dockerd(proc):
    return proc is not None and "dockerd" in (proc.name, os.path.basename(proc.argv[0]))


def dockerd_process(socket_path):
    """The Process of the dockerd listening on the Docker Engine socket ``socket_path``, or None.

    The listener (/proc/net/unix), else a dockerd whose ``-H``/``--host`` names the socket (resolved; Docker's default
    socket when it names none): /proc/net/unix lists the sockets of this network namespace only, and a dockerd may run
    in another one (a systemd unit's PrivateNetwork, a test harness)."""
    pid = listener_pid(socket_path)
    proc = read_process(pid) if pid else None
    if _is_dockerd(proc):
        return proc
    target = os.path.realpath(socket_path)
    for pid in _pids():
        proc = read_process(pid)
        if not _is_dockerd(proc):
            continue
        hosts = _all_values(proc.argv[1:], ("host", "H")) or ["unix://" + DOCKER_SOCKET]
        for host in hosts:
            path = host[len("unix://"):] if host.startswith("unix://") else None
            if path and path.startswith("/") and os.path.realpath(in_process(proc, path)) == target:
                return proc
    return None


def _all_values(words, aliases):
    """Every value of a repeatable flag (``-H a -H b``, ``--host=a``) in ``words``, as Go's flag packages read them."""
    values, words, i = [], list(words), 0
    while i < len(words):
        word = words[i]
        i += 1
        if word == "--":
            break
        name, sep, value = word.lstrip("-").partition("=")
        if not word.startswith("-") or name not in aliases:
            continue
        if not sep:
            if i >= len(words):
                break
            value, i = words[i], i + 1
        values.append(value)
    return values


def in_process(proc, path):
    """``path`` as the process sees it, relative paths joined to its working directory."""
    return path if not path or os.path.isabs(path) else os.path.normpath(os.path.join(proc.cwd, path))


# ---------------------------------------------------------------------------------------------- command lines


def go_flags(words, names):
    """``{name: value}`` of the flags ``names`` (each a tuple of aliases, the first naming the result) in ``words``.

    As Go's flag package reads them: one or two dashes, ``=value`` or the next word; a later flag wins; ``--`` ends them.
    """
    found = {}
    aliases = {alias: group[0] for group in names for alias in group}
    words = list(words)
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if word == "--":
            break
        if not word.startswith("-") or word == "-":
            continue
        name, sep, value = word.lstrip("-").partition("=")
        if name not in aliases:
            continue
        if not sep:
            if i >= len(words):
                break
            value, i = words[i], i + 1
        found[aliases[name]] = value
    return found


def unexpanded(value):
    """Whether ``value`` still holds a $VAR or ${VAR} placeholder (a template's, or one nothing defines)."""
    return bool(value) and _PLACEHOLDER.search(value) is not None


def expand(text, variables):
    """``text`` with $VAR and ${VAR} of ``variables`` replaced; unknown ones are left as they are."""
    def one(match):
        name = match.group(1).strip("{}")
        return variables.get(name, match.group(0))
    return _PLACEHOLDER.sub(one, text)


def args_file_words(text, variables=None):
    """The words of a one-flag-per-line arguments file (``--flag=value`` or ``--flag value``; ``#`` comments)."""
    words = []
    for line in (text or "").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        line = expand(line, variables or {})
        try:
            words += shlex.split(line)
        except ValueError:
            words += line.split()
    return words


def _unit_lines(text):
    for line in re.sub(r"\\\r?\n", " ", text or "").splitlines():
        name, sep, value = line.strip().partition("=")
        if sep and not name.strip().startswith(("#", ";")):
            yield name.strip(), value.strip()


def _env_file(path, read_text):
    out = {}
    for name, value in _unit_lines(read_text(path) or ""):
        name = re.sub(r"^export\s+", "", name)
        if re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", name):
            out[name] = _words(value)[0] if _words(value) else ""
    return out


def _words(value):
    try:
        return shlex.split(value)
    except ValueError:
        return value.split()


def unit_files(unit, directories):
    """The files of systemd ``unit`` (such as containerd.service) in ``directories`` (earlier wins), then its drop-ins (*.conf, by name)."""
    main = next((os.path.join(d, unit) for d in directories if os.path.isfile(os.path.join(d, unit))), None)
    dropins = {}
    for directory in reversed(directories):
        for path in glob.glob(os.path.join(directory, unit + ".d", "*.conf")):
            dropins[os.path.basename(path)] = path
    return ([main] if main else []) + [dropins[name] for name in sorted(dropins)]


def unit_command(files, read_text):
    """(the words of the unit's last ExecStart with its variables expanded, the files read) from ``files`` (unit_files).

    Environment= and EnvironmentFile= (``-`` for optional) of every file are applied in order, and an empty
    ExecStart= resets the command, as systemd does. A word whose variables nothing defines stays unexpanded."""
    variables, command, used = {}, None, []
    for path in files:
        text = read_text(path)
        if text is None:
            continue
        used.append(path)
        for name, value in _unit_lines(text):
            if name == "Environment":
                for item in _words(value):
                    key, sep, val = item.partition("=")
                    if sep:
                        variables[key] = val
            elif name == "EnvironmentFile":
                variables.update(_env_file(value.lstrip("-"), read_text))
            elif name == "ExecStart":
                command = _words(value.lstrip("@-:+!")) if value else None
    if not command:
        return None, used
    words = []
    for word in command:
        whole = re.match(r"^\$([A-Za-z_][A-Za-z0-9_]*)$", word)
        if whole and whole.group(1) in variables:  # $VAR alone: split into words, as systemd does
            words += variables[whole.group(1)].split()
        else:
            words.append(expand(word, variables))
    return words, used


# ---------------------------------------------------------------------------------------------- the runtimes' flags

SYSTEMD_UNIT_DIRS = ("/etc/systemd/system", "/run/systemd/system", "/usr/lib/systemd/system", "/lib/systemd/system")
CONTAINERD_FLAGS = (("config", "c"), ("root",), ("state",), ("address", "a"))
CRIO_FLAGS = (("config", "c"), ("config-dir", "d"), ("root", "r"), ("runroot",), ("pause-image",), ("storage-driver", "s"), ("imagestore",))
# cri-o takes each of its flags from an environment variable too (the flag wins); containers/storage reads its file
# from CONTAINERS_STORAGE_CONF
CRIO_ENV = {"config": "CONTAINER_CONFIG", "config-dir": "CONTAINER_CONFIG_DIR", "root": "CONTAINER_ROOT", "runroot": "CONTAINER_RUNROOT",
            "pause-image": "CONTAINER_PAUSE_IMAGE", "storage-driver": "CONTAINER_STORAGE_DRIVER", "imagestore": "CONTAINER_IMAGESTORE"}
STORAGE_CONF_ENV = "CONTAINERS_STORAGE_CONF"
# cri-dockerd (cobra/pflag): the Docker Engine it talks to; dockerd: its data root (--graph and -g before 17.05), daemon.json
CRI_DOCKERD_FLAGS = (("docker-endpoint",),)
DOCKERD_FLAGS = (("data-root", "graph", "g"), ("config-file",), ("exec-root",))
PATH_FLAGS = ("config", "config-dir", "root", "state", "runroot", "imagestore", "address", "storage-conf", "data-root", "config-file", "exec-root")


def runtime_flags(runtime, words, environ=None, proc=None):
    """``{flag: value}`` of containerd's (config, root, state, address), cri-o's (config, config-dir, root, runroot,
    pause-image, storage-driver, imagestore, and storage-conf from CONTAINERS_STORAGE_CONF), cri-dockerd's
    (docker-endpoint) or dockerd's (data-root, config-file, exec-root) command line ``words`` (without the program);
    paths relative to ``proc``'s working directory; placeholders left unexpanded are no value."""
    environ = environ or {}
    if runtime == "cri-dockerd":
        found = go_flags(words, CRI_DOCKERD_FLAGS)
    elif runtime == "dockerd":
        found = go_flags(words, DOCKERD_FLAGS)
    elif runtime == "crio":
        found = {flag: environ[var] for flag, var in CRIO_ENV.items() if environ.get(var)}
        found.update(go_flags(words, CRIO_FLAGS))
        if environ.get(STORAGE_CONF_ENV):
            found["storage-conf"] = environ[STORAGE_CONF_ENV]
    else:
        found = go_flags(words, CONTAINERD_FLAGS)
    found = {k: v for k, v in found.items() if v and not unexpanded(v)}
    if proc is not None:
        found = {k: in_process(proc, v) if k in PATH_FLAGS else v for k, v in found.items()}
    return found
