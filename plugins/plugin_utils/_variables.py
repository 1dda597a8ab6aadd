# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""Every variable the playbooks and roles read, declared once: type, default, range, choices, relations; and the check
the playbooks run on the controller, for every host, before any node is touched (kubenode.gc.variable_error).

The roles' meta/argument_specs.yml must agree with this declaration (tests/unit/plugins/plugin_utils/test__variables.py),
and docs/docsite/rst/variables.rst is generated from it (scripts/gen_variables_doc.py). The role variables' descriptions
live in the roles' argument_specs (the role docs); the playbook variables' descriptions live here.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping

from ansible_collections.kubenode.gc.plugins.module_utils._durations import DurationError, format_duration, parse_duration
from ansible_collections.kubenode.gc.plugins.module_utils._errors import OptionError
from ansible_collections.kubenode.gc.plugins.module_utils._quantity import byte_amount, parse_quantity

PREFIXES = ("kubenode_gc_", "kubelet_gc_", "containerd_storage_", "crio_storage_", "node_prereqs_", "gc_timer_")
UNSET = object()
EXTRA = "*"  # Variable.setting of a map of further settings, enforced as given
PLAYBOOKS = ("audit", "cleanup", "configure")


class Variable:
    """One variable: ``kind`` is str, int, float, bool, list, dict, raw, percent (an int 0..100), duration (a Go duration
    the kubelet accepts) or bytes (a number of bytes or a quantity such as 50Gi, as image_gc's byte targets); ``default``
    UNSET when there is none (the variable is then unset unless the user sets it); ``setting`` the key of the runtime's or
    the kubelet's configuration a role variable sets (EXTRA: a map of further keys), which the role enforces and the audit
    measures drift against (role_settings)."""

    def __init__(self, name, kind, used_by, description=None, default=UNSET, choices=None, minimum=None, maximum=None,
                 elements=None, quantity=False, setting=None):
        self.name, self.kind, self.used_by, self.description = name, kind, tuple(used_by), description
        self.default, self.choices, self.minimum, self.maximum = default, choices, minimum, maximum
        self.elements, self.quantity, self.setting = elements, quantity, setting

    @property
    def role(self):
        """The role whose argument_specs declare it too, or None for a playbook variable."""
        for prefix in ("kubelet_gc", "containerd_storage", "crio_storage", "node_prereqs", "gc_timer"):
            if self.name.startswith(prefix + "_"):
                return prefix
        return None

    @property
    def spec_type(self):
        """The argument_specs type."""
        return {"percent": "int", "duration": "str", "bytes": "raw"}.get(self.kind, self.kind)


_ALL = PLAYBOOKS
_AC = ("audit", "cleanup")
_CLEANUP = ("cleanup",)
_AUDIT = ("audit",)
_CONFIGURE = ("configure",)
_KUBELET = ("kubelet_gc role", "configure", "audit")
_CONTAINERD = ("containerd_storage role", "configure", "audit")
_CRIO = ("crio_storage role", "configure", "audit")
_PREREQS = ("node_prereqs role", "configure")
_TIMER = ("gc_timer role",)

