# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""The running daemons of a node, read from /proc, and the command lines their files give them: I/O, no Ansible.

* ``find_kubelet``: the kubelet (a process named ``kubelet``, or MicroK8s's ``kubelite``, whose kubelet flags are
  in the file of its ``--kubelet-args-file``); ``find_runtime``: the process listening on a CRI socket (its inode
  in /proc/net/unix, then the ``socket:[inode]`` links of /proc/<pid>/fd; cri-dockerd, which binds its listener to
  a temporary name, by its ``--container-runtime-endpoint``): containerd, cri-o or cri-dockerd; ``dockerd_process``:
  the dockerd listening on a Docker Engine socket (the one cri-dockerd's ``--docker-endpoint`` names). Each is a
  ``Process``: pid, name, the
  command line (/proc/<pid>/cmdline, which holds the values systemd expanded from the unit's Environment= and
  EnvironmentFile=) and the environment (/proc/<pid>/environ).
* Only root's daemons are believed (``trust_problem``, the one place that decides): a process whose real and
  effective uid are 0 (/proc/<pid>/status) and whose executable (/proc/<pid>/exe) is a regular file root owns and
  no one else may write. Anyone can start a process named ``kubelet`` (a script, ``exec -a kubelet``), so a process
  with the name that fails these checks is ignored and returned as ``Untrusted`` (pid, uid, executable, why), which
  the modules report as the finding ``untrusted_daemon_process``; with no trusted daemon they read the files, as
  when none runs.
* Where systemd runs, the process of the daemon's own unit is preferred to any other (``unit_of``; KUBELET_UNITS,
  RUNTIME_UNITS): the kubelet of kubelet.service over a root process of the same name started by hand.
* ``go_flags``: the values of a Go daemon's flags (containerd and cri-o use urfave/cli on Go's flag package):
  ``-name value``, ``--name value``, ``-name=value``, the last one wins.
