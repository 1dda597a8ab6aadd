# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""HTTP/1.1 over a unix socket with the standard library: the one connection class of the daemons' HTTP APIs
(Docker Engine's, cri-o's). No Ansible, no I/O beyond the socket."""

from __future__ import annotations

import http.client
import socket


class UnixHTTPConnection(http.client.HTTPConnection):
    """An http.client connection to the unix socket ``path`` (the Host header says localhost)."""

    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self.socket_path = path

    def connect(self):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self.socket_path)
        except OSError:
            sock.close()
            raise
        self.sock = sock
