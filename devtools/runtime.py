# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What every embedded runtime shares: a work directory, a tmpfs imagefs, lifecycle and CRI helpers.

Lifecycle, split so that a fault test can stop and restart a runtime on the same root:

* ``start()`` = ``prepare()`` (directories, tmpfs, config files) + ``launch()``
  (the daemon, until it answers CRI) + seeding the sandbox image;
* ``restart()`` = ``shutdown(leftovers=False)`` + ``launch()`` (the root, its images and
  containers stay; running containers keep running, as when a node's runtime restarts);
* ``crash()`` = SIGKILL of the daemon alone (no clean shutdown; root, state and containers stay),
  after which ``restart()`` brings it back on the same root (``devtools.faults`` crashes a runtime
  after N removals);
* ``stop()`` = removing the pods + ``shutdown()`` (the daemon by its pid, then the shims /
  conmon processes that served it) + ``cleanup()`` (unmount everything below the work
  directory, delete it).

Subclasses say how to write their config (``write_config``), the daemon's command line
(``command``), which leftover processes belong to them (``leftover_pids``) and how images get in
(``load_archive``).
"""

import concurrent.futures
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

from . import registry
from .cri import DevCriClient
from .images import ImageSpec, build_archive

from ansible_collections.kubenode.gc.plugins.module_utils.cri._cri import CriError
from ansible_collections.kubenode.gc.plugins.module_utils.cri._image_ref import normalize_image_ref

SANDBOX_IMAGE = "registry.k8s.io/pause:3.9-kubenode"
POD_UID_LABEL = "io.kubernetes.pod.uid"


def parse_size(text):
    """'64M' / '1G' / '512k' / 1048576 -> bytes."""
    if isinstance(text, int):
        return text
    text = str(text).strip().upper().rstrip("IB")
    units = {"K": 1024, "M": 1024**2, "G": 1024**3}
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def mounts_below(path):
    """Mount points at or below ``path``, deepest first."""
    path = os.path.realpath(path)
    found = []
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        for line in f:
            mnt = line.split()[4].replace("\\040", " ")
            if mnt == path or mnt.startswith(path + "/"):
                found.append(mnt)
    return sorted(set(found), key=len, reverse=True)


def pids_with(needle):
    """Pids whose command line (arguments joined by spaces, plus a trailing space) contains ``needle``."""
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


def kill(pid, sig=signal.SIGTERM, wait=10):
    """Send ``sig`` to ``pid``, wait up to ``wait`` seconds for it to go, then SIGKILL it."""
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return
    deadline = time.time() + wait
    while time.time() < deadline:
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return
        except ChildProcessError:
            if not os.path.exists("/proc/%d" % pid) or _zombie(pid):
                return
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass


def _zombie(pid):
    try:
        with open("/proc/%d/stat" % pid, encoding="utf-8") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def _container_state(name):
    from ansible_collections.kubenode.gc.plugins.module_utils.cri import _cri_api_pb2 as pb  # pylint: disable=import-outside-toplevel

    return pb.ContainerState.Value(name)


class EmbeddedRuntime:
    """One CRI runtime process with its own root (a tmpfs of ``imagefs_size``), state and socket."""

    kind = None  # "containerd" or "cri-o": the runtime_name it reports over CRI
    name = None  # the harness name, e.g. "containerd-2.1"
    daemon = None  # name of the daemon in messages
    socket_name = "cri.sock"

    def __init__(self, workdir=None, imagefs_size="128M", sandbox_image=SANDBOX_IMAGE, socket=None, imagefs_inodes=None):
        self.workdir = os.path.realpath(workdir or tempfile.mkdtemp(prefix="kubenode-gc-%s-" % self.kind.replace("-", "")))
        self.imagefs_size = parse_size(imagefs_size)
        # tmpfs nr_inodes of the image filesystem's mount (None: the kernel's default, half the RAM pages)
        self.imagefs_inodes = int(imagefs_inodes) if imagefs_inodes else None
        self.sandbox_image = sandbox_image
        self.root = os.path.join(self.workdir, "root")
        self.state = os.path.join(self.workdir, "state")
        self.socket = socket or os.path.join(self.workdir, self.socket_name)
        self.endpoint = "unix://" + self.socket
        self.log_path = os.path.join(self.workdir, "%s.log" % self.kind.replace("-", ""))
        self.pid_path = os.path.join(self.workdir, "%s.pid" % self.kind.replace("-", ""))
        self.pod_logs = os.path.join(self.workdir, "pod-logs")
        self.pid = None
        self._client = None
        self._registry = None

    # -- what a runtime must say -----------------------------------------------

    @property
    def version(self):
        """The version string the runtime reports over CRI (``runtime_version``)."""
        raise NotImplementedError

    @property
    def imagefs_mountpoint(self):
        """The image filesystem mountpoint the runtime reports in ImageFsInfo."""
        raise NotImplementedError

    @property
    def imagefs_mounts(self):
        """{tmpfs mount point: size in bytes} that ``prepare()`` mounts."""
        return {self.root: self.imagefs_size}

    @property
    def imagefs_mount(self):
        """The tmpfs mount point (a key of ``imagefs_mounts``) that holds the image filesystem: ``imagefs_inodes`` applies to it."""
        return self.root

    def write_config(self):
        raise NotImplementedError

    def command(self):
        raise NotImplementedError

    def daemon_env(self):
        return None

    def leftover_pids(self):
        """Processes the daemon started that outlive it (shims, conmon)."""
        return []

    def load_archive(self, path, specs):
        raise NotImplementedError

    def image_refs(self):
        """Image ids and tags as the runtime's own tool lists them (not our CRI client): {"ids": set, "tags": set}."""
        raise NotImplementedError

    def container_ids(self):
        """Ids of every container and sandbox, as the runtime's own tool lists them."""
        raise NotImplementedError

    # -- lifecycle ---------------------------------------------------------

    def prepare(self):
        """Directories, the tmpfs imagefs (and any other tmpfs) and config files; nothing runs yet."""
        for d in (self.root, self.state, self.pod_logs):
            os.makedirs(d, exist_ok=True)
        os.makedirs(os.path.dirname(self.socket), exist_ok=True)
        for mountpoint, size in self.imagefs_mounts.items():
            os.makedirs(mountpoint, exist_ok=True)
            opts = "size=%d,mode=0711" % size
            if self.imagefs_inodes and mountpoint == self.imagefs_mount:
                opts += ",nr_inodes=%d" % self.imagefs_inodes
            subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "kubenode-gc-imagefs", mountpoint], check=True)
        self.write_config()

    def launch(self, timeout=60):
        """Start the daemon and wait until it answers CRI Version and Status."""
        log = open(self.log_path, "ab")
        env = self.daemon_env()
        proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env)
        log.close()
        self.pid = proc.pid
        with open(self.pid_path, "w", encoding="utf-8") as f:
            f.write(str(self.pid))
        deadline = time.time() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError("%s exited with %s; see %s:\n%s" % (self.daemon, proc.returncode, self.log_path, self.log_tail()))
            try:
                self.client.version()
                self.client.status()
                return self
            except CriError:
                if time.time() > deadline:
                    raise RuntimeError("%s did not answer CRI within %ss; see %s:\n%s" % (self.daemon, timeout, self.log_path, self.log_tail())) from None
                self.client.close()
                time.sleep(0.2)

    def start(self, timeout=60):
        self.prepare()
        try:
            self.launch(timeout)
            self.seed_sandbox_image()
        except BaseException:
            self.stop()
            raise
        return self

    def shutdown(self, leftovers=True):
        """Stop the daemon (by its pid) and, with ``leftovers``, the shims/conmons it left running.

        The root and its content stay.  Without ``leftovers`` the containers keep running, as
        when a node's runtime restarts."""
        if self._client is not None:
            self._client.close()
            self._client = None
        if self.pid is not None:
            kill(self.pid)
            self.pid = None
        for pid in self.leftover_pids() if leftovers else ():
            kill(pid, sig=signal.SIGKILL)

    def daemon_pid(self):
        """Pid of the runtime daemon itself (the process ``launch()`` started, unless a wrapper runs it)."""
        return self.pid

    def crash(self, timeout=10):
        """Kill the daemon with SIGKILL, as a crash would, and wait until it is gone; ``restart()`` brings it back.

        Nothing else is touched: the root, the state directory, the shims/conmons and the running containers stay."""
        pid = self.daemon_pid()
        if pid is None:
            raise RuntimeError("%s is not running" % self.daemon)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        deadline = time.time() + timeout
        while os.path.exists("/proc/%d" % pid) and not _zombie(pid):
            if time.time() > deadline:
                raise RuntimeError("%s (pid %d) did not die of SIGKILL within %ss" % (self.daemon, pid, timeout))
            time.sleep(0.01)

    def restart(self, timeout=60):
        """Stop the daemon and start it again on the same root and config; running containers survive."""
        self.shutdown(leftovers=False)
        return self.launch(timeout)

    def cleanup(self):
        """Unmount everything below the work directory and delete it."""
        for mnt in mounts_below(self.workdir):
            subprocess.run(["umount", "-l", mnt], check=False)
        shutil.rmtree(self.workdir, ignore_errors=True)

    def stop(self):
        """Stop everything this instance started and remove the work directory."""
        if self.pid is not None and os.path.exists("/proc/%d" % self.pid):
            try:
                self.remove_all_pods()
            except (CriError, RuntimeError):
                pass
        self.shutdown()
        self.cleanup()

    def log_tail(self, lines=30):
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""

    def saved_state(self):
        return {"imagefs_size": self.imagefs_size, "sandbox_image": self.sandbox_image, "socket": self.socket}

    def restore_state(self, saved):
        self.imagefs_size = saved["imagefs_size"]
        self.sandbox_image = saved["sandbox_image"]
        self.socket = saved["socket"]
        self.endpoint = "unix://" + self.socket

    def save(self):
        """Record what ``attach()`` needs to find this runtime again (for the CLI)."""
        with open(os.path.join(self.workdir, "harness.json"), "w", encoding="utf-8") as f:
            json.dump(dict(self.saved_state(), runtime=self.name), f)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def host_path(self, path):
        """Where a path the runtime sees lives on this machine (the same path here; see nodes.NodeContainer)."""
        return path

    def engine_env(self):
        """The environment a module needs to find this runtime's engine when it reaches the CRI through another socket (a
        devtools.faults proxy): nothing here; cri-dockerd's Docker Engine is named by DOCKER_HOST then."""
        return {}

    # -- clients -----------------------------------------------------------

    @property
    def client(self):
        if self._client is None:
            self._client = DevCriClient(self.endpoint, timeout=30)
        return self._client

    # -- images ------------------------------------------------------------

    def sandbox_spec(self):
        """The ImageSpec of the sandbox (pause) image."""
        return ImageSpec(self.sandbox_image, entrypoint=["/bin/sleep", "2147483647"])

    def seed_sandbox_image(self):
        """Put the sandbox (pause) image on the runtime as a node gets it: pulled through the CRI."""
        self.pull_images([self.sandbox_spec()])

    @property
    def registry(self):
        """The registry this runtime pulls from (``devtools.registry.shared()``, started on first use)."""
        if self._registry is None:
            self._registry = registry.shared()
        return self._registry

    def pull_images(self, specs, parallel=4):
        """Build ``specs`` (ImageSpec list), push them to the harness's registry and pull every tag through the CRI's
        PullImage, as the kubelet does; return {first tag: image id as the CRI reports it}.

        The registry keeps what it was given: an image pushed before with the same content is not pushed again."""
        ids = self.push_images(specs, parallel)
        tags = [tag for spec in specs for tag in spec.tags]
        client = self.pull_client()
        try:
            with concurrent.futures.ThreadPoolExecutor(max_workers=parallel) as pool:
                list(pool.map(lambda tag: client.pull_image(self.pull_ref(tag)), tags))
        finally:
            if client is not self.client:
                client.close()
        self.wait_for_images(tags)
        return {tag: self.image_id(digest) for tag, digest in ids.items()}

    def push_images(self, specs, parallel=4):
        """Build ``specs`` (ImageSpec list) and push every tag to the harness's registry; return {first tag: config digest}."""
        fd, path = tempfile.mkstemp(prefix="images-", suffix=".tar", dir=self.workdir)
        os.close(fd)
        try:
            ids = build_archive(path, specs)
            reg = self.registry
            todo = [(tag, ids[spec.tags[0]]) for spec in specs for tag in spec.tags]
            with concurrent.futures.ThreadPoolExecutor(max_workers=parallel) as pool:
                list(pool.map(lambda item: reg.push(path, item[0], item[1]), todo))
        finally:
            os.unlink(path)
        return ids

    def pull_client(self):
        """The CRI client pulls go through (a pull of many layers may take longer than one list call)."""
        return DevCriClient(self.endpoint, timeout=120)

    def pull_ref(self, tag):
        """The reference the kubelet would send for ``tag`` (its name as the pod spec gives it)."""
        return tag

    def import_images(self, specs):
        """Build ``specs`` (ImageSpec list) into one archive and load it; return {first tag: image id as the CRI reports it}."""
        fd, path = tempfile.mkstemp(prefix="images-", suffix=".tar", dir=self.workdir)
        os.close(fd)
        try:
            ids = build_archive(path, specs)
            self.load_archive(path, specs)
        finally:
            os.unlink(path)
        self.wait_for_images([tag for spec in specs for tag in spec.tags])
        return {tag: self.image_id(digest) for tag, digest in ids.items()}

    def image_id(self, config_digest):
        """The id the runtime gives an image whose config has this digest (``sha256:<hex>``)."""
        return config_digest

    def wait_for_images(self, tags, timeout=20):
        """Wait until the CRI lists every tag (containerd learns of imported images through events)."""
        want = {normalize_image_ref(t) for t in tags}
        deadline = time.time() + timeout
        while True:
            # Docker lists docker.io's images by their short names (busybox:1.36)
            have = {normalize_image_ref(t) for img in self.client.list_images() for t in img.repo_tags}
            if want <= have:
                return
            if time.time() > deadline:
                raise RuntimeError("CRI does not list imported images %s" % sorted(want - have))
            time.sleep(0.1)

    # -- pods --------------------------------------------------------------

    def namespace_options(self):
        return {"network": "NODE"}

    def container_image(self, image):
        """The ImageSpec a container of this runtime is created with."""
        return {"image": image}

    def volume_image(self, image):
        """The ImageSpec of an image volume mount, as the kubelet sends it: the image's id (its PullImage image_ref)."""
        return {"image": self.image_id_of(image)}

    def image_id_of(self, image):
        """The id of an image the runtime holds, by tag (short names normalised)."""
        want = normalize_image_ref(image)
        for img in self.client.list_images():
            if want in (normalize_image_ref(t) for t in img.repo_tags):
                return img.id
        raise RuntimeError("the runtime holds no image %s" % image)

    def pod_config(self, name, namespace="default", uid=None, attempt=0):
        uid = uid or "uid-%s-%s" % (namespace, name)
        return {
            "metadata": {"name": name, "uid": uid, "namespace": namespace, "attempt": attempt},
            "log_directory": os.path.join(self.pod_logs, "%s_%s_%s" % (namespace, name, uid)),
            "labels": {POD_UID_LABEL: uid, "io.kubernetes.pod.name": name, "io.kubernetes.pod.namespace": namespace},
            "linux": {"security_context": {"namespace_options": self.namespace_options()}},
        }

    def run_pod(self, name, namespace="default", uid=None, attempt=0):
        """Start a host-network pod sandbox; return (sandbox id, its config)."""
        config = self.pod_config(name, namespace, uid, attempt)
        os.makedirs(self.host_path(config["log_directory"]), exist_ok=True)
        return self.client.run_pod_sandbox(config), config

    def add_container(self, sandbox, name, image, state="running", attempt=0, command=None, link_dir=None, image_volumes=()):
        """Create a container in a pod and bring it to ``state`` (running, exited or created); return its id.

        ``image_volumes``: images (tags) mounted read-only as volumes at /volumes/0, /volumes/1, ... (KEP-4639).

        With ``link_dir``, also make the kubelet's legacy symlink <pod>_<ns>_<name>-<id>.log to its log file there."""
        sandbox_id, pod = sandbox
        if command is None:
            command = ["/bin/true"] if state == "exited" else ["/bin/sleep", "2147483647"]
        config = {
            "metadata": {"name": name, "attempt": attempt},
            "image": self.container_image(image),
            "command": command,
            "log_path": "%s/%d.log" % (name, attempt),
            "labels": {
                POD_UID_LABEL: pod["metadata"]["uid"],
                "io.kubernetes.pod.name": pod["metadata"]["name"],
                "io.kubernetes.pod.namespace": pod["metadata"]["namespace"],
                "io.kubernetes.container.name": name,
            },
            "linux": {"security_context": {"namespace_options": self.namespace_options()}},
        }
        if image_volumes:
            config["mounts"] = [{"container_path": "/volumes/%d" % n, "image": self.volume_image(ref), "readonly": True}
                                for n, ref in enumerate(image_volumes)]
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
