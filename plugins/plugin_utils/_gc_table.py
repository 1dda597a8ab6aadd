# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""Controller-side formatting shared by the gc_summary callback and the audit filters. Pure: no I/O, no Ansible."""

from __future__ import annotations

from ansible_collections.kubenode.gc.plugins.module_utils.cri._image_ref import display_ref
from ansible_collections.kubenode.gc.plugins.module_utils.gc._image_gc import LISTED_RULES

UNITS = ("KiB", "MiB", "GiB", "TiB", "PiB")
COLUMNS = ("HOST", "CONTAINERS", "SANDBOXES", "LOGS", "IMAGES", "FREED", "USAGE", "TARGET", "ERRORS")
# Columns whose cells are right-aligned (counts and sizes).
RIGHT = frozenset(("CONTAINERS", "SANDBOXES", "LOGS", "IMAGES", "FREED"))
DASH = "-"


def human_bytes(value):
    """Bytes as text: V(512 B), V(1.5 KiB), V(3.2 GiB) (binary units, one decimal); V(-) for None."""
    if value is None or isinstance(value, bool):
        return DASH
    value = int(value)
    sign = "-" if value < 0 else ""
    size = abs(value)
    if size < 1024:
        return "%s%d B" % (sign, size)
    scaled = float(size)
    unit = UNITS[0]
    for unit in UNITS:
        scaled /= 1024.0
        if round(scaled, 1) < 1024 or unit == UNITS[-1]:
            break
    return "%s%.1f %s" % (sign, scaled, unit)


def _count(value):
    return DASH if value is None else str(int(value))


def _usage(before, after):
    if before is None and after is None:
        return DASH
    return "%s → %s" % (DASH if before is None else "%d%%" % before, DASH if after is None else "%d%%" % after)


def _target(value):
    if value is None:
        return DASH
    return "yes" if value else "no"


def _errors(row):
    status = row.get("status") or "ok"
    count = int(row.get("errors") or 0)
    if status == "ok":
        return str(count)
    return "%s (%d)" % (status, count) if count else status


def _total_errors(errors, broken):
    if not broken:
        return str(errors)
    return "%d failed" % broken if not errors else "%d, %d failed" % (errors, broken)


def _freed(value, estimated):
    if value is None:
        return DASH
    return ("~" if estimated else "") + human_bytes(value)


def _sum(rows, key):
    values = [row.get(key) for row in rows if row.get(key) is not None]
    return sum(int(v) for v in values) if values else None


def _cells(row, mark):
    return (
        row["host"] + mark,
        _count(row.get("containers")),
        _count(row.get("sandboxes")),
        _count(row.get("logs")),
        _count(row.get("images")),
        _freed(row.get("bytes_freed"), row.get("bytes_estimated")),
        _usage(row.get("usage_before"), row.get("usage_after")),
        _target(row.get("target_reached")),
        _errors(row),
    )


def _line(cells, widths):
    out = []
    for name, cell, width in zip(COLUMNS, cells, widths):
        out.append(cell.rjust(width) if name in RIGHT else cell.ljust(width))
    return "  ".join(out).rstrip()


def _target_line(rows):
    missed = [r["host"] for r in rows if r.get("target_reached") is False]
    unknown = [r["host"] for r in rows if r.get("target_reached") is None]
    if missed:
        return "Not at target: %s" % ", ".join(missed)
    if not unknown:
        return "All nodes reached their target."
    if len(unknown) == len(rows):
        return "No target to report: no image_gc result."
    return "All nodes with a known target reached it (unknown: %s)." % ", ".join(unknown)


def render_table(rows, title=None):
    """Render the per-host summary of one play as fixed-width text (lines joined with newlines, no trailing newline).

    Each row is a dict: host (str); containers, sandboxes, logs, images (int or None when nothing was recorded);
    bytes_freed (int or None) and bytes_estimated (bool: the figure is the sum of image sizes, not measured);
    usage_before, usage_after (int percents or None); target_reached (True, False or None when unknown);
    errors (int); status (ok, failed or unreachable); message (str or None: the failure); check_mode (bool).

    The output is the optional title (with C((check mode: planned)) when every row came from check mode), a header,
    one row per host sorted by name, a totals row, then the hosts that did not reach their target (or that all did,
    or that none had an image_gc result), a legend for
    estimated sizes and mixed check mode when they occur, and one line per failed or unreachable host.
    """
    rows = sorted(rows, key=lambda r: r["host"])
    all_check = bool(rows) and all(r.get("check_mode") for r in rows)
    some_check = any(r.get("check_mode") for r in rows) and not all_check

    lines = []
    if title is not None or all_check:
        heading = title or "kubenode.gc summary"
        lines.append(heading + (" (check mode: planned)" if all_check else ""))

    body = [_cells(r, "*" if some_check and r.get("check_mode") else "") for r in rows]
    known = [r.get("target_reached") for r in rows if r.get("target_reached") is not None]
    estimated = any(r.get("bytes_estimated") and r.get("bytes_freed") is not None for r in rows)
    total_errors = sum(int(r.get("errors") or 0) for r in rows)
    broken = sum(1 for r in rows if (r.get("status") or "ok") in ("failed", "unreachable"))
    totals = (
        "TOTAL (%d)" % len(rows),
        _count(_sum(rows, "containers")),
        _count(_sum(rows, "sandboxes")),
        _count(_sum(rows, "logs")),
        _count(_sum(rows, "images")),
        _freed(_sum(rows, "bytes_freed"), estimated),
        DASH,
        "%d/%d" % (sum(1 for v in known if v), len(known)) if known else DASH,
        _total_errors(total_errors, broken),
    )
    widths = [max(len(c[i]) for c in [COLUMNS, totals] + body) for i in range(len(COLUMNS))]
    lines.append(_line(COLUMNS, widths))
    lines.extend(_line(cells, widths) for cells in body)
    lines.append(_line(totals, widths))

    lines.append(_target_line(rows))
    if estimated:
        lines.append("~ estimated: sum of the removed images' sizes (not measured on the filesystem).")
    if some_check:
        lines.append("* check mode: planned, nothing was removed.")
    for row in rows:
        if (row.get("status") or "ok") != "ok" and row.get("message"):
            lines.append("%s: %s: %s" % (row["host"], row["status"], " ".join(str(row["message"]).split())))
    lines.extend(listed_lines(rows))
    return "\n".join(lines)