DECLARATION = (
    # the playbooks (descriptions here)
    Variable("kubenode_gc_hosts", "str", _ALL, "The host pattern the playbook runs on. A play keyword: pass it with C(-e); set in "
             "the inventory or C(group_vars), the variable check refuses it.", default="all"),
    Variable("kubenode_gc_cri_endpoint", "str", _AC, "The runtime's CRI socket, such as V(unix:///run/containerd/containerd.sock). "
             "Unset, each node's is detected."),
    Variable("kubenode_gc_keep_images", "list", _AC, "Images never to remove (and that the audit's plans never count), as "
             "references or shell patterns such as V(registry.k8s.io/*).", default=[], elements="str"),
    Variable("kubenode_gc_remove_images", "list", _AC, "Images to remove from every node of the play, whatever its usage "
             "(image_gc V(mode=listed), after container GC), written like C(kubenode_gc_keep_images): references with or without a "
             "tag or registry, digests, V(sha256:) ids, globs. An image a container still uses, the sandbox image, pinned and "
             "keep-listed images stay. The audit reports where each one is present and which pods use it (finding "
             "C(listed_image_present)).", default=[], elements="str"),
    Variable("kubenode_gc_ledger_path", "str", _AC, "image_gc's ledger of first sightings and last uses on each node.",
             default="/var/lib/kubenode-gc/image-ledger.json"),
    Variable("kubenode_gc_inodes_high_threshold_percent", "percent", _AC, "image_gc's inode pass: free image filesystem inodes down "
             "to the low mark once inode usage reaches this one (set both or neither; unset, bytes only: the kubelet has no inode GC)."),
    Variable("kubenode_gc_inodes_low_threshold_percent", "percent", _AC, "The inode usage the inode pass frees down to; below the high one."),
    Variable("kubenode_gc_free_bytes_high", "bytes", _AC, "image_gc's byte target: GC starts when fewer bytes than this are "
             "available on the image filesystem (a number of bytes or a quantity such as V(50Gi), in ASCII, at most 2^63-1 bytes; "
             "set both or neither; with the "
             "percent thresholds the stricter wins). The kubelet takes percentages only."),
    Variable("kubenode_gc_free_bytes_low", "bytes", _AC, "The available bytes the byte target frees up to; at least "
             "C(kubenode_gc_free_bytes_high)."),
    Variable("kubenode_gc_container_min_age", "duration", _AC, "Dead containers younger than this are kept.", default="1m"),
    Variable("kubenode_gc_container_max_per_pod_container", "int", _AC, "Dead containers kept per pod and container name "
             "(negative: no limit).", default=1, minimum=-1),
    Variable("kubenode_gc_container_max_containers", "int", _AC, "Dead containers kept on the node (negative: no limit).",
             default=-1, minimum=-1),
    Variable("kubenode_gc_active_pod_uids", "list", _AC, "The UIDs of the pods the API server knows; unset, no pod counts as deleted.",
             elements="str"),
    Variable("kubenode_gc_pod_logs_dir", "str", _AC, "The kubelet's pod log directory (default: the node's, V(/var/log/pods))."),
    Variable("kubenode_gc_container_logs_dir", "str", _AC, "The kubelet's container log symlink directory (default V(/var/log/containers))."),
    Variable("kubenode_gc_cleanup_serial", "raw", _CLEANUP, "Nodes per wave: a number or a percentage such as V(25%). A play "
             "keyword: pass it with C(-e); set in the inventory or C(group_vars), the variable check refuses it.", default="25%"),
    Variable("kubenode_gc_cleanup_max_fail_percentage", "percent", _CLEANUP, "Stop the waves when more of a wave fails.", default=10),
    Variable("kubenode_gc_cleanup_only_over_threshold", "bool", _CLEANUP, "Skip nodes below their high threshold (and below the inode "
             "high threshold, when set) unless the image mode is V(prune).", default=True),
    Variable("kubenode_gc_cleanup_image_mode", "str", _CLEANUP, "V(threshold) frees down to the low threshold, as the kubelet; "
             "V(prune) removes every unused image old enough.", default="threshold", choices=["threshold", "prune"]),
    Variable("kubenode_gc_cleanup_high_threshold_percent", "percent", _AC, "The image GC high threshold. Unset, each node's own "
             "(C(imageGCHighThresholdPercent) of its kubelet configuration, file and flags), else the kubelet's 85."),
    Variable("kubenode_gc_cleanup_low_threshold_percent", "percent", _AC, "The image GC low threshold, below the high one. Unset, each "
             "node's own (C(imageGCLowThresholdPercent)), else the kubelet's 80."),
    Variable("kubenode_gc_cleanup_image_min_age", "duration", _AC, "The minimum image age, counted from image_gc's first sighting (its "
             "ledger). Unset, each node's C(imageMinimumGCAge), else V(2m). V(0s) frees space at once on a node image_gc never saw."),
    Variable("kubenode_gc_cleanup_image_max_age", "duration", _AC, "Remove images unused for longer (V(0s): off); above the minimum age. "
             "Unset, each node's C(imageMaximumGCAge), else V(0s)."),
    Variable("kubenode_gc_cleanup_pin", "bool", _CLEANUP, "Before removing anything, pin the keep-listed images in the runtime so that "
             "the kubelet's own image GC keeps them too (a runtime that cannot pin only warns).", default=False),
    Variable("kubenode_gc_cleanup_containers", "bool", _CLEANUP, "Run container GC before image GC.", default=True),
    Variable("kubenode_gc_cleanup_storage", "bool", _CLEANUP, "After image GC, free the storage the CRI cannot see "
             "(kubenode.gc.storage_gc: on containerd stale ingests, old leases, images of C(kubenode_gc_cleanup_storage_namespaces), "
             "unreferenced snapshots; on Docker Engine build cache and unused anonymous volumes, as the next two variables ask).",
             default=False),
    Variable("kubenode_gc_cleanup_storage_namespaces", "list", _CLEANUP, "The containerd namespaces whose images storage_gc deletes "
             "(never V(k8s.io)).", default=[], elements="str"),
    Variable("kubenode_gc_cleanup_storage_ingest_max_age", "duration", _CLEANUP, "Partial downloads (ingests) not written to for "
             "longer than this are removed (storage_gc's default V(1h) when unset)."),
    Variable("kubenode_gc_cleanup_storage_lease_max_age", "duration", _CLEANUP, "Leases older than this are deleted (unset: only "
             "expired leases)."),
    Variable("kubenode_gc_cleanup_storage_discard_unpacked_layers", "bool", _CLEANUP, "With C(kubenode_gc_cleanup_storage), also free "
             "the compressed layer blobs of the images containerd has unpacked (kubenode.gc.storage_gc's C(discard_unpacked_layers)): "
             "the second copy of every pulled image, which the audit reports as C(unpacked_layer_blobs). Such an image can no longer "
             "be exported or pushed from the node; pulling it again works. The history record names the images. Like every step of the "
             "cleanup it runs on the nodes the cleanup cleans: C(kubenode_gc_cleanup_only_over_threshold=false) for every node.", default=False),
    Variable("kubenode_gc_cleanup_storage_build_cache_max_age", "duration", _CLEANUP, "Docker Engine nodes: build cache records not "
             "used for longer than this are removed (unset: none)."),
    Variable("kubenode_gc_cleanup_storage_remove_unused_volumes", "bool", _CLEANUP, "Docker Engine nodes: also remove the anonymous "
             "volumes no container references (named volumes never).", default=False),
    Variable("kubenode_gc_cleanup_history_dir", "str", _CLEANUP, "Where each node keeps its cleanup history records.",
             default="/var/lib/kubenode-gc/history"),
    Variable("kubenode_gc_report_dir", "str", _AUDIT, "Where report.json, report.md and report.html go, on the controller.",
             default="./kubenode-gc-report"),
    Variable("kubenode_gc_report_history_dir", "str", _AUDIT, "Where a timestamped copy of each report.json is kept for the trends "
             "(default C(<report dir>/history); empty: no history)."),
    Variable("kubenode_gc_report_history_keep", "int", _AUDIT, "How many reports the history keeps, the newest.", default=30, minimum=1),
    Variable("kubenode_gc_audit_fail_on", "str", _AUDIT, "After writing the report, fail the play: V(failed) when a node "
             "could not be audited; V(drift), V(warning) or V(error) also for CI gating at that level; V(never) opts out.",
             default="failed", choices=["never", "failed", "drift", "warning", "error"]),
    Variable("kubenode_gc_audit_metrics_dir", "str", _AUDIT, "Write kubenode_gc.prom there on each node for node_exporter's textfile "
             "collector (empty: no metrics).", default=""),
    Variable("kubenode_gc_audit_eviction_margin_percent", "percent", _AUDIT, "Flag nodes with less than this many percentage points "
             "of free space or inodes above a kubelet hard eviction threshold.", default=5),
    Variable("kubenode_gc_kubelet_root_dir", "str", _AUDIT, "The kubelet's root directory, whose filesystem is nodefs.",
             default="/var/lib/kubelet"),
    Variable("kubenode_gc_configure_prereqs", "bool", _CONFIGURE, "Run the node_prereqs role.", default=True),
    Variable("kubenode_gc_configure_kubelet", "bool", _CONFIGURE, "Run the kubelet_gc role.", default=True),
    Variable("kubenode_gc_configure_runtime", "str", _CONFIGURE, "The runtime role to run; V(auto) picks containerd when "
             "/etc/containerd/config.toml exists, else cri-o when its configuration does.", default="auto",
             choices=["auto", "containerd", "crio", "none"]),
    # kubelet_gc (descriptions in roles/kubelet_gc/meta/argument_specs.yml)
    Variable("kubelet_gc_manage", "str", _KUBELET, default="merge", choices=["merge", "template"]),
    Variable("kubelet_gc_config_path", "str", _KUBELET, default=""),
    Variable("kubelet_gc_image_gc_high_threshold_percent", "percent", _KUBELET, setting="imageGCHighThresholdPercent"),
    Variable("kubelet_gc_image_gc_low_threshold_percent", "percent", _KUBELET, setting="imageGCLowThresholdPercent"),
    Variable("kubelet_gc_image_minimum_gc_age", "duration", _KUBELET, setting="imageMinimumGCAge"),
    Variable("kubelet_gc_image_maximum_gc_age", "duration", _KUBELET, setting="imageMaximumGCAge"),
    Variable("kubelet_gc_eviction_hard", "dict", _KUBELET, setting="evictionHard"),
    Variable("kubelet_gc_eviction_soft", "dict", _KUBELET, setting="evictionSoft"),
    Variable("kubelet_gc_eviction_soft_grace_period", "dict", _KUBELET, setting="evictionSoftGracePeriod"),
    Variable("kubelet_gc_eviction_minimum_reclaim", "dict", _KUBELET, setting="evictionMinimumReclaim"),
    Variable("kubelet_gc_merge_default_eviction_settings", "bool", _KUBELET, setting="mergeDefaultEvictionSettings"),
    Variable("kubelet_gc_container_log_max_size", "str", _KUBELET, quantity=True, setting="containerLogMaxSize"),
    Variable("kubelet_gc_container_log_max_files", "int", _KUBELET, minimum=2, setting="containerLogMaxFiles"),
    Variable("kubelet_gc_extra_settings", "dict", _KUBELET, default={}, setting=EXTRA),
    Variable("kubelet_gc_template_extra", "dict", _KUBELET, default={}),
    Variable("kubelet_gc_backup", "bool", _KUBELET, default=True),
    Variable("kubelet_gc_restart", "bool", _KUBELET, default=True),
    Variable("kubelet_gc_service", "str", _KUBELET, default="kubelet"),
    Variable("kubelet_gc_fail_on_findings", "str", _KUBELET, default="error", choices=["error", "warning", "never"]),
    # containerd_storage (descriptions in roles/containerd_storage/meta/argument_specs.yml)
    Variable("containerd_storage_manage", "str", _CONTAINERD, default="merge", choices=["merge", "template"]),
    Variable("containerd_storage_config_path", "str", _CONTAINERD, default="/etc/containerd/config.toml"),
    Variable("containerd_storage_root", "str", _CONTAINERD, setting="root"),
    Variable("containerd_storage_state", "str", _CONTAINERD, setting="state"),
    Variable("containerd_storage_snapshotter", "str", _CONTAINERD, setting="snapshotter"),
    Variable("containerd_storage_sandbox_image", "str", _CONTAINERD, setting="sandbox_image"),
    Variable("containerd_storage_pinned_images", "list", _CONTAINERD, elements="str", setting="pinned_images"),
    Variable("containerd_storage_discard_unpacked_layers", "bool", _CONTAINERD, setting="discard_unpacked_layers"),
    Variable("containerd_storage_template_version", "int", _CONTAINERD, default=2, choices=[2, 3]),
    Variable("containerd_storage_template_cri_options", "dict", _CONTAINERD, default={}),
    Variable("containerd_storage_systemd_cgroup", "bool", _CONTAINERD, default=True),
    Variable("containerd_storage_device", "str", _CONTAINERD, default=""),
    Variable("containerd_storage_device_fstype", "str", _CONTAINERD, default="ext4"),
    Variable("containerd_storage_device_options", "str", _CONTAINERD, default="defaults"),
    Variable("containerd_storage_backup", "bool", _CONTAINERD, default=True),
    Variable("containerd_storage_validate", "bool", _CONTAINERD, default=True),
    Variable("containerd_storage_restart", "bool", _CONTAINERD, default=True),
    Variable("containerd_storage_service", "str", _CONTAINERD, default="containerd"),
    Variable("containerd_storage_cri_endpoint", "str", _CONTAINERD, default="unix:///run/containerd/containerd.sock"),
    Variable("containerd_storage_restart_timeout", "int", _CONTAINERD, default=60, minimum=1),
    Variable("containerd_storage_fail_on_findings", "str", _CONTAINERD, default="error", choices=["error", "warning", "never"]),
    # crio_storage (descriptions in roles/crio_storage/meta/argument_specs.yml)
    Variable("crio_storage_manage", "str", _CRIO, default="merge", choices=["merge", "template"]),
    Variable("crio_storage_storage_conf_path", "str", _CRIO, default="/etc/containers/storage.conf"),
    Variable("crio_storage_config_path", "str", _CRIO, default="/etc/crio/crio.conf"),
    Variable("crio_storage_dropin_dir", "str", _CRIO, default="/etc/crio/crio.conf.d"),
    Variable("crio_storage_graphroot", "str", _CRIO, setting="graphroot"),
    Variable("crio_storage_runroot", "str", _CRIO, setting="runroot"),
    Variable("crio_storage_imagestore", "str", _CRIO, setting="imagestore"),
    Variable("crio_storage_driver", "str", _CRIO, setting="driver"),
    Variable("crio_storage_pause_image", "str", _CRIO, setting="pause_image"),
    Variable("crio_storage_pinned_images", "list", _CRIO, elements="str"),
    Variable("crio_storage_pinned_dropin", "str", _CRIO, default="90-kubenode-gc-pinned.conf"),
    Variable("crio_storage_template_options", "dict", _CRIO, default={}),
    Variable("crio_storage_template_overlay_options", "dict", _CRIO, default={"mountopt": "nodev"}),
    Variable("crio_storage_backup", "bool", _CRIO, default=True),
    Variable("crio_storage_restart", "bool", _CRIO, default=True),
    Variable("crio_storage_service", "str", _CRIO, default="crio"),
    Variable("crio_storage_cri_endpoint", "str", _CRIO, default="unix:///run/crio/crio.sock"),
    Variable("crio_storage_restart_timeout", "int", _CRIO, default=60, minimum=1),
    Variable("crio_storage_fail_on_findings", "str", _CRIO, default="error", choices=["error", "warning", "never"]),
    # gc_timer (descriptions in roles/gc_timer/meta/argument_specs.yml)
    Variable("gc_timer_state", "str", _TIMER, default="present", choices=["present", "absent"]),
    Variable("gc_timer_interval", "str", _TIMER, default="5min"),
    Variable("gc_timer_observe", "bool", _TIMER, default=False),
    Variable("gc_timer_python", "str", _TIMER, default="/usr/bin/python3"),
    Variable("gc_timer_cri_endpoint", "str", _TIMER, default=""),
    Variable("gc_timer_cri_timeout", "float", _TIMER, default=30, minimum=0),
    Variable("gc_timer_lock_timeout", "float", _TIMER, default=600, minimum=0),
    Variable("gc_timer_high_threshold_percent", "percent", _TIMER),
    Variable("gc_timer_low_threshold_percent", "percent", _TIMER),
    Variable("gc_timer_min_age", "duration", _TIMER),
    Variable("gc_timer_max_age", "duration", _TIMER),
    Variable("gc_timer_free_bytes_high", "bytes", _TIMER),
    Variable("gc_timer_free_bytes_low", "bytes", _TIMER),
    Variable("gc_timer_inodes_high_threshold_percent", "percent", _TIMER),
    Variable("gc_timer_inodes_low_threshold_percent", "percent", _TIMER),
    Variable("gc_timer_keep_images", "list", _TIMER, default=[], elements="str"),
    Variable("gc_timer_ledger_path", "str", _TIMER, default="/var/lib/kubenode-gc/image-ledger.json"),
    Variable("gc_timer_containers", "bool", _TIMER, default=True),
    Variable("gc_timer_container_min_age", "duration", _TIMER, default="1m"),
    Variable("gc_timer_container_max_per_pod_container", "int", _TIMER, default=1, minimum=-1),
    Variable("gc_timer_container_max_containers", "int", _TIMER, default=-1, minimum=-1),
    Variable("gc_timer_pod_logs_dir", "str", _TIMER, default=""),
    Variable("gc_timer_container_logs_dir", "str", _TIMER, default="/var/log/containers"),
    Variable("gc_timer_kubelet_config_path", "str", _TIMER, default=""),
    Variable("gc_timer_cpu_weight", "int", _TIMER, default=20, minimum=1, maximum=10000),
    Variable("gc_timer_memory_max", "str", _TIMER, default="512M"),
    Variable("gc_timer_timeout_start_sec", "str", _TIMER, default="30min"),
    # node_prereqs (descriptions in roles/node_prereqs/meta/argument_specs.yml)
    Variable("node_prereqs_method", "str", _PREREQS, default="packages", choices=["packages", "venv"]),
    Variable("node_prereqs_packages", "list", _PREREQS, default=[], elements="str"),
    Variable("node_prereqs_venv_path", "str", _PREREQS, default="/opt/kubenode-gc/venv"),
    Variable("node_prereqs_pip_packages", "list", _PREREQS, elements="str",
             default=["grpcio==1.85.1", "protobuf==7.36.2", "tomlkit==0.15.2", "PyYAML==6.0.3", "ruamel.yaml==0.19.1"]),
    Variable("node_prereqs_pip_extra_args", "str", _PREREQS, default=""),
    Variable("node_prereqs_set_interpreter", "bool", _PREREQS, default=True),
)
VARIABLES = {v.name: v for v in DECLARATION}

