# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Integration fixtures: the built-and-installed collection, ansible-playbook, and real runtimes.

Modules run through ``ansible-playbook`` against localhost, from the collection
tarball that ``ansible-galaxy collection build`` makes of this checkout; each run forks from the session's
``devtools.ansible_zygote`` (ansible-core imported once) and calls ansible-playbook's own ``main()``
(``KUBENODE_GC_TEST_ZYGOTE=0``: a new process for every run).

Tests that use the ``runtime`` fixture run on the runtimes of the matrix (``devtools.runtimes``; test ids
ctrd16, ctrd17, ctrd21, ctrd22, ctrd23, crio,
dockerd), one runtime instance per test module and runtime.  Which runtimes is
declared by every module whose tests take a runtime (a test may override its module with its own mark), and the
collection fails for a module that does not say:

* ``pytestmark = pytest.mark.runtimes("every")``: what the tests prove differs between runtimes (the CRI's answers:
  ids, references, pins, the sandbox image, what a removal or a crash does; a runtime's storage: the bytes it frees,
  containerd's own API, cri-o's files; a runtime's own configuration and version): every runtime of the matrix;
* ``pytestmark = pytest.mark.runtimes("one")``: the runtime is only a fixture (Ansible-side logic, playbook variables,
  history records, reports, files, locks, the ledger, bad input): once, on the default runtime (containerd-1.6), or on
  the first runtime of ``KUBENODE_GC_TEST_RUNTIMES`` when that leaves the default out.

docs/development.md has the table of which module runs where, and why.  ``KUBENODE_GC_TEST_RUNTIMES=name,...``
narrows the matrix; ``KUBENODE_GC_TEST_EVERY_RUNTIME=1`` runs the ``one`` tests on every runtime too (to check a
module's declaration).  cri-o is in the matrix when its binaries are there (``../shared/runtimes`` or
``KUBENODE_GC_CRIO_DIR``); without them the session ends with one loud line saying it was not tested.

Tests that take ``interpreter`` run once per managed-node interpreter where they run on the default runtime (and
``one`` tests wherever they run), and under the first interpreter only on the other runtimes:

* ``debian``: /usr/bin/python3 with Debian 12's python3-grpcio and python3-protobuf;
* ``pypi``: the project venv, with the newest grpcio and protobuf from PyPI.

KUBENODE_GC_TEST_INTERPRETERS=name=/path,... overrides the list.

Each (test module, runtime) pair is one xdist group: its tests run on one worker, which starts that runtime once for
the module, and the two workers of ``-n 2 --dist loadgroup`` share the pairs, the largest first.
"""

import contextlib
import glob
import json
import os
import subprocess
import sys

import pytest
import yaml

from devtools import fetch, kubelet_lock, runtimes
from devtools.ansible_zygote import Zygote
from devtools.collection import REPO

BIN = os.path.dirname(sys.executable)


def _interpreters():
    spec = os.environ.get("KUBENODE_GC_TEST_INTERPRETERS", "debian=/usr/bin/python3,pypi=%s" % sys.executable)
    return [tuple(item.split("=", 1)) for item in spec.split(",") if item]


INTERPRETERS = _interpreters()


def _runtimes():
    wanted = os.environ.get("KUBENODE_GC_TEST_RUNTIMES")
    names = [n.strip() for n in wanted.split(",") if n.strip()] if wanted else list(runtimes.NAMES)
    unknown = set(names) - set(runtimes.NAMES)
    if unknown:
        raise pytest.UsageError("KUBENODE_GC_TEST_RUNTIMES names unknown runtimes %s (known: %s)" % (sorted(unknown), ", ".join(runtimes.NAMES)))
    return [n for n in names if runtimes.available(n)], [n for n in names if not runtimes.available(n)]


RUNTIMES, MISSING_RUNTIMES = _runtimes()
# where the "one" tests run: the default runtime, unless KUBENODE_GC_TEST_RUNTIMES leaves it out
ONE_RUNTIME = runtimes.DEFAULT if runtimes.DEFAULT in RUNTIMES else (RUNTIMES[0] if RUNTIMES else None)
EVERY_RUNTIME_ENV = "KUBENODE_GC_TEST_EVERY_RUNTIME"
KINDS = ("every", "one")


def pytest_configure(config):
    config.addinivalue_line("markers", "runtimes(kind): 'every' runtime of the matrix, or 'one' (the default runtime): see tests/integration/conftest.py")


def runtimes_of(metafunc):
    """The runtimes a test that takes a runtime runs on, by its (or its module's) ``runtimes`` mark."""
    mark = metafunc.definition.get_closest_marker("runtimes")
    where = "%s::%s" % (metafunc.definition.path.name, metafunc.definition.name)
    if mark is None:
        raise ValueError("%s takes a runtime, but neither it nor its module says on which runtimes it runs: add pytestmark = "
                         "pytest.mark.runtimes(\"every\") or (\"one\") to the module (see tests/integration/conftest.py)" % where)
    if len(mark.args) != 1 or mark.args[0] not in KINDS:
        raise ValueError("%s: pytest.mark.runtimes takes one of %s, got %r" % (where, ", ".join(KINDS), mark.args))
    if mark.args[0] == "every" or os.environ.get(EVERY_RUNTIME_ENV) == "1":
        return RUNTIMES, "every"
    return ([ONE_RUNTIME] if ONE_RUNTIME else []), "one"


def _param(module, runtime_name, *values, interpreter=None):
    test_id = runtimes.TEST_IDS[runtime_name] + ("-" + interpreter if interpreter else "")
    # one xdist group per test module and runtime: its tests run on one worker, which starts the runtime once for them
    group = "%s-%s" % (module.__name__.rsplit(".", 1)[-1], runtimes.TEST_IDS[runtime_name])
    return pytest.param(runtime_name, *values, id=test_id, marks=pytest.mark.xdist_group(group))


def pytest_generate_tests(metafunc):
    names = metafunc.fixturenames
    if "runtime_name" in names:
        chosen, kind = runtimes_of(metafunc)
        if "interpreter" in names:
            params = []
            for rt in chosen:
                pairs = INTERPRETERS if rt == runtimes.DEFAULT or kind == "one" else INTERPRETERS[:1]
                params += [_param(metafunc.module, rt, path, interpreter=name) for name, path in pairs]
            metafunc.parametrize(("runtime_name", "interpreter"), params, scope="module")
        else:
            metafunc.parametrize("runtime_name", [_param(metafunc.module, rt) for rt in chosen], scope="module")
    elif "interpreter" in names:
        metafunc.parametrize("interpreter", [path for name, path in INTERPRETERS], ids=[name for name, path in INTERPRETERS])


def pytest_terminal_summary(terminalreporter):
    if "crio" in MISSING_RUNTIMES:
        terminalreporter.write_line(
            "!!!!! cri-o was NOT tested: no crio and pinns binaries in %s (set %s to a directory holding them) !!!!!"
            % (fetch.crio_search_dir(), runtimes.CRIO_DIR_ENV),
            red=True,
            bold=True,
        )
    if "cri-dockerd" in MISSING_RUNTIMES:
        terminalreporter.write_line(
            "!!!!! cri-dockerd was NOT tested: no cri-dockerd in %s (set %s to a directory holding it) or no Debian docker.io (/usr/sbin/dockerd) !!!!!"
            % (fetch.shared_runtimes_dir(), fetch.SHARED_RUNTIMES_ENV),
            red=True,
            bold=True,
        )
    for name in MISSING_RUNTIMES:
        if name.startswith("containerd-"):
            terminalreporter.write_line(
                "!!!!! %s was NOT tested: no prebuilt containerd in %s/%s (set %s to a directory holding it) !!!!!"
                % (name, fetch.shared_runtimes_dir(), name, fetch.SHARED_RUNTIMES_ENV),
                red=True,
                bold=True,
            )


@pytest.fixture(scope="session", autouse=True)
def _needs_root():
    if os.geteuid() != 0:
        pytest.exit("integration tests need root (they mount tmpfs and run containerd)", returncode=1)


# The fixtures that run processes named kubelet, which every module on this machine sees in /proc: ``kubelet``
# (test_daemon_config.py) and ``ns`` (test_trust.py: impostors in a private pid namespace, which the machine's /proc
# shows too). A test that uses one holds devtools.kubelet_lock exclusively, every other test holds it shared, so no test
# of another xdist worker (or the ansible-core matrix's unit and smoke tests) runs while such a process is up.
FAKE_KUBELET_FIXTURES = ("kubelet", "ns")


@pytest.fixture(autouse=True)
def _kubelet_process_lock(request):
    with kubelet_lock.held(exclusive=any(name in request.fixturenames for name in FAKE_KUBELET_FIXTURES)):
        yield


@pytest.fixture(scope="session")
def collection_tarball(tmp_path_factory):
    out = tmp_path_factory.mktemp("build")
    subprocess.run([os.path.join(BIN, "ansible-galaxy"), "collection", "build", REPO, "--output-path", str(out)], check=True, capture_output=True)
    (tarball,) = glob.glob(str(out / "kubenode-gc-*.tar.gz"))
    return tarball


@pytest.fixture(scope="session")
def collections_path(tmp_path_factory, collection_tarball):
    path = tmp_path_factory.mktemp("collections")
    cmd = [os.path.join(BIN, "ansible-galaxy"), "collection", "install", "--force", "-p", str(path), collection_tarball]
    subprocess.run(cmd, check=True, capture_output=True)
    assert os.path.isfile(path / "ansible_collections" / "kubenode" / "gc" / "plugins" / "modules" / "cri_info.py")
    return str(path)


CALLBACK_PLUGINS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "callback_plugins")
# what makes ansible-playbook write the task's result where KUBENODE_GC_TEST_RESULT (set for each run) says
RESULT_ENV = {"ANSIBLE_CALLBACK_PLUGINS": CALLBACK_PLUGINS, "ANSIBLE_CALLBACKS_ENABLED": "kubenode_gc_test_result"}


class Ansible:
    """Runs one module task through ansible-playbook and returns its registered result.

    The result is what ``register`` would store, written by the callback in callback_plugins/ (a second task copying it
    into a file cost a module execution of its own per run)."""

    def __init__(self, collections_path, workdir, node_cache=None, zygote=None):
        self.collections_path = collections_path
        self.zygote = zygote  # devtools.ansible_zygote.Zygote: the runs without a prefix fork from it
        self.workdir = workdir
        self.node_cache = node_cache  # the modules' cache directory (_cache), kept for the session
        self.count = 0
        self.prefix = []  # a command that ansible-playbook runs under (test_trust.py: nsenter into a private namespace)

    def env(self, extra=None, unset=()):
        env = dict(os.environ)
        for key in unset:
            env.pop(key, None)
        if self.node_cache:
            # as on a node: the modules keep their compiled code between runs (_zipimport), in the session's directory
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["KUBENODE_GC_CACHE_DIR"] = self.node_cache
        env.update(
            ANSIBLE_COLLECTIONS_PATH=self.collections_path,
            ANSIBLE_NOCOLOR="1",
            ANSIBLE_RETRY_FILES_ENABLED="0",
            ANSIBLE_LOCALHOST_WARNING="0",
            ANSIBLE_INVENTORY_UNPARSED_WARNING="0",
            PATH=BIN + os.pathsep + env.get("PATH", ""),
        )
        env.update(extra or {})
        return env

    def module(self, name, args=None, interpreter=sys.executable, check=False, diff=False, task_env=None, unset_env=()):
        self.count += 1
        out = os.path.join(str(self.workdir), "result-%d.json" % self.count)
        task = {"name": "Run the module", name: args or {}, "register": "result", "ignore_errors": True}
        if task_env:
            task["environment"] = task_env
        play = [{"name": "kubenode.gc integration test", "hosts": "localhost", "gather_facts": False, "tasks": [task]}]
        playbook = os.path.join(str(self.workdir), "play-%d.yml" % self.count)
        with open(playbook, "w", encoding="utf-8") as f:
            yaml.safe_dump(play, f)
        cmd = self.prefix + [os.path.join(BIN, "ansible-playbook"), "-i", "localhost,", "-c", "local", "-e", "ansible_python_interpreter=" + interpreter,
                             playbook]
        if check:
            cmd.append("--check")
        if diff:
            cmd.append("--diff")
        env = self.env(dict(RESULT_ENV, KUBENODE_GC_TEST_RESULT=out), unset=unset_env)
        if self.zygote is not None and not self.prefix:
            proc = self.zygote.run(cmd, env)
        else:
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        if not os.path.exists(out):
            raise AssertionError("ansible-playbook produced no result (rc %d):\n%s\n%s" % (proc.returncode, proc.stdout, proc.stderr))
        with open(out, encoding="utf-8") as f:
            return json.load(f)


@pytest.fixture(scope="session")
def node_cache(tmp_path_factory):
    """The modules' cache directory for the session (root's, 0700), made by the first module run."""
    return str(tmp_path_factory.mktemp("node-cache") / "kubenode-gc")


@pytest.fixture(scope="session")
def ansible_zygote(collections_path, node_cache):
    """The session's devtools.ansible_zygote (KUBENODE_GC_TEST_ZYGOTE=0: none, every run a new process)."""
    if os.environ.get("KUBENODE_GC_TEST_ZYGOTE") == "0":
        yield None
        return
    zygote = Zygote(Ansible(collections_path, None, node_cache).env(RESULT_ENV))
    yield zygote
    zygote.close()


@pytest.fixture
def ansible(collections_path, tmp_path, node_cache, ansible_zygote):
    return Ansible(collections_path, tmp_path, node_cache, ansible_zygote)


@pytest.fixture(scope="module")
def runtime_instance(runtime_name):
    """One real runtime per test module and runtime of the matrix, on a 128 MiB tmpfs imagefs."""
    with runtimes.make(runtime_name, imagefs_size="128M") as rt:
        yield rt


@pytest.fixture
def runtime(runtime_instance):
    """The module's runtime, emptied to just its sandbox image before each test."""
    runtime_instance.reset()
    return runtime_instance


@contextlib.contextmanager
def read_only_tmpfs(path, files):
    """A 1 MiB tmpfs at ``path`` holding ``files`` (name -> text), remounted read-only (root can't write there either)."""
    os.makedirs(path)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "kubenode-gc-ro", str(path)], check=True)
    try:
        for name, text in files.items():
            with open(os.path.join(str(path), name), "w", encoding="utf-8") as f:
                f.write(text)
        subprocess.run(["mount", "-o", "remount,ro", str(path)], check=True)
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=False)
