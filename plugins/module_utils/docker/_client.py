# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""Docker Engine API client: HTTP/1.1 over a unix socket with the standard library, JSON in and out.

Knows HTTP, nothing of Ansible or of the CRI. Every path is versioned (``/v1.41/...``, Docker 20.10's API, which every
later engine still serves; an older engine answers that the version is too new, and that answer is the error). One
connection is kept open for the client's calls and closed by ``close()``. Every failure is a DockerApiError whose text
is one sentence naming the endpoint and the call, with the engine's own message; ``status`` is the HTTP status (404:
gone, 409: conflict, None: no answer). Calls are counted per operation as ``docker.<Operation>`` (the operation ids of
the Engine API's reference) into ``api_calls``, which may be the CRI client's ``rpc_calls`` so a module returns both.
"""

from __future__ import annotations

import http.client
import json
import threading
import urllib.parse

from ansible_collections.kubenode.gc.plugins.module_utils._errors import DockerApiError
from ansible_collections.kubenode.gc.plugins.module_utils._unix_http import UnixHTTPConnection

DEFAULT_ENDPOINT = "unix:///var/run/docker.sock"
API_VERSION = "1.41"
# an answer larger than this is refused (a node with thousands of images and containers stays far below it)
MAX_ANSWER_BYTES = 256 * 1024 * 1024


def socket_path(endpoint):
    """The socket path of a ``unix://`` endpoint (or of a bare absolute path); DockerApiError for anything else."""
    if endpoint.startswith("unix://"):
        path = endpoint[len("unix://"):]
    elif endpoint.startswith("/"):
        path = endpoint
    else:
        raise DockerApiError("Docker endpoint %r is not supported: only a unix socket such as %s is." % (endpoint, DEFAULT_ENDPOINT), endpoint)
    if not path.startswith("/"):
        raise DockerApiError("Docker endpoint %r is not an absolute unix socket path." % endpoint, endpoint)
    return path


def _one_line(text):
    return " ".join(str(text).split()).rstrip(".")


def _quote(name):
    return urllib.parse.quote(name, safe="")


class DockerClient:
    """The Docker Engine API on one unix socket."""

    def __init__(self, endpoint=DEFAULT_ENDPOINT, timeout=30.0, api_calls=None):
        self.endpoint = endpoint if endpoint.startswith("unix://") else "unix://" + endpoint
        self.path = socket_path(endpoint)
        self.timeout = float(timeout)
        self.api_calls = {} if api_calls is None else api_calls
        self._lock = threading.Lock()
        self._conn = None

    # -- plumbing -------------------------------------------------------------

    def close(self):
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def request(self, operation, method, path, query=None, body=None, content_type="application/json", timeout=None, raw=False):
        """One call: ``method`` on ``/v<API_VERSION><path>`` with ``query`` (a dict; lists and dicts JSON-encoded as the
        API wants its filters) and ``body`` (bytes, or anything JSON-encodable); returns the decoded JSON (None for an
        empty answer), or the body's bytes with ``raw``. Counted as ``docker.<operation>``."""
        url = "/v%s%s" % (API_VERSION, path)
        if query:
            url += "?" + urllib.parse.urlencode({k: json.dumps(v, separators=(",", ":")) if isinstance(v, (dict, list)) else v
                                                 for k, v in query.items() if v is not None})
        data = body
        headers = {}
        if body is not None and not isinstance(body, bytes):
            data = json.dumps(body).encode("utf-8")
        if data is not None:
            headers = {"Content-Type": content_type, "Content-Length": str(len(data))}
        with self._lock:
            self.api_calls["docker." + operation] = self.api_calls.get("docker." + operation, 0) + 1
            status, reason, answer = self._exchange(operation, method, url, data, headers, timeout)
        if status >= 400:
            raise DockerApiError("Docker Engine API at %s failed %s (%s %s): %s (HTTP %d)." % (
                self.endpoint, operation, method, path, _message(answer) or reason, status), self.endpoint, operation, status)
        if raw:
            return answer
        if not answer.strip():
            return None
        try:
            return json.loads(answer.decode("utf-8"))
        except ValueError:
            raise DockerApiError("Docker Engine API at %s answered %s (%s %s) with something that is not JSON." % (
                self.endpoint, operation, method, path), self.endpoint, operation, status) from None

    def _exchange(self, operation, method, url, data, headers, timeout):
        """Send one request on the kept connection (a new one when the engine closed it) and read the whole answer."""
        for attempt in (1, 2):
            if self._conn is None:
                self._conn = UnixHTTPConnection(self.path, timeout or self.timeout)
            elif timeout:
                self._conn.timeout = timeout
            fresh = self._conn.sock is None
            try:
                self._conn.request(method, url, body=data, headers=headers)
                resp = self._conn.getresponse()
                answer = resp.read(MAX_ANSWER_BYTES + 1)
            except (OSError, http.client.HTTPException) as exc:
                self._conn.close()
                self._conn = None
                # a kept connection the engine closed while idle: once more on a new one (never after a fresh connect)
                if attempt == 1 and not fresh and isinstance(exc, (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError)):
                    continue
                raise DockerApiError("Docker Engine API at %s did not answer %s: %s." % (
                    self.endpoint, operation, _one_line(getattr(exc, "strerror", None) or exc) or type(exc).__name__),
                    self.endpoint, operation) from None
            if len(answer) > MAX_ANSWER_BYTES:
                self._conn.close()
                self._conn = None
                raise DockerApiError("Docker Engine API at %s answered %s with more than %d bytes." % (self.endpoint, operation, MAX_ANSWER_BYTES),
                                     self.endpoint, operation)
            if resp.will_close:
                self._conn.close()
                self._conn = None
            if timeout and self._conn is not None:
                self._conn.timeout = self.timeout
            return resp.status, resp.reason, answer
        raise AssertionError("unreachable")  # pragma: no cover

    # -- the calls the collection makes ------------------------------------------

    def info(self):
        """``GET /info``: the engine's id, version, ``DockerRootDir``, driver..."""
        return self.request("SystemInfo", "GET", "/info")

    def system_df(self):
        """``GET /system/df``: images (with ``LayersSize``), containers with their writable layers, volumes with their usage,
        build cache records."""
        return self.request("SystemDataUsage", "GET", "/system/df")

    def containers(self):
        """``GET /containers/json?all=1``: every container in any state, with its labels, image and mounts."""
        return self.request("ContainerList", "GET", "/containers/json", {"all": "1"}) or []

    def remove_volume(self, name):
        """``DELETE /volumes/{name}`` without force: the engine refuses (409) a volume a container uses."""
        self.request("VolumeDelete", "DELETE", "/volumes/%s" % _quote(name))

    def prune_build_cache(self, filters, all_records=True, timeout=None):
        """``POST /build/prune`` with ``filters`` ({name: [values]}); returns the answer (``CachesDeleted``, ``SpaceReclaimed``)."""
        query = {"filters": filters}
        if all_records:
            query["all"] = "1"
        return self.request("BuildPrune", "POST", "/build/prune", query, timeout=timeout) or {}


def _message(answer):
    """The engine's error text: the JSON ``message`` of its answer, else the answer's first line."""
    text = answer.decode("utf-8", "replace") if isinstance(answer, bytes) else str(answer or "")
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict) and data.get("message"):
        return _one_line(data["message"])
    return _one_line(text.strip().splitlines()[0]) if text.strip() else ""
