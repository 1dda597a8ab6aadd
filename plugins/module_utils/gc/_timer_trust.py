# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""What root executes is root's: the kubenode.gc.gc_timer role's check, before it writes anything, that everything its
service would run as root is owned by root and writable by root alone, and so is every directory above it (I/O, no
Ansible). The role packs this file, _files and _errors into a zip application on the controller and runs it on the node
with the interpreter Ansible runs its modules with (never with ``gc_timer_python``, which is what is being checked):
main().

Checked: ``gc_timer_python`` (each link on the way, its target, a venv's ``pyvenv.cfg`` and the ``home`` it names), the
directories of the interpreter's ``sys.path`` and its site directories (with their ``.pth`` files and the directories
they add), the runner's code (the runner and its copy of module_utils) and its configuration. Each path is walked from
``/`` one component at a time by ``_files.chase`` with ``strict`` (the rule is ``_files.problem``, without the sticky
exception): a symbolic link is looked at, then followed, so its target's directories are checked too; a component that
does not exist yet ends the walk (root will create it).

The interpreter is run only after its own files passed, with ``-I -S`` (no site directory, no ``.pth`` file, no
environment variable, no user directory) to learn its ``sys.path`` and site directories (a venv's: those of the prefix
its ``pyvenv.cfg`` gives, asked of ``site.getsitepackages()``; ``site.venv()`` would read the ``.pth`` files); once those
and their ``.pth`` files passed, with ``-I`` (as the service runs it) to learn the directories the ``.pth`` files add.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import subprocess
import sys

from ansible_collections.kubenode.gc.plugins.module_utils import _files
from ansible_collections.kubenode.gc.plugins.module_utils._errors import KubenodeGcError

# what the service's sandbox hides from it (ProtectHome=yes, PrivateTmp=yes): the role refuses an interpreter or a path
# the service writes there
HIDDEN = ("/home", "/root", "/run/user", "/tmp", "/var/tmp")
QUERY_TIMEOUT = 60
# the site directories of the prefixes given (a venv's first, made sys.prefix as site.venv() makes it), else of the
# interpreter's own; never site.venv() or site.main(), which read the .pth files
SYS_PATH = ("import json, site, sys; p = sys.argv[1:]; sys.prefix = sys.exec_prefix = p[0] if p else sys.prefix; "
            "print(json.dumps({'path': sys.path, 'site': site.getsitepackages(p or None)}))")
WHY = "root runs it in the timer's service, so it and every directory above it must be owned by root and writable by root alone"


def _read_lines(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read().splitlines()


class UntrustedError(KubenodeGcError):
    """Something the service would run is not root's alone; str() is one sentence naming it and its owner."""


def _refuse(label, path, component, why):
    if component == path:
        return UntrustedError("%s is %s: %s." % (label, why, WHY))
    return UntrustedError("%s goes through %s, which is %s: %s." % (label, component, why, WHY))


def walk(path, label):
    """The path ``path`` resolves to (_files.chase, strict: links followed after they are looked at); None when a
    component does not exist yet. UntrustedError names the first component that is not root's alone."""
    try:
        with _files.chase(path, write=True, strict=True) as found:  # write: refused at the first unsafe transition
            return None if found.st is None else found.path
    except _files.UnsafePathError as exc:
        raise _refuse(label, path, exc.unsafe.component, exc.unsafe.why)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UntrustedError("%s goes through more than %d symbolic links." % (label, _files.MAX_LINKS))
        raise


def _raise(exc):
    raise exc


def walk_tree(top, label):
    """walk() ``top``, then every file, directory and link below it (links not followed: each is looked at as itself),
    each looked up in the directory opened before it (os.fwalk)."""
    real = walk(top, label)
    if real is None or not stat.S_ISDIR(os.lstat(real).st_mode):
        return real
    for directory, dirs, files, dir_fd in os.fwalk(real, onerror=_raise):
        dirs.sort()  # the order it goes down in
        for name in sorted(dirs + files):
            why = _files.problem(os.stat(name, dir_fd=dir_fd, follow_symlinks=False))
            if why:
                raise UntrustedError("%s holds %s, which is %s: %s." % (label, os.path.join(directory, name), why, WHY))
    return real


def hidden(path, dirs=HIDDEN):
    """The directory of ``dirs`` that ``path`` is in, or None."""
    return next((d for d in dirs if path == d or path.startswith(d.rstrip("/") + "/")), None)


def _venv(python, label):
    """A venv's (home, prefix, system site packages): its pyvenv.cfg, next to the interpreter or one level up where
    Python looks, checked; None when there is none. The prefix is the directory above the interpreter's, as site has it."""
    for directory in (os.path.dirname(python), os.path.dirname(os.path.dirname(python))):
        cfg = os.path.join(directory, "pyvenv.cfg")
        real = walk(cfg, "%s's %s" % (label, cfg))
        if real is None:
            continue
        values = {}
        for line in _read_lines(real):
            key, sep, value = line.partition("=")
            if sep:
                values[key.strip().lower()] = value.strip()
        return values.get("home") or None, os.path.dirname(os.path.dirname(python)), values.get("include-system-site-packages", "").lower() == "true"
    return None


def _prefix_libs(executable):
    """The standard library directories an interpreter at ``executable`` would read at startup (<prefix>/lib*/python3*)."""
    prefix = os.path.dirname(os.path.dirname(executable))
    out = []
    for lib in ("lib", "lib64"):
        try:
            names = os.listdir(os.path.join(prefix, lib))
        except OSError:
            continue
        out += [os.path.join(prefix, lib, n) for n in sorted(names) if n.startswith("python3")]
    return out


def _query(python, isolated_site, run, prefixes=()):
    """The interpreter's own word on its sys.path and site directories (those of ``prefixes`` when given), run as the
    service runs it (-I) or without site (-I -S: no .pth file read)."""
    argv = [python, "-I"] + ([] if isolated_site else ["-S"]) + ["-c", SYS_PATH] + list(prefixes)
    try:
        proc = run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={}, cwd="/", timeout=QUERY_TIMEOUT, check=False)
        answer = json.loads(proc.stdout.decode("utf-8", "replace")) if proc.returncode == 0 else None
    except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
        raise UntrustedError("gc_timer_python %s could not say its sys.path (%s -I -c): %s." % (python, python, exc))
    if not isinstance(answer, dict):
        raise UntrustedError("gc_timer_python %s could not say its sys.path (%s -I -c): %s" % (
            python, python, (proc.stderr.decode("utf-8", "replace").strip().splitlines() or ["exit status %d" % proc.returncode])[-1]))
    return [p for p in answer.get("path") or [] if isinstance(p, str) and p], [p for p in answer.get("site") or [] if isinstance(p, str) and p]


