# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""Inline SVG charts for the audit report: a line chart over time and a sparkline. Pure: text in, text out."""

from __future__ import annotations

from html import escape


def _num(value):
    return ("%.1f" % value).rstrip("0").rstrip(".")


def _segments(coords):
    """Split [(x, y or None)] at the gaps into runs of points."""
    runs, run = [], []
    for x, y in coords:
        if y is None:
            if run:
                runs.append(run)
            run = []
        else:
            run.append((x, y))
    if run:
        runs.append(run)
    return runs


def _nice_max(value):
    if value <= 0:
        return 1
    magnitude = 1
    while magnitude * 10 <= value:
        magnitude *= 10
    for step in (1, 2, 2.5, 5, 10):
        if step * magnitude >= value:
            return step * magnitude
    return 10 * magnitude


def nice_bytes_max(value):
    """A round top for a byte axis, in binary units (48 MiB rather than 47.7 MiB)."""
    unit = 1
    while value >= unit * 1024:
        unit *= 1024
    return _nice_max(value / float(unit)) * unit


def line_chart(labels, series, title, y_format=_num, y_max=None, width=560, height=200, css_class="chart", nice=None):
    """An SVG line chart. ``labels`` are the x values (text, oldest first); ``series`` is [(name, css class, [y or None])].

    Each point carries a <title> with its label and value, so hovering shows the figure; a one-point series is a dot.
    """
    left, right, top, bottom = 64, 12, 24, 36
    plot_w, plot_h = width - left - right, height - top - bottom
    values = [v for entry in series for v in entry[2] if v is not None]
    top_value = y_max if y_max is not None else (nice or _nice_max)(max(values) if values else 0)
    n = len(labels)

    def x_at(i):
        return left + (plot_w * i / (n - 1) if n > 1 else plot_w / 2)

    def y_at(v):
        return top + plot_h - plot_h * min(max(v, 0), top_value) / top_value

    out = ['<svg class="%s" role="img" viewBox="0 0 %d %d" width="%d" height="%d">'
           % (css_class, width, height, width, height), "<title>%s</title>" % escape(title)]
    for frac in (0, 0.25, 0.5, 0.75, 1):
        y = top + plot_h - plot_h * frac
        out.append('<line class="grid" x1="%d" x2="%d" y1="%s" y2="%s"/>' % (left, left + plot_w, _num(y), _num(y)))
        out.append('<text class="axis" x="%d" y="%s" text-anchor="end">%s</text>' % (left - 6, _num(y + 4), escape(y_format(top_value * frac))))
    if n:
        ticks = [0, n - 1] if n > 1 else [0]
        for i in ticks:
            anchor = "start" if i == 0 and n > 1 else ("end" if i == n - 1 and n > 1 else "middle")
            out.append('<text class="axis" x="%s" y="%d" text-anchor="%s">%s</text>' % (_num(x_at(i)), height - 12, anchor, escape(labels[i])))
    legend_x = left
    for name, cls, ys in series:
        coords = [(x_at(i), None if v is None else y_at(v)) for i, v in enumerate(ys)]
        for run in _segments(coords):
            if len(run) > 1:
                out.append('<polyline class="line %s" points="%s"/>' % (cls, " ".join("%s,%s" % (_num(x), _num(y)) for x, y in run)))
        for i, v in enumerate(ys):
            if v is not None:
                out.append('<circle class="dot %s" cx="%s" cy="%s" r="3"><title>%s: %s %s</title></circle>'
                           % (cls, _num(x_at(i)), _num(y_at(v)), escape(labels[i]), escape(name), escape(y_format(v))))
        out.append('<rect class="key %s" x="%d" y="6" width="10" height="10"/>' % (cls, legend_x))
        out.append('<text class="legend" x="%d" y="15">%s</text>' % (legend_x + 14, escape(name)))
        legend_x += 24 + 7 * len(name)
    out.append("</svg>")
    return "".join(out)


def sparkline(values, high=None, width=90, height=20, label=""):
    """A tiny usage trend: percent values (None for a gap) on a 0-100 scale, the high threshold as a faint line."""
    points = list(enumerate(values))
    n = len(values)
    if not any(v is not None for v in values):
        return ""

    def x_at(i):
        return 2 + ((width - 4) * i / (n - 1) if n > 1 else (width - 4) / 2)

    def y_at(v):
        return 2 + (height - 4) * (100 - min(max(v, 0), 100)) / 100

    out = ['<svg class="spark" viewBox="0 0 %d %d" width="%d" height="%d">' % (width, height, width, height)]
    if label:
        out.append("<title>%s</title>" % escape(label))
    if high is not None:
        y = _num(y_at(high))
        out.append('<line class="hi" x1="0" x2="%d" y1="%s" y2="%s"/>' % (width, y, y))
    for run in _segments([(x_at(i), None if v is None else y_at(v)) for i, v in points]):
        if len(run) > 1:
            out.append('<polyline points="%s"/>' % " ".join("%s,%s" % (_num(x), _num(y)) for x, y in run))
    last = next(((i, v) for i, v in reversed(points) if v is not None))
    out.append('<circle cx="%s" cy="%s" r="2"/>' % (_num(x_at(last[0])), _num(y_at(last[1]))))
    out.append("</svg>")
    return "".join(out)
