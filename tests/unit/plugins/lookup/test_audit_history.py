# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The audit_history lookup: earlier report.json files reduced to trend points."""

import json

import pytest
import yaml

from ansible import constants as C
from ansible.errors import AnsibleLookupError

from ansible_collections.kubenode.gc.plugins.lookup.audit_history import DOCUMENTATION, LookupModule

# what the plugin loader does when Ansible loads the lookup: register its documented options
NAME = "kubenode.gc.audit_history"
C.config.initialize_plugin_configuration_definitions("lookup", NAME, yaml.safe_load(DOCUMENTATION)["options"])


def report(when, usage):
    return {"schema_version": 1, "generated_at": when, "summary": {"reclaimable_bytes_policy": 1, "reclaimable_bytes_prune": 2},
            "nodes": [{"host": "a", "status": "ok", "imagefs": {"usage_percent": usage}}]}


def lookup(*terms, **kw):
    plugin = LookupModule()
    plugin._load_name = NAME
    return plugin.run(list(terms), variables={}, **kw)


def test_reads_the_newest_reports_oldest_first(tmp_path):
    for i, when in enumerate(["2026-11-03T00:00:00Z", "2026-11-01T00:00:00Z", "2026-11-02T00:00:00Z"]):
        (tmp_path / ("report-%d.json" % i)).write_text(json.dumps(report(when, 50 + i)))
    (tmp_path / "notes.txt").write_text("not json")
    (tmp_path / "broken.json").write_text("{")
    (tmp_path / "other.json").write_text(json.dumps({"hello": "world"}))
    points = lookup(str(tmp_path), keep=2)
    assert [p["generated_at"] for p in points] == ["2026-11-02T00:00:00Z", "2026-11-03T00:00:00Z"]
    assert points[1]["usage"] == {"a": 50} and points[1]["reclaimable_prune"] == 2


def test_missing_directory_is_no_history(tmp_path):
    assert lookup(str(tmp_path / "nope")) == []


def test_bad_arguments(tmp_path):
    with pytest.raises(AnsibleLookupError, match="one history directory"):
        lookup(str(tmp_path), str(tmp_path))
    with pytest.raises(AnsibleLookupError, match="keep"):
        lookup(str(tmp_path), keep=0)
