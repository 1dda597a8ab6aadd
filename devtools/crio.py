# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Start, fill and tear down a real cri-o (the prebuilt binaries of ../shared/runtimes) with its own everything.

cri-o reads only the files written here: ``crio.conf`` (``--config``), an empty drop-in
directory (``--config-dir``) and ``storage.conf`` (``CONTAINERS_STORAGE_CONF``); every other
path it would use on a node (exits, attach sockets, namespaces, version files, logs) is moved
into the work directory by flags.  With ``split`` (the default) images go to an
``imagestore`` on a tmpfs of ``imagefs_size`` and containers to ``root`` on a tmpfs of
``containerfs_size``: cri-o then reports both in ImageFsInfo (a split image filesystem).

Images get in as on a node without a registry: ``skopeo copy docker-archive:...
containers-storage:[overlay@STORE+RUNROOT]NAME`` (STORE is the imagestore when split).
Pods run with host network and their own pid namespace per container (no infra container:
these machines cannot lower oom_score_adj, which it needs).  cri-o runs under
``devtools.reaper`` so the conmon processes of stopped containers are reaped.
"""

import concurrent.futures
import json
import os
import subprocess
import sys

from .fetch import CRIO_DIR_ENV, crio_dir
from .runtime import SANDBOX_IMAGE, EmbeddedRuntime, parse_size, pids_with

CONMON = "/usr/bin/conmon"
RUNC = "/usr/bin/runc"
DRIVER = "overlay"

CRIO_CONF = """# written by devtools.crio
[crio]
root = "{root}"
runroot = "{runroot}"
storage_driver = "{driver}"
{imagestore_line}log_dir = "{pod_logs}"
version_file = "{workdir}/version"
version_file_persist = "{workdir}/version-persist"
clean_shutdown_file = "{workdir}/clean.shutdown"

[crio.api]
listen = "{socket}"

[crio.runtime]
default_runtime = "runc"
conmon = "{conmon}"
conmon_cgroup = "pod"
cgroup_manager = "cgroupfs"
apparmor_profile = "unconfined"
pinns_path = "{pinns}"
container_exits_dir = "{workdir}/exits"
container_attach_socket_dir = "{workdir}/attach"
namespaces_dir = "{workdir}/ns"

[crio.runtime.runtimes.runc]
runtime_path = "{runc}"
runtime_root = "{workdir}/runc"

[crio.image]
pause_image = "{sandbox_image}"
signature_policy = "{workdir}/policy.json"

