# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""report.md's one cell escaping, and every table of a rendered report kept whole by a host name with a pipe and a line break."""

import re

from ansible_collections.kubenode.gc.plugins.filter import audit_report as ar
from ansible_collections.kubenode.gc.plugins.plugin_utils import _report_md
from ansible_collections.kubenode.gc.plugins.plugin_utils._md_table import cell, row
from tests.unit.plugins.plugin_utils.test__report_storage import MiB, disk_usage

UNESCAPED_PIPE = re.compile(r"(?<!\\)(?:\\\\)*\|")


def test_cell_escapes_pipes_backslashes_and_line_breaks():
    assert cell("a|b") == "a\\|b" and cell("a\\|b") == "a\\\\\\|b"
    assert cell("one\ntwo\r\n  three\tfour") == "one two three four"
    assert cell(None) == "-" and cell(3) == "3"
    assert row("x|y", None, "a\nb") == "| x\\|y | - | a b |"


def test_every_table_of_report_md_keeps_its_columns():
    host = "rack|1\nnode"
    others = {"bytes": 5 * MiB, "objects": [{"namespace": "moby", "name": "golang|1", "bytes": 5 * MiB}]}
    report = ar.audit_report([{"host": host, "disk_usage": disk_usage(10 * MiB, k8s_images=4 * MiB, other_namespace_images=others,
                                                                      stale_ingests=MiB)}])
    text = _report_md.render(report)
    assert "rack\\|1 node" in text
    lines = text.splitlines()
    tables = 0
    for n, line in enumerate(lines):
        if re.match(r"^\|(-+:?\|)+$", line):  # a header separator: the header above, the rows below
            tables += 1
            columns = len(UNESCAPED_PIPE.findall(line))
            assert len(UNESCAPED_PIPE.findall(lines[n - 1])) == columns, lines[n - 1]
            for body in lines[n + 1:]:
                if not body.startswith("|"):
                    break
                assert len(UNESCAPED_PIPE.findall(body)) == columns, body
    assert tables >= 3  # nodes, findings, disk use by category
    assert any(line.startswith("| k8s_images | rack\\|1 node") for line in lines)
