# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The supported ansible-core range is one list, tests/compat/ansible-core.txt (what the matrix runs):
the README's "Tested with Ansible" table, meta/runtime.yml's requires_ansible and the sanity ignore
files follow it."""

import os
import re

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _read(*path):
    with open(os.path.join(REPO, *path), encoding="utf-8") as f:
        return f.read()


def _matrix():
    """[(series, version, where)] in the file's order."""
    lines = [line.split() for line in _read("tests", "compat", "ansible-core.txt").splitlines()]
    return [tuple(words) for words in lines if words and not words[0].startswith("#")]


def _table_rows():
    """{series: first cell} of the README's support table."""
    text = _read("README.md")
    table = text[text.index("<!-- support table"):text.index("<!-- end support table -->")]
    rows = {}
    for line in table.splitlines():
        match = re.match(r"\| (\d+\.\d+)\b([^|]*)\|", line)
        if match:
            rows[match.group(1)] = (match.group(1) + match.group(2)).strip()
    return rows, table


def test_every_line_is_a_series_its_version_and_where_it_runs():
    matrix = _matrix()
    assert matrix
    for series, version, where in matrix:
        assert version.startswith(series + "."), (series, version)
        assert where in ("host", "trixie"), (series, where)
    assert [s for s, _v, _w in matrix] == sorted({s for s, _v, _w in matrix}, key=lambda s: tuple(map(int, s.split("."))))


def test_requires_ansible_is_the_lowest_series():
    runtime = yaml.safe_load(_read("meta", "runtime.yml"))
    assert runtime["requires_ansible"] == ">=%s.0" % _matrix()[0][0]


def test_readme_table_has_a_row_per_series_and_names_release_candidates():
    rows, table = _table_rows()
    matrix = _matrix()
    assert sorted(rows) == sorted(s for s, _v, _w in matrix)
    assert "not proven" not in table
    for series, version, _where in matrix:
        patch = version.rsplit(".", 1)[1]
        if patch.isdigit():
            assert rows[series] == series, rows[series]
        else:  # no alpha or beta: a release, or a release candidate while the series has none
            assert re.fullmatch(r"\d+rc\d+", patch), version
            assert rows[series] == "%s (release candidate %s)" % (series, version), rows[series]
    assert "proves %s to %s" % (matrix[0][0], matrix[-1][0]) in table


def test_every_series_has_an_empty_sanity_ignore_file():
    for series, _version, _where in _matrix():
        assert _read("tests", "sanity", "ignore-%s.txt" % series) == "", series
