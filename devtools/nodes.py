# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Kubernetes-node-like Docker containers: systemd, a real runtime with pods, images filled from here.

Each node runs an image ``tests/node-image/build.sh`` makes (Debian 12, systemd as
PID 1, and containerd 1.6, 1.7 or 2.x, or cri-o as ``crio.service``).  The runtime's
storage is on size-limited tmpfs, so every node has a real, small imagefs.  The
node's CRI socket directory and ``/var/log/pods`` are bind mounts of a work
directory here, so this process talks CRI to the node's runtime and fills it with
the same helpers as the embedded runtimes (``NodeContainer`` is an
``EmbeddedContainerd``, ``CrioNode`` an ``EmbeddedCrio``), while Ansible reaches
the node over the ``community.docker.docker`` connection.  ``make_node()`` picks
the class by runtime name.

Images reach a node as they reach a Kubernetes node: pulled through its CRI's PullImage (``pull_images``, the harness's
CRI client on the shared socket) from the harness's registry (devtools.registry). A node container cannot reach this
machine's loopback, where the registry listens: ``devtools.netrelay`` runs in the node's network namespace (``nsenter
--net``) and serves ``REGISTRY_ADDRESS`` there, passing every connection to the registry's unix socket (to its
DockerPullProxy on a Docker node), as the embedded dockerd reaches it. Before the node boots, the harness writes each
runtime's mirror configuration into the container (``docker create``, ``docker cp``, then ``docker start``), where the
storage roles and their drift checks do not look: containerd's ``certs.d`` (with ``config_path`` added to its
config.toml), a cri-o ``registries.conf.d`` drop-in, dockerd's ``registry-mirrors``/``insecure-registries`` and a
``docker.service`` drop-in naming the proxy. ``import_images`` (ctr import, skopeo into containers-storage, docker load)
stays for tests about imports.

The Docker engine needs ``ensure_dockerd()`` on a machine where nothing starts it.
"""

import io
import json
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib

from .containerd import SANDBOX_IMAGE, EmbeddedContainerd, parse_size
from .crio import EmbeddedCrio, _qualified
from .dockerd import EmbeddedCriDockerd
from .fetch import containerd_bin_dir, shared_runtimes_dir
from .registry import DEFAULT_HOSTS, DOCKER_PROXY_ADDRESS
from .runtime import kill

from ansible_collections.kubenode.gc.plugins.module_utils.cri._cri import CriError

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
BUILD_SCRIPT = os.path.join(REPO, "tests", "node-image", "build.sh")
LABEL = "kubenode-gc-test"
# the runtimes node images exist for (tests/node-image/build.sh), named as in devtools.runtimes
RUNTIMES = ("containerd-1.6", "containerd-1.7", "containerd-2.1", "crio", "cri-dockerd")
DEFAULT_RUNTIME = "containerd-1.6"

# What a node container needs to run systemd, containerd and runc pods without
# --privileged (which fails here): every capability but CAP_SYS_RESOURCE, no
# seccomp/AppArmor confinement, and the host's cgroup tree. /run is root's 0755 as on a
# node (Docker's tmpfs default is 1777, where any user could make /run/kubenode-gc);
# /run/lock and /tmp are 1777, as there.
RUN_FLAGS = [
    "--cap-add", "ALL", "--cap-drop", "SYS_RESOURCE",
    "--security-opt", "seccomp=unconfined", "--security-opt", "apparmor=unconfined",
    "--cgroupns", "host", "-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw",
    "--tmpfs", "/run:mode=0755", "--tmpfs", "/run/lock", "--tmpfs", "/tmp",
]


# where a node reaches the harness's registry, in its own network namespace (devtools.netrelay); the embedded dockerd's
# address for the same purpose
REGISTRY_ADDRESS = DOCKER_PROXY_ADDRESS
# where a containerd node's registry hosts (certs.d) are; config_path is added to its config.toml
CERTS_D = "/etc/containerd/certs.d"
HARNESS_NOTE = "written by devtools.nodes: pulls go through the test harness's registry (devtools.registry)"


def docker(*args, check=True, capture=True):
    proc = subprocess.run(["docker"] + list(args), capture_output=capture, text=True, check=False)
    if check and proc.returncode != 0:
        raise RuntimeError("docker %s failed (%d): %s" % (" ".join(args), proc.returncode, (proc.stderr or "").strip()))
    return proc.stdout if capture else ""


DOCKERD_PIDFILE = "/run/kubenode-gc-dockerd.pid"


def ensure_dockerd(timeout=60):
    """Start dockerd in the background unless an engine already answers."""
    if subprocess.run(["docker", "info"], capture_output=True, check=False).returncode == 0:
        return
    log = open("/var/log/kubenode-gc-dockerd.log", "ab")
    proc = subprocess.Popen(["dockerd"], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    log.close()
    # scripts/test.sh stops the dockerd its steps started, by this pid
    with open(DOCKERD_PIDFILE, "w", encoding="utf-8") as f:
        f.write("%d\n" % proc.pid)
    deadline = time.time() + timeout
    while subprocess.run(["docker", "info"], capture_output=True, check=False).returncode != 0:
        if time.time() > deadline:
            raise RuntimeError("dockerd did not answer within %ss; see /var/log/kubenode-gc-dockerd.log" % timeout)
        time.sleep(0.5)


def node_images(runtimes=(DEFAULT_RUNTIME,)):
    """Build the node images of ``runtimes`` (RUNTIMES) that are missing, in parallel; return {runtime: image}.

    The base image takes a debootstrap (one to a few minutes); the other runtimes' images derive from it."""
    runtimes = list(runtimes)
    env = dict(os.environ)
    for runtime in runtimes:
        if runtime in ("containerd-1.7", "containerd-2.1"):
            env["KUBENODE_GC_NODE_" + runtime.upper().replace("-", "_").replace(".", "_")] = containerd_bin_dir(runtime.split("-", 1)[1])
    ensure_dockerd()
    out = subprocess.run(["bash", BUILD_SCRIPT] + runtimes, capture_output=True, text=True, check=False, env=env)
    if out.returncode != 0:
        raise RuntimeError("building the node images failed:\n%s" % out.stderr)
    return dict(zip(runtimes, out.stdout.split()[-len(runtimes):]))