# set by the playbooks and roles themselves (facts, registered results): accepted, never checked
INTERNAL = frozenset((
    "kubenode_gc_audit_hosts", "kubenode_gc_audit_node", "kubenode_gc_audit_result", "kubenode_gc_cleanup_hosts", "kubenode_gc_cleanup_node",
    "kubenode_gc_cleanup_waves", "kubenode_gc_cleanup_stopped",
    "kubenode_gc_report", "kubenode_gc_report_history", "kubelet_gc_result", "containerd_storage_result", "crio_storage_result",
    "node_prereqs_python",
))

# (low, high): when both are set, low must be below high
BELOW = (
    ("kubenode_gc_cleanup_low_threshold_percent", "kubenode_gc_cleanup_high_threshold_percent"),
    ("kubenode_gc_inodes_low_threshold_percent", "kubenode_gc_inodes_high_threshold_percent"),
    ("kubelet_gc_image_gc_low_threshold_percent", "kubelet_gc_image_gc_high_threshold_percent"),
    ("gc_timer_low_threshold_percent", "gc_timer_high_threshold_percent"),
)
# (min age, max age): when both are set and the max is not 0s, the max must be above the min
AGES = (
    ("kubenode_gc_cleanup_image_min_age", "kubenode_gc_cleanup_image_max_age"),
    ("kubelet_gc_image_minimum_gc_age", "kubelet_gc_image_maximum_gc_age"),
    ("gc_timer_min_age", "gc_timer_max_age"),
)
# set together or not at all
TOGETHER = (("kubenode_gc_inodes_high_threshold_percent", "kubenode_gc_inodes_low_threshold_percent"),
            ("kubenode_gc_free_bytes_high", "kubenode_gc_free_bytes_low"),
            ("gc_timer_inodes_high_threshold_percent", "gc_timer_inodes_low_threshold_percent"),
            ("gc_timer_free_bytes_high", "gc_timer_free_bytes_low"))
