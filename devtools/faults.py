# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Fault injection: a CRI proxy that kills the real runtime after N successful removals.

``CrashAfter(runtime, n)`` listens on its own unix socket and forwards every CRI call, as raw
bytes, to the runtime's socket. Removals (RemoveImage, RemoveContainer, RemovePodSandbox) pass
one at a time; when the n-th of them has succeeded, the proxy SIGKILLs the runtime's daemon
(``runtime.crash()``: the root, its state and the containers stay), waits until it is gone and
only then answers that call. Every later call reaches a dead socket and fails as it would on a
node (UNAVAILABLE), so the module under test sees exactly n successful removals whatever its
parallelism. Point the module's ``cri_endpoint`` at ``proxy.endpoint``; afterwards
``runtime.restart()`` brings the runtime back on the same root, and what is left can be listed.

Works for every runtime of the matrix: it only needs the runtime's socket and ``crash()``.
"""

import os
import tempfile
import threading
from concurrent import futures

import grpc

REMOVALS = ("RemoveImage", "RemoveContainer", "RemovePodSandbox")


def _identity(data):
    return data


class CrashAfter:
    """A CRI proxy in front of ``runtime`` that crashes it once ``n`` removals succeeded (a context manager)."""

    def __init__(self, runtime, n, methods=REMOVALS):
        self.runtime = runtime
        self.n = n
        self.methods = tuple(methods)
        self.removed = 0  # removals that succeeded through the proxy
        self.crashed = False
        self.calls = []  # (method, status code name) of every forwarded call, in order
        self._lock = threading.Lock()
        self.dir = tempfile.mkdtemp(prefix="proxy-", dir=runtime.workdir)
        self.socket = os.path.join(self.dir, "cri.sock")
        self.endpoint = "unix://" + self.socket
        self._upstream = grpc.insecure_channel(runtime.endpoint)
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
        self._server.add_generic_rpc_handlers((_Forward(self),))
        self._server.add_insecure_port(self.endpoint)

    def forward(self, method, request, context):
        call = self._upstream.unary_unary(method, request_serializer=_identity, response_deserializer=_identity)
        timeout = context.time_remaining()
        name = method.rsplit("/", 1)[-1]
        try:
            if name not in self.methods:
                return self._record(name, call(request, timeout=timeout))
            with self._lock:  # removals one at a time: the n-th success is the last one the runtime sees
                reply = self._record(name, call(request, timeout=timeout))
                self.removed += 1
                if self.removed == self.n and not self.crashed:
                    self.runtime.crash()
                    self.crashed = True
                return reply
        except grpc.RpcError as exc:
            self.calls.append((name, exc.code().name))
            context.abort(exc.code(), exc.details() or "")
        return None  # not reached: abort raises

    def _record(self, name, reply):
        self.calls.append((name, "OK"))
        return reply

    def __enter__(self):
        self._server.start()
        return self

    def __exit__(self, *exc):
        self._server.stop(0)
        self._upstream.close()
        try:
            os.unlink(self.socket)
        except OSError:
            pass
        os.rmdir(self.dir)


class _Forward(grpc.GenericRpcHandler):
    def __init__(self, proxy):
        self.proxy = proxy

    def service(self, handler_call_details):
        method = handler_call_details.method

        def unary(request, context):
            return self.proxy.forward(method, request, context)

        return grpc.unary_unary_rpc_method_handler(unary, request_deserializer=None, response_serializer=None)
