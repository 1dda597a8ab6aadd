# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

import os
import shutil
import socket
import tempfile

import pytest

from ansible_collections.kubenode.gc.plugins.module_utils._daemons import listener_pid as _listener_pid


@pytest.fixture
def short_dir():
    path = tempfile.mkdtemp(prefix="kgc-", dir="/tmp")  # unix socket paths are short
    yield path
    shutil.rmtree(path)


@pytest.mark.real_proc
def test_listener_found_through_a_symlinked_directory(short_dir):
    """cri-o binds /var/run/crio/crio.sock; /var/run is a symlink to /run, and clients name /run/crio/crio.sock."""
    os.mkdir(os.path.join(short_dir, "run"))
    os.symlink("run", os.path.join(short_dir, "var-run"))
    bound, named = os.path.join(short_dir, "var-run", "c.sock"), os.path.join(short_dir, "run", "c.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(bound)
        assert _listener_pid(named) is None  # bound but not listening
        server.listen(1)
        assert _listener_pid(named) == os.getpid()
        assert _listener_pid(bound) == os.getpid()
        assert _listener_pid(os.path.join(short_dir, "run", "other.sock")) is None
    finally:
        server.close()
