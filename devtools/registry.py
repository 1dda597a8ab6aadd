# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A container registry on the loopback, so that test images reach a runtime as the kubelet's do: through PullImage.

Debian 12's ``docker-registry`` (distribution 2.8) serves plain HTTP on 127.0.0.1 and a free port, its storage in a
temporary directory.  ``push()`` copies an offline-built docker-archive into it with ``skopeo`` (layers gzip-compressed,
as registries serve them).

Images keep their real names (``registry.k8s.io/pause:3.9``, ``quay.io/example/app:1``): the registry holds each
upstream host's repositories under a path named after the host (``127.0.0.1:PORT/quay.io/example/app``) and every
runtime is configured with that path as the host's mirror, as a node behind a pull-through mirror is:

* containerd (1.6 and later): ``config_path`` naming a ``certs.d`` directory, one ``hosts.toml`` per upstream host
  whose mirror is ``http://127.0.0.1:PORT/v2/<host>`` with ``override_path = true`` (``containerd_hosts_dir``);
* cri-o (containers/image): a ``registries.conf`` with one ``[[registry]]`` per host whose ``location`` is
  ``127.0.0.1:PORT/<host>``, ``insecure = true`` (``registries_conf``), given through ``CONTAINERS_REGISTRIES_CONF``;
* Docker Engine (through cri-dockerd) can mirror only docker.io (``registry-mirrors``, a URL without a path), so it pulls
  through ``DockerPullProxy``, a small HTTP server of this process: it is docker.io's mirror (``/v2/<repo>/...`` served
  from ``/v2/docker.io/<repo>/...``) and the HTTP proxy dockerd's environment names (``HTTP_PROXY``/``HTTPS_PROXY``) for
  every other host, which dockerd treats as an insecure registry (``insecure-registries``): the proxy refuses the
  ``CONNECT`` of the HTTPS attempt, dockerd falls back to plain HTTP, and ``GET http://quay.io/v2/<repo>/...`` is served
  from ``/v2/quay.io/<repo>/...`` (``docker_daemon_config``). dockerd therefore pulls the upstream name itself, as the
  kubelet asks through cri-dockerd's PullImage, and the image carries that name's tag and repo digest
  (``registry.k8s.io/pause@sha256:...``), as on a node. The proxy listens on a unix socket, which a relay in dockerd's own
  network namespace serves on ``DOCKER_PROXY_ADDRESS`` there (devtools/netrelay.py, started by devtools/dockerd.py).

A pulled image therefore carries the labels, digests and leases of a real pull (``containerd.io/distribution.source.
quay.io=example/app``, repo digests of the upstream name), and its compressed layers stay in the content store.

