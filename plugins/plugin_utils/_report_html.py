# -*- coding: utf-8 -*-
# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This file is private to the kubenode.gc collection; it is not a public API.

"""The audit report as one self-contained HTML page (inline CSS, SVG and a little JavaScript; nothing external).

The first screen answers what a fleet owner asks first: how many nodes are in which state, which nodes need
attention (a worst-first table that sorts and filters in the browser, and reads as a plain table without
JavaScript), which problems are fleet-wide (findings grouped by code, drift grouped by key and value), which
images hold the most disk, and whether things get better or worse (trend charts from the history). Per-node
detail follows, collapsed. Pure: report dict (and history points) in, text out.
"""

from __future__ import annotations

from html import escape

from ansible_collections.kubenode.gc.plugins.plugin_utils import _report_eviction as eviction
from ansible_collections.kubenode.gc.plugins.plugin_utils import _report_fleet as fleet
from ansible_collections.kubenode.gc.plugins.plugin_utils import _report_storage as storage
from ansible_collections.kubenode.gc.plugins.plugin_utils._gc_table import human_bytes
from ansible_collections.kubenode.gc.plugins.plugin_utils._report_listed import why as listed_why
from ansible_collections.kubenode.gc.plugins.plugin_utils._report_svg import line_chart, nice_bytes_max, sparkline

HEALTH_HINT = {
    "critical": "evicting pods (imagefs below the eviction threshold), or an error finding",
    "failed": "could not be audited",
    "warning": "over the image GC high threshold, or a warning finding",
    "ok": "nothing to do",
}
HOSTS_SHOWN = 200  # hosts listed in a finding or drift group before "and N more"
IMAGES_SHOWN = 10  # images on the first screen; the rest of the report's list is one click away

