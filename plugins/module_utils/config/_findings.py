# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""Findings: the one shape (severity, code, message), their order and the severity gate.

Used by the config modules (kubelet_config, runtime_config), the audit report filter and the
roles' ``fail_on_findings`` gate (through the ``findings_at_or_above`` filter).
"""

from __future__ import annotations

from ansible_collections.kubenode.gc.plugins.module_utils._daemons import untrusted_message
from ansible_collections.kubenode.gc.plugins.module_utils._errors import OptionError

SEVERITIES = ("error", "warning", "info")
# fail_on value -> the severities that fail (never: none)
GATES = {"error": SEVERITIES[:1], "warning": SEVERITIES[:2], "never": ()}


def finding(severity, code, message):
    return dict(severity=severity, code=code, message=message)


def untrusted_findings(untrusted, what):
    """An ``untrusted_daemon_process`` warning per process of a daemon's name that is not trusted (_daemons.Untrusted),
    taken for ``what`` (the kubelet, the runtime listening on a socket): its pid, uid and executable."""
    return [finding("warning", "untrusted_daemon_process", untrusted_message(item, what)) for item in untrusted]


def severity_rank(severity):
    """0 for error, 1 for warning, 2 for info."""
    return SEVERITIES.index(severity)


def sort_findings(findings, by=("code", "message")):
    """Most severe first, then by the keys ``by``, in order (a stable sort: equal keys keep their order)."""
    return sorted(findings, key=lambda f: (severity_rank(f["severity"]),) + tuple(f[k] for k in by))


def gate_levels(fail_on):
    """The severities that fail under ``fail_on`` (error, warning or never); OptionError for anything else."""
    if fail_on not in GATES:
        raise OptionError("fail_on must be one of %s, got %r." % (", ".join(GATES), fail_on))
    return GATES[fail_on]


def at_or_above(findings, fail_on):
    """The findings whose severity fails under ``fail_on`` (error, warning or never), in their order."""
    levels = gate_levels(fail_on)
    return [f for f in findings or [] if isinstance(f, dict) and f.get("severity") in levels]
