# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""Each source file a module imports from its AnsiballZ zip is compiled once, not twice.

Ansible runs a module from a zip file, where Python keeps no bytecode, so every import compiles the file's source.
CPython's zipimport (3.8 to 3.13) compiles it twice: ``find_spec`` asks the loader for the file name
(``zipimporter.get_filename``), which compiles the source to decide where the code comes from, and the import then
compiles it again for the code. That is about 60 ms of node_audit's run and 25 ms of image_gc's (docs/development.md,
issue 43). Importing this module, first in every module file, makes the second compile of a file reuse the first code
object (the same source under the same name gives the same code). It changes only how the module process compiles what
it imports, for that process; a Python without zipimport's ``_compile_source`` is left as it is. Outside a zip (unit
tests, ansible-test) nothing goes through it.

The module process started from its zip also runs without the cyclic garbage collector (``gc.disable()``). A run is one
short process that ends with the task: the collector's passes found nothing to free in it (1,409 objects in cycles at
the end of a node_audit run over 2,003 images, the same peak memory with and without it), yet its full passes walked
every object imported and read, 0.11 to 0.12 CPU-s of that run's 1.45 (docs/development.md, issue 43). Reference
counting frees everything else as before. Only a process whose collection was imported from a zip is changed: a unit
test or any other process importing the files from disk keeps its collector.
"""

from __future__ import annotations

import gc
import zipimport

_MARK = "_kubenode_gc_compiles_once"


def install(module=zipimport):
    """Wrap ``module._compile_source`` (zipimport's) so that the second compile of a source reuses the first; once."""
    compile_source = getattr(module, "_compile_source", None)
    if compile_source is None or getattr(compile_source, _MARK, False):
        return False
    compiled = {}

    def compile_once(pathname, source):
        key = (pathname, bytes(source))
        code = compiled.pop(key, None)  # the second compile of a file takes the first's code, and forgets it
        if code is None:
            code = compiled[key] = compile_source(pathname, source)
        return code

    setattr(compile_once, _MARK, True)
    compile_once.__wrapped__ = compile_source
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


install()
collect_no_cycles(from_zip())
