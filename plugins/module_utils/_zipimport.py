# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""Each source file a module imports from its AnsiballZ zip is compiled once per run, and once at all while it does not
change.

Ansible runs a module from a zip file, where Python keeps no bytecode, so every import compiles the file's source.
CPython's zipimport (3.8 to 3.13) compiles it twice: ``find_spec`` asks the loader for the file name
(``zipimporter.get_filename``), which compiles the source to decide where the code comes from, and the import then
compiles it again for the code. Importing this module, first in every module file, makes the second compile of a file
reuse the first code object (the same source under the same name gives the same code). Outside a zip (unit tests,
ansible-test) nothing goes through it.

A module process started from its zip also keeps the code it compiled for the next run (``Bytecode``), as Python keeps
``__pycache__`` for files on disk: one file per module and Python in the node's cache directory (``_cache``: root's
alone, root only), holding each file's code under its path in the zip and the SHA-256 of its source. A file whose source
is the one compiled before is not compiled again; any other is, and the file is rewritten when the process ends. The
file also records Python's magic number, the marshal format and the optimisation level, and a digest of its content:
anything else is ignored as if there were no cache. Compiling the collection's files was about 90 ms of every
node_audit run and most of what image_gc's imports cost above cri_info's (docs/development.md, issue 43).
``sys.dont_write_bytecode`` (``PYTHONDONTWRITEBYTECODE``, ``-B``) is kept: the cache is then read but not written.

The module process started from its zip also runs without the cyclic garbage collector (``gc.disable()``). A run is one
short process that ends with the task: the collector's passes found nothing to free in it (1,409 objects in cycles at
the end of a node_audit run over 2,003 images, the same peak memory with and without it), yet its full passes walked
every object imported and read, 0.11 to 0.12 CPU-s of that run's 1.45 (docs/development.md, issue 43). Reference
counting frees everything else as before. Only a process whose collection was imported from a zip is changed: a unit
test or any other process importing the files from disk keeps its collector.
"""

from __future__ import annotations

import atexit
import gc
import hashlib
import importlib.util
import marshal
import os
import re
import sys
import types
import zipimport

from ansible_collections.kubenode.gc.plugins.module_utils import _cache

try:
    from _imp import _fix_co_filename
except ImportError:  # not CPython: no cache
    _fix_co_filename = None

_MARK = "_kubenode_gc_compiles_once"
FORMAT = "kubenode.gc bytecode 1"


def _header():
    return (FORMAT, importlib.util.MAGIC_NUMBER, marshal.version, sys.flags.optimize)


class Bytecode:
    """The code compiled from the files of one zip (``archive``), kept in the cache directory between runs.

    ``code(pathname, source, compile_source)`` gives the code of a file of the zip: the kept code when the source's
    SHA-256 is the one it was compiled from, else ``compile_source``'s (remembered, and written by ``save`` when the
    process ends). ``cache``: the cache directory's functions (``_cache``)."""

    def __init__(self, archive, cache=_cache):
        self.prefix = archive.rstrip(os.sep) + os.sep
        stem = re.sub(r"[^A-Za-z0-9._-]", "_", os.path.basename(archive.rstrip(os.sep)))[:100]
        self.name = "bytecode.%s.%s" % (stem, sys.implementation.cache_tag)
        self.cache = cache
        self.kept = None  # {path in the zip: (sha256 of the source, marshalled code)}, read on first use
        self.compiled = {}  # {path in the zip: (sha256 of the source, code)} compiled in this run
        self.hits = 0

    @staticmethod
    def parse(data):
        """The entries of a cache file's ``data``, or {} when it is none this Python may use."""
        if not data or len(data) < 32 or hashlib.sha256(data[32:]).digest() != data[:32]:
            return {}
        try:
            header, entries = marshal.loads(data[32:])
        except (EOFError, ValueError, TypeError):
            return {}
        if header != _header() or not isinstance(entries, dict):
            return {}
        return entries

    def code(self, pathname, source, compile_source):
        if _fix_co_filename is None or not pathname.startswith(self.prefix):
            return compile_source(pathname, source)
        if self.kept is None:
            self.kept = self.parse(self.cache.load(self.name))
        path, digest = pathname[len(self.prefix):], hashlib.sha256(source).digest()
        entry = self.kept.get(path)
        if isinstance(entry, tuple) and len(entry) == 2 and entry[0] == digest:
            try:
                code = marshal.loads(entry[1])
            except (EOFError, ValueError, TypeError):
                code = None
            if isinstance(code, types.CodeType):
                _fix_co_filename(code, pathname)  # the name of this run's zip, as a compile here would give
                self.hits += 1
                return code
        code = compile_source(pathname, source)
        if not self.compiled:
            atexit.register(self.save)
        self.compiled[path] = (digest, code)
        return code

    def save(self):
        """Write the cache file with this run's code beside the entries kept for other files; False when nothing was
        compiled, writing bytecode is off, or it could not be written."""
        if not self.compiled or sys.dont_write_bytecode:
            return False
        try:
            entries = dict(self.kept or {})
            entries.update((path, (digest, marshal.dumps(code))) for path, (digest, code) in self.compiled.items())
            body = marshal.dumps((_header(), entries))
        except ValueError:
            return False
        return self.cache.store(self.name, hashlib.sha256(body).digest() + body)


def install(module=zipimport, bytecode=None):
    """Wrap ``module._compile_source`` (zipimport's) so that the second compile of a source reuses the first, and, with
    ``bytecode`` (a Bytecode), the code kept from an earlier run; once."""
    compile_source = getattr(module, "_compile_source", None)
    if compile_source is None or getattr(compile_source, _MARK, False):
        return False
    compiled = {}

    def compile_once(pathname, source):
        key = (pathname, bytes(source))
        code = compiled.pop(key, None)  # the second compile of a file takes the first's code, and forgets it
        if code is None:
            code = bytecode.code(pathname, key[1], compile_source) if bytecode is not None else compile_source(pathname, source)
            compiled[key] = code
        return code

    setattr(compile_once, _MARK, True)
    compile_once.__wrapped__ = compile_source
    compile_once.bytecode = bytecode
    module._compile_source = compile_once
    return True


def from_zip(spec=__spec__):
    """True when this collection was imported from a zip (``spec``: this file's module spec): Ansible's module process."""
    return spec is not None and isinstance(spec.loader, zipimport.zipimporter)


def collect_no_cycles(zipped, collector=gc):
    """Turn the cyclic garbage collector off when ``zipped`` (a module process started from its zip); True when it did."""
    if not zipped:
        return False
    collector.disable()
    return True


install(bytecode=Bytecode(__spec__.loader.archive) if from_zip() else None)
collect_no_cycles(from_zip())
