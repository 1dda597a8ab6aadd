# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The runtimes of the matrix by name, and re-attaching to one the CLI left running.

=================  ========  ====================================================================
name               test id   what
=================  ========  ====================================================================
containerd-1.6     ctrd16    Debian 12's containerd package (on PATH)
containerd-1.7     ctrd17    Debian trixie's containerd package (1.7.24), see devtools.fetch
containerd-2.1     ctrd21    Debian sid's containerd package (2.1.9), see devtools.fetch
containerd-2.2     ctrd22    containerd 2.2.7 from ../shared/runtimes/containerd-2.2 ($KUBENODE_GC_SHARED_RUNTIMES)
containerd-2.3     ctrd23    containerd 2.3.4 from ../shared/runtimes/containerd-2.3
crio               crio      cri-o 1.37 from $KUBENODE_GC_CRIO_DIR or ../shared/runtimes
cri-dockerd        dockerd   Debian 12's dockerd (docker.io 20.10) behind cri-dockerd 0.4.3 from ../shared/runtimes
=================  ========  ====================================================================
"""

import json
import os

from .containerd import EmbeddedContainerd
from .crio import EmbeddedCrio
from .dockerd import EmbeddedCriDockerd
from .fetch import CONTAINERD_PREBUILT, CRIO_DIR_ENV, containerd_bin_dir, cri_dockerd_binary, crio_dir  # noqa: F401  pylint: disable=unused-import  # re-exported

DEFAULT = "containerd-1.6"
NAMES = ("containerd-1.6", "containerd-1.7", "containerd-2.1", "containerd-2.2", "containerd-2.3", "crio", "cri-dockerd")
TEST_IDS = {"containerd-1.6": "ctrd16", "containerd-1.7": "ctrd17", "containerd-2.1": "ctrd21", "containerd-2.2": "ctrd22",
            "containerd-2.3": "ctrd23", "crio": "crio", "cri-dockerd": "dockerd"}
CONTAINERD = tuple(n for n in NAMES if n.startswith("containerd-"))


def available(name):
    """True when the runtime can be started here (cri-o and the prebuilt containerd lines need their binaries; Debian's
    containerd builds are fetched)."""
    if name == "crio":
        return crio_dir() is not None
    if name == "cri-dockerd":
        return cri_dockerd_binary() is not None
    if name.startswith("containerd-") and name[len("containerd-"):] in CONTAINERD_PREBUILT:
        return containerd_bin_dir(name[len("containerd-"):]) is not None
    return name in NAMES


def make(name, **kwargs):
    """An unstarted runtime of that name; kwargs go to its constructor (workdir, imagefs_size, ...)."""
    if name == "crio":
        return EmbeddedCrio(**kwargs)
    if name == "cri-dockerd":
        return EmbeddedCriDockerd(**kwargs)
    if name.startswith("containerd-") and name in NAMES:
        line = name[len("containerd-"):]
        return EmbeddedContainerd(bin_dir=containerd_bin_dir(line), line=line, name=name, **kwargs)
    raise ValueError("unknown runtime %r: choose one of %s" % (name, ", ".join(NAMES)))


def attach(workdir):
    """Re-open a runtime that ``start()`` + ``save()`` left running in ``workdir`` (for the CLI)."""
    with open(os.path.join(workdir, "harness.json"), encoding="utf-8") as f:
        saved = json.load(f)
    name = saved.get("runtime", DEFAULT)
    if name == "crio":
        rt = EmbeddedCrio(workdir=workdir, bin_dir=saved.get("bin_dir"))
    elif name == "cri-dockerd":
        rt = EmbeddedCriDockerd(workdir=workdir, binary=saved.get("binary"))
    else:
        rt = EmbeddedContainerd(workdir=workdir, bin_dir=saved.get("bin_dir"), line=saved.get("line", "1.6"), name=name)
    rt.restore_state(saved)
    with open(rt.pid_path, encoding="utf-8") as f:
        rt.pid = int(f.read())
    return rt
