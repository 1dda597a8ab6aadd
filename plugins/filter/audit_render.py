# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Render the fleet audit report: one self-contained HTML page, Markdown, and a one-line summary.

The documentation of each filter is in the YAML file named after it next to this file. Pure: the report dict of
kubenode.gc.audit_report (and history points of the kubenode.gc.audit_history lookup) in, text out.
"""

from __future__ import annotations

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.kubenode.gc.plugins.plugin_utils import _report_html, _report_md
from ansible_collections.kubenode.gc.plugins.plugin_utils._report_fleet import summary_line


def _check(report, history, name):
    if not isinstance(report, Mapping) or not isinstance(report.get("nodes"), list) or "images" not in report:
        raise AnsibleFilterError("%s expects the report dict of kubenode.gc.audit_report (schema_version 2)." % name)
    if history is not None and not isinstance(history, (list, tuple)):
        raise AnsibleFilterError("%s expects history to be a list of history points, got a %s." % (name, type(history).__name__))
    return list(history or [])


def audit_report_html(report, history=None, history_note=""):
    """The report as one self-contained HTML page."""
    return _report_html.render(report, _check(report, history, "audit_report_html"), history_note=str(history_note or ""))


def audit_report_markdown(report, history=None):
    """The report as Markdown."""
    return _report_md.render(report, _check(report, history, "audit_report_markdown"))


def audit_summary_line(report, history=None):
    """One line: nodes by health, over the threshold, usage, reclaimable bytes, and the change since the last audit."""
    return summary_line(report, _check(report, history, "audit_summary_line"))


class FilterModule:
    """kubenode.gc audit report renderings."""

    def filters(self):
        return {
            "audit_report_html": audit_report_html,
            "audit_report_markdown": audit_report_markdown,
            "audit_summary_line": audit_summary_line,
        }
