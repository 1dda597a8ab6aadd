# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Fixtures for the unit tests that talk gRPC on a real socket.

Every server and client a test opens is closed when the test ends, whatever it asserted: no gRPC
channel, server or handler thread of one test is alive in the next (a later fork, by the test or by
a library, must not find any; gRPC's fork handlers can wait forever on them).
"""

import pytest

from ansible_collections.kubenode.gc.plugins.module_utils.cri import _cri
from devtools import kubelet_lock
from devtools.grpc_server import GrpcServer


@pytest.fixture(autouse=True)
def _no_node_cache(monkeypatch):
    """No unit test reads or writes the machine's /var/cache/kubenode-gc (_cache): a test of the cache names its own."""
    monkeypatch.setenv("KUBENODE_GC_CACHE_DIR", "off")


@pytest.fixture
def grpc_server():
    """``grpc_server(behaviours=None, handlers=())``: a started devtools.grpc_server.GrpcServer, closed at teardown."""
    made = []

    def make(behaviours=None, handlers=()):
        server = GrpcServer(behaviours, handlers)
        made.append(server)
        return server.start()

    yield make
    for server in reversed(made):
        server.close()


@pytest.fixture
def cri_client(grpc_server):  # pylint: disable=redefined-outer-name,unused-argument  # set up first, so torn down last
    """``cri_client(endpoint, timeout=5)``: a CriClient, closed at teardown, before the servers."""
    made = []

    def make(endpoint, timeout=5):
        client = _cri.CriClient(endpoint, timeout=timeout)
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


def pytest_configure(config):
    config.addinivalue_line("markers", "real_proc: the test reads the machine's /proc (processes it starts itself)")


@pytest.fixture(autouse=True)
def no_running_daemons(request, monkeypatch, tmp_path_factory):
    """The unit tests see no running kubelet or runtime: module_utils/_daemons reads an empty /proc unless a test gives
    its own fake one, or is marked ``real_proc`` (it reads processes it starts itself). The machine's processes (a
    kubelet on a node, another test's fake kubelet) never decide a unit test's outcome.

    A ``real_proc`` test starts processes named kubelet that every module on this machine would see: it holds the
    machine-wide kubelet lock (devtools/kubelet_lock) exclusively, so no other test that reads /proc runs beside it (the
    ansible-core matrix runs the unit tests of several versions at once, and beside the integration tests)."""
    if request.node.get_closest_marker("real_proc"):
        with kubelet_lock.held(exclusive=True):
            yield
        return
    from ansible_collections.kubenode.gc.plugins.module_utils import _daemons

    monkeypatch.setattr(_daemons, "PROC", str(tmp_path_factory.mktemp("no-proc")))
    yield