# (high, low) byte targets: when both are set, low (the bytes freed up to) must be at least high (the start mark)
AT_LEAST = (("kubenode_gc_free_bytes_low", "kubenode_gc_free_bytes_high"), ("gc_timer_free_bytes_low", "gc_timer_free_bytes_high"))

BOOLEANS = {"true": True, "yes": True, "on": True, "1": True, "false": False, "no": False, "off": False, "0": False}
_SERIAL = re.compile(r"^\s*\d+(\.\d+)?\s*%?\s*$")


class VariableError(ValueError):
    """One sentence naming the variable the user set."""


def _shown(value):
    return repr(value) if isinstance(value, str) else str(value)


def _int(var, value):
    if isinstance(value, bool):
        raise VariableError("%s=%s is not an integer." % (var.name, _shown(value)))
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.match(r"^\s*-?\d+\s*$", value):
        return int(value)
    raise VariableError("%s=%s is not an integer." % (var.name, _shown(value)))


def convert(var, value):
    """The value of ``var`` as the playbooks read it; VariableError (one sentence) when it is wrong."""
    if value is None:
        return None  # null: unset (the roles' "leave the key alone")
    kind = var.kind
    if kind in ("int", "percent"):
        number = _int(var, value)
        low, high = (0, 100) if kind == "percent" else (var.minimum, var.maximum)
        if kind == "percent" and not low <= number <= high:
            raise VariableError("%s=%s is out of range: it must be a percent between 0 and 100." % (var.name, _shown(value)))
        if low is not None and number < low:
            raise VariableError("%s=%s is out of range: it must be at least %d." % (var.name, _shown(value), low))
        if high is not None and number > high:
            raise VariableError("%s=%s is out of range: it must be at most %d." % (var.name, _shown(value), high))
        value = number
    elif kind == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise VariableError("%s=%s is not a number." % (var.name, _shown(value)))
        try:
            value = float(value)
        except ValueError:
            raise VariableError("%s=%s is not a number." % (var.name, _shown(value))) from None
        if var.minimum is not None and value < var.minimum:
            raise VariableError("%s=%s is out of range: it must be at least %s." % (var.name, _shown(value), var.minimum))
    elif kind == "bytes":
        try:
            value = byte_amount(var.name, value)
        except OptionError as exc:
            raise VariableError(str(exc)) from None
    elif kind == "bool":
        if isinstance(value, bool):
            pass
        elif isinstance(value, (str, int)) and str(value).strip().lower() in BOOLEANS:
            value = BOOLEANS[str(value).strip().lower()]
        else:
            raise VariableError("%s=%s is not a boolean (true or false)." % (var.name, _shown(value)))
    elif kind == "duration":
        if not isinstance(value, str):
            raise VariableError("%s=%s is not a Go duration such as 90s, 2m or 1h30m." % (var.name, _shown(value)))
        try:
            ns = parse_duration(value)
        except DurationError as exc:
            raise VariableError("%s=%s is not a Go duration the kubelet accepts, such as 90s, 2m or 1h30m (%s)." % (var.name, _shown(value), exc)) from None
        if ns < 0:
            raise VariableError("%s=%s must not be negative." % (var.name, _shown(value)))
        value = ns
    elif kind == "str":
        if not isinstance(value, str):
            raise VariableError("%s=%s is not a string." % (var.name, _shown(value)))
        if var.quantity:
            try:
                parse_quantity(value)
            except ValueError as exc:
                raise VariableError("%s=%s is not a quantity the kubelet accepts, such as 10Mi (%s)." % (var.name, _shown(value), exc)) from None
    elif kind == "list":
        if not isinstance(value, list):
            raise VariableError("%s=%s is not a list." % (var.name, _shown(value)))
        if var.elements == "str" and not all(isinstance(item, str) for item in value):
            raise VariableError("%s=%s must be a list of strings." % (var.name, _shown(value)))
    elif kind == "dict":
        if not isinstance(value, Mapping):
            raise VariableError("%s=%s is not a mapping." % (var.name, _shown(value)))
    elif kind == "raw" and var.name == "kubenode_gc_cleanup_serial":
        if isinstance(value, bool) or not (isinstance(value, int) and value > 0 or isinstance(value, str) and _SERIAL.match(value)):
            raise VariableError("%s=%s is not a number of nodes or a percentage such as 25%%." % (var.name, _shown(value)))
    if var.choices is not None and value not in var.choices:
        raise VariableError("%s=%s is not one of %s." % (var.name, _shown(value), ", ".join(str(c) for c in var.choices)))
    return value


