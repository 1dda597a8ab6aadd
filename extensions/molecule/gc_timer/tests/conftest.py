# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Each node's tests in one pytest-xdist group: the verifier runs the nodes side by side (-n 2 --dist loadgroup), each
node's tests in their order on one worker (they wait minutes for the node's timer; the nodes share nothing)."""

import pytest


# first: pytest-xdist's own hook turns the marks into the groups
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    for item in items:
        host = getattr(item, "callspec", None) and item.callspec.params.get("_testinfra_host")
        if host is not None:
            item.add_marker(pytest.mark.xdist_group(host.backend.get_hostname()))