def _pth_dirs(site, label):
    """Check the .pth files of a site directory (site runs them at startup) and return the directories they add."""
    try:
        names = sorted(n for n in os.listdir(site) if n.endswith(".pth"))
    except OSError:
        return []
    out = []
    for name in names:
        real = walk(os.path.join(site, name), "%s's %s" % (label, os.path.join(site, name)))
        if real is None:
            continue
        for line in _read_lines(real):
            line = line.rstrip()
            if line and not line.startswith(("#", "import ", "import\t")):
                out.append(os.path.join(site, line))
    return out


def check(python, code_dir, config, writable=None, run=subprocess.run):
    """Check, without writing anything, what the timer's service would run as root; UntrustedError (one sentence naming
    the file and its owner) at the first thing that is not root's alone. ``writable`` ({variable: path}) are the paths
    the service writes (its ReadWritePaths=): one its sandbox hides is refused.

    Returns ``python`` (the interpreter's resolved path, None when it does not exist: the role's library check then says
    so), ``sys_path`` (the directories checked for it) and ``checked`` (how many paths were walked)."""
    for name, path in sorted((writable or {}).items()):
        where = hidden(path)
        if where:
            raise UntrustedError("%s %s is in %s, which the timer's service cannot write (its sandbox hides %s)." % (name, path, where, ", ".join(HIDDEN)))
    try:
        return _check(python, code_dir, config, run)
    except OSError as exc:
        raise UntrustedError("Cannot check what the timer's service would run: %s%s." % (
            exc.strerror or exc, (": %s" % exc.filename) if exc.filename else ""))


def _check(python, code_dir, config, run):
    label = "gc_timer_python %s" % python
    resolved = {}  # each path walked, and what it resolved to

    def one(path, what):
        if path not in resolved:
            resolved[path] = walk(path, what)
        return resolved[path]

    real = one(python, label)
    if real is None:
        return dict(python=None, sys_path=[], checked=len(resolved))
    for path in (python, real):
        where = hidden(path)
        if where:
            raise UntrustedError("%s is in %s, which the timer's service cannot see (its sandbox hides %s): install the interpreter "
                                 "elsewhere, such as kubenode.gc.node_prereqs' /opt/kubenode-gc/venv." % (label, where, ", ".join(HIDDEN)))
    venv = _venv(python, label)
    home = venv[0] if venv else None
    if home:
        one(home, "%s's venv home %s" % (label, home))
    for lib in _prefix_libs(real) + (_prefix_libs(os.path.join(home, "python3")) if home else []):
        one(lib, "%s's library directory %s" % (label, lib))
    # a venv's site directories are its own (and the base's when it says so); asking site for them without its main()
    prefixes = ([venv[1]] + ([os.path.dirname(home)] if venv[2] and home else [])) if venv else []
    directories = []

    def add(paths):
        for path in paths:
            if one(path, "%s's sys.path directory %s" % (label, path)) is not None and path not in directories:
                directories.append(path)

    paths, sites = _query(python, False, run, prefixes)
    add(paths + sites)
    for site in sites:
        add(_pth_dirs(site, label))
    add(_query(python, True, run)[0])
    walk_tree(code_dir, "The runner's code %s" % code_dir)
    walk_tree(os.path.dirname(config), "The runner's configuration directory %s" % os.path.dirname(config))
    return dict(python=real, sys_path=directories, checked=len(resolved) + 2)


def main(argv=None, out=sys.stdout):
    """``trust.pyz PYTHON CODE_DIR CONFIG [VARIABLE=PATH...]`` (the VARIABLE=PATH pairs are the paths the service writes):
    one JSON line, check()'s result, or ``{"failed": true, "msg": sentence}`` and exit status 1."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 3 or not all("=" in a for a in argv[3:]):
        out.write(json.dumps(dict(failed=True, msg="usage: trust.pyz PYTHON CODE_DIR CONFIG [VARIABLE=PATH...]")) + "\n")
        return 2
    writable = dict(a.split("=", 1) for a in argv[3:])
    try:
        result = check(argv[0], argv[1], argv[2], writable=writable)
    except UntrustedError as exc:
        out.write(json.dumps(dict(failed=True, msg=str(exc))) + "\n")
        return 1
    out.write(json.dumps(result) + "\n")
    return 0
