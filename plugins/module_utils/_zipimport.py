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
"""

from __future__ import annotations

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


install()