CSS = """
:root { --fg: #1d2433; --muted: #57606a; --line: #d0d7de; --bg2: #f6f8fa; --critical: #b42318; --failed: #6e40c9;
  --warning: #9a6700; --ok: #1a7f37; --blue: #0969da; }
* { box-sizing: border-box; }
body { font: 13px/1.35 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; margin: 0; color: var(--fg); background: #fff; }
header { padding: 12px 20px 4px; }
h1 { font-size: 1.5em; margin: 0; }
h2 { font-size: 1.1em; margin: 0 0 6px; }
.meta { color: var(--muted); margin: 2px 0 0; }
.tiles { display: flex; flex-wrap: wrap; gap: 8px; padding: 8px 20px; }
.tile { display: block; min-width: 100px; padding: 4px 10px; border: 1px solid var(--line); border-left-width: 6px; border-radius: 4px;
  color: inherit; text-decoration: none; background: #fff; }
.tile .n { display: block; font-size: 1.5em; font-weight: 650; font-variant-numeric: tabular-nums; }
.tile .l { display: block; font-weight: 600; }
.tile .hint { display: block; color: var(--muted); font-size: 0.85em; max-width: 14em; }
a.tile:hover { background: var(--bg2); }
.tile.critical { border-left-color: var(--critical); } .tile.critical .n { color: var(--critical); }
.tile.failed { border-left-color: var(--failed); } .tile.failed .n { color: var(--failed); }
.tile.warning { border-left-color: var(--warning); } .tile.warning .n { color: var(--warning); }
.tile.ok { border-left-color: var(--ok); } .tile.ok .n { color: var(--ok); }
.tile.info { border-left-color: var(--blue); }
.up { color: var(--critical); } .down { color: var(--ok); }
.dash { display: grid; grid-template-columns: minmax(0, 1fr); gap: 12px; padding: 6px 20px; }
@media (min-width: 1600px) { .dash { grid-template-columns: minmax(0, 3fr) minmax(0, 2fr); } }
.panel { border: 1px solid var(--line); border-radius: 6px; padding: 8px 10px; margin-bottom: 12px; background: #fff; overflow-x: auto; }
#images code { overflow-wrap: anywhere; }
table.storage td { overflow-wrap: anywhere; }
.side .panel:last-child { margin-bottom: 0; }
.scroll { max-height: 62vh; overflow: auto; border: 1px solid var(--line); }
table { border-collapse: collapse; width: 100%; }
th, td { border-bottom: 1px solid var(--line); padding: 2px 4px; text-align: left; vertical-align: top; }
th { background: var(--bg2); font-weight: 600; white-space: nowrap; }
.scroll thead th { position: sticky; top: 0; z-index: 1; box-shadow: 0 1px 0 var(--line); }
th button { font: inherit; font-weight: 600; border: 0; background: none; padding: 0; cursor: pointer; color: inherit; }
th[aria-sort="ascending"] button::after { content: " \\25B2"; } th[aria-sort="descending"] button::after { content: " \\25BC"; }
td.host { white-space: nowrap; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.neg { color: var(--critical); font-weight: 600; }
tr:hover td { background: #f9fbfd; }
.badge { display: inline-block; padding: 0 6px; border-radius: 9px; font-size: 0.85em; font-weight: 600; color: #fff; }
.badge.critical, .badge.error { background: var(--critical); } .badge.failed { background: var(--failed); }
.badge.warning { background: var(--warning); } .badge.ok { background: var(--ok); } .badge.info { background: var(--blue); }
td.trend { white-space: nowrap; } td.trend small { color: var(--muted); margin-left: 2px; }
.ubar { display: inline-block; position: relative; width: 40px; height: 10px; background: #eaeef2; border-radius: 2px; vertical-align: middle;
  margin-right: 4px; overflow: hidden; }
.ubar i { position: absolute; top: 0; bottom: 0; left: 0; background: #4c9f70; }
.ubar i.warning { background: #d4a72c; } .ubar i.critical { background: #cf4b3e; }
.ubar b { position: absolute; top: 0; bottom: 0; width: 0; border-left: 2px solid var(--fg); }
.controls { display: flex; flex-wrap: wrap; gap: 8px; align-items: center; margin-bottom: 6px; }
.controls input[type=search] { min-width: 18em; padding: 3px 6px; }
.controls .count { color: var(--muted); }
.scope { color: var(--muted); white-space: nowrap; }
.scope.wide.error { color: var(--critical); font-weight: 600; } .scope.wide.warning { color: var(--warning); font-weight: 600; }
.scope.wide.info { color: var(--blue); }
details > summary { cursor: pointer; white-space: nowrap; }
.hosts { margin: 4px 0; color: var(--muted); font-size: 0.9em; max-height: 12em; overflow: auto; }
.muted, .none { color: var(--muted); }
svg.spark { vertical-align: middle; } svg.spark polyline { fill: none; stroke: var(--blue); stroke-width: 1.5; }
svg.spark circle { fill: var(--blue); } svg.spark .hi { stroke: #cf4b3e; stroke-dasharray: 2 2; stroke-width: 1; opacity: 0.6; }
svg.chart { max-width: 100%; height: auto; }
svg.chart .grid { stroke: #eaeef2; } svg.chart .axis, svg.chart .legend { font-size: 11px; fill: var(--muted); }
svg.chart .line { fill: none; stroke-width: 2; } svg.chart .dot { stroke: #fff; stroke-width: 1; }
.s1 { stroke: var(--blue); fill: var(--blue); } .s2 { stroke: #cf4b3e; fill: #cf4b3e; } .s3 { stroke: #8250df; fill: #8250df; }
.charts { display: flex; flex-wrap: wrap; gap: 8px; } .charts figure { margin: 0; } figcaption { font-weight: 600; }
#details { padding: 0 20px 20px; }
details.node { content-visibility: auto; contain-intrinsic-size: auto 1.8em; border: 1px solid var(--line); border-radius: 4px;
  margin: 4px 0; padding: 4px 8px; }
details.node[open] { background: #fcfcfd; }
details.node table { width: auto; margin: 6px 0; }
.bar { position: relative; height: 1.2em; max-width: 40em; background: #eaeef2; border: 1px solid #afb8c1; border-radius: 3px; overflow: hidden; }
.bar .used { position: absolute; top: 0; bottom: 0; left: 0; }
.bar .ok { background: #4c9f70; } .bar .high { background: #d4a72c; } .bar .over { background: #cf4b3e; }
.bar .reclaimable { position: absolute; top: 0; bottom: 0;
  background: repeating-linear-gradient(135deg, #5b8def 0, #5b8def 4px, #c9d8fb 4px, #c9d8fb 8px); }
.bar .mark { position: absolute; top: -2px; bottom: -2px; width: 0; border-left: 2px solid var(--fg); }
.bar .mark.low { border-left: 2px dashed var(--muted); }
.failed-box { padding: 4px 8px; background: #fff1f0; border: 1px solid #f5c2c0; color: var(--critical); border-radius: 3px; }
.sev-error { color: var(--critical); font-weight: 600; } .sev-warning { color: var(--warning); font-weight: 600; } .sev-info { color: var(--blue); }
"""