[crio.network]
network_dir = "{workdir}/cni"
"""

STORAGE_CONF = """# written by devtools.crio
[storage]
driver = "{driver}"
graphroot = "{root}"
runroot = "{runroot}"
{imagestore_line}"""


class EmbeddedCrio(EmbeddedRuntime):
    """One cri-o process with its own storage on tmpfs, state, config files and socket."""

    kind = "cri-o"
    name = "crio"
    daemon = "cri-o"
    socket_name = "crio.sock"

    def __init__(self, workdir=None, imagefs_size="128M", sandbox_image=SANDBOX_IMAGE, socket=None, bin_dir=None, split=True, containerfs_size=None,
                 imagefs_inodes=None):
        super().__init__(workdir=workdir, imagefs_size=imagefs_size, sandbox_image=sandbox_image, socket=socket, imagefs_inodes=imagefs_inodes)
        self.bin_dir = bin_dir or crio_dir()
        if not self.bin_dir:
            raise RuntimeError("no cri-o binaries: set %s to a directory holding crio and pinns, or provide ../shared/runtimes" % CRIO_DIR_ENV)
        self.split = split
        self.containerfs_size = parse_size(containerfs_size) if containerfs_size else self.imagefs_size
        self.runroot = os.path.join(self.workdir, "runroot")
        self.imagestore = os.path.join(self.workdir, "imagestore") if split else None
        self.config_path = os.path.join(self.workdir, "crio.conf")
        self.dropin_dir = os.path.join(self.workdir, "crio.conf.d")
        self.storage_conf = os.path.join(self.workdir, "storage.conf")
        self._version = None

    def binary(self, name):
        return os.path.join(self.bin_dir, name)

    @property
    def version(self):
        if self._version is None:
            out = subprocess.run([self.binary("crio"), "--version"], capture_output=True, text=True, check=True)
            self._version = out.stdout.split()[2]
        return self._version

    @property
    def store(self):
        """Where images are stored: the imagestore when split, else the root."""
        return self.imagestore or self.root

    @property
    def imagefs_mountpoint(self):
        return os.path.join(self.store, DRIVER + "-images")

    @property
    def containerfs_mountpoint(self):
        return os.path.join(self.root, DRIVER + "-containers")

    @property
    def imagefs_mount(self):
        return self.store

    @property
    def imagefs_mounts(self):
        if self.split:
            return {self.imagestore: self.imagefs_size, self.root: self.containerfs_size}
        return {self.root: self.imagefs_size}

    def write_config(self):
        for d in ("exits", "attach", "ns", "runc", "cni", "registries.conf.d", self.runroot, self.dropin_dir):
            os.makedirs(os.path.join(self.workdir, d), exist_ok=True)
        fields = dict(
            root=self.root,
            runroot=self.runroot,
            driver=DRIVER,
            pod_logs=self.pod_logs,
            workdir=self.workdir,
            socket=self.socket,
            conmon=CONMON,
            runc=RUNC,
            pinns=self.binary("pinns"),
            sandbox_image=self.sandbox_image,
        )
        with open(self.config_path, "w", encoding="utf-8") as f:
            f.write(CRIO_CONF.format(imagestore_line='imagestore = "%s"\n' % self.imagestore if self.split else "", **fields))
        with open(self.storage_conf, "w", encoding="utf-8") as f:
            f.write(STORAGE_CONF.format(imagestore_line='imagestore = "%s"\n' % self.imagestore if self.split else "", **fields))
        with open(os.path.join(self.workdir, "policy.json"), "w", encoding="utf-8") as f:
            json.dump({"default": [{"type": "insecureAcceptAnything"}]}, f)

    def command(self):
        # cri-o's own flags for what crio.conf cannot say, plus the ones verified on these machines
        return [
            sys.executable, "-m", "devtools.reaper",
            self.binary("crio"),
            "--config", self.config_path,
            "--config-dir", self.dropin_dir,
            "--log-level", "info",
            "--hooks-dir", os.path.join(self.workdir, "hooks.d"),
            "--default-mounts-file", os.path.join(self.workdir, "mounts.conf"),
            "--cdi-spec-dirs", os.path.join(self.workdir, "cdi"),
            "--disable-hostport-mapping",
            # cri-o's (hidden) flags for containers-registries.conf(5) and its drop-in directory: every upstream host
            # mirrored by the harness's registry (devtools.registry), nothing of the host's /etc/containers
            "--registries-conf", self.registry.registries_conf(os.path.join(self.workdir, "registries.conf")),
            "--registries-conf-dir", os.path.join(self.workdir, "registries.conf.d"),
        ]  # fmt: skip

    def daemon_env(self):
        repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = dict(os.environ, CONTAINERS_STORAGE_CONF=self.storage_conf)
        env["PYTHONPATH"] = repo + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        return env

    def write_empty_files(self):
        open(os.path.join(self.workdir, "mounts.conf"), "a", encoding="utf-8").close()
        os.makedirs(os.path.join(self.workdir, "hooks.d"), exist_ok=True)

    def prepare(self):
        super().prepare()
        self.write_empty_files()

    def daemon_pid(self):
        # crio runs as the only child of devtools.reaper (self.pid)
        try:
            with open("/proc/%d/task/%d/children" % (self.pid, self.pid), encoding="utf-8") as f:
                children = [int(c) for c in f.read().split()]
        except (OSError, TypeError):
            return None
        return next((c for c in children if _comm(c) == "crio"), None)

    def leftover_pids(self):
        # conmon processes outlive cri-o; each names our exits dir
        return [pid for pid in pids_with(os.path.join(self.workdir, "exits")) if _comm(pid) == "conmon"]

    def saved_state(self):
        return dict(super().saved_state(), bin_dir=self.bin_dir, split=self.split, containerfs_size=self.containerfs_size)

    def restore_state(self, saved):
        super().restore_state(saved)
        self.bin_dir = saved.get("bin_dir") or self.bin_dir
        self.split = saved.get("split", True)
        self.containerfs_size = saved.get("containerfs_size", self.imagefs_size)
        self.imagestore = os.path.join(self.workdir, "imagestore") if self.split else None

    # -- the runtime's own view ------------------------------------------------

    def crictl(self, *args):
        """Run the crictl next to crio (a CRI client that is not ours); return stdout."""
        cmd = [self.binary("crictl"), "--runtime-endpoint", self.endpoint, "--image-endpoint", self.endpoint] + list(args)
        out = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if out.returncode != 0:
            raise RuntimeError("%s failed (%d): %s" % (" ".join(cmd), out.returncode, out.stderr.strip()))
        return out.stdout

    def image_refs(self):
        images = json.loads(self.crictl("images", "-o", "json"))["images"]
        return {"ids": {img["id"] for img in images}, "tags": {t for img in images for t in img.get("repoTags") or []},
                "digests": {d for img in images for d in img.get("repoDigests") or []}}

    def container_ids(self):
        containers = json.loads(self.crictl("ps", "-a", "-o", "json"))["containers"]
        pods = json.loads(self.crictl("pods", "-o", "json"))["items"]
        return {c["id"] for c in containers} | {p["id"] for p in pods}

    # -- images ------------------------------------------------------------

    def image_id(self, config_digest):
        # containers/storage names an image by the hex of its config digest, without "sha256:"
        return config_digest.split(":", 1)[-1]

    def namespace_options(self):
        return {"network": "NODE", "pid": "CONTAINER"}

    def container_image(self, image):
        # cri-o resolves short names only through registries.conf search registries (none here):
        # a container names its image fully qualified, as pod specs for cri-o nodes do; and it
        # wants the name the user gave (for signature policies) as the kubelet sends it
        return {"image": _qualified(image), "user_specified_image": _qualified(image)}

    def pull_ref(self, tag):
        return _qualified(tag)

    def volume_image(self, image):
        # cri-o verifies the signature policy of a mounted image against the name the user gave
        return {"image": self.image_id_of(_qualified(image)), "user_specified_image": _qualified(image)}

    def load_archive(self, path, specs):
        dest = "containers-storage:[%s@%s+%s]" % (DRIVER, self.store, self.runroot)

        def copy(spec):
            for tag in spec.tags:  # the first copy stores the image, the next ones add names to it
                cmd = ["skopeo", "copy", "--quiet", "docker-archive:%s:%s" % (path, tag), dest + _qualified(tag)]
                out = subprocess.run(cmd, capture_output=True, text=True, check=False)
                if out.returncode != 0:
                    raise RuntimeError("%s failed (%d): %s" % (" ".join(cmd), out.returncode, out.stderr.strip()))

        with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
            list(pool.map(copy, specs))


def _qualified(tag):
    from ansible_collections.kubenode.gc.plugins.module_utils.cri._image_ref import normalize_image_ref  # pylint: disable=import-outside-toplevel

    return normalize_image_ref(tag)


def _comm(pid):
    try:
        with open("/proc/%d/comm" % pid, encoding="utf-8") as f:
            return f.read().strip()
    except OSError:
        return None