One registry serves the whole process (``shared()``): it starts on first use and stops at exit.
"""

import atexit
import http.client
import http.server
import os
import shutil
import socket
import socketserver
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

from . import netrelay

REGISTRY_BIN = os.environ.get("KUBENODE_GC_REGISTRY_BIN", "/usr/bin/docker-registry")
SKOPEO = "skopeo"

# where dockerd, in its own network namespace, reaches DockerPullProxy (through devtools.netrelay)
DOCKER_PROXY_ADDRESS = "127.0.0.1:5000"
# the upstream hosts the harness's images may be named after: each gets a mirror in every runtime's configuration
DEFAULT_HOSTS = ("docker.io", "registry.k8s.io", "quay.io", "registry.example", "registry.example.com", "k8s.gcr.io", "gcr.io", "ghcr.io")


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def split_ref(ref):
    """('quay.io', 'example/app', 'latest') of a reference as the runtimes normalise it (docker.io/library for short
    names, ':latest' for none)."""
    from ansible_collections.kubenode.gc.plugins.module_utils.cri._image_ref import normalize_image_ref  # pylint: disable=import-outside-toplevel

    full = normalize_image_ref(ref)
    host, _sep, rest = full.partition("/")
    if "@" in rest:
        repo, _sep, tag = rest.partition("@")
    else:
        repo, _sep, tag = rest.rpartition(":")
    return host, repo, tag


class Registry:
    """One docker-registry process on 127.0.0.1 with its own storage."""

    def __init__(self, workdir=None):
        self.workdir = os.path.realpath(workdir or tempfile.mkdtemp(prefix="kubenode-gc-registry-"))
        self.port = None
        self.proc = None
        self.pushed = {}  # tag -> config digest of what the registry holds under that tag
        self._lock = threading.Lock()
        self._tag_locks = {}  # tag -> the lock its pushes hold: one push of a tag at a time
        self._docker_proxy = None
        self._unix_relay = None

    @property
    def address(self):
        return "127.0.0.1:%d" % self.port

    def start(self, timeout=30):
        if not os.access(REGISTRY_BIN, os.X_OK):
            raise RuntimeError("no %s: install Debian's docker-registry package (scripts/setup.sh does)" % REGISTRY_BIN)
        storage = os.path.join(self.workdir, "storage")
        os.makedirs(storage, exist_ok=True)
        for _attempt in range(5):
            self.port = _free_port()
            config = os.path.join(self.workdir, "config.yml")
            with open(config, "w", encoding="utf-8") as f:
                f.write("version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: %s\n"
                        "  delete:\n    enabled: true\nhttp:\n  addr: %s\n" % (storage, self.address))
            log = open(os.path.join(self.workdir, "registry.log"), "ab")
            self.proc = subprocess.Popen([REGISTRY_BIN, "serve", config], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
            log.close()
            deadline = time.time() + timeout
            while self.proc.poll() is None and time.time() < deadline:
                try:
                    with urllib.request.urlopen("http://%s/v2/" % self.address, timeout=2) as answer:
                        if answer.status == 200:
                            return self
                except (urllib.error.URLError, OSError):
                    time.sleep(0.05)
            self.stop(keep_storage=True)  # the port was taken between the probe and the bind: another one
        raise RuntimeError("docker-registry did not start; see %s" % os.path.join(self.workdir, "registry.log"))

    def stop(self, keep_storage=False):
        for server in (self._docker_proxy, self._unix_relay):
            if server is not None:
                server.stop()
        self._docker_proxy = self._unix_relay = None
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.terminate()
                try:
                    self.proc.wait(10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            self.proc = None
        if not keep_storage:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def repository(self, ref):
        """Where the registry keeps ``ref``: ``127.0.0.1:PORT/<host>/<repo>:<tag>``."""
        host, repo, tag = split_ref(ref)
        return "%s/%s/%s%s%s" % (self.address, host, repo, "@" if tag.startswith("sha256:") else ":", tag)

    def push(self, archive, tag, digest=None):
        """Copy the image ``tag`` of the docker-archive ``archive`` into the registry under its own name (not again when
        it already holds that tag with the config ``digest``)."""
        host = split_ref(tag)[0]
        if host not in DEFAULT_HOSTS:
            raise ValueError("%s: the harness's runtimes mirror only %s; add the host to devtools.registry.DEFAULT_HOSTS" % (tag, ", ".join(DEFAULT_HOSTS)))
        with self._lock:
            tag_lock = self._tag_locks.setdefault(tag, threading.Lock())
        # nodes set up in parallel push the same tags: the second push of a tag waits for the first, then skips
        with tag_lock:
            with self._lock:
                if digest is not None and self.pushed.get(tag) == digest:
                    return
            cmd = [SKOPEO, "copy", "--quiet", "--dest-tls-verify=false", "--dest-compress-format", "gzip",
                   "docker-archive:%s:%s" % (archive, tag), "docker://" + self.repository(tag)]
            for attempt in range(3):
                out = subprocess.run(cmd, capture_output=True, text=True, check=False)
                # two pushes of a layer that tags share (different tags, at once) can make docker-registry answer "blob
                # unknown" for the manifest of one of them; the copy is idempotent, so it is made again
                if out.returncode == 0 or "blob unknown" not in out.stderr or attempt == 2:
                    break
            if out.returncode != 0:
                raise RuntimeError("%s failed (%d): %s" % (" ".join(cmd), out.returncode, out.stderr.strip()))
            with self._lock:
                self.pushed[tag] = digest

    def digest(self, tag):
        """The digest of the manifest the registry serves for ``tag`` (what a pull records as the image's repo digest)."""
        host, repo, ref = split_ref(tag)
        request = urllib.request.Request("http://%s/v2/%s/%s/manifests/%s" % (self.address, host, repo, ref), method="HEAD", headers={
            "Accept": "application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.manifest.v1+json"})
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.headers["Docker-Content-Digest"]

    # -- what a runtime needs to pull from it ----------------------------------------------------

    def containerd_hosts_dir(self, directory, hosts=DEFAULT_HOSTS, address=None):
        """Write containerd's ``certs.d`` tree (one ``hosts.toml`` per upstream host) into ``directory``; return it.

        ``address``: where the runtime reaches the registry (a node's relay, devtools.nodes), if not at its own."""
        for host in hosts:
            os.makedirs(os.path.join(directory, host), exist_ok=True)
            with open(os.path.join(directory, host, "hosts.toml"), "w", encoding="utf-8") as f:
                f.write(self.hosts_toml(host, address))
        return directory

    def hosts_toml(self, host, address=None):
        """The ``hosts.toml`` text that sends containerd's pulls from ``host`` to the registry (at ``address``, if given)."""
        return ('server = "https://%s"\n\n[host."http://%s/v2/%s"]\n  capabilities = ["pull", "resolve"]\n  override_path = true\n'
                % (host, address or self.address, host))

    def registries_conf(self, path, hosts=DEFAULT_HOSTS, address=None, search=True):
        """Write a containers-registries.conf(5) mirroring every upstream host to the registry; return ``path``.

        ``address`` as for ``containerd_hosts_dir``; without ``search`` the file holds the mirrors alone (a drop-in of
        registries.conf.d, which leaves the node's own search settings alone)."""
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.registries_conf_text(hosts, address, search))
        return path

    def registries_conf_text(self, hosts=DEFAULT_HOSTS, address=None, search=True):
        """The text ``registries_conf`` writes."""
        text = "# written by devtools.registry: every host below is served by the harness's registry\n"
        if search:
            text += 'unqualified-search-registries = ["docker.io"]\nshort-name-mode = "permissive"\n'
        for host in hosts:
            text += '\n[[registry]]\nprefix = "%s"\nlocation = "%s/%s"\ninsecure = true\n' % (host, address or self.address, host)
        return text

    def unix_socket(self):
        """A unix socket in front of the registry, byte for byte (started on first use, stopped with the registry): a node
        container's relay (devtools.netrelay, in the node's network namespace) reaches the registry through it."""
        with self._lock:
            if self._unix_relay is None:
                self._unix_relay = _UnixRelay(os.path.join(self.workdir, "registry.sock"), ("127.0.0.1", self.port)).start()
            return self._unix_relay.socket

    def docker_proxy(self):
        """The DockerPullProxy in front of this registry (started on first use, stopped with the registry)."""
        with self._lock:
            if self._docker_proxy is None:
                self._docker_proxy = DockerPullProxy(self).start()
            return self._docker_proxy

    def docker_daemon_config(self, address=DOCKER_PROXY_ADDRESS, hosts=DEFAULT_HOSTS):
        """(daemon.json keys, environment) that make a dockerd pull every upstream host from this registry, through the
        DockerPullProxy it reaches at ``address``."""
        config = {"registry-mirrors": ["http://%s" % address], "insecure-registries": [h for h in hosts if h != "docker.io"]}
        env = {"HTTP_PROXY": "http://%s" % address, "HTTPS_PROXY": "http://%s" % address, "NO_PROXY": ""}
        return config, env


