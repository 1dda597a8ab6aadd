# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: role_settings
version_added: 0.1.0
author: kubenode.gc contributors (@kubenode)
short_description: The configuration keys a kubenode.gc role enforces, from its variables
description:
  - Returns the keys of the kubelet's or the runtime's configuration that P(kubenode.gc.kubelet_gc#role),
    P(kubenode.gc.containerd_storage#role) or P(kubenode.gc.crio_storage#role) enforces, computed from the role's
    variables as the task sees them (inventory, C(group_vars), play, role parameters, C(-e)), each unset variable at the
    role's default, and keys whose value is V(null) left out.
  - The roles pass the result to M(kubenode.gc.kubelet_config) and M(kubenode.gc.runtime_config), and the C(kubenode.gc.audit)
    playbook measures each node's drift against it, without running a task of the roles on any host.
  - A boolean variable given as a string (C(-e containerd_storage_discard_unpacked_layers=true)) is returned as a boolean;
    C(kubelet_gc_extra_settings) is merged in last.
options:
  _terms:
    description: The role, one of V(kubelet_gc), V(containerd_storage) and V(crio_storage).
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: Compare a node's kubelet configuration with what kubenode.gc.kubelet_gc would enforce there
  kubenode.gc.kubelet_config:
    settings: "{{ lookup('kubenode.gc.role_settings', 'kubelet_gc') }}"
  check_mode: true
  register: drift
"""

RETURN = r"""
_raw:
  description: >-
    One mapping of configuration keys to values, such as C({"imageGCHighThresholdPercent": 80}) for V(kubelet_gc).
  type: list
  elements: dict
"""

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.kubenode.gc.plugins.plugin_utils._variables import DECLARATION, UNSET, VariableError, role_settings

ROLES = tuple(sorted({var.role for var in DECLARATION if var.setting is not None}))


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        if len(terms) != 1 or terms[0] not in ROLES:
            raise AnsibleLookupError("role_settings expects one role of %s, got %s." % (", ".join(ROLES), ", ".join(map(str, terms)) or "none"))
        variables = variables or {}

        def value_of(name):
            if name not in variables:
                return UNSET
            # ansible-core 2.16 to 2.18 give the variables as written ("{{ ... }}" included); 2.19 and later, templated
            return self._templar.template(variables[name])

        try:
            return [role_settings(terms[0], value_of)]
        except VariableError as exc:
            raise AnsibleLookupError(str(exc)) from None