def _holder(container):
    return "%s/%s (%s, %s)" % (container.get("pod_namespace"), container.get("pod_name"), container.get("container"),
                               "running" if container.get("running") else container.get("state") or "not running")


def listed_present_text(entry):
    """One image a listed removal kept: its name and who uses it (the pods, their containers and state) or the rule."""
    containers = [c for c in entry.get("containers") or [] if isinstance(c, dict)]
    why = ", ".join(_holder(c) for c in containers) if containers else LISTED_RULES.get(entry.get("reason"), entry.get("reason") or "kept")
    return "%s: %s" % (display_ref(entry.get("repo_tags"), entry.get("repo_digests")), why)


def listed_lines(rows):
    """Per host, the images a listed removal (image_gc mode=listed, kubenode_gc_remove_images) removed, and the listed images
    still present with the pods using them (or the rule that keeps them). No line when no listed removal ran."""
    lines = []
    for row in rows:
        removed, present = row.get("listed_removed"), row.get("listed_present")
        if removed is None and present is None:
            continue
        verb = "would remove" if row.get("check_mode") else "removed"
        lines.append("%s: listed images %s: %s." % (row["host"], verb, ", ".join(removed) if removed else "none"))
        if present:
            lines.append("%s: listed images still present: %s." % (row["host"], "; ".join(present)))
    return lines


def new_row(host, check_mode=False):
    """An empty row for render_table."""
    return dict(host=host, containers=None, sandboxes=None, logs=None, images=None, bytes_freed=None, bytes_estimated=False,
                usage_before=None, usage_after=None, target_reached=None, errors=0, status="ok", message=None, check_mode=check_mode,
                listed_removed=None, listed_present=None)


def _add(row, key, items):
    if isinstance(items, list):
        row[key] = (row[key] or 0) + len(items)


def _add_listed(row, result):
    """A listed removal's images (image_gc mode=listed: removed with reason listed, and listed_kept) into the row."""
    removed = [i for i in result.get("removed") or [] if isinstance(i, dict) and i.get("reason") == "listed"]
    kept = [i for i in result.get("listed_kept") or [] if isinstance(i, dict)]
    if not removed and not isinstance(result.get("listed_kept"), list):
        return
    row["listed_removed"] = (row.get("listed_removed") or []) + [display_ref(i.get("repo_tags"), i.get("repo_digests")) for i in removed]
    row["listed_present"] = (row.get("listed_present") or []) + [listed_present_text(i) for i in kept]


def apply_result(row, kind, result, failed=False):
    """Fold one module result (a dict) into the host's row: counts add up, usage goes from the first to the last run."""
    errors = result.get("errors")
    if isinstance(errors, list):
        row["errors"] += len(errors)
    if kind == "container":
        _add(row, "containers", result.get("removed_containers"))
        _add(row, "sandboxes", result.get("removed_sandboxes"))
        _add(row, "logs", result.get("removed_log_paths"))
    else:
        _add(row, "images", result.get("removed"))
        _add_listed(row, result)
        measured = result.get("bytes_freed_measured")
        estimated = result.get("bytes_freed_estimated")
        if measured is not None:
            row["bytes_freed"] = (row["bytes_freed"] or 0) + int(measured)
        elif estimated is not None:
            row["bytes_freed"] = (row["bytes_freed"] or 0) + int(estimated)
            row["bytes_estimated"] = True
        if row["usage_before"] is None and result.get("usage_before") is not None:
            row["usage_before"] = result["usage_before"]
        if result.get("usage_after") is not None:
            row["usage_after"] = result["usage_after"]
        if result.get("target_reached") is not None:
            row["target_reached"] = bool(result["target_reached"])
    if failed and row["status"] == "ok":
        row["status"] = "failed"
        row["message"] = result.get("msg") or "The task failed without a message."
