# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""CRI (runtime.v1) client over gRPC on a unix socket.

Knows gRPC and protobuf, nothing of Ansible: every failure is a CriError whose
text is one sentence naming the endpoint and the call.  It counts the RPCs it
makes per method (``rpc_calls``) so modules can prove how much they asked.
"""

from __future__ import annotations

import errno
import hashlib
import math
import os
import socket
import stat
import threading
import traceback

from ansible_collections.kubenode.gc.plugins.module_utils._errors import KubenodeGcError, OptionError
from ansible_collections.kubenode.gc.plugins.module_utils.cri import _cri_api_pb2 as pb

try:
    import grpc
except ImportError:
    HAS_GRPC = False
    GRPC_IMPORT_ERROR = traceback.format_exc()
else:
    HAS_GRPC = True
    GRPC_IMPORT_ERROR = None

HAS_PROTOBUF = pb.HAS_PROTOBUF
PROTOBUF_IMPORT_ERROR = pb.PROTOBUF_IMPORT_ERROR

CRI_API_VERSION = "v1"
CRICTL_CONFIG = "/etc/crictl.yaml"
DEFAULT_ENDPOINTS = (
    "unix:///run/containerd/containerd.sock",
    "unix:///run/crio/crio.sock",
    "unix:///run/k3s/containerd/containerd.sock",
    "unix:///var/run/cri-dockerd.sock",
)
# The kubelet accepts messages up to 16 MiB; a node with thousands of images
# can exceed gRPC's 4 MiB default on ListImages, so allow more.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024

# status codes of a call whose answer was lost: the runtime may or may not have done it (it went away, restarted, or
# did not answer in time); a removal ending so is re-checked against a fresh list before it is reported
LOST_ANSWER_CODES = ("UNAVAILABLE", "DEADLINE_EXCEEDED", "CANCELLED")

# the services of proto/cri_api.proto, searched in this order for a method
_SERVICES = ("RuntimeService", "ImageService")

# The CRI methods that only read. While a client shares its answers (CriClient.share_answers), each such request is sent
# once and its answer given again to every later caller: what the runtime says of itself (RUNTIME_READS: its version and
# configuration, the same all through one execution) in scope "runtime", and every read in scope "node" until a call
# that may change the node (any method not listed here, containerd's own included) drops the answers of the node.
RUNTIME_READS = frozenset(("Version", "Status"))
NODE_READS = RUNTIME_READS | frozenset(("ImageFsInfo", "ListImages", "ListContainers", "ListPodSandbox", "ContainerStatus",
                                        "PodSandboxStatus", "ImageStatus", "ListContainerStats"))
# containerd's own methods (counted as containerd.<service>.<Method>) that only read
CONTAINERD_READS = frozenset(("List", "ListStream", "Get", "Info", "Usage", "ListStatuses", "ListResources", "Plugins", "Server"))


class CriError(KubenodeGcError):
    """A CRI call failed; str() is one sentence naming the endpoint and the call."""

    def __init__(self, message, endpoint=None, method=None, code=None):
        super().__init__(message)
        self.endpoint = endpoint
        self.method = method
        self.code = code


def cri_options(params):
    """The shared CRI options (cri_endpoint, cri_timeout), checked: (endpoint option or None, timeout in seconds).

    Here rather than in _common so that code running without Ansible (the gc_timer role's runner) can check them."""
    if params["cri_timeout"] <= 0:
        raise OptionError("cri_timeout must be a positive number of seconds, got %s." % params["cri_timeout"])
    if not math.isfinite(params["cri_timeout"]):
        raise OptionError("cri_timeout must be a finite number of seconds, got %s." % params["cri_timeout"])
    return dict(cri_endpoint=params["cri_endpoint"], cri_timeout=params["cri_timeout"])


def endpoint_to_path(endpoint):
    """Return the socket path of a ``unix://`` endpoint (or of a bare absolute path)."""
    if endpoint.startswith("unix://"):
        path = endpoint[len("unix://"):]
    elif endpoint.startswith("unix:"):
        path = endpoint[len("unix:"):]
    elif endpoint.startswith("/"):
        path = endpoint
    else:
        raise CriError(
            "CRI endpoint %r is not supported: use a unix socket such as unix:///run/containerd/containerd.sock." % endpoint,
            endpoint=endpoint,
        )
    if not path.startswith("/"):
        raise CriError("CRI endpoint %r is not an absolute unix socket path." % endpoint, endpoint=endpoint)
    return path


def normalize_endpoint(endpoint):
    """Return the canonical ``unix:///path`` form of an endpoint."""
    return "unix://" + endpoint_to_path(endpoint)


def socket_identity(endpoint):
    """The runtime socket an endpoint reaches, whatever its spelling: the socket path with every symbolic link, ``.``,
    ``..`` and repeated slash resolved (``unix:///var/run/x.sock``, ``/run//x.sock`` and a path through a linked directory
    give one answer). The path, not the inode, so a runtime restarted between two runs keeps its identity."""
    return "/" + os.path.realpath(endpoint_to_path(endpoint)).lstrip("/")


def socket_digest(endpoint):
    """16 hex digits of the SHA-256 of ``socket_identity``: the name part of a file kept per runtime socket (the node
    lock, the kept snapshot sizes), the same for every spelling of one socket."""
    return hashlib.sha256(socket_identity(endpoint).encode("utf-8")).hexdigest()[:16]


# a socket this user may not use: the usual cause is a play without become (the runtime's sockets are root's)
PERMISSION_DENIED = "permission denied on socket %s (run as root: become: true)"


def probe_socket(path):
    """Connect to a unix socket once; return None when it answers, else a short reason."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "socket %s does not exist" % path
    except PermissionError:
        return PERMISSION_DENIED % path
    except OSError as exc:
        return "cannot read socket %s: %s" % (path, exc.strerror or exc)
    if not stat.S_ISSOCK(mode):
        return "%s is not a socket" % path
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(5)
        sock.connect(path)
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EPERM):
            return PERMISSION_DENIED % path
        if exc.errno == errno.ECONNREFUSED:
            return "nothing is listening on socket %s" % path
        return "cannot connect to socket %s: %s" % (path, exc.strerror or exc)
    finally:
        sock.close()
    return None


def read_crictl_endpoint(path=CRICTL_CONFIG):
    """Return ``runtime-endpoint`` from a crictl config file, or None."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return None
    try:
        import yaml
    except ImportError:
        yaml = None
    if yaml is not None:
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError:
            return None
        value = data.get("runtime-endpoint") if isinstance(data, dict) else None
        return str(value).strip() or None if value else None
    # PyYAML is not guaranteed on a node: crictl.yaml is flat "key: value".
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "runtime-endpoint":
            return value.strip().strip("'\"") or None
    return None


def resolve_endpoint(option=None, crictl_config=CRICTL_CONFIG, defaults=DEFAULT_ENDPOINTS):
    """Pick the CRI endpoint: the option, then crictl's config, then the first live default socket.

    Returns ``(endpoint, source)`` where source is ``option``, ``crictl`` or ``default``.
    """
    if option:
        return normalize_endpoint(option), "option"
    configured = read_crictl_endpoint(crictl_config)
    if configured:
        return normalize_endpoint(configured), "crictl"
    denied = []
    for candidate in defaults:
        problem = probe_socket(endpoint_to_path(candidate))
        if problem is None:
            return candidate, "default"
        if problem.startswith("permission denied"):
            denied.append(candidate)
    if denied:
        # the socket is there, this user may not use it: say so, not "no endpoint"
        raise CriError(
            "Permission denied on the CRI socket %s: cri_endpoint is unset and this user may not connect to it; run as root "
            "(become: true)." % " and ".join(denied)
        )
    raise CriError(
        "No CRI endpoint found: cri_endpoint and CONTAINER_RUNTIME_ENDPOINT are unset, %s names no runtime-endpoint, "
        "and none of %s answers." % (crictl_config, ", ".join(defaults))
    )


def _one_line(text):
    return " ".join(str(text).split()).rstrip(".")


class CriClient:
    """A CRI runtime.v1 client bound to one unix socket endpoint."""

    def __init__(self, endpoint, timeout=30.0):
        self.endpoint = normalize_endpoint(endpoint)
        self.path = endpoint_to_path(self.endpoint)
        self.timeout = float(timeout)
        self.rpc_calls = {}
        self._lock = threading.Lock()
        self._channel = None
        self._callables = {}
        self._shared = frozenset()  # the methods whose answers are shared (share_answers)
        self._answers = {}  # (method, request bytes) -> the answer, while shared
        self.node_memo = None  # while the node's reads are shared: a dict _snapshot keeps what it measured of the node in

    def share_answers(self, scope):
        """Send each read once from now on and give its answer again to every later caller (the parts of node_audit and
        node_cleanup, which run several modules' logic on one client): ``"runtime"``, the runtime's Version and Status
        (RUNTIME_READS); ``"node"``, every read (NODE_READS), until a call that may change the node. An answer given again
        is not counted in ``rpc_calls``: no call was made."""
        self._shared = NODE_READS if scope == "node" else RUNTIME_READS
        self.node_memo = {} if scope == "node" else None

    def _answer_key(self, method, request):
        if method not in self._shared:
            return None
        return method, request.SerializeToString(deterministic=True)

    def _remember(self, key, answer):
        if key is not None:
            with self._lock:
                self._answers[key] = answer

    # -- plumbing -----------------------------------------------------------

    def _connect(self, method):
        if self._channel is not None:
            return
        problem = probe_socket(self.path)
        if problem:
            raise CriError("CRI endpoint %s is unusable for %s: %s." % (self.endpoint, method, problem), self.endpoint, method)
        self._channel = grpc.insecure_channel(
            self.endpoint,
            options=[
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                ("grpc.enable_http_proxy", 0),
            ],
        )

    def _callable(self, method):
        """Return (multicallable, request class) for a method named in proto/cri_api.proto."""
        entry = self._callables.get(method)
        if entry is not None:
            return entry
        for service in _SERVICES:
            desc = pb.DESCRIPTOR.services_by_name[service].methods_by_name.get(method)
            if desc is not None:
                break
        else:
            raise CriError("CRI method %s is not known to this client." % method, self.endpoint, method)
        request_cls = getattr(pb, desc.input_type.name)
        response_cls = getattr(pb, desc.output_type.name)
        fn = self._channel.unary_unary(
            "/runtime.v1.%s/%s" % (service, method),
            request_serializer=request_cls.SerializeToString,
            response_deserializer=response_cls.FromString,
        )
        entry = self._callables[method] = (fn, request_cls)
        return entry

    def _count(self, method):
        with self._lock:
            self.rpc_calls[method] = self.rpc_calls.get(method, 0) + 1
            if self._answers and not _reads_only(method):
                # the node may change: only what the runtime says of itself is still its answer
                self._answers = {k: v for k, v in self._answers.items() if k[0] in RUNTIME_READS}
                if self.node_memo:
                    self.node_memo.clear()

    def _error(self, method, exc):
        code = exc.code() if hasattr(exc, "code") else None
        details = _one_line(exc.details() if hasattr(exc, "details") else exc) or "no details"
        name = code.name if code is not None else "UNKNOWN"
        if code == grpc.StatusCode.UNIMPLEMENTED:
            msg = "CRI endpoint %s does not implement %s of the CRI runtime.v1 API (UNIMPLEMENTED: %s); is it a container runtime's CRI socket?" % (
                self.endpoint,
                method,
                details,
            )
        elif code == grpc.StatusCode.DEADLINE_EXCEEDED:
            msg = "CRI endpoint %s did not answer %s within %g seconds (cri_timeout)." % (self.endpoint, method, self.timeout)
        elif code == grpc.StatusCode.UNAVAILABLE:
            msg = "CRI endpoint %s is unavailable for %s: %s." % (self.endpoint, method, details)
        elif code == grpc.StatusCode.PERMISSION_DENIED:
            msg = "CRI endpoint %s denied %s: %s." % (self.endpoint, method, details)
        else:
            msg = "CRI endpoint %s failed %s: %s (%s)." % (self.endpoint, method, details, name)
        return CriError(msg, self.endpoint, method, name)

    def _request(self, method, fields):
        """Connect if needed and build the request from ``fields``: (multicallable, request, key of a shared answer or None)."""
        self._connect(method)
        fn, request_cls = self._callable(method)
        request = _build(request_cls, fields)
        return fn, request, self._answer_key(method, request)

    def call(self, method, **fields):
        """Make one unary RPC; ``fields`` become the request message (nested dicts allowed)."""
        fn, request, key = self._request(method, fields)
        if key is not None and key in self._answers:
            return self._answers[key]
        self._count(method)
        try:
            answer = fn(request, timeout=self.timeout)
        except grpc.RpcError as exc:
            raise self._error(method, exc) from None
        self._remember(key, answer)
        return answer

    def call_async(self, method, **fields):
        """Start one unary RPC and return a future; ``result()`` raises CriError."""
        fn, request, key = self._request(method, fields)
        if key is not None and key in self._answers:
            return _Answered(self._answers[key])
        self._count(method)
        return _Future(self, method, fn.future(request, timeout=self.timeout), key)

    def close(self):
        if self._channel is not None:
            self._channel.close()
            self._channel = None
            self._callables = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- RuntimeService -------------------------------------------------------

    def version(self):
        return self.call("Version", version=CRI_API_VERSION)

    def status(self, verbose=True):
        return self.call("Status", verbose=verbose)

    def list_pod_sandbox(self):
        return list(self.call("ListPodSandbox").items)

    def stop_pod_sandbox(self, sandbox_id):
        self.call("StopPodSandbox", pod_sandbox_id=sandbox_id)

    def remove_pod_sandbox(self, sandbox_id):
        self.call("RemovePodSandbox", pod_sandbox_id=sandbox_id)

    def list_containers(self):
        return list(self.call("ListContainers").containers)

    def stop_container(self, container_id, timeout=0):
        self.call("StopContainer", container_id=container_id, timeout=int(timeout))

    def remove_container(self, container_id):
        self.call("RemoveContainer", container_id=container_id)

    # -- ImageService ---------------------------------------------------------

    def list_images(self):
        return list(self.call("ListImages").images)

    def image_fs_info(self):
        return self.call("ImageFsInfo")


def _reads_only(method):
    """Whether a counted call (a CRI method, or containerd.<service>.<Method>) only reads."""
    if method.startswith("containerd."):
        return method.rsplit(".", 1)[-1] in CONTAINERD_READS
    return method in NODE_READS


class _Future:
    def __init__(self, client, method, future, key=None):
        self._client = client
        self._method = method
        self._future = future
        self._key = key

    def done(self):
        return self._future.done()

    def result(self):
        try:
            answer = self._future.result()
        except grpc.RpcError as exc:
            raise self._client._error(self._method, exc) from None
        self._client._remember(self._key, answer)  # pylint: disable=protected-access
        return answer


class _Answered:
    """The future of a call answered by a shared answer (CriClient.share_answers): done, no call made."""

    def __init__(self, answer):
        self._answer = answer

    def done(self):
        return True

    def result(self):
        return self._answer


def _build(cls, fields):
    """Build a request message from keyword fields; nested messages may be given as dicts.

    The message's own constructor takes field names, scalars and dicts for messages about 40 times faster than
    json_format (it counts: image_gc builds one RemoveImage request per image); whatever it refuses (JSON names,
    numbers as strings) goes through json_format.ParseDict, which also names an unknown field."""
    if not fields:
        return cls()
    try:
        return cls(**fields)
    except (TypeError, ValueError, KeyError, AttributeError):
        pass
    from google.protobuf import json_format

    return json_format.ParseDict(fields, cls(), ignore_unknown_fields=False)
