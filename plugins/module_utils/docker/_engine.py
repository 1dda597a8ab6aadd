# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""The Docker Engine behind a cri-dockerd CRI socket, and its containers as the modules need them. I/O, no Ansible.

Which engine: the ``--docker-endpoint`` of the cri-dockerd listening on the CRI socket (read from /proc, _daemons), else
(no cri-dockerd found there: the socket is a proxy, or the process is in another pid namespace) ``DOCKER_HOST`` when it
names a unix socket, else Docker's default ``unix:///var/run/docker.sock``. Whatever the source, the engine is used only
when it is the one behind the CRI: its data root (``GET /info`` ``DockerRootDir``) is the image filesystem cri-dockerd
reports in ImageFsInfo (cri-dockerd reports exactly its engine's data root). Another engine on the same machine (a
node's own dockerd beside a kind node's) is refused with one sentence.

A container is Kubernetes' when it carries a label of the kubelet's (``io.kubernetes.*``: cri-dockerd labels every
container and pod sandbox it creates with the pod's); every other container is outside Kubernetes (``docker run``,
compose, CI jobs), which the CRI's ListContainers does not list.
"""

from __future__ import annotations

import os
import re

from ansible_collections.kubenode.gc.plugins.module_utils import _daemons
from ansible_collections.kubenode.gc.plugins.module_utils._errors import DockerApiError, KubenodeGcError
from ansible_collections.kubenode.gc.plugins.module_utils.docker._client import DEFAULT_ENDPOINT, DockerClient

KUBERNETES_LABEL_PREFIX = "io.kubernetes."
DOCKER_HOST_ENV = "DOCKER_HOST"
# Docker's container states -> the CRI's (a paused or restarting container holds its image as a running one does)
STATES = {"running": "running", "paused": "running", "restarting": "running", "created": "created", "exited": "exited", "dead": "exited",
          "removing": "unknown"}
# what Docker answers when an image a container uses is removed without force; the container's (short) id is group 1
CONFLICT = re.compile(r"conflict: unable to (?:remove|delete) .*?(?:running|stopped)? ?container ([0-9a-f]{12,64})")


def docker_endpoint(cri_socket_path, environ=None):
    """(endpoint, source) of the Docker Engine behind the CRI socket: ``cri-dockerd`` (its ``--docker-endpoint``, or its
    default when it has none), ``DOCKER_HOST`` or ``default``."""
    runtime, proc = _daemons.runtime_process(cri_socket_path)
    if runtime == "cri-dockerd" and proc is not None:
        flags = _daemons.runtime_flags("cri-dockerd", proc.argv[1:], proc.environ, proc)
        return flags.get("docker-endpoint") or DEFAULT_ENDPOINT, "cri-dockerd"
    value = (os.environ if environ is None else environ).get(DOCKER_HOST_ENV) or ""
    if value.startswith("unix://"):
        return value, DOCKER_HOST_ENV
    return DEFAULT_ENDPOINT, "default"


def connect(cri_socket_path, data_root, timeout=30.0, api_calls=None):
    """(DockerClient, ``GET /info``) of the engine behind the CRI socket, checked to be it: its data root is ``data_root``
    (the image filesystem cri-dockerd reports). DockerApiError of one sentence otherwise (the client is closed)."""
    endpoint, source = docker_endpoint(cri_socket_path)
    client = DockerClient(endpoint, timeout=timeout, api_calls=api_calls)
    try:
        info = client.info()
        root = (info or {}).get("DockerRootDir") or ""
        if data_root and os.path.realpath(root) != os.path.realpath(data_root):
            raise DockerApiError("The Docker Engine at %s (%s) has its data root at %s, not at %s where cri-dockerd's image filesystem is: it is "
                                 "not the engine behind the CRI socket %s." % (endpoint, _source(source), root or "(none)", data_root, cri_socket_path),
                                 endpoint, "SystemInfo")
    except DockerApiError:
        client.close()
        raise
    return client, info


def connect_for(client, data_root, what, result):
    """connect() for a module's run on the CRI client ``client``: a failure is KubenodeGcError("<what> cannot reach the
    Docker Engine behind <endpoint>: <why>.") carrying ``result``."""
    try:
        return connect(client.path, data_root, timeout=client.timeout, api_calls=client.rpc_calls)
    except DockerApiError as exc:
        raise KubenodeGcError("%s cannot reach the Docker Engine behind %s: %s" % (what, client.endpoint, str(exc).rstrip(".") + "."),
                              result=result) from None


def _source(source):
    return {"cri-dockerd": "cri-dockerd's --docker-endpoint", DOCKER_HOST_ENV: "from DOCKER_HOST"}.get(source, "Docker's default socket")


def is_kubernetes(labels):
    """Whether a container's labels are the kubelet's (cri-dockerd's containers and pod sandboxes)."""
    return any(key.startswith(KUBERNETES_LABEL_PREFIX) for key in (labels or {}))


def container_record(c):
    """One container of ``GET /containers/json`` (or of ``/system/df``) as the modules read it."""
    names = c.get("Names") or []
    labels = c.get("Labels") or {}
    return {
        "id": c.get("Id") or "",
        "name": (names[0] if names else "").lstrip("/") or (c.get("Id") or "")[:12],
        "image": c.get("Image") or "",
        "image_id": c.get("ImageID") or "",
        "state": STATES.get((c.get("State") or "").lower(), "unknown"),
        "docker_state": c.get("State") or "",
        "labels": labels,
        "kubernetes": is_kubernetes(labels),
        "volumes": sorted(m["Name"] for m in c.get("Mounts") or [] if m.get("Type") == "volume" and m.get("Name")),
        "size_rw": int(c.get("SizeRw") or 0),
    }


def outside_containers(client, cri_ids):
    """The containers of the engine that the CRI does not list (``cri_ids``: its containers' and sandboxes' ids), as
    image_gc's container records: no pod, the container's Docker name, ``outside_kubernetes`` true."""
    out = []
    for c in client.containers():
        rec = container_record(c)
        if rec["id"] in cri_ids:
            continue
        out.append({"id": rec["id"], "name": rec["name"], "attempt": 0, "pod_uid": None, "label_pod_uid": "", "pod_name": None,
                    "pod_namespace": None, "sandbox_id": "", "state": rec["state"], "created_at": None, "created_at_ns": int(c.get("Created") or 0) * 10**9,
                    "image_id": rec["image_id"], "image_ref": rec["image_id"], "image": rec["image"], "outside_kubernetes": True})
    return out


def conflict_container(message):
    """The container id Docker names in a refusal to remove an image a container uses, or None."""
    match = CONFLICT.search(message or "")
    return match.group(1) if match else None
