# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The one declaration of the playbook and role variables: the check's sentences, and the roles' argument_specs and
defaults agreeing with it (issue 22, item 2)."""

import glob
import os
import re

import pytest
import yaml

from ansible_collections.kubenode.gc.plugins.filter.variable_error import variable_error
from ansible_collections.kubenode.gc.plugins.plugin_utils import _variables as v

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))


@pytest.mark.parametrize(
    "values, sentence",
    [
        ({"kubenode_gc_cleanup_low_threshold_percent": "70", "kubenode_gc_cleanup_high_threshold_percent": "60"},
         "kubenode_gc_cleanup_low_threshold_percent='70' must be below kubenode_gc_cleanup_high_threshold_percent='60'."),
        ({"kubenode_gc_cleanup_high_threshold_percent": 150},
         "kubenode_gc_cleanup_high_threshold_percent=150 is out of range: it must be a percent between 0 and 100."),
        ({"kubenode_gc_cleanup_image_min_age": "2 minutes"},
         "kubenode_gc_cleanup_image_min_age='2 minutes' is not a Go duration the kubelet accepts, such as 90s, 2m or 1h30m "
         "(time: unknown unit \" minutes\" in duration \"2 minutes\")."),
        ({"kubenode_gc_keep_image": ["x"]}, "kubenode_gc_keep_image is not a kubenode.gc variable; did you mean kubenode_gc_keep_images?"),
        ({"kubenode_gc_nonsense": 1}, "kubenode_gc_nonsense is not a kubenode.gc variable (see the kubenode.gc variables reference)."),
        ({"kubenode_gc_cleanup_image_mode": "all"}, "kubenode_gc_cleanup_image_mode='all' is not one of threshold, prune."),
        ({"kubenode_gc_inodes_high_threshold_percent": 90},
         "kubenode_gc_inodes_high_threshold_percent is set but kubenode_gc_inodes_low_threshold_percent is not: set both or neither."),
        ({"kubelet_gc_image_minimum_gc_age": "1h", "kubelet_gc_image_maximum_gc_age": "30m"},
         "kubelet_gc_image_maximum_gc_age='30m' must be greater than kubelet_gc_image_minimum_gc_age=1h0m0s (or 0s: off)."),
        ({"kubelet_gc_container_log_max_size": "ten"}, None),
        ({"kubenode_gc_free_bytes_high": "80Gi", "kubenode_gc_free_bytes_low": "50Gi"},
         "kubenode_gc_free_bytes_low='50Gi' must be at least kubenode_gc_free_bytes_high='80Gi' (GC starts below the second and frees "
         "up to the first)."),
        ({"kubenode_gc_free_bytes_high": "50Gi"},
         "kubenode_gc_free_bytes_high is set but kubenode_gc_free_bytes_low is not: set both or neither."),
        ({"gc_timer_cri_timeout": "soon"}, "gc_timer_cri_timeout='soon' is not a number."),
        ({"gc_timer_intervall": "1min"}, "gc_timer_intervall is not a kubenode.gc variable; did you mean gc_timer_interval?"),
        ({"kubenode_gc_cleanup_pin": "maybe"}, "kubenode_gc_cleanup_pin='maybe' is not a boolean (true or false)."),
        ({"kubenode_gc_keep_images": "nginx"}, "kubenode_gc_keep_images='nginx' is not a list."),
        ({"kubenode_gc_cleanup_serial": "a lot"}, "kubenode_gc_cleanup_serial='a lot' is not a number of nodes or a percentage such as 25%."),
        ({"kubenode_gc_cleanup_high_threshold_percent": 150, "kubenode_gc_cleanup_image_mode": "all"},
         "kubenode_gc_cleanup_image_mode='all' is not one of threshold, prune (and 1 more problem(s) with the kubenode.gc variables)."),
    ],
)
def test_wrong_values_give_one_sentence_naming_the_variable(values, sentence):
    got = variable_error(values)
    if sentence is None:
        assert got.startswith("kubelet_gc_container_log_max_size='ten' is not a quantity the kubelet accepts, such as 10Mi (")
    else:
        assert got == sentence


def test_right_values_and_internal_names_pass():
    values = {"kubenode_gc_cleanup_low_threshold_percent": "60", "kubenode_gc_cleanup_high_threshold_percent": 70,
              "kubenode_gc_cleanup_image_min_age": "0s", "kubenode_gc_keep_images": ["registry.k8s.io/*"], "kubenode_gc_cleanup_pin": "yes",
              "kubenode_gc_cleanup_serial": 2, "kubelet_gc_image_gc_high_threshold_percent": None, "kubenode_gc_cleanup_node": {},
              "kubelet_gc_result": {}, "kubenode_gc_inodes_high_threshold_percent": 90, "kubenode_gc_inodes_low_threshold_percent": 80,
              "kubelet_gc_image_maximum_gc_age": "0s", "kubelet_gc_image_minimum_gc_age": "5m", "other_variable": 1}
    assert variable_error(values) == ""


def _role_specs():
    for path in sorted(glob.glob(os.path.join(ROOT, "roles", "*", "meta", "argument_specs.yml"))):
        role = path.split(os.sep)[-3]
        with open(path, encoding="utf-8") as f:
            yield role, yaml.safe_load(f)["argument_specs"]["main"]["options"]


def test_the_roles_argument_specs_agree_with_the_declaration():
    declared = {}
    for var in v.DECLARATION:
        if var.role:
            declared.setdefault(var.role, set()).add(var.name)
    for role, options in _role_specs():
        assert set(options) == declared.get(role, set()), role
        for name, spec in options.items():
            var = v.VARIABLES[name]
            assert spec["type"] == var.spec_type, name
            assert spec.get("default") == (None if var.default is v.UNSET else var.default), name
            assert spec.get("choices") == var.choices, name
            assert spec.get("elements") == var.elements, name
            assert var.description is None, name  # described once, in the role's argument_specs


def test_the_roles_defaults_agree_with_the_declaration_and_are_valid():
    for role, options in _role_specs():
        with open(os.path.join(ROOT, "roles", role, "defaults", "main.yml"), encoding="utf-8") as f:
            defaults = yaml.safe_load(f)
        for name in options:
            var = v.VARIABLES[name]
            assert defaults.get(name) == (None if var.default is v.UNSET else var.default), name
        assert variable_error(defaults) == "", role


def test_every_variable_the_playbooks_and_roles_read_is_declared():
    text = ""
    for path in glob.glob(os.path.join(ROOT, "playbooks", "**", "*.yml"), recursive=True) + glob.glob(os.path.join(ROOT, "roles", "**", "*.*"), recursive=True):
        with open(path, encoding="utf-8") as f:
            text += f.read()
    names = set(re.findall(r"(?<![_\w])((?:kubenode_gc|kubelet_gc|containerd_storage|crio_storage|node_prereqs)_[a-z0-9_]*[a-z0-9])\b", text))
    metrics = {n for n in names if n.startswith("kubenode_gc_") and n not in v.VARIABLES and n not in v.INTERNAL and re.search(n, _metrics())}
    assert names - set(v.VARIABLES) - v.INTERNAL - metrics == set()
    for var in v.DECLARATION:
        if not var.role:
            assert var.description, var.name
            assert var.name in text, var.name


def _metrics():
    with open(os.path.join(ROOT, "playbooks", "templates", "metrics.prom.j2"), encoding="utf-8") as f:
        return f.read()


def test_the_docs_reference_is_generated_from_the_declaration():
    from scripts.gen_variables_doc import render  # pylint: disable=import-outside-toplevel

    with open(os.path.join(ROOT, "docs", "docsite", "rst", "variables.rst"), encoding="utf-8") as f:
        assert f.read() == render(), "run python scripts/gen_variables_doc.py"


def test_fleet_variable_error_names_the_first_host_with_a_wrong_variable():
    from ansible_collections.kubenode.gc.plugins.filter.variable_error import fleet_variable_error

    hostvars = {"a": {"kubenode_gc_keep_images": ["x:*"], "inventory_hostname": "a"},
                "b": {"kubenode_gc_cleanup_high_threshold_percent": 150, "ansible_host": "b"},
                "c": {"kubenode_gc_keep_image": []}}
    assert fleet_variable_error(["a"], hostvars) == ""
    assert fleet_variable_error(["a", "b", "c"], hostvars) == (
        "b: kubenode_gc_cleanup_high_threshold_percent=150 is out of range: it must be a percent between 0 and 100.")
    assert fleet_variable_error(["c"], hostvars).startswith("c: kubenode_gc_keep_image is not a kubenode.gc variable")


@pytest.mark.parametrize("value, problem", [
    ("2³⁰", "is not a number of bytes or a quantity such as 50Gi: only ASCII digits, a decimal point and a unit suffix are accepted."),
    ("1e400", "is more than 9223372036854775807 bytes (2^63-1), the most a byte amount may be."),
    (2**70, "is more than 9223372036854775807 bytes (2^63-1), the most a byte amount may be."),
    (1.5, None),
])
@pytest.mark.parametrize("name", ["kubenode_gc_free_bytes_high", "gc_timer_free_bytes_high"])
def test_hostile_byte_values_give_one_sentence_naming_the_variable_and_the_value(name, value, problem):
    """The variable check parses byte values with the modules' parser (issue 32): no traceback, the variable and value named,
    the same at the fleet check."""
    from ansible_collections.kubenode.gc.plugins.filter.variable_error import fleet_variable_error

    low = name.replace("_high", "_low")
    shown = repr(value) if isinstance(value, str) else str(value)
    sentence = ("%s %s %s" % (name, shown, problem) if problem
                else "%s must be a number of bytes or a quantity such as 50Gi, got %s." % (name, shown))
    assert variable_error({name: value, low: 2**62}) == sentence
    assert fleet_variable_error(["n1"], {"n1": {name: value, low: 2**62}}) == "n1: " + sentence


def test_play_keyword_variables_from_the_inventory_are_refused_and_from_e_accepted():
    """Issue 32: hosts and serial read only extra variables; the playbooks pass the keywords as the play sees them (null
    unless -e), and a host that sets one in the inventory is refused with a sentence saying to use -e."""
    from ansible_collections.kubenode.gc.plugins.filter.variable_error import fleet_variable_error

    hostvars = {"a": {"kubenode_gc_keep_images": []}, "b": {"kubenode_gc_cleanup_serial": 1}}
    keywords = {"kubenode_gc_hosts": None, "kubenode_gc_cleanup_serial": None}
    assert fleet_variable_error(["a", "b"], hostvars, keywords=keywords) == (
        "b: kubenode_gc_cleanup_serial=1 is set for b in the inventory or group_vars, but a play keyword (hosts, serial) reads only extra "
        "variables: pass it with -e kubenode_gc_cleanup_serial=...")
    # given with -e, every host sees that value and so does the play
    assert fleet_variable_error(["a", "b"], hostvars, keywords=dict(keywords, kubenode_gc_cleanup_serial=1)) == ""
    # a wrong value is named first, by the usual check
    assert fleet_variable_error(["b"], {"b": {"kubenode_gc_cleanup_serial": "lots"}}, keywords=keywords).startswith(
        "b: kubenode_gc_cleanup_serial='lots' is not a number of nodes")
    assert fleet_variable_error(["b"], hostvars) == ""  # without keywords: the variables only


def _values(values):
    return lambda name: values.get(name, v.UNSET)


def test_role_settings_at_the_roles_defaults_enforce_nothing():
    for role in ("kubelet_gc", "containerd_storage", "crio_storage"):
        assert v.role_settings(role, _values({})) == {}, role


def test_role_settings_map_each_variable_to_its_key_and_leave_out_nulls():
    kubelet = v.role_settings("kubelet_gc", _values({
        "kubelet_gc_image_gc_high_threshold_percent": 80, "kubelet_gc_image_gc_low_threshold_percent": None,
        "kubelet_gc_eviction_hard": {"imagefs.available": "15%"}, "kubelet_gc_merge_default_eviction_settings": "yes",
        "kubelet_gc_extra_settings": {"imageGCHighThresholdPercent": 90, "serializeImagePulls": False},
        "kubelet_gc_config_path": "/etc/kubernetes/kubelet.yaml"}))
    # the extra map last, over the variables; a -e boolean string as a boolean; paths are no setting
    assert kubelet == {"imageGCHighThresholdPercent": 90, "evictionHard": {"imagefs.available": "15%"},
                       "mergeDefaultEvictionSettings": True, "serializeImagePulls": False}
    containerd = v.role_settings("containerd_storage", _values({
        "containerd_storage_root": "/data/containerd", "containerd_storage_pinned_images": ["registry.example/app:1"],
        "containerd_storage_discard_unpacked_layers": "true", "crio_storage_graphroot": "/elsewhere"}))
    assert containerd == {"root": "/data/containerd", "pinned_images": ["registry.example/app:1"], "discard_unpacked_layers": True}
    assert v.role_settings("crio_storage", _values({"crio_storage_graphroot": "/data/crio", "crio_storage_pinned_images": ["x"],
                                                    "crio_storage_driver": "overlay"})) == {"graphroot": "/data/crio", "driver": "overlay"}


def test_role_settings_keys_are_the_keys_the_modules_enforce():
    from ansible_collections.kubenode.gc.plugins.module_utils.config import _runtime_config_policy as rc  # pylint: disable=import-outside-toplevel

    keys = {role: {var.setting for var in v.DECLARATION if var.setting and var.role == role} for role in ("containerd_storage", "crio_storage")}
    assert keys["containerd_storage"] == set(rc.CONTAINERD_KEYS) | {rc.PINNED_IMAGES}
    assert keys["crio_storage"] == set(rc.CRIO_KEYS)
    assert {var.setting for var in v.DECLARATION if var.setting and var.role not in keys} == {
        "imageGCHighThresholdPercent", "imageGCLowThresholdPercent", "imageMinimumGCAge", "imageMaximumGCAge", "evictionHard", "evictionSoft",
        "evictionSoftGracePeriod", "evictionMinimumReclaim", "mergeDefaultEvictionSettings", "containerLogMaxSize", "containerLogMaxFiles", v.EXTRA}


def test_role_settings_name_a_wrong_boolean():
    with pytest.raises(v.VariableError, match=r"^containerd_storage_discard_unpacked_layers='maybe' is not a boolean"):
        v.role_settings("containerd_storage", _values({"containerd_storage_discard_unpacked_layers": "maybe"}))
