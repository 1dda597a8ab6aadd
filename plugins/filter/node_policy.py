# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""The decisions the fleet playbooks and roles take per node, in code: the playbooks only orchestrate.

The documentation of each filter is in the YAML file named after it next to this file. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.kubenode.gc.plugins.module_utils._errors import KubenodeGcError
from ansible_collections.kubenode.gc.plugins.module_utils.config._findings import at_or_above
from ansible_collections.kubenode.gc.plugins.module_utils.config._runtime_config_policy import detect_runtime
from ansible_collections.kubenode.gc.plugins.module_utils.cri._image_pin_policy import runtime_kind as _pin_kind
from ansible_collections.kubenode.gc.plugins.module_utils.cri._snapshot import image_filesystem as _image_filesystem
from ansible_collections.kubenode.gc.plugins.module_utils.gc import _gc_policy, _image_gc
from ansible_collections.kubenode.gc.plugins.module_utils.node._cleanup_policy import pressure_reasons


def image_gc_policy(kubelet=None, overrides=None, errors="fail", variables=None):
    """image_gc's thresholds and ages for a node and where each came from (kubenode.gc's _gc_policy, the one source):
    the variables the user set (``overrides``: cleanup variable name -> value, unset ones null), else the node's
    effective kubelet configuration (a kubenode.gc.kubelet_config result; a failed or missing one counts as unreadable),
    else the kubelet's defaults. ``errors='return'`` returns ``{'error': sentence}`` instead of failing the task."""
    if kubelet is not None and not isinstance(kubelet, Mapping):
        raise AnsibleFilterError("image_gc_policy expects a kubenode.gc.kubelet_config result, got %s." % type(kubelet).__name__)
    if overrides is not None and not isinstance(overrides, Mapping):
        raise AnsibleFilterError("image_gc_policy: overrides must be a mapping of variable names to values, got %s." % type(overrides).__name__)
    try:
        policy = _gc_policy.image_gc_policy(kubelet, overrides, variables)
    except KubenodeGcError as exc:
        if errors == "return":
            return {"error": str(exc)}
        raise AnsibleFilterError(str(exc)) from None
    policy["described"] = _gc_policy.describe_sources(policy)
    return policy


def runtime_kind(value=None, existing=None, default=None):
    """containerd or crio for a node: from what its runtime reports (a cri_info result or a runtime name),
    else from the config files that exist there (``existing``); ``default`` when neither says."""
    name = value
    if isinstance(value, Mapping):
        runtime = value.get("runtime")
        name = runtime.get("name") if isinstance(runtime, Mapping) else None
    if name is not None and not isinstance(name, str):
        raise AnsibleFilterError("runtime_kind expects a cri_info result or a runtime name, got %s." % type(value).__name__)
    present = set(existing or [])
    return detect_runtime(None, (), present.__contains__, runtime_name=name, strict=False) or default


def can_pin(value):
    """Whether the runtime a cri_info result (or a runtime dict with name and version) reports can pin images, as
    kubenode.gc.image_pin decides it: containerd 1.7.3 and later, cri-o."""
    runtime = value.get("runtime", value) if isinstance(value, Mapping) else None
    if not isinstance(runtime, Mapping):
        raise AnsibleFilterError("can_pin expects a cri_info result gathered with runtime, or its runtime dict.")
    return _pin_kind(runtime.get("name"), runtime.get("version"))[0] is not None


def image_filesystem(value):
    """The image filesystem of a cri_info result (or of its imagefs list): the one the runtime reports as such, else the first."""
    filesystems = value.get("imagefs") if isinstance(value, Mapping) else value
    if not isinstance(filesystems, list):
        raise AnsibleFilterError("image_filesystem expects a cri_info result gathered with imagefs, or its imagefs list.")
    filesystems = [fs for fs in filesystems if isinstance(fs, Mapping)]
    chosen = _image_filesystem(filesystems) or (filesystems[0] if filesystems else None)
    if chosen is None:
        raise AnsibleFilterError("image_filesystem: the runtime reports no image filesystem.")
    return dict(chosen)


def _percent(value, name):
    if value is None or value == "":
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        raise AnsibleFilterError("imagefs_pressure: %s must be an integer percent, got %r." % (name, value)) from None


def imagefs_pressure(value, high, inodes_high=None, free_bytes_high=None):
    """Why a node's image filesystem needs image GC: one sentence per measure at or above its high threshold (bytes: the
    kubelet's usage percent against ``high``; available bytes strictly below ``free_bytes_high``, when set; inodes: the
    same formula over inodes against ``inodes_high``, when set). An empty list when none is reached."""
    fs = image_filesystem(value)
    high, inodes_high = _percent(high, "high"), _percent(inodes_high, "inodes_high")
    free_high = None
    if free_bytes_high not in (None, ""):
        try:
            free_high = _image_gc.byte_amount("free_bytes_high", free_bytes_high)
        except KubenodeGcError as exc:
            raise AnsibleFilterError("imagefs_pressure: %s" % exc) from None
    return pressure_reasons(fs, high, inodes_high, free_high)


def findings_at_or_above(findings, fail_on="error"):
    """The findings whose severity fails under ``fail_on`` (error, warning or never), in their order."""
    if findings is None:
        return []
    if not isinstance(findings, list):
        raise AnsibleFilterError("findings_at_or_above expects a list of findings, got %s." % type(findings).__name__)
    try:
        return at_or_above(findings, fail_on)
    except KubenodeGcError as exc:
        raise AnsibleFilterError("findings_at_or_above: %s" % exc) from None


class FilterModule:
    """kubenode.gc per-node decisions."""

    def filters(self):
        return {
            "image_gc_policy": image_gc_policy,
            "runtime_kind": runtime_kind,
            "can_pin": can_pin,
            "image_filesystem": image_filesystem,
            "imagefs_pressure": imagefs_pressure,
            "findings_at_or_above": findings_at_or_above,
        }
