# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Fault injection: CRI proxies that kill, or gracefully restart, the real runtime after N successful removals.

``CrashAfter(runtime, n)`` listens on its own unix socket and forwards every CRI call (and every call of containerd's
own API, with its namespace metadata), as raw bytes, to the runtime's socket. Removals (RemoveImage, RemoveContainer,
RemovePodSandbox, or the ``methods`` given) pass one at a time; when the n-th of them has succeeded, the proxy SIGKILLs the runtime's daemon
(``runtime.crash()``: the root, its state and the containers stay), waits until it is gone and
only then answers that call. Every later call reaches a dead socket and fails as it would on a
node (UNAVAILABLE), so the module under test sees exactly n successful removals whatever its
parallelism. Point the module's ``cri_endpoint`` at ``proxy.endpoint``; afterwards
``runtime.restart()`` brings the runtime back on the same root, and what is left can be listed.

``RestartAfter(runtime, n, down=0)`` is a package upgrade mid-run: removals pass concurrently (the module's pipeline
stays full); the first removal to succeed after n others did starts a thread that stops the runtime gracefully
(SIGTERM, as systemd does, waiting for it to exit: ``runtime.shutdown(leftovers=False)``), waits ``down`` seconds and
starts it again on the same root (``runtime.launch()``). That removal, and every one that succeeds in the runtime
until it is back, loses its answer: once the runtime is down the module gets UNAVAILABLE although the object is gone
(``proxy.lost`` counts them, at least one), as when the connection closes before the answer is written; calls made
while it is down fail as on a node. Leaving the ``with`` block waits for the runtime to be back; ``proxy.back_after`` is
how long after its stop it answered again (``down`` plus the start, which takes longer on a loaded machine).