def _suffix(name):
    return next((name[len(p):] for p in PREFIXES if name.startswith(p)), name)


def _unknown(name):
    # compared without the prefixes (they would make every name look close), so kubelet_gc_cleanup_pin finds
    # kubenode_gc_cleanup_pin and kubenode_gc_keep_image finds kubenode_gc_keep_images
    by_suffix = {}
    for known in VARIABLES:
        by_suffix.setdefault(_suffix(known), known)
    close = [by_suffix[m] for m in difflib.get_close_matches(_suffix(name), list(by_suffix), n=1, cutoff=0.8)]
    hint = "; did you mean %s?" % close[0] if close else " (see the kubenode.gc variables reference)."
    return "%s is not a kubenode.gc variable%s" % (name, hint)


def errors(values):
    """The problems of the variables the user set (``values``: name -> value, every name with a collection prefix), one
    sentence each, in the declaration's order (unknown names first)."""
    out = []
    for name in sorted(values):
        if name.startswith(PREFIXES) and name not in VARIABLES and name not in INTERNAL:
            out.append(_unknown(name))
    converted = {}
    for var in DECLARATION:
        if var.name not in values:
            continue
        try:
            converted[var.name] = convert(var, values[var.name])
        except VariableError as exc:
            out.append(str(exc))
    for first, second in TOGETHER:
        if any(name in values and name not in converted for name in (first, second)):
            continue  # a wrong value is its own problem, not also "unset"
        if (converted.get(first) is None) != (converted.get(second) is None) and (first in converted or second in converted):
            given, missing = (first, second) if converted.get(first) is not None else (second, first)
            out.append("%s is set but %s is not: set both or neither." % (given, missing))
    for low, high in BELOW:
        if converted.get(low) is not None and converted.get(high) is not None and converted[low] >= converted[high]:
            out.append("%s=%s must be below %s=%s." % (low, _shown(values[low]), high, _shown(values[high])))
    for low, high in AT_LEAST:
        if converted.get(low) is not None and converted.get(high) is not None and converted[low] < converted[high]:
            out.append("%s=%s must be at least %s=%s (GC starts below the second and frees up to the first)."
                       % (low, _shown(values[low]), high, _shown(values[high])))
    for minimum, maximum in AGES:
        lo, hi = converted.get(minimum), converted.get(maximum)
        if lo is not None and hi is not None and 0 < hi <= lo:
            out.append("%s=%s must be greater than %s=%s (or 0s: off)." % (maximum, _shown(values[maximum]), minimum, format_duration(lo)))
    return out


