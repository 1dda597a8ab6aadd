# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""The kubelet's defaults and its validation of the image GC thresholds and ages, in one place.

Used by image_gc (its options), kubelet_config (the effective configuration) and the audit
report (thresholds of a node without a readable kubelet configuration). The texts are the
kubelet's own (pkg/kubelet/apis/config/validation, VAL in docs/development.md's sources).
"""

from __future__ import annotations

from ansible_collections.kubenode.gc.plugins.module_utils._durations import format_duration
from ansible_collections.kubenode.gc.plugins.module_utils._errors import PolicyError

SECOND = 10**9
MINUTE = 60 * SECOND

# KubeletConfiguration defaults (v1beta1 SetDefaults_KubeletConfiguration)
IMAGE_GC_HIGH_THRESHOLD_PERCENT = 85
IMAGE_GC_LOW_THRESHOLD_PERCENT = 80
IMAGE_MINIMUM_GC_AGE = 2 * MINUTE
IMAGE_MAXIMUM_GC_AGE = 0
EVICTION_PRESSURE_TRANSITION_PERIOD = 5 * MINUTE
CONTAINER_LOG_MAX_SIZE = "10Mi"
CONTAINER_LOG_MAX_FILES = 5
CONTAINER_LOG_MAX_WORKERS = 1
CONTAINER_LOG_MONITOR_INTERVAL = 10 * SECOND
POD_LOGS_DIR = "/var/log/pods"
EVICTION_HARD = {"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%", "imagefs.available": "15%",
                 "imagefs.inodesFree": "5%"}

# The KubeletConfiguration keys kubenode.gc manages, how their values are read, and their defaults.
KINDS = {
    "imageGCHighThresholdPercent": "int",
    "imageGCLowThresholdPercent": "int",
    "imageMinimumGCAge": "duration",
    "imageMaximumGCAge": "duration",
    "evictionHard": "thresholds",
    "evictionSoft": "thresholds",
    "evictionSoftGracePeriod": "periods",
    "evictionMinimumReclaim": "reclaims",
    "evictionPressureTransitionPeriod": "duration",
    "evictionMaxPodGracePeriod": "int",
    "mergeDefaultEvictionSettings": "bool",
    "containerLogMaxSize": "quantity",
    "containerLogMaxFiles": "int",
    "containerLogMaxWorkers": "int",
    "containerLogMonitorInterval": "duration",
    "podLogsDir": "string",
}
MAP_KINDS = ("thresholds", "periods", "reclaims")
DEFAULTS = {
    "imageGCHighThresholdPercent": IMAGE_GC_HIGH_THRESHOLD_PERCENT, "imageGCLowThresholdPercent": IMAGE_GC_LOW_THRESHOLD_PERCENT,
    "imageMinimumGCAge": IMAGE_MINIMUM_GC_AGE, "imageMaximumGCAge": IMAGE_MAXIMUM_GC_AGE,
    "evictionHard": EVICTION_HARD, "evictionSoft": {}, "evictionSoftGracePeriod": {}, "evictionMinimumReclaim": {},
    "evictionPressureTransitionPeriod": EVICTION_PRESSURE_TRANSITION_PERIOD, "evictionMaxPodGracePeriod": 0,
    "mergeDefaultEvictionSettings": False, "containerLogMaxSize": CONTAINER_LOG_MAX_SIZE,
    "containerLogMaxFiles": CONTAINER_LOG_MAX_FILES, "containerLogMaxWorkers": CONTAINER_LOG_MAX_WORKERS,
    "containerLogMonitorInterval": CONTAINER_LOG_MONITOR_INTERVAL, "podLogsDir": POD_LOGS_DIR,
}

PREFIX = "invalid configuration: "


def threshold_errors(high, low, names=None, prefix=PREFIX):
    """The kubelet's errors for the image GC thresholds: 0 <= low < high <= 100.

    ``names`` (high name, low name) and ``prefix`` word the same rule for other threshold pairs (image_gc's inode thresholds)."""
    high_name, low_name = names or ("imageGCHighThresholdPercent (--image-gc-high-threshold)", "imageGCLowThresholdPercent (--image-gc-low-threshold)")
    errors = []
    if not 0 <= high <= 100:
        errors.append(prefix + "%s %d must be between 0 and 100, inclusive" % (high_name, high))
    if not 0 <= low <= 100:
        errors.append(prefix + "%s %d must be between 0 and 100, inclusive" % (low_name, low))
    if low >= high:
        errors.append(prefix + "%s %d must be less than %s %d" % (low_name, low, high_name, high))
    return errors


def age_errors(min_age, max_age):
    """The kubelet's imageMaximumGCAge rules (nanoseconds), and a non-negative imageMinimumGCAge."""
    errors = []
    if min_age < 0:
        errors.append(PREFIX + "imageMinimumGCAge %s must not be negative" % format_duration(min_age))
    if max_age < 0:
        errors.append(PREFIX + "imageMaximumGCAge %s must not be negative" % format_duration(max_age))
    if 0 < max_age <= min_age:
        errors.append(PREFIX + "imageMaximumGCAge %s must be greater than imageMinimumGCAge %s" % (format_duration(max_age), format_duration(min_age)))
    return errors


def validate_thresholds(high, low):
    """PolicyError with the kubelet's first complaint about the thresholds."""
    _raise_first(threshold_errors(high, low))


def validate_inode_thresholds(high, low):
    """PolicyError for image_gc's inode thresholds (no kubelet setting): both or neither, then the kubelet's rule for its thresholds."""
    if (high is None) != (low is None):
        raise PolicyError("inodes_high_threshold_percent and inodes_low_threshold_percent must be set together, got only %s"
                          % ("inodes_high_threshold_percent" if low is None else "inodes_low_threshold_percent"))
    if high is not None:
        _raise_first(threshold_errors(high, low, ("inodes_high_threshold_percent", "inodes_low_threshold_percent"), prefix=""))


def validate_ages(min_age, max_age):
    """PolicyError with the kubelet's first complaint about the ages (nanoseconds)."""
    _raise_first(age_errors(min_age, max_age))


def _raise_first(errors):
    if errors:
        raise PolicyError(errors[0])