Works for every runtime of the matrix: it only needs the runtime's socket, ``crash()``, ``shutdown()`` and ``launch()``.
"""

import os
import tempfile
import threading
import time
from concurrent import futures

import grpc

REMOVALS = ("RemoveImage", "RemoveContainer", "RemovePodSandbox")


def _identity(data):
    return data


def _forwarded(context):
    """The call's own metadata (containerd's API carries its namespace there), without what gRPC sets itself."""
    return tuple((m.key, m.value) for m in context.invocation_metadata() if m.key != "user-agent" and not m.key.startswith(("grpc-", ":")))


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
        # what a module talking to the runtime through this proxy needs in its environment (Docker's engine: DOCKER_HOST)
        self.env = runtime.engine_env() if hasattr(runtime, "engine_env") else {}
        # reconnect quickly once a restarted runtime listens again (gRPC's default backoff grows to minutes)
        backoff = [("grpc.initial_reconnect_backoff_ms", 100), ("grpc.min_reconnect_backoff_ms", 100), ("grpc.max_reconnect_backoff_ms", 300)]
        self._upstream = grpc.insecure_channel(runtime.endpoint, options=backoff)
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
        self._server.add_generic_rpc_handlers((_Forward(self),))
        self._server.add_insecure_port(self.endpoint)

    def forward(self, method, request, context):
        call = self._upstream.unary_unary(method, request_serializer=_identity, response_deserializer=_identity)
        timeout = context.time_remaining()
        name = method.rsplit("/", 1)[-1]
        try:
            metadata = _forwarded(context)
            if name not in self.methods:
                return self._record(name, call(request, timeout=timeout, metadata=metadata))
            with self._lock:  # removals one at a time: the n-th success is the last one the runtime sees
                reply = self._record(name, call(request, timeout=timeout, metadata=metadata))
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


class RestartAfter(CrashAfter):
    """A CRI proxy in front of ``runtime`` that restarts it gracefully once ``n`` removals succeeded (a context manager).

    The removal that succeeds after the n-th starts the restart; its answer, and that of every removal that succeeds
    until the runtime is back, is held until the runtime has stopped and then lost (UNAVAILABLE), so the module cannot
    see the runtime up again before it really went down."""

    def __init__(self, runtime, n, down=0.0, methods=REMOVALS):
        super().__init__(runtime, n, methods)
        self.down = down
        self.restarted = False  # the runtime answers again
        self.lost = 0  # removals the runtime did whose answer the module never got
        self.error = None  # what went wrong restarting, re-raised on exit
        self.back_after = None  # seconds from the runtime's stop to its answering again (the module waits RUNTIME_BACK_WAIT)
        self._thread = None
        self._stopped = threading.Event()

    def _restart(self):
        try:
            self.runtime.shutdown(leftovers=False)  # SIGTERM, then wait for the daemon to exit
            stopped = time.monotonic()
            self._stopped.set()
            time.sleep(self.down)
            self.runtime.launch()
            self.back_after = time.monotonic() - stopped
        except BaseException as exc:  # pylint: disable=broad-except
            self.error = exc
        finally:
            self._stopped.set()
            with self._lock:
                self.restarted = True

    def forward(self, method, request, context):
        call = self._upstream.unary_unary(method, request_serializer=_identity, response_deserializer=_identity)
        name = method.rsplit("/", 1)[-1]
        try:
            reply = call(request, timeout=context.time_remaining(), metadata=_forwarded(context))
        except grpc.RpcError as exc:
            self.calls.append((name, exc.code().name))
            context.abort(exc.code(), exc.details() or "")
            return None  # not reached: abort raises
        if name in self.methods:
            with self._lock:
                lost = self.removed >= self.n and not self.restarted
                if lost:
                    self.lost += 1
                    if self._thread is None:
                        self._thread = threading.Thread(target=self._restart, daemon=True)
                        self._thread.start()
                else:
                    self.removed += 1
            if lost:
                self._stopped.wait()
                self.calls.append((name, "LOST"))
                context.abort(grpc.StatusCode.UNAVAILABLE, "the runtime restarted before answering")
        return self._record(name, reply)

    def __exit__(self, *exc):
        if self._thread is not None:
            self._thread.join()
        super().__exit__(*exc)
        if self.error is not None:
            raise self.error


class _Forward(grpc.GenericRpcHandler):
    def __init__(self, proxy):
        self.proxy = proxy

    def service(self, handler_call_details):
        method = handler_call_details.method

        def unary(request, context):
            return self.proxy.forward(method, request, context)

        return grpc.unary_unary_rpc_method_handler(unary, request_deserializer=None, response_serializer=None)


def back_in_time(proxy, wait, margin=2.0):
    """Whether a RestartAfter's runtime answered again within ``wait`` seconds of its stop (the module's wait for it):
    True when ``margin`` seconds before the end of that wait, False when after it, None in between (the module's last try
    may or may not have found it back). A loaded machine can take longer than ``down`` to start the runtime again."""
    if proxy.back_after is None:
        return None
    if proxy.back_after <= wait - margin:
        return True
    return False if proxy.back_after > wait else None


def until_decided(down, scenario, wait, attempts=2):
    """Run ``scenario(attempt)`` (it restarts the runtime through a RestartAfter of ``down`` seconds, checks what holds
    for its outcome, back_in_time(proxy, wait), and returns the proxy) until the outcome it was written for is tested:
    with ``down`` (back late) the first run; with none, the first run whose runtime was back in time, up to ``attempts``
    runs (a loaded machine can start the runtime too slowly), else AssertionError naming how long each took."""
    slow = []
    for attempt in range(attempts):
        proxy = scenario(attempt)
        back = back_in_time(proxy, wait)
        if down:
            assert back is False, "the runtime answered %.1f s after its stop, within the module's wait of %s s" % (proxy.back_after, wait)
            return
        if back:
            return
        slow.append(proxy.back_after)
    raise AssertionError("the runtime answered %s s after its stop, never within the module's wait of %s s minus 2 s: the case "
                         "of a runtime back in time was not tested" % (" and ".join("%.1f" % t for t in slow), wait))