# Sorting and filtering of the node table; the page works and reads the same without it.
SCRIPT = r"""
(function () {
  var table = document.getElementById("node-table");
  if (!table) { return; }
  var body = table.tBodies[0];
  var rows = Array.prototype.slice.call(body.rows);
  var controls = document.getElementById("node-controls");
  var q = document.getElementById("node-filter");
  var health = document.getElementById("node-health");
  var drifted = document.getElementById("node-drift");
  var count = document.getElementById("node-count");
  controls.hidden = false;
  function apply() {
    var words = q.value.toLowerCase().split(/\s+/).filter(Boolean);
    var h = health.value, d = drifted.checked, shown = 0;
    rows.forEach(function (row) {
      var text = row.getAttribute("data-search");
      var ok = (!h || row.getAttribute("data-health") === h) && (!d || row.getAttribute("data-drift") !== "0") &&
        words.every(function (w) { return text.indexOf(w) >= 0; });
      row.hidden = !ok;
      if (ok) { shown += 1; }
    });
    count.textContent = shown === rows.length ? "all " + rows.length + " nodes" : shown + " of " + rows.length + " nodes";
  }
  function value(row, index, numeric) {
    var cell = row.cells[index];
    var v = cell.getAttribute("data-v");
    if (v === null) { v = cell.textContent.trim(); }
    if (!numeric) { return v.toLowerCase(); }
    return v === "" ? null : parseFloat(v);
  }
  function sortBy(th, index, direction) {
    var numeric = th.getAttribute("data-type") === "num";
    var keyed = rows.map(function (row, i) { return [value(row, index, numeric), i, row]; });
    keyed.sort(function (a, b) {
      var x = a[0], y = b[0];
      if (x === y) { return a[1] - b[1]; }
      if (x === null) { return 1; }
      if (y === null) { return -1; }
      return (x < y ? -1 : 1) * direction;
    });
    rows = keyed.map(function (k) { return k[2]; });
    var fragment = document.createDocumentFragment();
    rows.forEach(function (row) { fragment.appendChild(row); });
    body.appendChild(fragment);
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (cell) { cell.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", direction > 0 ? "ascending" : "descending");
  }
  Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, index) {
    var button = document.createElement("button");
    button.type = "button";
    button.textContent = th.textContent;
    button.title = "Sort by " + th.textContent;
    th.textContent = "";
    th.appendChild(button);
    button.addEventListener("click", function () {
      var current = th.getAttribute("aria-sort");
      var first = th.getAttribute("data-first") === "desc" ? -1 : 1;
      sortBy(th, index, current === null ? first : (current === "ascending" ? -1 : 1));
    });
  });
  [q, health, drifted].forEach(function (el) { el.addEventListener("input", apply); el.addEventListener("change", apply); });
  Array.prototype.forEach.call(document.querySelectorAll("[data-filter-health]"), function (a) {
    a.addEventListener("click", function () { health.value = a.getAttribute("data-filter-health"); apply(); });
  });
  Array.prototype.forEach.call(document.querySelectorAll("[data-filter-text]"), function (a) {
    a.addEventListener("click", function () { q.value = a.getAttribute("data-filter-text"); health.value = ""; apply(); });
  });
  Array.prototype.forEach.call(document.querySelectorAll("a.host"), function (a) {
    a.addEventListener("click", function () {
      var target = document.getElementById(a.getAttribute("href").slice(1));
      if (target && target.tagName === "DETAILS") { target.open = true; }
    });
  });
  apply();
})();
"""


def e(value):
    """Text for HTML: None is a dash; everything is escaped."""
    return "-" if value is None else escape(str(value), quote=True)


def _pct(value):
    return "-" if value is None else "%d%%" % value


def _bytes(value):
    return escape(human_bytes(value))


def _fs_used(fs):
    if fs["capacity_bytes"] is None or fs["available_bytes"] is None:
        return "-"
    return _bytes(fs["capacity_bytes"] - fs["available_bytes"])


def _runtime(r):
    return e(" ".join(v for v in (r["name"], r["version"]) if isinstance(v, str)) or None)


def _num_attr(value):
    return "" if value is None else str(value)


def _headroom_cell(value, limit=0):
    """A headroom in bytes; at or under ``limit`` it is past the threshold, shown in red as what must be freed."""
    if value is None:
        return '<td class="num" data-v="">-</td>'
    if value <= limit:
        over = limit + 1 - value
        return '<td class="num neg" data-v="%d" title="over by %s">&minus;%s</td>' % (value, _bytes(over), _bytes(over))
    return '<td class="num" data-v="%d">%s</td>' % (value, _bytes(value))


def _delta(now, before, unit, lower_is_better=True, fmt="%+.1f"):
    if now is None or before is None or now == before:
        return '<span class="muted">unchanged</span>' if now is not None and now == before else ""
    worse = (now > before) == lower_is_better
    return '<span class="%s">%s%s</span>' % ("up" if worse else "down", fmt % (now - before), unit)


