# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A TCP-to-unix-socket relay: ``python -m devtools.netrelay HOST:PORT SOCKET [TAG [PID]]`` (TAG, unused, names its owner
in the command line: the work directory of the runtime that started it, which finds it there when it stops). The relay
exits by itself once SOCKET is gone (its registry stopped) or, when given, process PID (a node container's init).

The harness's dockerd runs in a network namespace of its own (devtools/dockerd.py: ``--bridge=none`` makes dockerd delete
the host's ``docker0``, so it must not run in the host's). Started there with ``nsenter --net``, this relay listens on
HOST:PORT inside that namespace and passes every connection, byte for byte, to SOCKET, a unix socket on the shared
filesystem where the test process's DockerPullProxy listens (devtools/registry.py): so dockerd reaches the registry.
Node containers (devtools/nodes.py) reach it the same way, the relay in the node's network namespace: the registry's own
unix socket (``Registry.unix_socket()``) for containerd and cri-o, the DockerPullProxy for a Docker node.
"""

import os
import socket
import sys
import threading

POLL = 1.0  # seconds between two looks at whether the socket and the watched process are still there


def _pump(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for sock, how in ((dst, socket.SHUT_WR), (src, socket.SHUT_RD)):
            try:
                sock.shutdown(how)
            except OSError:
                pass


def pump_both(conn, upstream):
    """Pass bytes both ways between two connected sockets until both sides are done; close them."""
    back = threading.Thread(target=_pump, args=(upstream, conn), daemon=True)
    back.start()
    _pump(conn, upstream)
    back.join()
    conn.close()
    upstream.close()


def _serve(conn, path):
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        conn.close()
        upstream.close()
        return
    pump_both(conn, upstream)


def _alive(path, pid):
    return os.path.exists(path) and (pid is None or os.path.exists("/proc/%d" % pid))


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    host, port = argv[0].rsplit(":", 1)
    path = argv[1]
    pid = int(argv[3]) if len(argv) > 3 else None
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, int(port)))
    listener.listen(64)
    listener.settimeout(POLL)
    print("listening", flush=True)
    while _alive(path, pid):
        try:
            conn, _addr = listener.accept()
        except socket.timeout:
            continue
        conn.settimeout(None)
        threading.Thread(target=_serve, args=(conn, path), daemon=True).start()
    return 0


if __name__ == "__main__":
    sys.exit(main())
