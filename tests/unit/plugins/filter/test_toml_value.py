# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""toml_value renders values that TOML parsers read back unchanged."""

import tomllib

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.kubenode.gc.plugins.filter.toml_value import toml_value


@pytest.mark.parametrize(
    "value",
    [
        True,
        False,
        0,
        -12,
        1.5,
        "",
        "registry.k8s.io/pause:3.10",
        'quote " backslash \\ tab \t newline \n unicode é',
        [1, 2, 3],
        ["a", True, [1]],
        {},
        {"enable_partial_images": "false", "use_hard_links": "true"},
        {"dotted.key": 1, "nested": {"a": [1, "b"]}},
    ],
)
def test_round_trip(value):
    assert tomllib.loads("v = " + toml_value(value))["v"] == value


def test_inline_table_text():
    assert toml_value({"enable_partial_images": "false"}) == '{enable_partial_images = "false"}'


@pytest.mark.parametrize("value", [None, float("nan"), object()])
def test_refuses_what_toml_cannot_hold(value):
    with pytest.raises(AnsibleFilterError):
        toml_value(value)
