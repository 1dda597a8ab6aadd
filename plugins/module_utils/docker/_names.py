# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""Whether the CRI runtime is cri-dockerd, apart from the Docker Engine's client (_engine): a run on another runtime
asks without importing the client (http.client) or the /proc reading it needs, and imports them with ``engine_api``
once it is on cri-dockerd (the client's error, DockerApiError, is in _errors). No I/O."""

from __future__ import annotations
RUNTIME_NAME = "docker"  # the runtime_name cri-dockerd reports over CRI


def is_docker(runtime_name):
    """Whether a CRI runtime name is cri-dockerd's."""
    return (runtime_name or "").lower() == RUNTIME_NAME


def engine_api():
    """docker/_engine, imported when first asked for: only a run on cri-dockerd uses the Engine's client, and every
    other run would pay its import (http.client, email) and the compile of its files for nothing."""
    # pylint: disable=import-outside-toplevel
    from ansible_collections.kubenode.gc.plugins.module_utils.docker import _engine

    return _engine
