# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment:
    # The options every CRI module shares (plugins/module_utils/_common.py CRI_COMMON_ARGS).
    DOCUMENTATION = r"""
options:
  cri_endpoint:
    description:
      - The CRI endpoint of the container runtime, a unix socket such as V(unix:///run/containerd/containerd.sock).
        A bare absolute path is accepted too.
      - If not set, the environment variable E(CONTAINER_RUNTIME_ENDPOINT) is used.
      - If that is not set either, C(runtime-endpoint) from C(/etc/crictl.yaml) is used, and then the first of
        V(unix:///run/containerd/containerd.sock), V(unix:///run/crio/crio.sock),
        V(unix:///run/k3s/containerd/containerd.sock) and V(unix:///var/run/cri-dockerd.sock) that accepts connections.
      - Behind cri-dockerd (Docker Engine nodes) the modules are tested as on the other runtimes; see the collection's
        compatibility table.
    type: str
  cri_timeout:
    description:
      - Seconds each CRI call may take before the module fails naming the call.
    type: float
    default: 30
requirements:
  - grpcio >= 1.51 and protobuf >= 4.21 (python3-grpcio and python3-protobuf on Debian 12) on the managed node.
notes:
  - "The modules talk to the runtime's CRI socket, so they usually need C(become: true) or root."
  - Every call the module makes is counted per CRI method and returned as RV(rpc_calls), so the cost of a run can be checked.
"""

    ATTRIBUTES_READ_ONLY = r"""
attributes:
  check_mode:
    description: Can run in check mode and return changed status prediction without modifying the target.
    support: full
    details:
      - The module changes nothing, so check mode runs it in full.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check mode), when in diff mode.
    support: N/A
    details:
      - The module changes nothing.
  idempotent:
    description: When run twice in a row outside check mode, with the same arguments, the second run indicates no change.
    support: full
"""

    ACTIONGROUP_CRI = r"""
attributes:
  action_group:
    description: Use C(group/kubenode.gc.cri) in C(module_defaults) to set the CRI options once for every module.
    support: full
    membership:
      - kubenode.gc.cri
"""
