# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""The check the playbooks run first, on the controller, for every host: the variables with a kubenode.gc prefix the
user set, against their one declaration (plugins/plugin_utils/_variables.py). Pure: no I/O."""

from __future__ import annotations

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.kubenode.gc.plugins.plugin_utils._variables import PREFIXES, first_error, keyword_error


def variable_error(values):
    """name -> value of the variables set for a host -> one sentence naming the first wrong one, or ""."""
    if not isinstance(values, Mapping):
        raise AnsibleFilterError("variable_error expects a mapping of variable names to values, got %s." % type(values).__name__)
    return first_error(dict(values))


def fleet_variable_error(hosts, hostvars, keywords=None):
    """Every host's variables with a kubenode.gc prefix (from ``hostvars``) -> "<host>: <sentence>" for the first host
    with a wrong one, or "": variable_error for a whole play in one task on the controller. ``keywords``: the play keyword
    variables as the play sees them (null unless given with -e); one set for a host in the inventory is refused."""
    if not isinstance(hosts, (list, tuple)):
        raise AnsibleFilterError("fleet_variable_error expects a list of hosts, got %s." % type(hosts).__name__)
    if keywords is not None and not isinstance(keywords, Mapping):
        raise AnsibleFilterError("fleet_variable_error expects keywords to be a mapping, got %s." % type(keywords).__name__)
    for host in hosts:
        variables = hostvars[host]
        values = {name: variables[name] for name in list(variables.keys()) if name.startswith(PREFIXES)}
        error = first_error(values) or keyword_error(host, values, keywords or {})
        if error:
            return "%s: %s" % (host, error)
    return ""


class FilterModule:
    def filters(self):
        return {"variable_error": variable_error, "fleet_variable_error": fleet_variable_error}