def _tiles(report, view):
    s = report["summary"]
    health = s["nodes_by_health"]
    out = ['<section class="tiles" id="status" aria-label="Nodes by status">']
    out.append('<div class="tile info"><span class="n">%d</span><span class="l">nodes</span><span class="hint">%d audited, %d failed</span></div>'
               % (s["nodes"], s["nodes_ok"], s["nodes_failed"]))
    for h in fleet.HEALTH:
        out.append('<a class="tile %s" href="#nodes" data-filter-health="%s"><span class="n">%d</span><span class="l">%s</span>'
                   '<span class="hint">%s</span></a>' % (h, h, health[h], h, HEALTH_HINT[h]))
    # since last: over the nodes audited both times (a failed audit is left out, never counted as 0)
    since = view["since_last"] or {}
    usage_delta = _delta(*(since.get("usage_mean") or (None, None)), " pts")
    out.append('<div class="tile info"><span class="n">%s</span><span class="l">mean usage</span><span class="hint">max %s%s</span></div>'
               % ("-" if s["usage_percent_mean"] is None else "%s%%" % fleet._pct(s["usage_percent_mean"]), _pct(s["usage_percent_max"]),
                  ("; " + usage_delta + " since last") if usage_delta else ""))
    recl_now, recl_before = since.get("reclaimable_policy") or (None, None)
    recl_delta = _delta(recl_now, recl_before, "", fmt="%+d")
    if recl_delta and recl_before is not None:
        diff = recl_now - recl_before
        recl_delta = recl_delta.replace("%+d" % diff, ("+" if diff > 0 else "-") + _bytes(abs(diff)))
    out.append('<div class="tile info"><span class="n">%s</span><span class="l">reclaimable now</span><span class="hint">under the nodes\' '
               'policies; prune: %s%s</span></div>'
               % (_bytes(s["reclaimable_bytes_policy"]), _bytes(s["reclaimable_bytes_prune"]),
                  ("; " + recl_delta + " since last") if recl_delta else ""))
    out.append('<a class="tile info" href="#storage"><span class="n">%s</span><span class="l">second copy of layers</span><span class="hint">'
               'compressed layer blobs of unpacked images; storage_gc discard_unpacked_layers frees them</span></a>'
               % _bytes(s.get("unpacked_layer_blob_bytes") or 0))
    out.append('<a class="tile info" href="#drift"><span class="n">%d</span><span class="l">drifted</span>'
               '<span class="hint">differ from the desired policy</span></a>' % s["nodes_with_drift"])
    out.append('<div class="tile %s"><span class="n">%d</span><span class="l">near eviction</span><span class="hint">within the margin of a '
               'hard eviction threshold</span></div>' % ("warning" if s.get("nodes_near_eviction") else "info", s.get("nodes_near_eviction", 0)))
    out.append("</section>")
    return "".join(out)


def _usage_cell(node):
    usage = node["imagefs"]["usage_percent"]
    if usage is None:
        return '<td class="num" data-v="">-</td>'
    width = min(max(usage, 0), 100)
    high = min(max(node["thresholds"]["high_percent"], 0), 100)
    cls = "critical" if node["health"] == "critical" else ("warning" if node["over_high_threshold"] else "")
    return ('<td class="num" data-v="%d"><span class="ubar" title="high threshold %d%%"><i class="%s" style="width:%d%%"></i>'
            '<b style="left:%d%%"></b></span>%d%%</td>' % (usage, high, cls, width, high, usage))


def _trend_text(trend):
    if trend == "":
        return ""
    return "<small>%s</small>" % ("%+d" % int(trend) if int(trend) else "0")


def _node_rows(report, view):
    out = []
    for rank, node in enumerate(view["ranked"], 1):
        host = node["host"]
        c = view["counts"][host]
        codes = " ".join(sorted({f["code"] for f in node["findings"]}))
        keys = " ".join(sorted({str(d["key"]) for d in node["drift"]}))
        search = " ".join((host, node["health"], codes, keys, node["runtime"]["name"] or "")).lower()
        recl_policy = node["images"]["reclaimable_policy"]["bytes"]
        recl_prune = node["images"]["reclaimable_prune"]["bytes"]
        series = view["series"].get(host) or []
        label = "%s usage over the last %d audits: %s" % (host, len(series), ", ".join(_pct(v) for v in series))
        spark = sparkline(series, node["thresholds"]["high_percent"], width=56, label=label) if len(series) > 1 else ""
        first, last = next((v for v in series if v is not None), None), series[-1] if series else None
        trend = "" if first is None or last is None or len(series) < 2 else str(last - first)
        findings = "%d / %d / %d" % (c["error"], c["warning"], c["info"])
        out.append(
            '<tr data-host="%s" data-health="%s" data-drift="%d" data-search="%s">'
            '<td class="num" data-v="%d">%d</td>'
            '<td class="host" data-v="%s"><a class="host" href="#node-%s">%s</a></td>'
            '<td data-v="%d"><span class="badge %s">%s</span></td>'
            '%s'
            '<td class="trend" data-v="%s">%s%s</td>'
            '%s%s'
            '<td class="num" data-v="%s">%s</td><td class="num" data-v="%s">%s</td>'
            '<td class="num" data-v="%d" title="errors / warnings / info">%s</td>'
            '<td class="num" data-v="%d">%d</td></tr>'
            % (e(host), node["health"], len(node["drift"]), e(search),
               rank, rank,
               e(host.lower()), e(host), e(host),
               fleet.HEALTH.index(node["health"]), node["health"], node["health"],
               _usage_cell(node),
               trend, spark, _trend_text(trend),
               _headroom_cell(node["headroom"]["high_threshold_bytes"]), _headroom_cell(node["headroom"]["eviction_bytes"], limit=-1),
               _num_attr(recl_policy), _bytes(recl_policy), _num_attr(recl_prune), _bytes(recl_prune),
               c["error"] * 1000000 + c["warning"] * 1000 + c["info"], findings,
               len(node["drift"]), len(node["drift"])))
    return "".join(out)


