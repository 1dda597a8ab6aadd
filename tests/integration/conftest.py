# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Integration fixtures: the built-and-installed collection, ansible-playbook, and real runtimes.

Modules run through ``ansible-playbook`` against localhost, from the collection
tarball that ``ansible-galaxy collection build`` makes of this checkout.

Every test that uses the ``runtime`` fixture runs on every runtime of the matrix
(``devtools.runtimes``; test ids ctrd16, ctrd17, ctrd21, ctrd22, ctrd23, crio, dockerd), one runtime instance
per test module and runtime.  cri-o is in the matrix when its binaries are there
(``../shared/runtimes`` or ``KUBENODE_GC_CRIO_DIR``); without them the session ends
with one loud line saying it was not tested.  ``KUBENODE_GC_TEST_RUNTIMES=name,...``
narrows the matrix.

Tests that take ``interpreter`` run once per managed-node interpreter on containerd 1.6
and under the first interpreter only on the other runtimes:

* ``debian``: /usr/bin/python3 with Debian 12's python3-grpcio and python3-protobuf;
* ``pypi``: the project venv, with the newest grpcio and protobuf from PyPI.

KUBENODE_GC_TEST_INTERPRETERS=name=/path,... overrides the list.
"""

import contextlib
import fcntl
import glob
import json
import os
import subprocess
import sys

import pytest
import yaml

from devtools import fetch, runtimes
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


def _param(runtime_name, *values, interpreter=None):
    test_id = runtimes.TEST_IDS[runtime_name] + ("-" + interpreter if interpreter else "")
    # one xdist group per runtime: its tests run on one worker, which starts it once per module
    return pytest.param(runtime_name, *values, id=test_id, marks=pytest.mark.xdist_group(runtimes.TEST_IDS[runtime_name]))


def pytest_generate_tests(metafunc):
    names = metafunc.fixturenames
    if "runtime_name" in names and "interpreter" in names:
        params = []
        for rt in RUNTIMES:
            pairs = INTERPRETERS if rt == runtimes.DEFAULT else INTERPRETERS[:1]
            params += [_param(rt, path, interpreter=name) for name, path in pairs]
        metafunc.parametrize(("runtime_name", "interpreter"), params, scope="module")
    elif "runtime_name" in names:
        metafunc.parametrize("runtime_name", [_param(rt) for rt in RUNTIMES], scope="module")
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


# The kubelet fixture (test_daemon_config.py) runs a process named kubelet that every module on this machine sees in
# /proc and obeys: a test that uses it holds this lock exclusively, every other test holds it shared, so no test of
# another xdist worker runs while that process is up.
KUBELET_PROCESS_LOCK = os.path.join(os.environ.get("TMPDIR", "/tmp"), "kubenode-gc-kubelet-process.lock")


@pytest.fixture(autouse=True)
def _kubelet_process_lock(request):
    with open(KUBELET_PROCESS_LOCK, "a", encoding="utf-8") as f:
        fcntl.flock(f, fcntl.LOCK_EX if "kubelet" in request.fixturenames else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


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


class Ansible:
    """Runs one module task through ansible-playbook and returns its registered result."""

    def __init__(self, collections_path, workdir):
        self.collections_path = collections_path
        self.workdir = workdir
        self.count = 0

    def env(self, extra=None, unset=()):
        env = dict(os.environ)
        for key in unset:
            env.pop(key, None)
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
        play = [
            {
                "name": "kubenode.gc integration test",
                "hosts": "localhost",
                "gather_facts": False,
                "tasks": [
                    task,
                    {
                        "name": "Save the result",
                        "ansible.builtin.copy": {"content": "{{ result | to_json }}", "dest": out, "mode": "0600"},
                        "check_mode": False,
                        "diff": False,
                    },
                ],
            }
        ]
        playbook = os.path.join(str(self.workdir), "play-%d.yml" % self.count)
        with open(playbook, "w", encoding="utf-8") as f:
            yaml.safe_dump(play, f)
        cmd = [os.path.join(BIN, "ansible-playbook"), "-i", "localhost,", "-c", "local", "-e", "ansible_python_interpreter=" + interpreter, playbook]
        if check:
            cmd.append("--check")
        if diff:
            cmd.append("--diff")
        proc = subprocess.run(cmd, env=self.env(unset=unset_env), capture_output=True, text=True, check=False)
        if not os.path.exists(out):
            raise AssertionError("ansible-playbook produced no result (rc %d):\n%s\n%s" % (proc.returncode, proc.stdout, proc.stderr))
        with open(out, encoding="utf-8") as f:
            return json.load(f)


@pytest.fixture
def ansible(collections_path, tmp_path):
    return Ansible(collections_path, tmp_path)


@pytest.fixture(scope="module")
def runtime_instance(runtime_name):
    """One real runtime per test module and runtime of the matrix, on a 128 MiB tmpfs imagefs."""
    rt = runtimes.make(runtime_name, imagefs_size="128M")
    rt.start()
    try:
        yield rt
    finally:
        rt.stop()


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
