# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A real gRPC server on a unix socket whose CRI methods behave as a test says.

Used to prove the client's error handling on the wire: a server with no CRI
service (UNIMPLEMENTED), one that is too slow (DEADLINE_EXCEEDED), one that
fails a call with a runtime error text.
"""

import os
import tempfile
import time
from concurrent import futures

import grpc


class _Handler(grpc.GenericRpcHandler):
    def __init__(self, behaviours):
        self.behaviours = behaviours

    def service(self, handler_call_details):
        method = handler_call_details.method.rsplit("/", 1)[-1]
        behaviour = self.behaviours.get(method)
        if behaviour is None:
            return None  # -> UNIMPLEMENTED

        def unary(request, context):
            kind, arg = behaviour
            if kind == "sleep":
                time.sleep(arg)
                return b""
            if kind == "abort":
                context.abort(arg[0], arg[1])
            return arg  # raw serialized response bytes

        return grpc.unary_unary_rpc_method_handler(unary, request_deserializer=None, response_serializer=None)


class GrpcServer:
    """``behaviours``: {method: ("sleep", seconds) | ("abort", (StatusCode, text)) | ("reply", bytes)}."""

    def __init__(self, behaviours=None):
        self.dir = tempfile.mkdtemp(prefix="kubenode-gc-grpc-")
        self.socket = os.path.join(self.dir, "fake.sock")
        self.endpoint = "unix://" + self.socket
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        self.server.add_generic_rpc_handlers((_Handler(behaviours or {}),))
        self.server.add_insecure_port(self.endpoint)

    def __enter__(self):
        self.server.start()
        return self

    def __exit__(self, *exc):
        self.server.stop(0)
        try:
            os.unlink(self.socket)
        except OSError:
            pass
        os.rmdir(self.dir)
