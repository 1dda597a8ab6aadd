# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The role_settings lookup: what a role enforces, from the variables a task sees (the roles and the audit read it).
A real ansible-playbook run on every ansible-core of the matrix: tests/compat (the audit's drift)."""

import pytest
import yaml

from ansible import constants as C
from ansible.errors import AnsibleLookupError

from ansible_collections.kubenode.gc.plugins.lookup.role_settings import DOCUMENTATION, LookupModule

NAME = "kubenode.gc.role_settings"
C.config.initialize_plugin_configuration_definitions("lookup", NAME, yaml.safe_load(DOCUMENTATION)["options"])


class Templar:
    """Stands for Ansible's: renders the one template the test writes."""

    def template(self, value):
        return 75 if value == "{{ 70 + 5 }}" else value


def lookup(*terms, variables=None):
    plugin = LookupModule()
    plugin._load_name = NAME
    plugin._templar = Templar()
    return plugin.run(list(terms), variables=variables if variables is not None else {})


def test_returns_the_settings_from_the_variables_templated():
    variables = {"kubelet_gc_image_gc_high_threshold_percent": "{{ 70 + 5 }}", "kubelet_gc_image_gc_low_threshold_percent": 60,
                 "kubelet_gc_extra_settings": {}, "inventory_hostname": "node-1"}
    assert lookup("kubelet_gc", variables=variables) == [{"imageGCHighThresholdPercent": 75, "imageGCLowThresholdPercent": 60}]
    assert lookup("crio_storage") == [{}]


@pytest.mark.parametrize("terms", [(), ("gc_timer",), ("kubelet_gc", "crio_storage")])
def test_refuses_anything_but_one_role(terms):
    with pytest.raises(AnsibleLookupError, match=r"^role_settings expects one role of containerd_storage, crio_storage, kubelet_gc, got "):
        lookup(*terms)


def test_a_wrong_value_is_one_sentence_naming_it():
    with pytest.raises(AnsibleLookupError, match=r"^kubelet_gc_merge_default_eviction_settings='sometimes' is not a boolean"):
        lookup("kubelet_gc", variables={"kubelet_gc_merge_default_eviction_settings": "sometimes"})
