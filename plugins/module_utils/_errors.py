# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""The one error family of kubenode.gc: every failure a module reports is a KubenodeGcError.

Its text is one sentence. ``result`` carries what the run did before it failed (removed images,
written files...), so a module can fail with ``changed: true`` and the partial result.
"""

from __future__ import annotations


class KubenodeGcError(Exception):
    """A run or an input failed; str() is one sentence, ``result`` what was done before (may be empty)."""

    def __init__(self, message, result=None):
        super().__init__(message)
        self.result = result or {}


class OptionError(KubenodeGcError):
    """A module option is invalid; nothing was done."""


class GcError(KubenodeGcError):
    """A GC run (image_gc, container_gc) failed; ``result`` holds what was done before (removed objects included)."""


class ConfigError(KubenodeGcError):
    """A configuration file, its content or a setting is invalid; one sentence naming the file or setting and the problem."""


class PolicyError(KubenodeGcError, ValueError):
    """Invalid policy input (thresholds, ages, an image filesystem without capacity); the kubelet's wording."""


class DockerApiError(KubenodeGcError):
    """A Docker Engine API call failed (docker/_client); str() is one sentence naming the endpoint and the call.
    Here, not beside the client, so that code catching it on any runtime does not import the client (http.client)."""

    def __init__(self, message, endpoint=None, operation=None, status=None):
        super().__init__(message)
        self.endpoint = endpoint
        self.operation = operation
        self.status = status