NODE_COLUMNS = (
    # (header, type, first direction, title)
    ("#", "num", "asc", "Rank, worst first"),
    ("Node", "text", "asc", ""),
    ("Health", "num", "asc", ""),
    ("Usage", "num", "desc", "Image filesystem usage (kubelet formula); the mark is the image GC high threshold"),
    ("Trend", "num", "desc", "Usage change since the oldest audit in the history, in points"),
    ("To high", "num", "asc", "Headroom: bytes that can be written before image GC starts (the high threshold)"),
    ("To eviction", "num", "asc", "Headroom: bytes until imagefs.available drops below the kubelet's hard eviction threshold"),
    ("GC frees", "num", "desc", "Reclaimable: what image GC under the node's own thresholds would free now"),
    ("Prune frees", "num", "desc", "Reclaimable: what removing every unused image would free"),
    ("E/W/I", "num", "desc", "Findings: errors / warnings / info"),
    ("Drift", "num", "desc", "Settings that differ from the desired policy"),
)


def _node_table(report, view):
    head = "".join('<th%s data-type="%s" data-first="%s"%s>%s</th>'
                   % (' class="num"' if kind == "num" and name not in ("Health", "Trend") else "", kind, first,
                      ' title="%s"' % e(title) if title else "", e(name))
                   for name, kind, first, title in NODE_COLUMNS)
    options = "".join('<option value="%s">%s</option>' % (h, h) for h in fleet.HEALTH)
    return (
        '<section class="panel" id="nodes"><h2>Nodes, worst first</h2>'
        '<div class="controls" id="node-controls" hidden>'
        '<input type="search" id="node-filter" placeholder="Filter: host, finding code, drift key" aria-label="Filter nodes">'
        '<select id="node-health" aria-label="Health"><option value="">any health</option>%s</select>'
        '<label><input type="checkbox" id="node-drift"> with drift</label>'
        '<span class="count" id="node-count"></span></div>'
        '<div class="scroll"><table class="nodes" id="node-table"><thead><tr>%s</tr></thead><tbody>%s</tbody></table></div>'
        '<p class="muted">Headroom is what can still be written to the image filesystem before image GC starts (high threshold) and '
        'before the kubelet evicts pods (evictionHard imagefs.available); a negative headroom (red) is what must be freed to get under it.</p>'
        '</section>'
        % (options, head, _node_rows(report, view)))


def _host_list(hosts):
    shown = ", ".join('<a class="host" href="#node-%s">%s</a>' % (e(h), e(h)) for h in hosts[:HOSTS_SHOWN])
    more = len(hosts) - HOSTS_SHOWN
    return '<p class="hosts">%s%s</p>' % (shown, " and %d more" % more if more > 0 else "")


def _scope(scope, nodes, total, severity=None):
    """How widespread a finding or a drift is; a wide one takes its severity's colour (info is never red)."""
    share = "-" if not total else ("<1%" if nodes * 100 < total else "%d%%" % round(nodes * 100.0 / total))
    wide = scope in ("fleet-wide", "every node")
    return '<span class="scope%s">%s, %s</span>' % ((" wide " + e(severity or "info")) if wide else "", scope, e(share))


def _group_note(group):
    note = '<a href="#nodes" data-filter-text="%s">Show these nodes in the table</a>.' % e(group["code"])
    if group["distinct_messages"] > 1:
        note = "%d different messages; the most common is shown. %s" % (group["distinct_messages"], note)
    return '<p class="muted">%s</p>' % note