# hop-by-hop headers a proxy does not pass on
_HOP_HEADERS = ("connection", "keep-alive", "proxy-connection", "proxy-authorization", "te", "trailer", "transfer-encoding", "upgrade", "host",
                "content-length")


class _ProxyHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "kubenode-gc-pull-proxy"

    def log_message(self, *args):  # quiet: dockerd's own log says what it pulled
        pass

    def address_string(self):
        return "dockerd"  # a unix socket has no client address

    def do_CONNECT(self):  # the HTTPS attempt of an insecure registry: refused, so dockerd falls back to plain HTTP
        self._answer(403, b"")

    def _answer(self, status, body, headers=()):
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _forward(self):
        url = urllib.parse.urlsplit(self.path)
        # an absolute URL is a proxied request for that host; a path is a request to docker.io's mirror
        host, path = (url.hostname, url.path) if url.scheme else ("docker.io", url.path)
        if path.startswith("/v2/") and path != "/v2/":
            path = "/v2/%s/%s" % (host, path[len("/v2/"):])
        if url.query:
            path += "?" + url.query
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        upstream = http.client.HTTPConnection("127.0.0.1", self.server.registry.port, timeout=120)
        try:
            upstream.putrequest(self.command, path, skip_accept_encoding=True)
            for name, value in self.headers.items():  # every header, repeated ones too (dockerd sends several Accept)
                if name.lower() not in _HOP_HEADERS:
                    upstream.putheader(name, value)
            if body is not None:
                upstream.putheader("Content-Length", str(len(body)))
            upstream.endheaders(body)
            answer = upstream.getresponse()
            data = answer.read()
            headers = [(k, v) for k, v in answer.getheaders() if k.lower() not in _HOP_HEADERS]
            if self.command == "HEAD" and answer.getheader("Content-Length"):
                headers.append(("Content-Length", answer.getheader("Content-Length")))
                self.send_response(answer.status)
                for name, value in headers:
                    self.send_header(name, value)
                self.end_headers()
                return
            self._answer(answer.status, data, headers)
        except OSError as exc:
            self._answer(502, str(exc).encode())
        finally:
            upstream.close()

    do_GET = do_HEAD = _forward


