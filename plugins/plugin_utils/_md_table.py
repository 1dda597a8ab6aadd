# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""Markdown table rows: the one escaping every table of report.md uses. Pure."""

from __future__ import annotations


def cell(value):
    """A table cell: backslashes and pipes escaped, line breaks and runs of blanks one space; None is a dash."""
    if value is None:
        return "-"
    return " ".join(str(value).replace("\\", "\\\\").replace("|", "\\|").split())


def row(*values):
    """One table row, every value a cell()."""
    return "| %s |" % " | ".join(cell(v) for v in values)