def _findings_panel(report, view):
    total = fleet.audited_count(report["nodes"])
    if not view["findings"]:
        return '<section class="panel" id="findings"><h2>Findings by code</h2><p class="none">No findings on any node.</p></section>'
    rows = []
    for g in view["findings"]:
        rows.append(
            '<tr data-code="%s"><td><span class="badge %s">%s</span></td><td><code>%s</code> <span class="muted">%s</span></td>'
            '<td class="num">%d</td><td>%s</td><td><details><summary>which</summary><p>%s</p>%s%s</details></td></tr>'
            % (e(g["code"]), e(g["severity"]), e(g["severity"]), e(g["code"]), e(g["source"]), g["nodes"],
               _scope(g["scope"], g["nodes"], total, g["severity"]), e(g["example"]),
               _group_note(g),
               _host_list(g["hosts"])))
    return ('<section class="panel" id="findings"><h2>Findings by code</h2><table><thead><tr><th>Severity</th><th>Code</th>'
            '<th class="num">Nodes</th><th>Spread</th><th></th></tr></thead><tbody>%s</tbody></table>'
            '</section>' % "".join(rows))


def _drift_panel(report, view):
    total = fleet.audited_count(report["nodes"])
    if not view["drift"]:
        return '<section class="panel" id="drift"><h2>Drift by setting</h2><p class="none">No node differs from the desired policy.</p></section>'
    rows = []
    for g in view["drift"]:
        for i, v in enumerate(g["values"]):
            lead = ('<td rowspan="%d"><code>%s</code><br><span class="muted">%s</span> %s</td>'
                    % (len(g["values"]), e(g["key"]), e(g["component"]), _scope(g["scope"], g["nodes"], total, "warning"))) if i == 0 else ""
            rows.append('<tr>%s<td>%s</td><td>%s</td><td class="num">%d</td><td><details><summary>nodes</summary>%s</details></td></tr>'
                        % (lead, e(v["desired"]), e(v["actual"]), v["nodes"], _host_list(v["hosts"])))
    return ('<section class="panel" id="drift"><h2>Drift by setting</h2><table><thead><tr><th>Setting</th><th>Desired</th><th>Actual</th>'
            '<th class="num">Nodes</th><th></th></tr></thead><tbody>%s</tbody></table></section>' % "".join(rows))


def _image_rows(images):
    return "".join(
        '<tr><td><code>%s</code></td><td class="num">%d</td><td class="num">%s</td><td class="num">%s</td><td class="num">%d</td></tr>'
        % (e(i["ref"]).replace("/", "/<wbr>"), i["nodes"], _bytes(i["bytes"]), _bytes(i["reclaimable_bytes"]), i["in_use_nodes"]) for i in images)


def _images_panel(report):
    images = report.get("images") or []
    if not images:
        return '<section class="panel" id="images"><h2>Images holding the most disk</h2><p class="none">No image lists were read.</p></section>'
    head = ('<thead><tr><th>Repository:tag</th><th class="num">Nodes</th><th class="num">Bytes</th><th class="num">Reclaimable</th>'
            '<th class="num">In use on</th></tr></thead>')
    more = ""
    if len(images) > IMAGES_SHOWN:
        more = ('<details><summary>%d more of the largest</summary><table>%s<tbody>%s</tbody></table></details>'
                % (len(images) - IMAGES_SHOWN, head, _image_rows(images[IMAGES_SHOWN:])))
    return ('<section class="panel" id="images"><h2>Images holding the most disk</h2><p class="muted">Across all nodes, by repository and '
            'tag (%d distinct); bytes add up the image size on every node, reclaimable what pruning unused images would free.</p>'
            '<table>%s<tbody>%s</tbody></table>%s</section>'
            % (report["summary"]["image_refs"], head, _image_rows(images[:IMAGES_SHOWN]), more))


def _listed_panel(report):
    """Where each listed image (kubenode_gc_remove_images) is, and which pods use it; nothing when no image is listed."""
    listed = report.get("listed_images")
    if not listed:
        return ""
    intro = ('<p class="muted">Patterns (kubenode_gc_remove_images): %s. On %d node(s), used by pods on %d.</p>'
             % (", ".join("<code>%s</code>" % e(p) for p in listed["patterns"]), listed["nodes_with"], listed["nodes_in_use"]))
    if not listed["images"]:
        return '<section class="panel" id="listed"><h2>Listed images</h2>%s<p class="none">No listed image is on any node.</p></section>' % intro
    rows = "".join('<tr><td><code>%s</code></td><td>%s</td><td>%s</td><td>%s</td></tr>'
                   % (e(image["ref"]).replace("/", "/<wbr>"), e(n["host"]), e(n["state"]), e(listed_why(n)))
                   for image in listed["images"] for n in image["nodes"])
    return ('<section class="panel" id="listed"><h2>Listed images</h2>%s<table><thead><tr><th>Image</th><th>Node</th><th>State</th>'
            '<th>Why</th></tr></thead><tbody>%s</tbody></table></section>' % (intro, rows))


