# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: audit_history
version_added: 0.2.0
author: kubenode.gc contributors (@kubenode)
short_description: Read earlier fleet audit reports from a history directory, reduced to what trend charts need
description:
  - Reads the C(*.json) files of a directory on the controller, each a copy of an earlier C(report.json) of the
    C(kubenode.gc.audit) playbook (schema version 1 or 2), and returns one history point per report - when it
    was made, the number of nodes, the mean and highest image filesystem usage, the reclaimable bytes and each node's usage.
  - The newest O(keep) reports are read (by C(generated_at)); files that are not audit reports are skipped with a warning.
    A missing directory gives an empty list.
  - Pass the result to the C(history) option of P(kubenode.gc.audit_report_html#filter),
    P(kubenode.gc.audit_report_markdown#filter) and P(kubenode.gc.audit_summary_line#filter).
options:
  _terms:
    description: The history directory (one).
    type: list
    elements: path
    required: true
  keep:
    description: Read at most this many reports, the newest.
    type: int
    default: 30
"""

EXAMPLES = r"""
- name: Trend points of the earlier audits
  ansible.builtin.set_fact:
    history: "{{ query('kubenode.gc.audit_history', report_dir ~ '/history', keep=30) }}"
"""

RETURN = r"""
_list:
  description: One point per earlier report, oldest first.
  type: list
  elements: dict
  contains:
    generated_at:
      description: The report's C(generated_at).
      type: str
    nodes:
      description: Nodes in the report.
      type: int
    audited:
      description: Nodes audited (not failed); a report with none is left out of the trends.
      type: int
    usage_mean:
      description: Mean image filesystem usage percent of the audited nodes (one decimal), V(null) when none.
      type: float
    usage_max:
      description: Highest usage percent.
      type: int
    reclaimable_policy:
      description: C(summary.reclaimable_bytes_policy).
      type: int
    reclaimable_prune:
      description: C(summary.reclaimable_bytes_prune).
      type: int
    over_high:
      description: C(summary.nodes_over_high_threshold).
      type: int
    usage:
      description: Usage percent per audited host (a failed node is left out, never 0).
      type: dict
    reclaimable:
      description: Bytes reclaimable under the node's policy per audited host; "since last" compares the hosts audited both times.
      type: dict
"""

import json
import os

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase
from ansible.utils.display import Display

from ansible_collections.kubenode.gc.plugins.plugin_utils._report_fleet import history_point

display = Display()


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        if len(terms) != 1:
            raise AnsibleLookupError("audit_history expects one history directory, got %d." % len(terms))
        keep = self.get_option("keep")
        if keep < 1:
            raise AnsibleLookupError("audit_history expects keep to be 1 or more, got %d." % keep)
        directory = terms[0]
        if not os.path.isdir(directory):
            return []
        points = []
        for name in sorted(os.listdir(directory)):
            if not name.endswith(".json"):
                continue
            path = os.path.join(directory, name)
            try:
                with open(path, encoding="utf-8") as f:
                    point = history_point(json.load(f))
            except (OSError, ValueError) as exc:
                display.warning("audit_history: skipped %s: %s" % (path, exc))
                continue
            if point is None or not point["generated_at"]:
                display.warning("audit_history: skipped %s: not an audit report." % path)
                continue
            points.append(point)
        points.sort(key=lambda p: p["generated_at"])
        return points[-keep:]
