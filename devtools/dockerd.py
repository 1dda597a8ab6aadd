# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Start, fill and tear down a real Docker Engine (Debian 12's ``docker.io``) behind cri-dockerd, with its own everything.

Two daemons, as on a Docker node of Kubernetes:

* a private ``dockerd``: its data root (``--data-root``, or ``data-root`` in its ``daemon.json`` with
  ``data_root_in_config``) on a tmpfs of ``imagefs_size``, so the image filesystem cri-dockerd reports is real and small;
  ``--exec-root``, ``--pidfile`` and its socket (``-H unix://...``) in the work directory; no iptables and no bridge; its
  containers run with ``runc-oom-wrapper`` (this directory) as the default OCI runtime (``--add-runtime``/
  ``--default-runtime``), because these machines cannot lower ``oom_score_adj`` and cri-dockerd gives every sandbox
  -998. It starts its own containerd below ``--exec-root``. It runs in a network namespace of its own (``unshare
  --net``, its loopback up): a dockerd with ``--bridge=none`` deletes the network interface ``docker0`` when it starts,
  which in the host's namespace is the host dockerd's bridge. Its containers use that namespace as their "host"
  network; it reaches the harness's registry through devtools.netrelay, which it runs there.
* ``cri-dockerd`` (``../shared/runtimes/cri-dockerd``, or ``$KUBENODE_GC_SHARED_RUNTIMES``) on the CRI socket, with
  ``--docker-endpoint`` naming that dockerd's socket: the runtime the modules talk to (``runtime_name`` ``docker``).

Images reach it as the kubelet's do: PullImage through cri-dockerd of the upstream name, which dockerd pulls from the
harness's registry (docker.io through its mirror, every other host through an HTTP proxy; see devtools.registry), so
images carry their upstream tag and repo digest; ``import_images`` loads an archive through the Engine API instead.

Lifecycle as every runtime of the matrix: ``restart()`` and ``crash()`` act on cri-dockerd alone (dockerd and its
containers stay, as when a node's cri-dockerd restarts); ``stop()`` removes the pods, stops cri-dockerd, dockerd (which
stops its containers and its containerd), any shim left, and unmounts and deletes the work directory. ``reset()`` also
removes what Docker holds outside the CRI: every container, volume and build cache record.
"""

import json
import os
import signal
import subprocess
import sys
import time

from .fetch import SHARED_RUNTIMES_ENV, cri_dockerd_binary
from .images import ImageSpec
from .registry import DOCKER_PROXY_ADDRESS
from .runtime import SANDBOX_IMAGE, EmbeddedRuntime, kill, pids_with

from ansible_collections.kubenode.gc.plugins.module_utils.cri._image_ref import normalize_image_ref
from ansible_collections.kubenode.gc.plugins.module_utils._errors import DockerApiError
from ansible_collections.kubenode.gc.plugins.module_utils.docker._client import DockerClient

HERE = os.path.dirname(os.path.abspath(__file__))
DOCKERD = "/usr/sbin/dockerd"
# Debian's docker CLI (BuildKit's client built in); another docker on PATH may be a CLI without it
DOCKER_CLI = "/usr/bin/docker"
WRAPPER = os.path.join(HERE, "runc-oom-wrapper")
OCI_RUNTIME = "kubenode-runc"


class EmbeddedCriDockerd(EmbeddedRuntime):
    """A private dockerd (data root on a tmpfs) and the cri-dockerd in front of it."""

    kind = "docker"
    name = "cri-dockerd"
    daemon = "cri-dockerd"
    socket_name = "cri-dockerd.sock"

    def __init__(self, workdir=None, imagefs_size="128M", sandbox_image=SANDBOX_IMAGE, socket=None, binary=None, imagefs_inodes=None,
                 data_root_in_config=False):
        super().__init__(workdir=workdir, imagefs_size=imagefs_size, sandbox_image=sandbox_image, socket=socket, imagefs_inodes=imagefs_inodes)
        self.binary = binary or cri_dockerd_binary()
        if not self.binary:
            raise RuntimeError("no cri-dockerd binary: set %s to a directory holding cri-dockerd, or provide ../shared/runtimes" % SHARED_RUNTIMES_ENV)
        self.data_root_in_config = data_root_in_config
        self.exec_root = os.path.join(self.workdir, "exec")
        self.docker_socket = os.path.join(self.workdir, "docker.sock")
        self.docker_endpoint = "unix://" + self.docker_socket
        self.config_path = os.path.join(self.workdir, "daemon.json")
        self.dockerd_pid_path = os.path.join(self.workdir, "dockerd.pid")
        self.dockerd_log = os.path.join(self.workdir, "dockerd.log")
        self.cri_root = os.path.join(self.workdir, "cri-dockerd")
        self.dockerd_proc = None
        self.relay_proc = None
        self._last_created = None  # when the last container or sandbox was created (see _next_second)
        self._api = None
        self._version = None

    # -- what a runtime must say -----------------------------------------------

    @property
    def version(self):
        if self._version is None:
            self._version = self.api.request("SystemVersion", "GET", "/version")["Version"]
        return self._version

    @property
    def imagefs_mountpoint(self):
        # cri-dockerd reports dockerd's data root as its image (and container) filesystem
        return self.root

    def write_config(self):
        for d in (self.exec_root, self.cri_root):
            os.makedirs(d, exist_ok=True)
        config, _env = self.registry.docker_daemon_config()
        if self.data_root_in_config:
            config["data-root"] = self.root
        with open(self.config_path, "w", encoding="utf-8") as f:
            json.dump(config, f, indent=2)

    def dockerd_command(self):
        # a network namespace of its own, its loopback up (see the module's docstring); exec keeps dockerd's pid
        netns = ["unshare", "--net", "--", "/bin/sh", "-c", 'ip link set lo up && exec "$0" "$@"']
        return netns + [DOCKERD, "--config-file", self.config_path] + ([] if self.data_root_in_config else ["--data-root", self.root]) + [
            "--exec-root", self.exec_root, "--pidfile", self.dockerd_pid_path, "-H", self.docker_endpoint,
            "--iptables=false", "--ip-masq=false", "--bridge=none", "--userland-proxy=false",
            "--add-runtime", "%s=%s" % (OCI_RUNTIME, WRAPPER), "--default-runtime", OCI_RUNTIME,
        ]  # fmt: skip

    def command(self):
        return [
            self.binary,
            "--docker-endpoint", self.docker_endpoint,
            "--container-runtime-endpoint", self.endpoint,
            "--cri-dockerd-root-directory", self.cri_root,
            "--network-plugin", "",
            "--pod-infra-container-image", self.sandbox_image,
            "--streaming-bind-addr", "127.0.0.1:0",
        ]  # fmt: skip

    def leftover_pids(self):
        # dockerd's containerd and its shims name our exec root (the shims: its containerd's address); the relay its socket
        return [pid for pid in pids_with(self.exec_root + "/") + pids_with(" %s " % self.workdir) if pid not in (self.dockerd_pid(), os.getpid())]

    # -- lifecycle ---------------------------------------------------------

    def dockerd_pid(self):
        if self.dockerd_proc is not None:
            return self.dockerd_proc.pid
        try:
            with open(self.dockerd_pid_path, encoding="utf-8") as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            return None

    def dockerd_running(self):
        pid = self.dockerd_pid()
        if pid is None or not os.path.exists("/proc/%d" % pid):
            return False
        try:
            self.api.request("SystemPing", "GET", "/_ping", raw=True)
            return True
        except DockerApiError:
            return False

    def start_dockerd(self, timeout=60):
        _config, env = self.registry.docker_daemon_config()
        self.registry.docker_proxy()  # listening before dockerd may pull
        log = open(self.dockerd_log, "ab")
        self.dockerd_proc = subprocess.Popen(self.dockerd_command(), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                             start_new_session=True, env=dict(os.environ, **env))
        log.close()
        deadline = time.time() + timeout
        while True:
            if self.dockerd_proc.poll() is not None:
                raise RuntimeError("dockerd exited with %s; see %s:\n%s" % (self.dockerd_proc.returncode, self.dockerd_log, _tail(self.dockerd_log)))
            try:
                self.api.request("SystemPing", "GET", "/_ping", raw=True)
                break
            except DockerApiError:
                if time.time() > deadline:
                    raise RuntimeError("dockerd did not answer within %ss; see %s:\n%s" % (timeout, self.dockerd_log, _tail(self.dockerd_log))) from None
                time.sleep(0.2)
        self.start_relay()

    def start_relay(self):
        """devtools.netrelay in dockerd's network namespace: DOCKER_PROXY_ADDRESS there is the registry's DockerPullProxy."""
        repo = os.path.dirname(HERE)
        env = dict(os.environ, PYTHONPATH=repo + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else ""))
        log = open(self.dockerd_log, "ab")
        self.relay_proc = subprocess.Popen(["nsenter", "--net=/proc/%d/ns/net" % self.dockerd_proc.pid, "--", sys.executable, "-m", "devtools.netrelay",
                                            DOCKER_PROXY_ADDRESS, self.registry.docker_proxy().socket, self.workdir],
                                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log, start_new_session=True, env=env)
        log.close()
        if self.relay_proc.stdout.readline().strip() != b"listening":
            raise RuntimeError("the relay to the registry did not start in dockerd's network namespace; see %s" % self.dockerd_log)
        self.relay_proc.stdout.close()

    def launch(self, timeout=60):
        """dockerd (unless it runs), then cri-dockerd, until it answers CRI Version and Status."""
        if not self.dockerd_running():
            self.start_dockerd(timeout)
        return super().launch(timeout)

    def shutdown(self, leftovers=True):
        """Stop cri-dockerd; with ``leftovers`` also dockerd (it stops its containers and its containerd) and any shim left."""
        super().shutdown(leftovers=False)
        if not leftovers:
            return
        if self._api is not None:
            self._api.close()
            self._api = None
        pid = self.dockerd_pid()
        if pid is not None:
            kill(pid, sig=signal.SIGTERM, wait=30)
        self.dockerd_proc = None
        if self.relay_proc is not None:
            kill(self.relay_proc.pid, sig=signal.SIGKILL)
            self.relay_proc = None
        for pid in self.leftover_pids():
            kill(pid, sig=signal.SIGKILL)

    def saved_state(self):
        return dict(super().saved_state(), binary=self.binary, data_root_in_config=self.data_root_in_config)

    def restore_state(self, saved):
        super().restore_state(saved)
        self.binary = saved.get("binary") or self.binary
        self.data_root_in_config = saved.get("data_root_in_config", False)

    def engine_env(self):
        # behind a proxy the module finds no cri-dockerd on the socket it talks to: DOCKER_HOST names the engine
        return {"DOCKER_HOST": self.docker_endpoint}

    # -- the engine's own view ------------------------------------------------

    @property
    def api(self):
        """The Docker Engine API of this dockerd (the collection's own client)."""
        if self._api is None:
            self._api = DockerClient(self.docker_endpoint, timeout=120)
        return self._api

    def docker(self, *args, check=True, env=None):
        """Run Debian's docker CLI against this dockerd; return stdout."""
        cmd = [DOCKER_CLI] + list(args)
        out = subprocess.run(cmd, capture_output=True, text=True, check=False, env=dict(os.environ, DOCKER_HOST=self.docker_endpoint, **(env or {})))
        if check and out.returncode != 0:
            raise RuntimeError("%s failed (%d): %s" % (" ".join(cmd), out.returncode, out.stderr.strip()))
        return out.stdout

    def image_refs(self):
        # tags and digests in full (docker.io/library/busybox:1.36), as the other runtimes' tools and the modules name
        # them; Docker itself lists docker.io's images by their short names
        images = self.api.request("ImageList", "GET", "/images/json") or []
        return {"ids": {i["Id"] for i in images},
                "tags": {normalize_image_ref(t) for i in images for t in i.get("RepoTags") or [] if t != "<none>:<none>"},
                "digests": {normalize_image_ref(d) for i in images for d in i.get("RepoDigests") or [] if not d.startswith("<none>@")}}

    def container_ids(self):
        # every container: the CRI's containers and its sandboxes (pause containers), and any other
        return {c["Id"] for c in self.api.containers()}

    # -- pods --------------------------------------------------------------

    def _next_second(self):
        """cri-dockerd's ListContainers and ListPodSandbox give creation times in whole seconds (Docker's list API): wait
        until the clock is in a later second than the last creation, so that objects made one after the other are listed
        in that order, as on the other runtimes (their times count nanoseconds)."""
        if self._last_created is not None:
            wait = int(self._last_created) + 1 - time.time()
            if wait > 0:
                time.sleep(wait + 0.01)

    def run_pod(self, name, namespace="default", uid=None, attempt=0):
        self._next_second()
        try:
            return super().run_pod(name, namespace, uid, attempt)
        finally:
            self._last_created = time.time()

    def add_container(self, sandbox, name, image, state="running", attempt=0, command=None, link_dir=None, image_volumes=()):
        self._next_second()
        try:
            return super().add_container(sandbox, name, image, state, attempt, command, link_dir, image_volumes)
        finally:
            self._last_created = time.time()

    # -- images ------------------------------------------------------------

    def sandbox_spec(self):
        # cri-dockerd stops a sandbox's pause container with a grace period of 10 seconds: this one exits on SIGTERM, as
        # the real pause does (a bare sleep as PID 1 ignores it)
        return ImageSpec(self.sandbox_image, entrypoint=["/bin/sh", "-c", "trap 'exit 0' TERM; sleep 2147483647 & wait"])

    def import_images(self, specs):
        # one archive per image: docker load unpacks an archive's layers beside the archive it keeps in the data root
        # meanwhile, so a small data root takes one image at a time, not all of them at once
        ids = {}
        for spec in specs:
            ids.update(super().import_images([spec]))
        return ids

    def load_archive(self, path, specs):
        with open(path, "rb") as f:
            data = f.read()
        answer = self.api.request("ImageLoad", "POST", "/images/load", {"quiet": "1"}, body=data, content_type="application/x-tar", raw=True)
        for line in answer.decode("utf-8", "replace").splitlines():  # a stream of JSON messages; an error is one of them
            if '"error' in line:
                raise RuntimeError("docker load of %s failed: %s" % (", ".join(t for spec in specs for t in spec.tags), line.strip()))

    def reset(self):
        """Back to a runtime holding only the sandbox image: the pods, and every container, volume and build cache record
        Docker holds outside the CRI too."""
        self.remove_all_pods()
        api = self.api
        for c in api.containers():
            try:
                api.request("ContainerDelete", "DELETE", "/containers/%s" % c["Id"], {"force": "1", "v": "1"})
            except DockerApiError:
                pass
        for volume in (api.request("VolumeList", "GET", "/volumes") or {}).get("Volumes") or []:
            try:
                api.remove_volume(volume["Name"])
            except DockerApiError:
                pass
        api.prune_build_cache({}, all_records=True)
        self.remove_all_images()


def _tail(path, lines=30):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""
