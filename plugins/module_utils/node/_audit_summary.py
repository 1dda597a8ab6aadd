# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""node_audit's detail=summary line format, in one place (pure, no Ansible): the module writes the lines (summarise) and
the audit report reads them back (plugin_utils/_fleet.py: summary_problem, expand_summary) with these constants."""

from __future__ import annotations

from ansible_collections.kubenode.gc.plugins.module_utils.cri._image_ref import display_ref

# one line per image, "<id> <ref> <size> <marks>" (image ids and references hold no spaces), in place of the lists that
# grow with the images; marks: one letter for each that holds, NONE for none
COLUMNS = ("id", "ref", "size", "marks")
MARKS = (("in_use", "u"), ("pinned", "p"), ("sandbox_image", "s"))  # cri_info's image flags
PLAN_MARKS = (("image_gc_policy", "g"), ("image_gc_prune", "r"))  # the plan removes the image
UNLISTED = "n"  # cri_info did not list the image
NONE = "-"
ALL_MARKS = frozenset("".join(mark for _key, mark in MARKS + PLAN_MARKS) + UNLISTED + NONE)
SUMMARISED = (("cri_info", "images"), ("image_gc_policy", "removed"), ("image_gc_prune", "removed"))


def _field(text):
    """``text`` as one field of a summary line: runs of white space (no image id or reference has any) become one ``_``,
    and an empty text is ``_``."""
    text = str(text)
    if " " in text or "\t" in text or "\n" in text or not text:
        return "_".join(text.split()) or "_"
    return text


def summarise(audit):
    """detail=summary (pure): ``audit`` with cri_info's images and both image_gc plans' removed lists folded into
    ``summary.images``, one line per image (COLUMNS; marks u/p/s: in use, pinned, sandbox image; g/r: the policy /
    prune plan removes it; n: cri_info did not list it, as when it was pulled between the two reads), so that a node with
    thousands of images returns thousands of short strings instead of two lists of dicts."""
    lists = {}
    for part, key in SUMMARISED:
        result = audit.get(part)
        if isinstance(result, dict) and isinstance(result.get(key), list):
            lists[part] = result[key]
    if not lists:
        return audit
    rows = {}
    for image in lists.get("cri_info", ()):
        rows[image["id"]] = [image["id"], display_ref(image.get("repo_tags"), image.get("repo_digests")), image.get("size"),
                             "".join(mark for key, mark in MARKS if image.get(key))]
    for part, mark in PLAN_MARKS:
        for removed in lists.get(part, ()):
            row = rows.get(removed["id"])
            if row is None:
                row = rows[removed["id"]] = [removed["id"], display_ref(removed.get("repo_tags"), ()), removed.get("size"), UNLISTED]
            row[3] += mark
    out = dict(audit)
    for part, key in SUMMARISED:
        if part in lists:
            out[part] = {k: v for k, v in audit[part].items() if k != key}
    out["summary"] = {"image_columns": list(COLUMNS),
                      "images": ["%s %s %d %s" % (_field(i), _field(ref), size or 0, marks or NONE) for i, ref, size, marks in rows.values()]}
    return out
