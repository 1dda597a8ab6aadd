# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""cri-o's own HTTP API, which cri-o serves on its CRI socket beside gRPC (what ``crio status`` reads).

Its verbose CRI Status info carries only the runtime table and the pause image (``sandboxImage``); ``GET /config``
gives the whole configuration the running cri-o uses, as TOML (root, runroot, storage_driver, imagestore, ...).
"""

from __future__ import annotations

import http.client

from ansible_collections.kubenode.gc.plugins.module_utils._errors import KubenodeGcError
from ansible_collections.kubenode.gc.plugins.module_utils._unix_http import UnixHTTPConnection


class CrioApiError(KubenodeGcError):
    """cri-o's HTTP API did not answer."""


def get(socket_path, path, timeout=10.0):
    """The body of ``GET path`` on cri-o's socket, as text; raises CrioApiError when it does not answer 200."""
    conn = UnixHTTPConnection(socket_path, timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        body = resp.read()
    except (OSError, http.client.HTTPException) as exc:
        raise CrioApiError("GET %s on %s failed: %s" % (path, socket_path, exc))
    finally:
        conn.close()
    if resp.status != 200:
        raise CrioApiError("GET %s on %s answered %d %s" % (path, socket_path, resp.status, resp.reason))
    return body.decode("utf-8", "replace")


def config(socket_path, timeout=10.0):
    """The configuration the running cri-o uses (``GET /config``), as TOML text."""
    return get(socket_path, "/config", timeout)
