# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_zipimport: a module imported from a zip (as Ansible runs modules) is compiled once, not twice (issue 43)."""

import ast
import gc
import glob
import hashlib
import importlib
import json
import marshal
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import types
import zipfile
import zipimport

import pytest

from ansible_collections.kubenode.gc.plugins.module_utils import _zipimport

NOBODY = 65534
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


PACKAGE = "ansible_collections/kubenode/gc/plugins/module_utils"
CACHE_FILES = ("_zipimport.py", "_cache.py", "_files.py", "_errors.py")  # what _zipimport imports


def _payload(archive, probe="VALUE = 6 * 7\n"):
    """A zip laid out as Ansible's payload: the collection's _zipimport and what it imports, and kgc_probe/mod.py."""
    with zipfile.ZipFile(str(archive), "w") as z:
        parts = PACKAGE.split("/")
        for depth in range(1, len(parts) + 1):
            z.writestr("/".join(parts[:depth]) + "/__init__.py", "")
        for name in CACHE_FILES:
            z.write(os.path.join(ROOT, "plugins", "module_utils", name), PACKAGE + "/" + name)
        z.writestr("kgc_probe/__init__.py", "")
        z.writestr("kgc_probe/mod.py", probe + "def where():\n    return where.__code__.co_filename\n")
    return archive


PROBE = """import gc, json, sys, zipimport
sys.path.insert(0, sys.argv[1])
from ansible_collections.kubenode.gc.plugins.module_utils import _zipimport as z
from kgc_probe import mod
b = zipimport._compile_source.bytecode
print(json.dumps({"from_zip": z.__file__.startswith(sys.argv[1]) and z.from_zip(), "gc": gc.isenabled(), "value": mod.VALUE,
                  "where": mod.where(), "hits": b.hits, "compiled": sorted(b.compiled), "name": b.name}))
"""


def _run(archive, cache, *flags, env=None, user=None, python=sys.executable):
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    environ.update({"KUBENODE_GC_CACHE_DIR": str(cache)}, **(env or {}))
    out = subprocess.run([python, *flags, "-c", PROBE, str(archive)], capture_output=True, text=True, check=True, env=environ,
                         user=user).stdout
    return json.loads(out)


def test_a_module_process_started_from_its_zip_runs_without_the_cycle_collector(tmp_path):
    out = _run(_payload(tmp_path / "payload.zip"), "off")
    assert out["from_zip"] is True and out["gc"] is False and out["value"] == 42


def test_the_code_compiled_from_a_zip_is_kept_for_the_next_run_while_its_source_is_the_same(tmp_path):
    cache = tmp_path / "cache"
    first = _run(_payload(tmp_path / "ansible_kgc_payload.zip"), cache)
    assert first["hits"] == 0 and "kgc_probe/mod.py" in first["compiled"] and first["value"] == 42
    kept = cache / first["name"]
    assert first["name"] == "bytecode.ansible_kgc_payload.zip.%s" % sys.implementation.cache_tag
    assert stat.S_IMODE(os.stat(str(kept)).st_mode) == 0o600 and os.listdir(str(cache)) == [first["name"]]
    # the next run, from a zip of the same name in another directory (Ansible's temporary directory of that run)
    (tmp_path / "next").mkdir()
    again = _run(_payload(tmp_path / "next" / "ansible_kgc_payload.zip"), cache)
    assert again["compiled"] == [] and again["hits"] >= 2 and again["value"] == 42
    assert again["where"] == str(tmp_path / "next" / "ansible_kgc_payload.zip" / "kgc_probe" / "mod.py")  # tracebacks name this run's zip
    # a changed source is compiled again, and the file then holds the new code beside the others
    changed = _run(_payload(tmp_path / "ansible_kgc_payload.zip", probe="VALUE = 7\n"), cache)
    assert changed["compiled"] == ["kgc_probe/mod.py"] and changed["value"] == 7
    assert _run(_payload(tmp_path / "ansible_kgc_payload.zip", probe="VALUE = 7\n"), cache)["compiled"] == []


FORGE = """import hashlib, marshal, sys
sys.path.insert(0, sys.argv[1])
from ansible_collections.kubenode.gc.plugins.module_utils import _zipimport
body = marshal.dumps((_zipimport._header(), {"kgc_probe/mod.py": (hashlib.sha256(sys.argv[2].encode()).digest(),
                                                                     marshal.dumps(compile(sys.argv[3], "mod.py", "exec")))}))
with open(sys.argv[4], "wb") as f:
    f.write(hashlib.sha256(body).digest() + body)
"""
SOURCE = "VALUE = 6 * 7\ndef where():\n    return where.__code__.co_filename\n"  # kgc_probe/mod.py of _payload
FORGED = "VALUE = 666\ndef where():\n    return ''\n"