* ``unit_command``: the command line a systemd unit and its drop-ins give, with $VAR and ${VAR} expanded from
  their Environment= and EnvironmentFile= (used when the daemon does not run, as when a node image is built);
  ``args_file_words``: the words of a one-flag-per-line arguments file (MicroK8s's ``args/``).
* A value that still holds a ``$VAR`` placeholder after expansion is no value (``unexpanded``).

Nothing here raises for an unreadable /proc entry: a process that cannot be read (another user's, gone) is skipped.
Within ``once()`` (node_audit and node_cleanup, which run several modules' logic in one execution) /proc is read once:
find_kubelet and find_runtime answer every later question from their first reading.
"""

from __future__ import annotations

import collections
import contextlib
import glob
import os
import re
import shlex
import stat

from ansible_collections.kubenode.gc.plugins.module_utils._files import owner as _owner, problem as _problem

PROC = "/proc"
KUBELET_NAMES = ("kubelet",)
KUBELITE = "kubelite"  # MicroK8s runs the kubelet inside kubelite, its flags in --kubelet-args-file
KUBELITE_ARGS_FLAG = "kubelet-args-file"
RUNTIME_NAMES = {"containerd": "containerd", "crio": "crio", "cri-dockerd": "cri-dockerd"}  # process name -> runtime
# The systemd units that run the kubelet: kubeadm's and most packages' kubelet.service, MicroK8s's kubelite, k0s's
# worker (or controller with --enable-worker), k3s's and RKE2's server and agent (RKE2 and k0s start the kubelet as a
# child process in their unit)
KUBELET_UNITS = ("kubelet.service", "snap.microk8s.daemon-kubelite.service", "k0sworker.service", "k0scontroller.service", "k3s.service",
                 "k3s-agent.service", "rke2-server.service", "rke2-agent.service")
# The units that run each runtime (k3s and RKE2 start their containerd as a child of their own unit, MicroK8s in its own)
RUNTIME_UNITS = {"containerd": ("containerd.service", "snap.microk8s.daemon-containerd.service", "k3s.service", "k3s-agent.service",
                                "rke2-server.service", "rke2-agent.service"),
                 "crio": ("crio.service",), "cri-dockerd": ("cri-docker.service",)}
DOCKERD_UNITS = ("docker.service",)
SYSTEM_SLICE = "/system.slice/"

Process = collections.namedtuple("Process", "pid name argv environ cwd")
# A process with a daemon's name that is not trusted: its pid, name, real and effective uid (None: unreadable), the
# path of its executable (None: unreadable) and why it is not trusted (a phrase)
Untrusted = collections.namedtuple("Untrusted", "pid name uid euid exe why")

_PLACEHOLDER = re.compile(r"\$(\{[A-Za-z_][A-Za-z0-9_]*\}|[A-Za-z_][A-Za-z0-9_]*)")

_READINGS = None  # while once() is open: what find_kubelet and find_runtime read of /proc, by question


@contextlib.contextmanager
def once():
    """Read /proc once for everything asked within: find_kubelet() and find_runtime(path) (and what uses them) answer
    from their first reading. Nested uses share the outer reading."""
    global _READINGS  # pylint: disable=global-statement
    outer = _READINGS
    if outer is None:
        _READINGS = {}
    try:
        yield
    finally:
        if outer is None:
            _READINGS = None


def _reading(question, read):
    """``read()``, or its first answer to ``question`` within once()."""
    if _READINGS is None:
        return read()
    if question not in _READINGS:
        _READINGS[question] = read()
    return _READINGS[question]


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


def _uids(pid):
    """(real uid, effective uid) from /proc/<pid>/status, or (None, None)."""
    for line in (_read(os.path.join(PROC, str(pid), "status")) or b"").decode("utf-8", "replace").splitlines():
        if line.startswith("Uid:"):
            fields = line.split()[1:3]
            if len(fields) == 2 and all(f.isdigit() for f in fields):
                return int(fields[0]), int(fields[1])
    return None, None


def trust_problem(proc):
    """None when root runs the Process ``proc`` from a root-owned executable only root may write; else an Untrusted.

    The real and effective uids must be 0 (a set-user-ID program another user started has euid 0 but not uid 0); the
    executable is /proc/<pid>/exe itself (stat follows the kernel's link to the very file that runs, even deleted):
    a regular file that is root's alone (_files.problem: owned by root, no group or other write bit). The file a script names is not its executable
    (the interpreter is); a script root runs is root's choice."""
    base = os.path.join(PROC, str(proc.pid))
    uid, euid = _uids(proc.pid)
    try:
        exe = os.readlink(os.path.join(base, "exe"))
    except OSError:
        exe = None
    why = None
    if uid is None:
        why = "its uids cannot be read"
    elif uid != 0 or euid != 0:
        why = "it does not run as root" if euid == uid else "its real uid is %d and its effective uid %d, not both 0" % (uid, euid)
    else:
        try:
            st = os.stat(os.path.join(base, "exe"))
        except OSError as exc:
            st, why = None, "its executable cannot be read (%s)" % (exc.strerror or exc)
        if st is not None:
            unsafe = _problem(st)
            if not stat.S_ISREG(st.st_mode):
                why = "its executable is not a regular file"
            elif unsafe:
                why = "its executable is %s" % unsafe
    return Untrusted(proc.pid, proc.name, uid, euid, exe, why) if why else None


def untrusted_message(item, what):
    """The sentence of the finding untrusted_daemon_process for the Untrusted ``item``, a process taken for ``what``."""
    uid = "an unknown uid" if item.uid is None else _owner(item.uid)
    return ("Process %d named %s, run by %s from %s, is ignored as %s: %s; kubenode.gc believes only a daemon root runs from a "
            "root-owned executable no one else may write." % (item.pid, item.name, uid, item.exe or "an unreadable executable", what, item.why))


def _systemd_cgroups(pid):
    """{hierarchy: path} of ``pid``'s systemd cgroups: cgroup v2's (key "") and v1's name=systemd hierarchy."""
    found = {}
    for line in (_read(os.path.join(PROC, str(pid), "cgroup")) or b"").decode("utf-8", "replace").splitlines():
        _hierarchy, sep, rest = line.partition(":")
        controllers, sep2, path = rest.partition(":")
        if sep and sep2 and controllers in ("", "name=systemd"):
            found[controllers] = path
    return found


def _systemd_root(hierarchy):
    """Where the node's systemd has its root in ``hierarchy``: pid 1's cgroup without its init.scope. "" on a host; the
    container's own cgroup on a node that is a container seen through the host's cgroup namespace (``--cgroupns host``,
    as kind and these tests' node containers run), where the units are at /docker/<id>/system.slice/<unit>."""
    path = _systemd_cgroups(1).get(hierarchy, "")
    if path.endswith("/init.scope"):
        path = path[:-len("/init.scope")]
    return path.rstrip("/")


def unit_of(pid):
    """The systemd unit whose cgroup holds ``pid`` (kubelet.service, ...), or None: the first component after
    /system.slice/ of its systemd cgroup (cgroup v2's ``0::`` line, v1's ``name=systemd`` hierarchy), below the node's
    systemd root (_systemd_root: pid 1's).

    Why the cgroup and not ``systemctl show -p MainPID``: the kernel lets only root move a process into a cgroup of
    /system.slice (its cgroup.procs files are root's) and systemd puts every process of a system unit there, so the
    path cannot be forged by another user (a user's delegated cgroups are under /user.slice, never at /system.slice);
    it needs no binary to run (no systemctl whose owner and PATH would need checking, none in the gc_timer's sandbox)
    and no D-Bus; and it also names the kubelet that k0s and RKE2 start as a child of their unit's main process, whose
    MainPID is their supervisor. Where the unit starts the daemon itself, the daemon is its MainPID."""
    for hierarchy, path in sorted(_systemd_cgroups(pid).items()):
        prefix = _systemd_root(hierarchy) + SYSTEM_SLICE
        if path.startswith(prefix):
            unit = path[len(prefix):].split("/", 1)[0]
            if unit:
                return unit
    return None


def choose(procs, units):
    """(the trusted Process to believe, [Untrusted]) among ``procs`` (pid order): the lowest pid of those a unit of
    ``units`` runs, else the lowest trusted pid; every untrusted one is returned for the findings."""
    trusted, untrusted = [], []
    for proc in procs:
        problem = trust_problem(proc)
        if problem:
            untrusted.append(problem)
        else:
            trusted.append(proc)
    own = [p for p in trusted if unit_of(p.pid) in units]
    return (own or trusted or [None])[0], untrusted


def _named_kubelet(pid):
    """Whether ``pid`` is named kubelet or kubelite (_name_of), from its comm and cmdline alone: the rest of a process
    (environment, working directory) is read only for those."""
    base = os.path.join(PROC, str(pid))
    comm = _read(os.path.join(base, "comm"))
    if comm is None:
        return False
    names = KUBELET_NAMES + (KUBELITE,)
    if comm.decode("utf-8", "replace").strip() in names:
        return True
    cmdline = _read(os.path.join(base, "cmdline"))
    return bool(cmdline) and os.path.basename(cmdline.split(b"\0", 1)[0].decode("utf-8", "replace")) in names


def _kubelet_candidates():
    """Every readable process named kubelet or kubelite of this process's pid namespace, in pid order."""
    own = _pid_namespace("self")
    found = []
    for pid in _pids():
        if pid == os.getpid() or not _named_kubelet(pid):
            continue
        proc = read_process(pid)
        if proc and _name_of(proc) in KUBELET_NAMES + (KUBELITE,):
            theirs = _pid_namespace(pid)
            if own is None or theirs is None or theirs == own:
                found.append(proc)
    return found


def find_kubelet():
    """(the running kubelet or MicroK8s's kubelite as a trusted Process, or None; [Untrusted] processes of that name).

    Only a process of this process's pid namespace counts: a kubelet in a container (a kind node on this host) reads
    the files of its own container, not the node's. Of the trusted ones, the one a kubelet unit runs (KUBELET_UNITS)
    wins, else the lowest pid."""
    proc, untrusted = _reading("kubelet", lambda: choose(_kubelet_candidates(), KUBELET_UNITS))
    return proc, list(untrusted)


def kubelet_process():
    """The running kubelet (or MicroK8s's kubelite) as a trusted Process, or None (find_kubelet)."""
    return find_kubelet()[0]


def listener_pids(socket_path):
    """Pids of the processes holding the listening unix socket ``socket_path`` (through /proc), in pid order.

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
        return []
    if not inodes:
        return []
    found = []
    for pid in _pids():
        fd_dir = os.path.join(PROC, str(pid), "fd")
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(os.path.join(fd_dir, fd)) in inodes:
                    found.append(pid)
                    break
            except OSError:
                continue
    return found


def listener_pid(socket_path):
    """Pid of the (first) process listening on a unix socket (listener_pids), or None; trusted or not."""
    pids = listener_pids(socket_path)
    return pids[0] if pids else None


def _runtime_of(proc):
    for name in (proc.name, os.path.basename(proc.argv[0])):
        if name in RUNTIME_NAMES:
            return RUNTIME_NAMES[name]
    return None


# cri-dockerd's CRI socket when its command line names none
CRI_DOCKERD_SOCKET = "/var/run/cri-dockerd.sock"


def cri_dockerd_candidates(socket_path):
    """The Processes (pid order, trusted or not) of the cri-dockerd whose ``--container-runtime-endpoint`` is
    ``socket_path`` (resolved).

    cri-dockerd binds its listener to a temporary name and renames it into place, so /proc/net/unix names the temporary
    path, never the socket: its command line is what says which socket it serves."""
    target = os.path.realpath(socket_path)
    found = []
    for pid in _pids():
        proc = read_process(pid)
        if proc is None or "cri-dockerd" not in (proc.name, os.path.basename(proc.argv[0])):
            continue
        endpoint = go_flags(proc.argv[1:], (("container-runtime-endpoint",),)).get("container-runtime-endpoint") or "unix://" + CRI_DOCKERD_SOCKET
        path = endpoint[len("unix://"):] if endpoint.startswith("unix://") else endpoint
        if path.startswith("/") and os.path.realpath(in_process(proc, path)) == target:
            found.append(proc)
    return found


def find_runtime(socket_path):
    """(runtime, trusted Process, [Untrusted]) of the containerd, cri-o or cri-dockerd listening on ``socket_path``:
    runtime None when no trusted process listens there (its Process then the trusted listener that is no runtime, else
    None).

    A listener that fails trust_problem is ignored, its command line not believed; of several processes holding the
    socket (a daemon's children may inherit it), the one its unit runs (RUNTIME_UNITS) wins, else the lowest pid. With
    no listener in /proc/net/unix, the cri-dockerd that names the socket (cri_dockerd_candidates), under the same rules."""
    def read():
        procs = [p for p in (read_process(pid) for pid in listener_pids(socket_path)) if p is not None]
        if not procs:
            procs = cri_dockerd_candidates(socket_path)
        return choose(procs, tuple(u for names in RUNTIME_UNITS.values() for u in names))

    proc, untrusted = _reading(("runtime", os.path.realpath(socket_path)), read)
    if proc is None:
        return None, None, list(untrusted)
    return _runtime_of(proc), proc, list(untrusted)


def runtime_process(socket_path):
    """(runtime, Process) of the trusted containerd, cri-o or cri-dockerd listening on ``socket_path``; (None, None)
    when none does (find_runtime; (None, Process) when the trusted listener is no runtime we know)."""
    runtime, proc, _untrusted = find_runtime(socket_path)
    return runtime, proc


DOCKER_SOCKET = "/var/run/docker.sock"


def _is_dockerd(proc):
    return proc is not None and "dockerd" in (proc.name, os.path.basename(proc.argv[0]))


def dockerd_process(socket_path):
    """The trusted Process of the dockerd listening on the Docker Engine socket ``socket_path``, or None.

    The listeners (/proc/net/unix), else the dockerds whose ``-H``/``--host`` names the socket (resolved; Docker's
    default socket when they name none): /proc/net/unix lists the sockets of this network namespace only, and a dockerd
    may run in another one (a systemd unit's PrivateNetwork, a test harness). Only root's dockerd from a root-owned
    executable is believed (choose: docker.service's first), whose command line then names its data root."""
    procs = [p for p in (read_process(pid) for pid in listener_pids(socket_path)) if _is_dockerd(p)]
    if not procs:
        target = os.path.realpath(socket_path)
        for pid in _pids():
            proc = read_process(pid)
            if not _is_dockerd(proc):
                continue
            hosts = _all_values(proc.argv[1:], ("host", "H")) or ["unix://" + DOCKER_SOCKET]
            for host in hosts:
                path = host[len("unix://"):] if host.startswith("unix://") else None
                if path and path.startswith("/") and os.path.realpath(in_process(proc, path)) == target:
                    procs.append(proc)
                    break
    return choose(procs, DOCKERD_UNITS)[0]


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
