# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_zipimport: a module imported from a zip (as Ansible runs modules) is compiled once, not twice (issue 43)."""

import ast
import gc
import glob
import importlib
import os
import subprocess
import sys
import types
import zipfile
import zipimport

from ansible_collections.kubenode.gc.plugins.module_utils import _zipimport

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))


def _import_from_zip(tmp_path, name, compiles, monkeypatch):
    archive = tmp_path / ("%s.zip" % name)
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("%s/__init__.py" % name, "")
        z.writestr("%s/mod.py" % name, "VALUE = 6 * 7\n")
    real_compile = compile

    def counting(source, filename, *args, **kwargs):
        if filename.endswith("mod.py"):
            compiles.append(filename)
        return real_compile(source, filename, *args, **kwargs)

    monkeypatch.setattr(zipimport, "compile", counting, raising=False)  # zipimport's own global, not the builtin
    monkeypatch.syspath_prepend(str(archive))
    try:
        return importlib.import_module("%s.mod" % name)
    finally:
        for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
            del sys.modules[key]


def test_a_module_imported_from_a_zip_is_compiled_once(tmp_path, monkeypatch):
    assert getattr(zipimport._compile_source, "_kubenode_gc_compiles_once", False)  # installed on import
    once = []
    module = _import_from_zip(tmp_path, "kgc_zip_once", once, monkeypatch)
    assert module.VALUE == 42 and module.__file__.endswith(os.path.join("kgc_zip_once.zip", "kgc_zip_once", "mod.py"))
    assert len(once) == 1
    # what CPython does without it: zipimporter.get_filename compiles the source, then get_code compiles it again
    monkeypatch.setattr(zipimport, "_compile_source", zipimport._compile_source.__wrapped__)
    twice = []
    assert _import_from_zip(tmp_path, "kgc_zip_twice", twice, monkeypatch).VALUE == 42
    assert len(twice) == 2


def test_install_wraps_once_and_leaves_a_python_without_the_hook_alone():
    calls = []
    fake = types.SimpleNamespace(_compile_source=lambda path, source: calls.append(path) or object())
    assert _zipimport.install(fake) is True and _zipimport.install(fake) is False
    first = fake._compile_source("a.py", b"x = 1\n")
    assert fake._compile_source("a.py", b"x = 1\n") is first and calls == ["a.py"]
    assert fake._compile_source("a.py", b"x = 2\n") is not first  # another source, another compile
    assert _zipimport.install(types.SimpleNamespace()) is False


def test_every_module_installs_it_before_anything_else_it_imports():
    for path in sorted(glob.glob(os.path.join(ROOT, "plugins", "modules", "*.py"))):
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        imports = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom)) and node.module != "__future__"]
        first = imports[0]
        assert isinstance(first, ast.ImportFrom) and first.module == "ansible_collections.kubenode.gc.plugins.module_utils", path
        assert [alias.name for alias in first.names] == ["_zipimport"], path


def test_a_module_process_started_from_its_zip_runs_without_the_cycle_collector(tmp_path):
    archive = tmp_path / "payload.zip"
    package = "ansible_collections/kubenode/gc/plugins/module_utils"
    with zipfile.ZipFile(archive, "w") as z:
        parts = package.split("/")
        for depth in range(1, len(parts) + 1):
            z.writestr("/".join(parts[:depth]) + "/__init__.py", "")
        z.write(os.path.join(ROOT, "plugins", "module_utils", "_zipimport.py"), package + "/_zipimport.py")
    probe = ("import gc, sys; sys.path.insert(0, sys.argv[1]); "
             "from ansible_collections.kubenode.gc.plugins.module_utils import _zipimport as z; "
             "print(z.__file__.startswith(sys.argv[1]), z.from_zip(), gc.isenabled())")
    out = subprocess.run([sys.executable, "-I", "-c", probe, str(archive)], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "True", "False"]


def test_a_process_importing_the_files_from_disk_keeps_its_collector():
    assert _zipimport.from_zip() is False and gc.isenabled()  # this test process imported the collection from disk
    calls = []
    collector = types.SimpleNamespace(disable=lambda: calls.append("disable"))
    assert _zipimport.collect_no_cycles(False, collector) is False and not calls
    assert _zipimport.collect_no_cycles(True, collector) is True and calls == ["disable"]
