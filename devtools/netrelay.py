# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A TCP-to-unix-socket relay: ``python -m devtools.netrelay HOST:PORT SOCKET [TAG]`` (TAG, unused, names its owner in the
command line: the work directory of the runtime that started it, which finds it there when it stops).

The harness's dockerd runs in a network namespace of its own (devtools/dockerd.py: ``--bridge=none`` makes dockerd delete
the host's ``docker0``, so it must not run in the host's). Started there with ``nsenter --net``, this relay listens on
HOST:PORT inside that namespace and passes every connection, byte for byte, to SOCKET, a unix socket on the shared
filesystem where the test process's DockerPullProxy listens (devtools/registry.py): so dockerd reaches the registry.
"""

import socket
import sys
import threading


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


def _serve(conn, path):
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        conn.close()
        upstream.close()
        return
    back = threading.Thread(target=_pump, args=(upstream, conn), daemon=True)
    back.start()
    _pump(conn, upstream)
    back.join()
    conn.close()
    upstream.close()


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    host, port = argv[0].rsplit(":", 1)
    path = argv[1]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, int(port)))
    listener.listen(64)
    print("listening", flush=True)
    while True:
        conn, _addr = listener.accept()
        threading.Thread(target=_serve, args=(conn, path), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
