# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The node's cache (plugins/module_utils/_cache.py) as the benchmarks set it: ``--cache warm`` (the default) or ``cold``.

* ``warm``: what a node has from its second run on. The modules keep their compiled code and containerd's committed
  snapshots' sizes in a directory of the benchmark's own (root's, 0700), as they do in /var/cache/kubenode-gc on a
  node. The benchmark makes one run of each command before it measures.
* ``cold``: no cache (KUBENODE_GC_CACHE_DIR=off): every run compiles and asks as the first run on a node does (less
  the first run's writing of the cache files).

Either way PYTHONDONTWRITEBYTECODE, which some machines set, is dropped for the commands: a node's Ansible runs modules
without it, and a controller keeps its own plugins' ``__pycache__``; so warm and cold differ by the node cache alone.
The setting goes into this process's environment, which every command the benchmark starts inherits.
"""

import os

CHOICES = ("warm", "cold")


def add_argument(parser):
    parser.add_argument("--cache", choices=CHOICES, default="warm",
                        help="the node's cache: warm (kept from an earlier run, the default) or cold (none)")


def apply(mode, workdir):
    """Set this process's environment for ``mode``; returns the line the benchmark prints about it."""
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    if mode == "cold":
        os.environ["KUBENODE_GC_CACHE_DIR"] = "off"
        return "node cache: cold (KUBENODE_GC_CACHE_DIR=off: every run compiles the collection and asks every size)"
    os.environ["KUBENODE_GC_CACHE_DIR"] = os.path.join(workdir, "node-cache")
    return "node cache: warm (kept from a first, unmeasured run of each command, as a node has it from its second run on)"
