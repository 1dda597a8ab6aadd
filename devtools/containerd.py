# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Start, fill and tear down a real containerd (1.6 from Debian 12, 1.7 from trixie, 2.x from sid) with its own everything.

The runtime's root sits on a size-limited tmpfs, so its image filesystem is
real and small and GC thresholds can be reached for real.  State dir, sockets
and pod logs live in a work directory; nothing outside it is touched, and
``stop()`` kills what it started (containerd by its own pid, then the shims
that served it) and unmounts everything below the work directory.

containerd 1.x gets a config of version 2, containerd 2.x one of version 3
(the CRI plugin split into ``io.containerd.cri.v1.images`` / ``.runtime``, the
sandbox image under ``pinned_images``).  Builds other than Debian 12's own come
from ``devtools.fetch`` (a cache of Debian packages, keyed by version).
"""

import os
import subprocess

from .runtime import SANDBOX_IMAGE, EmbeddedRuntime, parse_size, pids_with  # noqa: F401  pylint: disable=unused-import  # re-exported

SNAPSHOTTER = "overlayfs"

DISABLED_PLUGINS = """disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.internal.v1.tracing",
]
"""

COMMON = """root = "{root}"
state = "{state}"
""" + DISABLED_PLUGINS + """
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
"""

CONFIG = "version = 2\n" + COMMON + """
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{sandbox_image}"
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "{snapshotter}"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "{hosts_dir}"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{workdir}/cni/bin"
    conf_dir = "{workdir}/cni/conf.d"
"""

CONFIG_V3 = "version = 3\n" + COMMON + """
[plugins."io.containerd.cri.v1.images"]
  snapshotter = "{snapshotter}"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "{sandbox_image}"
  [plugins."io.containerd.cri.v1.images".registry]
    config_path = "{hosts_dir}"

[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["{workdir}/cni/bin"]
    conf_dir = "{workdir}/cni/conf.d"

# NRI is on by default from 2.0, and its socket (/var/run/nri/nri.sock) is one for the machine: two instances
# starting at once (two test workers) fought over it ("failed to create socket ... address already in use")
[plugins."io.containerd.nri.v1.nri"]
  socket_path = "{workdir}/nri.sock"
"""


class EmbeddedContainerd(EmbeddedRuntime):
    """One containerd process with its own root (tmpfs of ``imagefs_size``), state and socket.

    ``bin_dir`` holds containerd, ctr and the runc shim of the wanted build (None: Debian 12's,
    from PATH); ``line`` is its release line ("1.6", "1.7", "2.1", ...), which picks the config version."""

    kind = "containerd"
    daemon = "containerd"
    socket_name = "containerd.sock"

    def __init__(self, workdir=None, imagefs_size="128M", sandbox_image=SANDBOX_IMAGE, socket=None, bin_dir=None, line="1.6", name=None,
                 imagefs_inodes=None, config_name="config.toml", root_state_flags=False):
        super().__init__(workdir=workdir, imagefs_size=imagefs_size, sandbox_image=sandbox_image, socket=socket, imagefs_inodes=imagefs_inodes)
        self.bin_dir = bin_dir
        self.line = line
        self.name = name or "containerd-%s" % line
        # config_name: the config file's name in the work directory (containerd reads it through --config);
        # root_state_flags: root and state given as --root/--state, the file naming other (unused) directories
        self.config_path = os.path.join(self.workdir, config_name)
        self.root_state_flags = root_state_flags
        self._version = None

    @property
    def major(self):
        return int(self.line.split(".")[0])

    def binary(self, name):
        return os.path.join(self.bin_dir, name) if self.bin_dir else name

    @property
    def version(self):
        if self._version is None:
            out = subprocess.run([self.binary("containerd"), "--version"], capture_output=True, text=True, check=True)
            self._version = out.stdout.split()[2]
        return self._version

    @property
    def imagefs_mountpoint(self):
        return os.path.join(self.root, "io.containerd.snapshotter.v1." + SNAPSHOTTER)

    def write_config(self):
        os.makedirs(os.path.join(self.workdir, "opt"), exist_ok=True)
        template = CONFIG_V3 if self.major >= 2 else CONFIG
        with open(self.config_path, "w", encoding="utf-8") as f:
            f.write(
                template.format(
                    root=os.path.join(self.workdir, "unused-root") if self.root_state_flags else self.root,
                    state=os.path.join(self.workdir, "unused-state") if self.root_state_flags else self.state,
                    socket=self.socket,
                    workdir=self.workdir,
                    sandbox_image=self.sandbox_image,
                    snapshotter=SNAPSHOTTER,
                    hosts_dir=self.hosts_dir(),
                )
            )

    def hosts_dir(self):
        """containerd's registry hosts directory (``config_path``): every upstream host mirrored by the harness's
        registry (``devtools.registry``)."""
        return self.registry.containerd_hosts_dir(os.path.join(self.workdir, "certs.d"))

    def command(self):
        flags = ["--root", self.root, "--state", self.state] if self.root_state_flags else []
        return [self.binary("containerd"), "--config", self.config_path] + flags

    def daemon_env(self):
        if not self.bin_dir:
            return None
        # containerd finds its shim (containerd-shim-runc-v2) on PATH: its own build's first
        return dict(os.environ, PATH=self.bin_dir + os.pathsep + os.environ.get("PATH", ""))

    def leftover_pids(self):
        # shims outlive containerd; they are started with "-address <our socket>"
        return pids_with("-address " + self.socket + " ")

    def saved_state(self):
        return dict(super().saved_state(), bin_dir=self.bin_dir, line=self.line)

    def restore_state(self, saved):
        super().restore_state(saved)
        self.bin_dir = saved.get("bin_dir")
        self.line = saved.get("line", "1.6")

    def config_dump(self):
        """``containerd config dump`` of this containerd's config (the merged config it runs with)."""
        out = subprocess.run([self.binary("containerd"), "--config", self.config_path, "config", "dump"], capture_output=True, text=True, check=False)
        if out.returncode != 0:
            raise RuntimeError("containerd config dump failed (%d): %s" % (out.returncode, out.stderr.strip()))
        return out.stdout

    # -- clients -----------------------------------------------------------

    def ctr(self, *args, check=True):
        """Run ``ctr`` against this containerd in the k8s.io namespace; return stdout."""
        cmd = [self.binary("ctr"), "--address", self.socket, "--namespace", "k8s.io"] + list(args)
        out = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if check and out.returncode != 0:
            raise RuntimeError("%s failed (%d): %s" % (" ".join(cmd), out.returncode, out.stderr.strip()))
        return out.stdout

    def image_refs(self):
        # ctr lists every image name: the tags, the "sha256:<id>" name the CRI plugin adds and, for a pulled image, the
        # repo digest ("name@sha256:<manifest>") the pull recorded
        refs = set(self.ctr("images", "ls", "-q").split())
        return {"ids": {r for r in refs if r.startswith("sha256:")}, "digests": {r for r in refs if "@" in r},
                "tags": {r for r in refs if not r.startswith("sha256:") and "@" not in r}}

    def container_ids(self):
        return set(self.ctr("containers", "ls", "-q").split())

    # -- images ------------------------------------------------------------

    def load_archive(self, path, specs):
        self.ctr("images", "import", "--snapshotter", SNAPSHOTTER, path)
