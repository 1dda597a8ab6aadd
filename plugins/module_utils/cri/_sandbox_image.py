# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""The sandbox (pause) image a runtime is configured with, from the most direct source that names it.

1. the runtime's verbose Status info: containerd 1.x (``sandboxImage``) and cri-o
   (``sandboxImage`` / ``pause_image``) say it there; containerd 2.x no longer does;
2. the verbose PodSandboxStatus info (``image``) of the newest existing sandbox: one RPC;
3. the config file the runtime process listening on the endpoint was started with
   (``--config``, else containerd's default path): version 3 ``[plugins."io.containerd.cri.v1.images"
   .pinned_images] sandbox``, version 2 ``[plugins."io.containerd.grpc.v1.cri"] sandbox_image``.

Each step runs only when the one before found nothing; ``source`` says which one answered.
"""

from __future__ import annotations

import json
import os

CONTAINERD_CONFIG = "/etc/containerd/config.toml"

try:
    import tomllib as _toml  # Python 3.11+
except ImportError:  # pragma: no cover - older controllers' nodes
    try:
        import tomlkit as _toml
    except ImportError:
        _toml = None


def _json(raw):
    try:
        data = json.loads(raw) if raw else None
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def from_status_info(info):
    """The sandbox image a runtime names in its verbose Status info, or None."""
    config = _json((info or {}).get("config"))
    if not config:
        return None
    # containerd 1.x / cri-o: "sandboxImage"; older cri-o: "pause_image"; containerd 2.0 betas: "pinnedImages"
    for key in ("sandboxImage", "sandbox_image", "pause_image", "PauseImage"):
        if isinstance(config.get(key), str) and config[key]:
            return config[key]
    pinned = config.get("pinnedImages") or config.get("PinnedImages")
    if isinstance(pinned, dict) and isinstance(pinned.get("sandbox"), str) and pinned["sandbox"]:
        return pinned["sandbox"]
    return None


def from_sandbox_info(info):
    """The image a sandbox was created from, as containerd's verbose PodSandboxStatus info names it, or None."""
    data = _json((info or {}).get("info"))
    image = data.get("image") if data else None
    return image if isinstance(image, str) and image else None


def _config_path(daemons, proc):
    if proc is None or not os.path.basename(proc.argv[0]).startswith("containerd"):
        return None
    return daemons.runtime_flags("containerd", proc.argv[1:], proc=proc).get("config", CONTAINERD_CONFIG)


def from_containerd_config(text):
    """The sandbox image a containerd config (version 2, 3 or 4) sets, or None."""
    if _toml is None:
        return None
    try:
        data = _toml.loads(text)
    except Exception:  # pylint: disable=broad-except  # any parse error: the file says nothing we can use
        return None
    plugins = data.get("plugins") or {}
    if data.get("version") in (3, 4):  # containerd 2.3's version 4 keeps the images plugin of version 3
        value = ((plugins.get("io.containerd.cri.v1.images") or {}).get("pinned_images") or {}).get("sandbox")
    else:
        value = (plugins.get("io.containerd.grpc.v1.cri") or {}).get("sandbox_image")
    return str(value) if value else None


def from_runtime_config(socket_path):
    """The sandbox image in the config file of the containerd listening on ``socket_path``, or None: only a trusted
    listener's command line is believed (_daemons.runtime_process: root's, from a root-owned executable)."""
    # imported here: only containerd 2.x without a sandbox gets this far; the other runs need no /proc reading code
    from ansible_collections.kubenode.gc.plugins.module_utils import _daemons  # pylint: disable=import-outside-toplevel

    _runtime, proc = _daemons.runtime_process(socket_path)
    path = _config_path(_daemons, proc)
    if not path:
        return None
    try:
        with open(os.path.join("/proc/%d/root" % proc.pid, path.lstrip("/")), encoding="utf-8") as f:
            return from_containerd_config(f.read())
    except OSError:
        return None


def discover(client, status_info, sandboxes):
    """(image, source) with source ``status``, ``sandbox`` or ``config``; (None, None) when nothing says.

    ``sandboxes`` is a callable returning the node's sandbox records (newest last), so the list is
    read only when the Status info does not name the image (and not at all when the caller has it)."""
    image = from_status_info(status_info)
    if image:
        return image, "status"
    existing = sandboxes()
    if existing:
        ready = [s for s in existing if s.get("state") == "ready"] or existing
        image = from_sandbox_info(dict(client.call("PodSandboxStatus", pod_sandbox_id=ready[-1]["id"], verbose=True).info))
        if image:
            return image, "sandbox"
    image = from_runtime_config(client.path)
    if image:
        return image, "config"
    return None, None