def _forge(archive, path, python=sys.executable):
    """A cache file root could have written for ``python``, whose entry for kgc_probe/mod.py (SOURCE) holds FORGED's code."""
    subprocess.run([python, "-c", FORGE, str(archive), SOURCE, FORGED, str(path)], check=True, env=dict(os.environ, KUBENODE_GC_CACHE_DIR="off"))
    os.chmod(str(path), 0o600)
    return path


def test_what_root_runs_from_the_cache_is_only_what_root_kept(tmp_path):
    cache = tmp_path / "cache"
    archive = _payload(tmp_path / "ansible_kgc_payload.zip")
    name = _run(archive, "off")["name"]
    cache.mkdir(mode=0o700)
    planted = _forge(archive, cache / name)
    forged = planted.read_bytes()
    assert _run(archive, cache, env={"PYTHONDONTWRITEBYTECODE": "1"})["value"] == 666  # root's file is what runs: hence the rules
    os.chown(str(planted), NOBODY, NOBODY)  # the same file written by another user
    out = _run(archive, cache, env={"PYTHONDONTWRITEBYTECODE": "1"})
    assert out["value"] == 42 and out["hits"] == 0
    os.chown(str(planted), 0, 0)
    os.chmod(str(planted), 0o666)  # or that another user may write
    assert _run(archive, cache, env={"PYTHONDONTWRITEBYTECODE": "1"})["value"] == 42
    os.chmod(str(planted), 0o600)
    os.chown(str(cache), NOBODY, NOBODY)  # or in a directory another user owns
    assert _run(archive, cache)["value"] == 42
    assert planted.read_bytes() == forged  # and nothing was written there


SYSTEM_PYTHON = "/usr/bin/python3"  # any user may run it (a venv under /root is root's alone)


@pytest.mark.skipif(not os.access(SYSTEM_PYTHON, os.X_OK), reason="needs %s" % SYSTEM_PYTHON)
def test_a_process_not_running_as_root_neither_reads_nor_writes_the_cache():
    shared = tempfile.mkdtemp(prefix="kgc-zipimport-")  # where any user may read: the zip and a cache file root kept
    try:
        os.chmod(shared, 0o755)
        archive = _payload(os.path.join(shared, "ansible_kgc_payload.zip"))
        os.chmod(archive, 0o644)
        readable = os.path.join(shared, "cache")
        os.mkdir(readable, 0o755)
        name = _run(archive, "off", python=SYSTEM_PYTHON)["name"]
        os.chmod(str(_forge(archive, os.path.join(readable, name), python=SYSTEM_PYTHON)), 0o644)
        assert _run(archive, readable, env={"PYTHONDONTWRITEBYTECODE": "1"}, python=SYSTEM_PYTHON)["value"] == 666  # root uses it
        out = _run(archive, readable, user=NOBODY, python=SYSTEM_PYTHON)
        assert out["value"] == 42 and out["hits"] == 0 and os.listdir(readable) == [name]
    finally:
        shutil.rmtree(shared)


def test_a_corrupt_or_foreign_cache_file_is_ignored_and_replaced(tmp_path):
    cache = tmp_path / "cache"
    archive = _payload(tmp_path / "ansible_kgc_payload.zip")
    name = _run(archive, cache)["name"]
    good = (cache / name).read_bytes()
    for bad in (b"", b"garbage", good[:-10], good[:32] + b"x" + good[33:], hashlib.sha256(b"\x00").digest() + b"\x00"):
        (cache / name).write_bytes(bad)
        out = _run(archive, cache)
        assert out["value"] == 42 and out["hits"] == 0 and "kgc_probe/mod.py" in out["compiled"]
        assert _run(archive, cache)["compiled"] == []  # rewritten, and used again
    # another Python's magic number, or another optimisation level, is not this run's code
    header = _zipimport._header()
    body = marshal.dumps(((header[0], b"\x00\x00\r\n") + header[2:], {}))
    (cache / name).write_bytes(hashlib.sha256(body).digest() + body)
    assert _run(archive, cache)["hits"] == 0
    assert _run(archive, cache, "-O")["hits"] == 0
    assert _run(archive, cache, "-O")["hits"] > 0 and _run(archive, cache)["hits"] == 0
    # PYTHONDONTWRITEBYTECODE (-B): read, never written
    kept = (cache / name).read_bytes()
    assert _run(archive, cache, "-O", env={"PYTHONDONTWRITEBYTECODE": "1"})["hits"] == 0 and (cache / name).read_bytes() == kept
    assert _run(archive, cache, env={"PYTHONDONTWRITEBYTECODE": "1"})["hits"] > 0


def test_a_process_importing_the_files_from_disk_keeps_its_collector():
    assert _zipimport.from_zip() is False and gc.isenabled()  # this test process imported the collection from disk
    calls = []
    collector = types.SimpleNamespace(disable=lambda: calls.append("disable"))
    assert _zipimport.collect_no_cycles(False, collector) is False and not calls
    assert _zipimport.collect_no_cycles(True, collector) is True and calls == ["disable"]
