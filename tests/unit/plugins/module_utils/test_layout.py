# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""module_utils's layout: one folder per concern, imports that point down only, no cycle, no crowded folder.

The layers, lowest first (docs/development.md): the shared top (files directly in module_utils), cri/ and docker/ side
by side, containerd/, then gc/, storage/ and config/ side by side, then node/. A module imports its own folder, the shared top and the
layers below its own; nothing in module_utils imports node/. The test reads every import statement (also those inside
functions) with ast, so a lazy import cannot hide an upward one.
"""

import ast
import os

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
MODULE_UTILS = os.path.join(REPO, "plugins", "module_utils")
PACKAGE = "ansible_collections.kubenode.gc.plugins.module_utils"
TOP = ""
# what each folder may import besides itself
MAY_IMPORT = {
    TOP: set(),
    "cri": {TOP},
    "docker": {TOP},
    "containerd": {TOP, "cri"},
    "gc": {TOP, "cri", "containerd", "docker"},
    "storage": {TOP, "cri", "containerd", "docker"},
    "config": {TOP, "cri", "containerd", "docker"},
    "node": {TOP, "cri", "containerd", "docker", "gc", "storage", "config"},
}
MAX_MODULES = 12


def modules():
    """{dotted name under module_utils: path} of every module (a package's __init__ under the package's name)."""
    out = {}
    for base, dirs, names in os.walk(MODULE_UTILS):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in names:
            if name.endswith(".py"):
                rel = os.path.relpath(os.path.join(base, name), MODULE_UTILS)[:-3].replace(os.sep, ".")
                out[rel[:-len(".__init__")] if rel.endswith(".__init__") else rel] = os.path.join(base, name)
    return out


def folder(name):
    return name.split(".")[0] if "." in name or name in MAY_IMPORT else TOP


def imports(path, known):
    """The module_utils modules ``path`` imports, by dotted name under module_utils."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and (node.module == PACKAGE or node.module.startswith(PACKAGE + ".")):
            base = node.module[len(PACKAGE) + 1:]
            for alias in node.names:
                sub = (base + "." + alias.name).lstrip(".")
                out.add(sub if sub in known else base)
        elif isinstance(node, ast.Import):
            out.update(a.name[len(PACKAGE) + 1:] for a in node.names if a.name.startswith(PACKAGE + "."))
    unknown = out - set(known)
    assert not unknown, "%s imports %s, which module_utils does not have" % (path, sorted(unknown))
    return out


def graph():
    known = modules()
    return {name: imports(path, known) - {name} for name, path in known.items()}


def test_every_folder_is_a_layer_and_says_what_it_holds():
    """Each folder's README.md says what lives there and what it may import.

    Not an ``__init__.py`` docstring: ansible-test 2.16 and 2.17 (empty-init) require every ``__init__.py`` under
    plugins/module_utils to be empty, and the folders are namespace packages as the rest of ansible_collections is.
    """
    folders = sorted(d for d in os.listdir(MODULE_UTILS) if os.path.isdir(os.path.join(MODULE_UTILS, d)) and d != "__pycache__")
    assert folders == sorted(f for f in MAY_IMPORT if f)
    for name in folders:
        with open(os.path.join(MODULE_UTILS, name, "README.md"), encoding="utf-8") as f:
            text = f.read()
        assert text.startswith("# module_utils/%s/: " % name) and "Imports " in text, name
        assert not os.path.exists(os.path.join(MODULE_UTILS, name, "__init__.py")), name


@pytest.mark.parametrize("name", sorted(f or "(top)" for f in MAY_IMPORT))
def test_no_folder_holds_more_than_twelve_modules(name):
    where = MODULE_UTILS if name == "(top)" else os.path.join(MODULE_UTILS, name)
    mods = [n for n in os.listdir(where) if n.endswith(".py") and n != "__init__.py" and not n.endswith("_pb2.py")]
    assert 0 < len(mods) <= MAX_MODULES, (name, sorted(mods))


def test_imports_point_down_only():
    upward = []
    for name, deps in sorted(graph().items()):
        own = folder(name)
        for dep in sorted(deps):
            if folder(dep) != own and folder(dep) not in MAY_IMPORT[own]:
                upward.append("%s imports %s" % (name, dep))
    assert upward == []


def test_no_import_cycle():
    deps = graph()
    state, stack, cycles = {}, [], []

    def visit(name):
        state[name] = "open"
        stack.append(name)
        for dep in sorted(deps[name]):
            if state.get(dep) == "open":
                cycles.append(" -> ".join(stack[stack.index(dep):] + [dep]))
            elif dep not in state:
                visit(dep)
        stack.pop()
        state[name] = "done"

    for name in sorted(deps):
        if name not in state:
            visit(name)
    assert cycles == []


def test_the_rules_catch_an_upward_import_and_a_cycle(monkeypatch):
    """The checks themselves: a made-up upward import and a made-up cycle are found."""
    assert folder("cri._snapshot") == "cri" and folder("_errors") == TOP and folder("gc") == "gc"
    fake = {"cri._cri": {"gc._image_gc"}, "gc._image_gc": {"cri._cri"}}
    monkeypatch.setitem(globals(), "graph", lambda: fake)
    with pytest.raises(AssertionError, match="cri._cri imports gc._image_gc"):
        test_imports_point_down_only()
    with pytest.raises(AssertionError, match="cri._cri -> gc._image_gc -> cri._cri"):
        test_no_import_cycle()