class _ProxyServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


class _UnixService:
    """A threaded server of ``handler`` on the unix socket ``socket`` of this process; ``attrs`` are set on the server
    for the handler to read. start() returns it; stop() closes it."""

    name = "unix-service"

    def __init__(self, path, handler, **attrs):
        self.socket = path
        self.handler = handler
        self.attrs = attrs
        self.server = None

    def start(self):
        if os.path.exists(self.socket):
            os.unlink(self.socket)
        self.server = _ProxyServer(self.socket, self.handler)
        for key, value in self.attrs.items():
            setattr(self.server, key, value)
        threading.Thread(target=self.server.serve_forever, name=self.name, daemon=True).start()
        return self

    def stop(self):
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None


class DockerPullProxy(_UnixService):
    """docker.io's mirror and the HTTP proxy of every other host, for a dockerd pulling from the harness's registry; it
    listens on the unix socket ``socket`` (devtools.netrelay brings it into dockerd's network namespace)."""

    name = "docker-pull-proxy"

    def __init__(self, registry):
        super().__init__(os.path.join(registry.workdir, "docker-proxy.sock"), _ProxyHandler, registry=registry)
        self.registry = registry


class _RelayHandler(socketserver.BaseRequestHandler):
    def handle(self):
        try:
            upstream = socket.create_connection(self.server.target, timeout=120)
        except OSError:
            return
        upstream.settimeout(None)
        netrelay.pump_both(self.request, upstream)


class _UnixRelay(_UnixService):
    """A unix socket whose every connection is passed, byte for byte, to ``target`` (host, port) on this machine."""

    name = "registry-unix-relay"

    def __init__(self, path, target):
        super().__init__(path, _RelayHandler, target=target)
        self.target = target


_SHARED = None
_SHARED_LOCK = threading.Lock()


def shared():
    """The process's registry, started on first use and stopped when the process exits."""
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None or _SHARED.proc is None or _SHARED.proc.poll() is not None:
            _SHARED = Registry().start()
            atexit.register(_SHARED.stop)
        return _SHARED