def _short_time(text):
    """2026-11-22T06:00:00Z -> 11-22 06:00 (the charts' axis labels; the full time is in each point's tooltip)."""
    return (text or "-").replace("T", " ")[5:16]


def _trends_panel(report, view, history_note):
    points = view["points"]
    if len(points) < 2:
        return ('<section class="panel" id="trends"><h2>Trends</h2><p class="none">No earlier audit to compare with. %s</p></section>'
                % e(history_note))
    labels = [_short_time(p["generated_at"]) for p in points]
    usage = line_chart(labels, [("mean", "s1", [p["usage_mean"] for p in points]), ("max", "s2", [p["usage_max"] for p in points])],
                       "Image filesystem usage across the fleet, percent", y_format=lambda v: "%d%%" % round(v), y_max=100,
                       width=250, height=140)
    recl = line_chart(labels, [("policy", "s1", [p["reclaimable_policy"] for p in points]),
                               ("prune", "s3", [p["reclaimable_prune"] for p in points])],
                      "Reclaimable bytes across the fleet", y_format=human_bytes, width=250, height=140, nice=nice_bytes_max)
    return ('<section class="panel" id="trends"><h2>Trends</h2><p class="muted">%d audits, %s to %s. %s</p><div class="charts">'
            '<figure><figcaption>Image filesystem usage, %%</figcaption>%s</figure><figure><figcaption>Reclaimable bytes</figcaption>%s</figure>'
            '</div></section>' % (len(points), e(labels[0]), e(labels[-1]), e(history_note), usage, recl))


def _clamp(value):
    return min(max(value, 0), 100)


def _bar(node):
    fs, th = node["imagefs"], node["thresholds"]
    usage = min(max(fs["usage_percent"], 0), 100)
    recl = min((node["images"]["reclaimable_prune"]["bytes"] or 0) * 100.0 / fs["capacity_bytes"], usage)
    level = "over" if node["over_high_threshold"] else ("high" if fs["usage_percent"] >= th["low_percent"] else "ok")
    return ('<div class="bar" title="%s: %s used"><div class="used %s" style="width: %.2f%%;"></div>'
            '<div class="reclaimable" style="left: %.2f%%; width: %.2f%%;" title="reclaimable by pruning: %s"></div>'
            '<div class="mark low" style="left: %.2f%%;" title="low threshold %s"></div>'
            '<div class="mark high" style="left: %.2f%%;" title="high threshold %s (%s)"></div></div>'
            % (e(node["host"]), _pct(fs["usage_percent"]), level, usage - recl, usage - recl, recl,
               _bytes(node["images"]["reclaimable_prune"]["bytes"]), _clamp(th["low_percent"]), _pct(th["low_percent"]),
               _clamp(th["high_percent"]), _pct(th["high_percent"]), e(th["source"])))


def _credential_records(node):
    cred = node.get("credential_records")
    if not cred:
        return ""
    gate = cred["feature_gate"]
    return "<br>Credential records (%s): %s pulled-image records; feature gate KubeletEnsureSecretPulledImages %s." % (
        e(cred["directory"]), e(cred["pulled_records"]),
        "unset (the kubelet version's default)" if gate is None else ("enabled" if gate else "disabled"))