# play keywords (hosts, serial): Ansible templates them once per play, before any host, with the play's and the extra
# variables only; set in the inventory or group_vars they would be silently ignored, so the variable check refuses that
PLAY_KEYWORDS = ("kubenode_gc_hosts", "kubenode_gc_cleanup_serial")


def keyword_error(host, values, seen):
    """One sentence when ``host``'s variables (``values``) set a play keyword variable that the play keywords did not see
    (``seen``: name -> the value the play sees, None unless given with -e), else ""."""
    for name in PLAY_KEYWORDS:
        if name in seen and seen[name] is None and values.get(name) is not None:
            return ("%s=%s is set for %s in the inventory or group_vars, but a play keyword (hosts, serial) reads only extra "
                    "variables: pass it with -e %s=..." % (name, _shown(values[name]), host, name))
    return ""


def first_error(values):
    """The first problem (one sentence, with how many more there are); "" when every variable is right."""
    found = errors(values)
    if not found:
        return ""
    if len(found) == 1:
        return found[0]
    return "%s (and %d more problem(s) with the kubenode.gc variables)." % (found[0].rstrip(".?"), len(found) - 1)


def role_settings(role, value_of):
    """The configuration keys ``role`` (kubelet_gc, containerd_storage, crio_storage) enforces and the audit measures drift
    against: each variable of the role with a ``setting``, its value (``value_of(name)``, UNSET when the variable is not
    set: then its declared default) where not null, booleans as booleans (a ``-e ...=true`` is a string), and last the
    role's EXTRA map of further keys. Raises VariableError naming a variable that is not what it must be."""
    settings, extra = {}, {}
    for var in DECLARATION:
        if var.setting is None or var.role != role:
            continue
        value = value_of(var.name)
        if value is UNSET:
            value = None if var.default is UNSET else var.default
        if value is None:
            continue
        if var.setting == EXTRA:
            extra = convert(var, value)
        else:
            settings[var.setting] = convert(var, value) if var.kind == "bool" else value
    settings.update(extra)
    return settings
