# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Start, fill and tear down a real containerd (Debian's containerd + runc) with its own everything.

The runtime's root sits on a size-limited tmpfs, so its image filesystem is
real and small and GC thresholds can be reached for real.  State dir, sockets
and pod logs live in a work directory; nothing outside it is touched, and
``stop()`` kills what it started (containerd by its own pid, then the shims
that served it) and unmounts everything below the work directory.
"""

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

from .cri import DevCriClient
from .images import ImageSpec, build_archive

from ansible_collections.kubenode.gc.plugins.module_utils._cri import CriError
from ansible_collections.kubenode.gc.plugins.module_utils._image_ref import normalize_image_ref

SANDBOX_IMAGE = "registry.k8s.io/pause:3.9-kubenode"
SNAPSHOTTER = "overlayfs"
POD_UID_LABEL = "io.kubernetes.pod.uid"

CONFIG = """version = 2
root = "{root}"
state = "{state}"
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.internal.v1.tracing",
]

[grpc]
  address = "{socket}"

[ttrpc]
  address = "{socket}.ttrpc"

[debug]
  address = ""
  level = "info"

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "{workdir}/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{sandbox_image}"
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "{snapshotter}"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{workdir}/cni/bin"
    conf_dir = "{workdir}/cni/conf.d"
"""


def parse_size(text):
    """'64M' / '1G' / '512k' / 1048576 -> bytes."""
    if isinstance(text, int):
        return text
    text = str(text).strip().upper().rstrip("IB")
    units = {"K": 1024, "M": 1024**2, "G": 1024**3}
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def _mounts_below(path):
    path = os.path.realpath(path)
    found = []
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        for line in f:
            mnt = line.split()[4].replace("\\040", " ")
            if mnt == path or mnt.startswith(path + "/"):
                found.append(mnt)
    return sorted(set(found), key=len, reverse=True)


def _pids_with(needle):
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % entry, "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if needle in cmdline:
            pids.append(int(entry))
    return pids


class EmbeddedContainerd:
    """One containerd process with its own root (tmpfs of ``imagefs_size``), state and socket."""

    def __init__(self, workdir=None, imagefs_size="128M", sandbox_image=SANDBOX_IMAGE, socket=None):
        self.workdir = os.path.realpath(workdir or tempfile.mkdtemp(prefix="kubenode-gc-ctrd-"))
        self.imagefs_size = parse_size(imagefs_size)
        self.sandbox_image = sandbox_image
        self.root = os.path.join(self.workdir, "root")
        self.state = os.path.join(self.workdir, "state")
        self.socket = socket or os.path.join(self.workdir, "containerd.sock")
        self.endpoint = "unix://" + self.socket
        self.config_path = os.path.join(self.workdir, "config.toml")
        self.log_path = os.path.join(self.workdir, "containerd.log")
        self.pid_path = os.path.join(self.workdir, "containerd.pid")
        self.pod_logs = os.path.join(self.workdir, "pod-logs")
        self.pid = None
        self._client = None

    # -- lifecycle ---------------------------------------------------------

    @property
    def imagefs_mountpoint(self):
        return os.path.join(self.root, "io.containerd.snapshotter.v1." + SNAPSHOTTER)

    def start(self, timeout=30):
        for d in (self.root, self.state, self.pod_logs, os.path.join(self.workdir, "opt")):
            os.makedirs(d, exist_ok=True)
        os.makedirs(os.path.dirname(self.socket), exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%d,mode=0711" % self.imagefs_size, "kubenode-gc-imagefs", self.root], check=True)
        with open(self.config_path, "w", encoding="utf-8") as f:
            f.write(
                CONFIG.format(
                    root=self.root,
                    state=self.state,
                    socket=self.socket,
                    workdir=self.workdir,
                    sandbox_image=self.sandbox_image,
                    snapshotter=SNAPSHOTTER,
                )
            )
        log = open(self.log_path, "ab")
        proc = subprocess.Popen(
            ["containerd", "--config", self.config_path],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        self.pid = proc.pid
        with open(self.pid_path, "w", encoding="utf-8") as f:
            f.write(str(self.pid))
        deadline = time.time() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError("containerd exited with %s; see %s:\n%s" % (proc.returncode, self.log_path, self.log_tail()))
            try:
                self.client.version()
                self.client.status()
                break
            except CriError:
                if time.time() > deadline:
                    raise RuntimeError("containerd did not answer CRI within %ss; see %s:\n%s" % (timeout, self.log_path, self.log_tail()))
                self.client.close()
                time.sleep(0.2)
        self.import_images([ImageSpec(self.sandbox_image, entrypoint=["/bin/sleep", "2147483647"])])
        return self

    def log_tail(self, lines=30):
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""

    @classmethod
    def attach(cls, workdir):
        """Re-open a containerd that ``start()`` left running in ``workdir`` (for the CLI)."""
        self = cls(workdir)
        with open(os.path.join(self.workdir, "harness.json"), encoding="utf-8") as f:
            saved = json.load(f)
        self.imagefs_size = saved["imagefs_size"]
        self.sandbox_image = saved["sandbox_image"]
        self.socket = saved["socket"]
        self.endpoint = "unix://" + self.socket
        with open(self.pid_path, encoding="utf-8") as f:
            self.pid = int(f.read())
        return self

    def save(self):
        with open(os.path.join(self.workdir, "harness.json"), "w", encoding="utf-8") as f:
            json.dump({"imagefs_size": self.imagefs_size, "sandbox_image": self.sandbox_image, "socket": self.socket}, f)

    def stop(self):
        """Stop everything this instance started and remove the work directory."""
        if self.pid is not None and os.path.exists("/proc/%d" % self.pid):
            try:
                self.remove_all_pods()
            except (CriError, RuntimeError):
                pass
        if self._client is not None:
            self._client.close()
            self._client = None
        if self.pid is not None:
            self._kill(self.pid)
            self.pid = None
        # shims outlive containerd; they are started with "-address <our socket>"
        for pid in _pids_with("-address " + self.socket + " "):
            self._kill(pid, sig=signal.SIGKILL)
        for mnt in _mounts_below(self.workdir):
            subprocess.run(["umount", "-l", mnt], check=False)
        shutil.rmtree(self.workdir, ignore_errors=True)

    @staticmethod
    def _kill(pid, sig=signal.SIGTERM, wait=10):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.time() + wait
        while time.time() < deadline:
            try:
                done = os.waitpid(pid, os.WNOHANG)[0]
                if done == pid:
                    return
            except ChildProcessError:
                if not os.path.exists("/proc/%d" % pid):
                    return
            time.sleep(0.05)
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def host_path(self, path):
        """Where a path the runtime sees lives on this machine (the same path here; see nodes.NodeContainer)."""
        return path

    # -- clients -----------------------------------------------------------

    @property
    def client(self):
        if self._client is None:
            self._client = DevCriClient(self.endpoint, timeout=30)
        return self._client

    def ctr(self, *args, check=True):
        """Run ``ctr`` against this containerd in the k8s.io namespace; return stdout."""
        cmd = ["ctr", "--address", self.socket, "--namespace", "k8s.io"] + list(args)
        out = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if check and out.returncode != 0:
            raise RuntimeError("%s failed (%d): %s" % (" ".join(cmd), out.returncode, out.stderr.strip()))
        return out.stdout

    # -- images ------------------------------------------------------------

    def import_images(self, specs):
        """Build ``specs`` (ImageSpec list) into one archive and import it; return {first tag: image id}."""
        fd, path = tempfile.mkstemp(prefix="images-", suffix=".tar", dir=self.workdir)
        os.close(fd)
        try:
            ids = build_archive(path, specs)
            self.ctr("images", "import", "--snapshotter", SNAPSHOTTER, path)
        finally:
            os.unlink(path)
        self.wait_for_images([tag for spec in specs for tag in spec.tags])
        return ids

    def wait_for_images(self, tags, timeout=20):
        """The CRI plugin learns of imported images through events: wait until it lists them all."""
        want = {normalize_image_ref(t) for t in tags}
        deadline = time.time() + timeout
        while True:
            have = {t for img in self.client.list_images() for t in img.repo_tags}
            if want <= have:
                return
            if time.time() > deadline:
                raise RuntimeError("CRI does not list imported images %s" % sorted(want - have))
            time.sleep(0.1)

    # -- pods --------------------------------------------------------------

    def pod_config(self, name, namespace="default", uid=None, attempt=0):
        uid = uid or "uid-%s-%s" % (namespace, name)
        return {
            "metadata": {"name": name, "uid": uid, "namespace": namespace, "attempt": attempt},
            "log_directory": os.path.join(self.pod_logs, "%s_%s_%s" % (namespace, name, uid)),
            "labels": {POD_UID_LABEL: uid, "io.kubernetes.pod.name": name, "io.kubernetes.pod.namespace": namespace},
            "linux": {"security_context": {"namespace_options": {"network": "NODE"}}},
        }

    def run_pod(self, name, namespace="default", uid=None, attempt=0):
        """Start a host-network pod sandbox; return (sandbox id, its config)."""
        config = self.pod_config(name, namespace, uid, attempt)
        os.makedirs(self.host_path(config["log_directory"]), exist_ok=True)
        return self.client.run_pod_sandbox(config), config

    def add_container(self, sandbox, name, image, state="running", attempt=0, command=None, link_dir=None):
        """Create a container in a pod and bring it to ``state`` (running, exited or created); return its id.

        With ``link_dir``, also make the kubelet's legacy symlink <pod>_<ns>_<name>-<id>.log to its log file there."""
        sandbox_id, pod = sandbox
        if command is None:
            command = ["/bin/true"] if state == "exited" else ["/bin/sleep", "2147483647"]
        config = {
            "metadata": {"name": name, "attempt": attempt},
            "image": {"image": image},
            "command": command,
            "log_path": "%s/%d.log" % (name, attempt),
            "labels": {
                POD_UID_LABEL: pod["metadata"]["uid"],
                "io.kubernetes.pod.name": pod["metadata"]["name"],
                "io.kubernetes.pod.namespace": pod["metadata"]["namespace"],
                "io.kubernetes.container.name": name,
            },
            "linux": {"security_context": {"namespace_options": {"network": "NODE"}}},
        }
        os.makedirs(self.host_path(os.path.join(pod["log_directory"], name)), exist_ok=True)
        cid = self.client.create_container(sandbox_id, config, pod)
        if state in ("running", "exited"):
            self.client.start_container(cid)
        if state == "exited":
            self.wait_for_state(cid, "CONTAINER_EXITED")
        elif state == "running":
            self.wait_for_state(cid, "CONTAINER_RUNNING")
        if link_dir:
            meta = pod["metadata"]
            os.makedirs(link_dir, exist_ok=True)
            link = os.path.join(link_dir, "%s_%s_%s-%s.log" % (meta["name"], meta["namespace"], name, cid))
            os.symlink(os.path.join(pod["log_directory"], config["log_path"]), link)
        return cid

    def wait_for_state(self, cid, state, timeout=20):
        deadline = time.time() + timeout
        while True:
            status = self.client.container_status(cid).status
            if status.state == _container_state(state):
                return
            if time.time() > deadline:
                raise RuntimeError("container %s did not reach %s" % (cid, state))
            time.sleep(0.05)

    def remove_all_pods(self):
        client = self.client
        for c in client.list_containers():
            try:
                client.stop_container(c.id, 0)
                client.remove_container(c.id)
            except CriError:
                pass
        for s in client.list_pod_sandbox():
            client.stop_pod_sandbox(s.id)
            client.remove_pod_sandbox(s.id)

    def remove_all_images(self, keep_sandbox=True):
        for img in self.client.list_images():
            if keep_sandbox and self.sandbox_image in img.repo_tags:
                continue
            self.client.remove_image(img.id)

    def reset(self):
        """Back to a runtime holding only the sandbox image."""
        self.remove_all_pods()
        self.remove_all_images()


def _container_state(name):
    from ansible_collections.kubenode.gc.plugins.module_utils import _cri_api_pb2 as pb

    return pb.ContainerState.Value(name)