def _node_detail(node):
    fs, th, img, ct = node["imagefs"], node["thresholds"], node["images"], node["containers"]
    host = node["host"]
    out = ['<details class="node" id="node-%s" data-host="%s"><summary><b>%s</b> <span class="badge %s">%s</span> %s</summary>'
           % (e(host), e(host), e(host), node["health"], node["health"],
              "" if fs["usage_percent"] is None else "%s used, %d finding%s, %d drifted setting%s"
              % (_pct(fs["usage_percent"]), len(node["findings"]), "" if len(node["findings"]) == 1 else "s", len(node["drift"]),
                 "" if len(node["drift"]) == 1 else "s"))]
    if node["status"] == "failed":
        # nothing was measured: its reason only, no thresholds, usage or signals that would read as measured
        out.append('<p class="failed-box">Not audited: %s</p></details>' % e(node["error"]))
        return "".join(out)
    if fs["usage_percent"] is not None and fs["capacity_bytes"]:
        out.append(_bar(node))
    out.append(
        "<p>Runtime: %s at %s, sandbox image %s.<br>Image filesystem: %s, %s used (%s of %s; the runtime counts %s as its own); "
        "thresholds high %s, low %s (%s); eviction at imagefs.available %s (%s).%s<br>Images: %s (%s in use); reclaimable under the node's "
        "policy %s (%s), by pruning %s (%s).<br>Containers: %s; reclaimable: %s dead containers, %s sandboxes.%s</p>"
        % (_runtime(node["runtime"]), e(node["runtime"]["endpoint"]), e(node["runtime"]["sandbox_image"]),
           e(fs["mountpoint"]), _pct(fs["usage_percent"]), _fs_used(fs), _bytes(fs["capacity_bytes"]), _bytes(fs["used_bytes"]),
           _pct(th["high_percent"]), _pct(th["low_percent"]), e(th["source"]), e(th["eviction_available"]), e(th["eviction_source"]),
           "".join("<br>Container filesystem (split image filesystem): %s, %s used (%s of %s)."
                   % (e(c["mountpoint"]), _pct(c["usage_percent"]), _fs_used(c), _bytes(c["capacity_bytes"]))
                   for c in node.get("container_filesystems") or []),
           e(img["total"]), e(img["in_use"]), e(img["reclaimable_policy"]["count"]), _bytes(img["reclaimable_policy"]["bytes"]),
           e(img["reclaimable_prune"]["count"]), _bytes(img["reclaimable_prune"]["bytes"]),
           e(ct["total"]), e(ct["reclaimable"]), e(ct["sandboxes"]),
           ("<br>Metrics: %s." % e(node["metrics_file"]) if node["metrics_file"] else "") + _credential_records(node)))
    out.append('<p class="eviction">Eviction signals%s: %s.</p>'
               % (' <span class="badge warning">near eviction</span>' if node.get("near_eviction") else "", e(eviction.signals_text(node))))
    if node["parts_failed"]:
        out.append('<table class="parts"><thead><tr><th>Check</th><th>Did not complete</th></tr></thead><tbody>%s</tbody></table>'
                   % "".join("<tr><td>%s</td><td>%s</td></tr>" % (e(k), e(v)) for k, v in sorted(node["parts_failed"].items())))
    if node["findings"]:
        rows = "".join('<tr><td class="sev-%s">%s</td><td>%s</td><td>%s</td><td>%s</td></tr>'
                       % (e(f["severity"]), e(f["severity"]), e(f["source"]), e(f["code"]), e(f["message"])) for f in node["findings"])
        out.append('<table class="findings"><thead><tr><th>Severity</th><th>Source</th><th>Code</th><th>Message</th></tr></thead>'
                   "<tbody>%s</tbody></table>" % rows)
    else:
        out.append('<p class="none">No findings.</p>')
    if node["drift"]:
        rows = "".join("<tr><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>"
                       % (e(d["component"]), e(d["key"]), e(d["desired"]), e(d["actual"])) for d in node["drift"])
        out.append('<table class="drift"><thead><tr><th>Component</th><th>Key</th><th>Desired</th><th>Actual</th></tr></thead>'
                   "<tbody>%s</tbody></table>" % rows)
    else:
        out.append('<p class="none">No drift.</p>')
    out.append(storage.html_node(node))
    out.append("</details>")
    return "".join(out)


def _policy(report):
    if not report.get("policy"):
        return ""
    return ('<details class="policy"><summary>Desired policy</summary><table><tbody>%s</tbody></table></details>'
            % "".join("<tr><td>%s</td><td>%s</td></tr>" % (e(k), e(v)) for k, v in sorted(report["policy"].items())))


def render(report, history=None, history_note=""):
    """The HTML page for ``report`` (schema 2) with trends from ``history`` (a list of history points)."""
    view = fleet.view(report, history)
    points = view["points"]
    compared = (" Trends over %d audits, %s to %s." % (len(points), e(points[0]["generated_at"]), e(points[-1]["generated_at"]))
                if len(points) > 1 else " No earlier audit in the history yet.")
    title = "Kubernetes node disk audit" + (" - %s" % e(report["generated_at"]) if report["generated_at"] else "")
    parts = [
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n<title>%s</title>\n<style>%s</style>\n</head>\n<body>\n' % (title, CSS),
        '<header><h1>Kubernetes node disk audit</h1><p class="meta">Generated %s by kubenode.gc, report schema version %s.%s</p>%s</header>\n'
        % (e(report["generated_at"]), e(report["schema_version"]), compared, _policy(report)),
        _tiles(report, view), "\n",
        '<div class="dash"><div class="main">', _node_table(report, view), _drift_panel(report, view),
        '</div><div class="side">', _findings_panel(report, view), _trends_panel(report, view, history_note), _images_panel(report),
        _listed_panel(report),
        storage.html_top(report),
        "</div></div>\n",
        '<section id="details"><h2>Per-node detail</h2><p class="muted">Every node, worst first; click to expand.</p>',
        "".join(_node_detail(n) for n in view["ranked"]),
        "</section>\n<script>%s</script>\n</body>\n</html>\n" % SCRIPT,
    ]
    return "".join(parts)