def node_image(runtime=DEFAULT_RUNTIME):
    """Build the node image of ``runtime`` if missing and return its name."""
    return node_images([runtime])[runtime]


def read_file(container, path):
    """(text, mode) of the file ``path`` of ``container`` (created or running), read with ``docker cp``."""
    out = subprocess.run(["docker", "cp", "%s:%s" % (container, path), "-"], capture_output=True, check=False)
    if out.returncode != 0:
        raise RuntimeError("docker cp %s:%s failed (%d): %s" % (container, path, out.returncode, out.stderr.decode(errors="replace").strip()))
    with tarfile.open(fileobj=io.BytesIO(out.stdout)) as tar:
        member = tar.next()
        return tar.extractfile(member).read().decode(), member.mode


def write_files(container, files):
    """Write ``files`` ({absolute path: (text, mode)}) into ``container`` (created or running), owned by root, with one
    ``docker cp``; missing directories are made (root, 0755)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for path, (text, mode) in sorted(files.items()):
            data = text.encode()
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size, info.mode, info.mtime = len(data), mode, int(time.time())
            tar.addfile(info, io.BytesIO(data))
    out = subprocess.run(["docker", "cp", "-", "%s:/" % container], input=buf.getvalue(), capture_output=True, check=False)
    if out.returncode != 0:
        raise RuntimeError("docker cp into %s failed (%d): %s" % (container, out.returncode, out.stderr.decode(errors="replace").strip()))


def with_config_path(text, section, path=CERTS_D):
    """containerd's config.toml ``text`` with ``config_path = path`` in the table ``[<section>.registry]``, inserted with
    the section's other tables (where the CRI plugin's images are configured: ``section``)."""
    lines = text.splitlines(keepends=True)
    headers = [(i, line.strip().strip("[]")) for i, line in enumerate(lines) if line.lstrip().startswith("[")]
    if any(name.startswith(section + ".registry") for _i, name in headers):
        raise RuntimeError("the node's config.toml configures [%s.registry] already: the harness's mirrors would not apply" % section)
    inside = [i for i, name in headers if name == section or name.startswith(section + ".")]
    if not inside:
        raise RuntimeError("the node's config.toml has no [%s] table" % section)
    after = [i for i, name in headers if i > inside[0] and not (name == section or name.startswith(section + "."))]
    at = after[0] if after else len(lines)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    block = ["  # %s\n" % HARNESS_NOTE, "  [%s.registry]\n" % section, '    config_path = "%s"\n' % path] + (["\n"] if after else [])
    result = "".join(lines[:at] + block + lines[at:])
    parsed = tomllib.loads(result)
    for key in _toml_path(section) + ["registry", "config_path"]:
        parsed = parsed[key]
    if parsed != path:
        raise RuntimeError("config_path did not land in [%s.registry]" % section)
    return result


def _toml_path(section):
    """['plugins', 'io.containerd.grpc.v1.cri'] of 'plugins."io.containerd.grpc.v1.cri"'."""
    keys = []
    for i, piece in enumerate(section.split('"')):
        keys += [piece] if i % 2 else [key for key in piece.split(".") if key]
    return keys


class _DockerNode:
    """What every node container shares: start it, reach it, stop it.  Mixed in before the runtime's class."""

    service = None  # the runtime's systemd unit
    socket_dir = None  # the node's directory of the CRI socket, shared with this machine
    imagefs_root = None  # where the node's image filesystem (a tmpfs) is mounted

    def _node_init(self, name, image, group):
        self.name = name
        self.image = image
        self.group = group
        self.pod_logs = "/var/log/pods"
        self.mounts = {self.socket_dir: os.path.join(self.workdir, "run"), "/var/log/pods": os.path.join(self.workdir, "pods")}
        self.registry_relay = None

    @staticmethod
    def _workdir(name):
        # short: the socket path must fit in sun_path
        return tempfile.mkdtemp(prefix="kgc-%s-" % name, dir="/tmp")

    def host_path(self, path):
        for inside, outside in self.mounts.items():
            if path == inside or path.startswith(inside + "/"):
                return outside + path[len(inside):]
        raise ValueError("%s is not shared with node %s" % (path, self.name))

    def run_args(self):
        """docker run arguments of the runtime: its tmpfs and extra mounts."""
        raise NotImplementedError

    def boot(self):
        """What to do once the node answers CRI, before the sandbox image is pulled."""

    def node_files(self):
        """{path: (text, mode)} written into the created container before it boots: the runtime's mirror configuration."""
        raise NotImplementedError

    def registry_socket(self):
        """The unix socket on this machine the node's relay passes its connections to."""
        return self.registry.unix_socket()

    def start(self, timeout=60):
        for d in self.mounts.values():
            os.makedirs(d, exist_ok=True)
        docker("rm", "-f", self.name, check=False)
        args = ["create", "--name", self.name, "--hostname", self.name, "--label", "%s=%s" % (LABEL, self.group)] + RUN_FLAGS + self.run_args()
        for inside, outside in self.mounts.items():
            args += ["-v", "%s:%s" % (outside, inside)]
        docker(*(args + [self.image]))
        write_files(self.name, self.node_files())
        docker("start", self.name)
        self.start_registry_relay()
        self.wait_for_cri(timeout)
        self.boot()
        self.seed_sandbox_image()
        return self

    def start_registry_relay(self):
        """devtools.netrelay in the node's network namespace: REGISTRY_ADDRESS there is the harness's registry."""
        pid = int(docker("inspect", "-f", "{{.State.Pid}}", self.name).strip())
        env = dict(os.environ, PYTHONPATH=REPO + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else ""))
        with open(os.path.join(self.workdir, "relay.log"), "ab") as log:
            self.registry_relay = subprocess.Popen(
                ["nsenter", "--net=/proc/%d/ns/net" % pid, "--", sys.executable, "-m", "devtools.netrelay", REGISTRY_ADDRESS, self.registry_socket(),
                 self.workdir, str(pid)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log, start_new_session=True, env=env)
        if self.registry_relay.stdout.readline().strip() != b"listening":
            raise RuntimeError("the relay to the registry did not start in node %s; see %s" % (self.name, os.path.join(self.workdir, "relay.log")))
        self.registry_relay.stdout.close()

    def wait_for_cri(self, timeout=60):
        deadline = time.time() + timeout
        while True:
            try:
                self.client.version()
                self.client.status()
                return
            except CriError:
                self.client.close()
                if time.time() > deadline:
                    raise RuntimeError("%s in node %s did not answer CRI within %ss:\n%s" % (self.service, self.name, timeout, self.log_tail())) from None
                time.sleep(0.3)

    def log_tail(self, lines=30):
        return self.exec("journalctl", "-u", self.service, "-n", str(lines), "--no-pager", check=False)

    def exec(self, *cmd, check=True):
        return docker("exec", self.name, *cmd, check=check)

    def address(self):
        """The node's IP address on the Docker network (this machine reaches it, and so does any container there)."""
        return docker("inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}", self.name).split()[0]

    def add_ssh_user(self, user, public_key, timeout=30):
        """Give the node a login ``user`` (not root) with ``public_key`` and passwordless sudo; wait for its sshd.

        The node image runs sshd (openssh-server is in it); nobody can log in until a key is added here."""
        script = (
            'id -u "$1" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$1"; '
            'install -d -m 0700 -o "$1" -g "$1" "/home/$1/.ssh"; '
            'printf "%s\\n" "$2" > "/home/$1/.ssh/authorized_keys"; '
            'chown "$1:$1" "/home/$1/.ssh/authorized_keys"; chmod 0600 "/home/$1/.ssh/authorized_keys"; '
            'printf "%s ALL=(ALL) NOPASSWD:ALL\\n" "$1" > "/etc/sudoers.d/$1"; chmod 0440 "/etc/sudoers.d/$1"'
        )
        self.exec("sh", "-euc", script, "sh", user, public_key.strip())
        deadline = time.time() + timeout
        while self.exec("systemctl", "is-active", "ssh", check=False).strip() != "active":
            if time.time() > deadline:
                log = self.exec("journalctl", "-u", "ssh", "-n", "20", "--no-pager", check=False)
                raise RuntimeError("sshd in node %s is not active after %ss:\n%s" % (self.name, timeout, log))
            time.sleep(0.3)

    def systemctl(self, action, unit=None):
        self.exec("systemctl", action, unit or self.service)
        if self._client is not None:
            self._client.close()

    def stop(self):
        if self._client is not None:
            self._client.close()
            self._client = None
        if self.registry_relay is not None:
            kill(self.registry_relay.pid)
            self.registry_relay = None
        docker("rm", "-f", self.name, check=False)
        shutil.rmtree(self.workdir, ignore_errors=True)


class NodeContainer(_DockerNode, EmbeddedContainerd):
    """A containerd node (``runtime`` containerd-1.6, -1.7 or -2); the CRI helpers act on its containerd.

    Its containerd pulls every upstream host from the harness's registry: ``config_path`` in its config.toml names
    ``/etc/containerd/certs.d``, one ``hosts.toml`` per host. ``import_images`` imports with the ``ctr`` of the node's own
    containerd build, from here."""

    service = "containerd"
    socket_dir = "/run/containerd"
    imagefs_root = "/var/lib/containerd"

    def __init__(self, name, image, imagefs_size="160M", sandbox_image=SANDBOX_IMAGE, group="harness", runtime=DEFAULT_RUNTIME):
        workdir = self._workdir(name)
        line = runtime.split("-", 1)[1]
        super().__init__(workdir=workdir, imagefs_size=imagefs_size, sandbox_image=sandbox_image, socket=os.path.join(workdir, "run", "containerd.sock"),
                         bin_dir=containerd_bin_dir(line), line=line, name=runtime)
        self._node_init(name, image, group)

    @property
    def imagefs_mountpoint(self):
        return self.imagefs_root + "/io.containerd.snapshotter.v1.overlayfs"

    def run_args(self):
        return ["--tmpfs", "%s:size=%d,mode=0711" % (self.imagefs_root, parse_size(self.imagefs_size))]

    def node_files(self):
        text, mode = read_file(self.name, "/etc/containerd/config.toml")
        section = 'plugins."io.containerd.cri.v1.images"' if self.major >= 2 else 'plugins."io.containerd.grpc.v1.cri"'
        files = {"/etc/containerd/config.toml": (with_config_path(text, section), mode)}
        for host in DEFAULT_HOSTS:
            files["%s/%s/hosts.toml" % (CERTS_D, host)] = ("# %s\n%s" % (HARNESS_NOTE, self.registry.hosts_toml(host, REGISTRY_ADDRESS)), 0o644)
        return files


class CrioNode(_DockerNode, EmbeddedCrio):
    """A cri-o node: the node image's crio.service with the cri-o binaries mounted at /opt/cri-o/bin.

    Its storage is split as on the embedded cri-o: images in an ``imagestore`` on a tmpfs of
    ``imagefs_size`` (the image filesystem, in storage.conf before cri-o starts), containers in the graphroot on another
    tmpfs. cri-o pulls every upstream host from the harness's registry (a drop-in of /etc/containers/registries.conf.d);
    ``import_images`` copies with the node's skopeo, from archives in the work directory (mounted in the node)."""

    service = "crio"
    socket_dir = "/run/crio"
    imagefs_root = "/var/lib/containers/images"
    graphroot = "/var/lib/containers/storage"
    shared = "/var/tmp/kubenode-gc"

    def __init__(self, name, image, imagefs_size="160M", sandbox_image=SANDBOX_IMAGE, group="harness", runtime="crio"):
        if runtime != "crio":
            raise ValueError("CrioNode runs cri-o, not %s" % runtime)
        workdir = self._workdir(name)
        super().__init__(workdir=workdir, imagefs_size=imagefs_size, sandbox_image=sandbox_image, socket=os.path.join(workdir, "run", "crio.sock"))
        self._node_init(name, image, group)
        self.imagestore = self.imagefs_root
        self.runroot = "/run/containers/storage"

    @property
    def store(self):
        return self.imagestore

    @property
    def containerfs_mountpoint(self):
        return self.graphroot + "/overlay-containers"

    def run_args(self):
        return [
            "--tmpfs", "%s:size=%d,mode=0700" % (self.imagefs_root, parse_size(self.imagefs_size)),
            "--tmpfs", "%s:size=%d,mode=0700" % (self.graphroot, self.containerfs_size),
            "-v", "%s:/opt/cri-o/bin:ro" % self.bin_dir,
            "-v", "%s:%s" % (self.workdir, self.shared),
        ]

    def node_files(self):
        """The imagestore in the node's storage.conf (after its graphroot line) and the registries.conf.d drop-in."""
        text, mode = read_file(self.name, "/etc/containers/storage.conf")
        lines = text.splitlines(keepends=True)
        graphroot = [i for i, line in enumerate(lines) if line.startswith("graphroot")]
        if not graphroot:
            raise RuntimeError("the node's storage.conf has no graphroot line to put the imagestore after")
        lines.insert(graphroot[0] + 1, 'imagestore = "%s"\n' % self.imagestore)
        mirrors = "# %s\n%s" % (HARNESS_NOTE, self.registry.registries_conf_text(address=REGISTRY_ADDRESS, search=False))
        return {"/etc/containers/storage.conf": ("".join(lines), mode), "/etc/containers/registries.conf.d/50-kubenode-gc-registry.conf": (mirrors, 0o644)}

    def load_archive(self, path, specs):
        inside = self.shared + path[len(self.workdir):]
        dest = "containers-storage:[overlay@%s+%s]" % (self.store, self.runroot)
        # one exec; the first copy of a spec stores the image, the next ones add its other names
        copies = [("docker-archive:%s:%s" % (inside, tag), dest + _qualified(tag)) for spec in specs for tag in spec.tags]
        script = "; ".join("skopeo copy --quiet %s %s" % (shlex.quote(src), shlex.quote(dst)) for src, dst in copies)
        self.exec("sh", "-euc", script)


class DockerNode(_DockerNode, EmbeddedCriDockerd):
    """A Docker Engine node: the node image's docker.service (Debian 12's docker.io, on the node's containerd, its data
    root /var/lib/docker on a tmpfs of ``imagefs_size``) and cri-dockerd.service with cri-dockerd mounted from the shared
    runtimes at /opt/cri-o/bin. Its CRI socket directory is shared with this machine. dockerd pulls from the harness's
    registry through its DockerPullProxy (devtools.registry), as the embedded dockerd does: ``registry-mirrors`` and
    ``insecure-registries`` in daemon.json, the proxy in a ``docker.service`` drop-in; ``pull_with_docker`` pulls with
    the node's docker CLI (an image for a container outside Kubernetes). ``import_images`` runs the node's own ``docker
    load``, from archives in the work directory (mounted in the node)."""

    service = "cri-dockerd"
    socket_dir = "/run/cri-dockerd"
    imagefs_root = "/var/lib/docker"
    shared = "/var/tmp/kubenode-gc"

    def __init__(self, name, image, imagefs_size="160M", sandbox_image=SANDBOX_IMAGE, group="harness", runtime="cri-dockerd"):
        if runtime != "cri-dockerd":
            raise ValueError("DockerNode runs cri-dockerd, not %s" % runtime)
        workdir = self._workdir(name)
        super().__init__(workdir=workdir, imagefs_size=imagefs_size, sandbox_image=sandbox_image, socket=os.path.join(workdir, "run", "cri-dockerd.sock"))
        self._node_init(name, image, group)

    @property
    def imagefs_mountpoint(self):
        return self.imagefs_root  # cri-dockerd reports dockerd's data root

    @property
    def version(self):
        return self.exec("docker", "version", "--format", "{{.Server.Version}}").strip()

    def run_args(self):
        return [
            "--tmpfs", "%s:size=%d,mode=0711" % (self.imagefs_root, parse_size(self.imagefs_size)),
            "-v", "%s:/opt/cri-o/bin:ro" % shared_runtimes_dir(),
            "-v", "%s:%s" % (self.workdir, self.shared),
        ]

    def registry_socket(self):
        return self.registry.docker_proxy().socket

    def node_files(self):
        text, mode = read_file(self.name, "/etc/docker/daemon.json")
        config, env = self.registry.docker_daemon_config(address=REGISTRY_ADDRESS)
        daemon = dict(json.loads(text), **config)
        dropin = "# %s\n[Service]\nEnvironment=%s\n" % (HARNESS_NOTE, " ".join('"%s=%s"' % kv for kv in sorted(env.items())))
        return {"/etc/docker/daemon.json": (json.dumps(daemon, indent=2) + "\n", mode),
                "/etc/systemd/system/docker.service.d/kubenode-gc-registry.conf": (dropin, 0o644)}

    def pull_with_docker(self, specs):
        """Push ``specs`` to the harness's registry and pull every tag with the node's docker CLI, as a user gets an image
        for ``docker run``; return {first tag: image id}."""
        ids = self.push_images(specs)
        for spec in specs:
            for tag in spec.tags:
                self.docker("pull", "-q", tag)
        return ids

    def docker(self, *args, check=True, env=None):
        """The node's own docker CLI; return stdout."""
        return self.exec(*(["env"] + ["%s=%s" % kv for kv in (env or {}).items()] + ["docker"] + list(args)), check=check)

    def load_archive(self, path, specs):
        self.exec("docker", "load", "-q", "-i", self.shared + path[len(self.workdir):])

    def image_refs(self):
        fields = self.exec("docker", "images", "--digests", "--no-trunc", "--format", "{{.ID}} {{.Repository}}:{{.Tag}} {{.Repository}}@{{.Digest}}").split()
        return {"ids": set(fields[0::3]), "tags": {_qualified(t) for t in fields[1::3] if not t.startswith("<none>")},
                "digests": {_qualified(d) for d in fields[2::3] if not d.startswith("<none>") and not d.endswith("@<none>")}}

    def container_ids(self):
        return set(self.exec("docker", "ps", "-aq", "--no-trunc").split())


def make_node(name, image, runtime=DEFAULT_RUNTIME, **kwargs):
    """A node container (not started) of that runtime (RUNTIMES) from its node image."""
    cls = {"crio": CrioNode, "cri-dockerd": DockerNode}.get(runtime, NodeContainer)
    return cls(name, image, runtime=runtime, **kwargs)


def remove_leftover_nodes(group="harness"):
    """Remove the node containers of ``group`` that a killed test run left behind."""
    ids = docker("ps", "-aq", "--filter", "label=%s=%s" % (LABEL, group), check=False).split()
    if ids:
        docker("rm", "-f", *ids, check=False)
