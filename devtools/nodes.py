# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Kubernetes-node-like Docker containers: systemd, a real containerd with pods, images filled from here.

Each node runs the image ``tests/node-image/build.sh`` makes (Debian 12, systemd
as PID 1, Debian's containerd).  Its containerd root is a size-limited tmpfs, so
every node has a real, small imagefs.  The node's ``/run/containerd`` and
``/var/log/pods`` are bind mounts of a work directory here, so this process can
talk CRI to the node's containerd and fill it with the same helpers as the
embedded containerd (``EmbeddedContainerd``), while Ansible reaches the node over
the ``community.docker.docker`` connection.

The Docker engine needs ``ensure_dockerd()`` on a machine where nothing starts it.
"""

import os
import shutil
import subprocess
import tempfile
import time

from .containerd import SANDBOX_IMAGE, EmbeddedContainerd, parse_size
from .images import ImageSpec

from ansible_collections.kubenode.gc.plugins.module_utils._cri import CriError

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
BUILD_SCRIPT = os.path.join(REPO, "tests", "node-image", "build.sh")
LABEL = "kubenode-gc-test"

# What a node container needs to run systemd, containerd and runc pods without
# --privileged (which fails here): every capability but CAP_SYS_RESOURCE, no
# seccomp/AppArmor confinement, and the host's cgroup tree.
RUN_FLAGS = [
    "--cap-add", "ALL", "--cap-drop", "SYS_RESOURCE",
    "--security-opt", "seccomp=unconfined", "--security-opt", "apparmor=unconfined",
    "--cgroupns", "host", "-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw",
    "--tmpfs", "/run", "--tmpfs", "/run/lock", "--tmpfs", "/tmp",
]


def docker(*args, check=True, capture=True):
    proc = subprocess.run(["docker"] + list(args), capture_output=capture, text=True, check=False)
    if check and proc.returncode != 0:
        raise RuntimeError("docker %s failed (%d): %s" % (" ".join(args), proc.returncode, (proc.stderr or "").strip()))
    return proc.stdout if capture else ""


def ensure_dockerd(timeout=60):
    """Start dockerd in the background unless an engine already answers."""
    if subprocess.run(["docker", "info"], capture_output=True, check=False).returncode == 0:
        return
    log = open("/var/log/kubenode-gc-dockerd.log", "ab")
    subprocess.Popen(["dockerd"], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    log.close()
    deadline = time.time() + timeout
    while subprocess.run(["docker", "info"], capture_output=True, check=False).returncode != 0:
        if time.time() > deadline:
            raise RuntimeError("dockerd did not answer within %ss; see /var/log/kubenode-gc-dockerd.log" % timeout)
        time.sleep(0.5)


def node_image():
    """Build the node image if missing (about 90 s) and return its name."""
    ensure_dockerd()
    out = subprocess.run(["bash", BUILD_SCRIPT], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError("building the node image failed:\n%s" % out.stderr)
    return out.stdout.strip().splitlines()[-1]


class NodeContainer(EmbeddedContainerd):
    """One node container; CRI helpers (import_images, run_pod, add_container, ...) act on its containerd."""

    def __init__(self, name, image, imagefs_size="160M", sandbox_image=SANDBOX_IMAGE, group="harness"):
        # short work dir: the socket path must fit in sun_path
        workdir = tempfile.mkdtemp(prefix="kgc-%s-" % name, dir="/tmp")
        super().__init__(workdir=workdir, imagefs_size=imagefs_size, sandbox_image=sandbox_image, socket=os.path.join(workdir, "run", "containerd.sock"))
        self.name = name
        self.image = image
        self.group = group
        self.pod_logs = "/var/log/pods"
        self.mounts = {"/run/containerd": os.path.join(self.workdir, "run"), "/var/log/pods": os.path.join(self.workdir, "pods")}

    def host_path(self, path):
        for inside, outside in self.mounts.items():
            if path == inside or path.startswith(inside + "/"):
                return outside + path[len(inside):]
        raise ValueError("%s is not shared with node %s" % (path, self.name))

    @property
    def imagefs_mountpoint(self):
        return "/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs"

    def start(self, timeout=60):
        for d in self.mounts.values():
            os.makedirs(d, exist_ok=True)
        docker("rm", "-f", self.name, check=False)
        args = ["run", "-d", "--name", self.name, "--hostname", self.name, "--label", "%s=%s" % (LABEL, self.group)] + RUN_FLAGS
        args += ["--tmpfs", "/var/lib/containerd:size=%d,mode=0711" % parse_size(self.imagefs_size)]
        for inside, outside in self.mounts.items():
            args += ["-v", "%s:%s" % (outside, inside)]
        docker(*(args + [self.image]))
        self.wait_for_cri(timeout)
        self.import_images([ImageSpec(self.sandbox_image, entrypoint=["/bin/sleep", "2147483647"])])
        return self

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
                    raise RuntimeError("containerd in node %s did not answer CRI within %ss:\n%s" % (self.name, timeout, self.log_tail()))
                time.sleep(0.3)

    def log_tail(self, lines=30):
        return self.exec("journalctl", "-u", "containerd", "-n", str(lines), "--no-pager", check=False)

    def exec(self, *cmd, check=True):
        return docker("exec", self.name, *cmd, check=check)

    def systemctl(self, action, unit="containerd"):
        self.exec("systemctl", action, unit)
        if self._client is not None:
            self._client.close()

    def stop(self):
        if self._client is not None:
            self._client.close()
            self._client = None
        docker("rm", "-f", self.name, check=False)
        shutil.rmtree(self.workdir, ignore_errors=True)


def remove_leftover_nodes(group="harness"):
    """Remove the node containers of ``group`` that a killed test run left behind."""
    ids = docker("ps", "-aq", "--filter", "label=%s=%s" % (LABEL, group), check=False).split()
    if ids:
        docker("rm", "-f", *ids, check=False)
