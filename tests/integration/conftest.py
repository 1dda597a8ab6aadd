# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Integration fixtures: the built-and-installed collection, ansible-playbook, and a real containerd.

Modules run through ``ansible-playbook`` against localhost, from the collection
tarball that ``ansible-galaxy collection build`` makes of this checkout, once
per managed-node interpreter:

* ``debian``: /usr/bin/python3 with Debian 12's python3-grpcio and python3-protobuf;
* ``pypi``: the project venv, with the newest grpcio and protobuf from PyPI.

KUBENODE_GC_TEST_INTERPRETERS=name=/path,... overrides the list.
"""

import contextlib
import glob
import json
import os
import subprocess
import sys

import pytest
import yaml

from devtools.collection import REPO
from devtools.containerd import EmbeddedContainerd

BIN = os.path.dirname(sys.executable)


def _interpreters():
    spec = os.environ.get("KUBENODE_GC_TEST_INTERPRETERS", "debian=/usr/bin/python3,pypi=%s" % sys.executable)
    return [tuple(item.split("=", 1)) for item in spec.split(",") if item]


INTERPRETERS = _interpreters()


def pytest_generate_tests(metafunc):
    if "interpreter" in metafunc.fixturenames:
        metafunc.parametrize("interpreter", [path for name, path in INTERPRETERS], ids=[name for name, path in INTERPRETERS])


@pytest.fixture(scope="session", autouse=True)
def _needs_root():
    if os.geteuid() != 0:
        pytest.exit("integration tests need root (they mount tmpfs and run containerd)", returncode=1)


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
def containerd():
    """One real containerd per test module, on a 128 MiB tmpfs imagefs."""
    ctrd = EmbeddedContainerd(imagefs_size="128M")
    ctrd.start()
    try:
        yield ctrd
    finally:
        ctrd.stop()


@pytest.fixture
def runtime(containerd):
    """The module's containerd, emptied to just its sandbox image before each test."""
    containerd.reset()
    return containerd


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
