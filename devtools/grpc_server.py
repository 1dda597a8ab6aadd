# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A real gRPC server on a unix socket whose CRI methods behave as a test says.

Used to prove the client's error handling on the wire: a server with no CRI
service (UNIMPLEMENTED), one that is too slow (DEADLINE_EXCEEDED), one that
fails a call with a runtime error text.

``close()`` (or leaving the ``with`` block) leaves nothing behind: a handler
still "sleeping" wakes at once, the server stops with a grace, its handler
threads are joined and the socket is removed. Tests use it through the
``grpc_server`` fixture (tests/unit/conftest.py), so no gRPC object of one
test outlives it.
"""

import os
import tempfile
import threading
from concurrent import futures

import grpc


class _Handler(grpc.GenericRpcHandler):
    def __init__(self, behaviours, stopping):
        self.behaviours = behaviours
        self.stopping = stopping

    def service(self, handler_call_details):
        method = handler_call_details.method.rsplit("/", 1)[-1]
        behaviour = self.behaviours.get(method)
        if behaviour is None:
            return None  # -> UNIMPLEMENTED

        def unary(request, context):
            kind, arg = behaviour
            if kind == "sleep":
                self.stopping.wait(arg)  # a slow runtime, that wakes when the server stops
                return b""
            if kind == "abort":
                context.abort(arg[0], arg[1])
            return arg  # raw serialized response bytes

        return grpc.unary_unary_rpc_method_handler(unary, request_deserializer=None, response_serializer=None)


class GrpcServer:
    """``behaviours``: {method: ("sleep", seconds) | ("abort", (StatusCode, text)) | ("reply", bytes)};
    ``handlers``: more generic RPC handlers, tried after the behaviours."""

    GRACE = 1.0  # seconds the server gives RPCs still running when it stops

    def __init__(self, behaviours=None, handlers=()):
        self.dir = tempfile.mkdtemp(prefix="kubenode-gc-grpc-")
        self.socket = os.path.join(self.dir, "fake.sock")
        self.endpoint = "unix://" + self.socket
        self._stopping = threading.Event()
        self._pool = futures.ThreadPoolExecutor(max_workers=4)
        self.server = grpc.server(self._pool)
        self.server.add_generic_rpc_handlers((_Handler(behaviours or {}, self._stopping),) + tuple(handlers))
        self.server.add_insecure_port(self.endpoint)
        self._closed = False

    def start(self):
        self.server.start()
        return self

    def close(self):
        """Wake sleeping handlers, stop with a grace, join the handler threads, remove the socket (once)."""
        if self._closed:
            return
        self._closed = True
        self._stopping.set()
        self.server.stop(self.GRACE).wait()
        self._pool.shutdown(wait=True)
        try:
            os.unlink(self.socket)
        except OSError:
            pass
        os.rmdir(self.dir)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()
