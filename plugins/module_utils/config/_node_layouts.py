# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""What node distributions do to the kubelet's and the runtime's files, for both config modules: which files something
else writes again (so an edit is lost), and where the command lines of daemons that do not run are written down.

``regenerated(path, text)`` gives the clause naming why ``path`` is written again and what to change instead, or None:

* Bottlerocket (``ID=bottlerocket`` in /etc/os-release) renders every file from its settings API onto a tmpfs;
* GKE's ``configure.sh`` writes /home/kubernetes/kubelet-config.yaml and containerd's config at every boot;
* k0s writes the kubelet's configuration (``<data dir>/kubelet-config.yaml``) and /etc/k0s/containerd.toml
  (``# k0s_managed=true``) at every start;
* MicroK8s generates ``args/containerd.toml`` from ``args/containerd-template.toml`` at every start;
* a file under /run is on a tmpfs, written by whatever started the daemon.
"""

from __future__ import annotations

import os
import re

from ansible_collections.kubenode.gc.plugins.module_utils._errors import KubenodeGcError

OS_RELEASE = "/etc/os-release"
# GKE's node start-up scripts: their presence says containerd's config is GKE's
GKE_SCRIPTS = ("/home/kubernetes/bin/configure.sh", "/home/kubernetes/bin/configure-helper.sh")
GKE_KUBELET_CONFIG = "/home/kubernetes/kubelet-config.yaml"
MICROK8S_TEMPLATE = "containerd-template.toml"
K0S_MANAGED = re.compile(r"^#\s*k0s_managed\s*=\s*true\b", re.M)
K0S_KUBELET_CONFIG = re.compile(r"/k0s/kubelet-config\.yaml$")
RUN_DIRS = ("/run/", "/var/run/")


def template_of(path, exists=os.path.exists):
    """The template a file is generated from at every start (MicroK8s's containerd-template.toml for its containerd.toml), or None."""
    template = os.path.join(os.path.dirname(path or ""), MICROK8S_TEMPLATE)
    return template if os.path.basename(path or "") == "containerd.toml" and exists(template) else None


def os_id(read_text):
    """The ID of /etc/os-release (``bottlerocket``, ``flatcar``, ``debian``...), or None."""
    try:
        text = read_text(OS_RELEASE) or ""
    except (OSError, ValueError, KubenodeGcError):
        return None
    match = re.search(r"^ID=\"?([^\"\n]*)\"?$", text, re.M)
    return match.group(1).strip().lower() if match else None


def regenerated(path, text, os_name=None, exists=os.path.exists):
    """Why ``path`` (holding ``text``) is written again by something else and what to change instead (one clause), or None."""
    if not path:
        return None
    if os_name == "bottlerocket":
        return ("Bottlerocket renders it from its settings API onto a tmpfs at every boot (and has no SSH and no Python for this "
                "module); change the setting through its API instead, with apiclient set (settings.kubernetes.* for the kubelet, "
                "such as settings.kubernetes.image-gc-high-threshold-percent, settings.container-runtime.* for containerd)")
    if path.endswith(GKE_KUBELET_CONFIG):
        return ("GKE's configure.sh writes it at every boot from the node's metadata; change the node pool's kubelet configuration "
                "instead (gcloud container node-pools update --system-config-from-file)")
    if path.endswith("/containerd/config.toml") and any(exists(script) for script in GKE_SCRIPTS):
        return "GKE's configure.sh writes it at every boot; change the node pool's containerd configuration instead"
    if K0S_KUBELET_CONFIG.search(path):
        return "k0s writes it at every start from its worker profile; change workerProfiles in k0s's configuration (/etc/k0s/k0s.yaml) instead"
    if K0S_MANAGED.search(text or ""):
        return "k0s writes it at every start (k0s_managed=true); put the settings in a file of /etc/k0s/containerd.d/ instead, which k0s imports"
    template = template_of(path, exists)
    if template:
        return "MicroK8s generates it from %s at every start; edit %s instead" % (template, template)
    real = os.path.realpath(path)
    if real.startswith(RUN_DIRS):
        return "it is on /run, a tmpfs emptied at every boot, so whatever starts the daemon writes it there again"
    return None


def microk8s_variables(args_path):
    """The snap's variables MicroK8s expands in the arguments file ``args_path`` (<SNAP_DATA>/args/<daemon>)."""
    data = os.path.dirname(os.path.dirname(args_path))
    return dict(SNAP="/snap/microk8s/current", SNAP_DATA=data, SNAP_COMMON=os.path.join(os.path.dirname(data), "common"))


def is_microk8s_args(path):
    return "/microk8s/" in path and os.path.basename(os.path.dirname(path)) == "args"


# MicroK8s starts containerd with the flags of this file (its snap's variables expanded)
MICROK8S_CONTAINERD_ARGS = "/var/snap/microk8s/current/args/containerd"
