# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The audit report of 1,000 synthetic nodes (benchmarks/report_fleet.py) in headless Chromium.

Asserts what a reader sees and does: the worst-first table, sorting by a column, filtering by text, health and
drift, the tiles as filters, collapsed per-node detail that a host link opens, no script errors, and the plain
table without JavaScript. Prints the generation time, the size and the render time (never asserted: the
benchmark's figures); keeps screenshots in tests/output/report-1000/.
"""

import json
import os

import pytest

from benchmarks.report_fleet import build
from tests.report.chromium import Browser

OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "output", "report-1000")
MiB = 1 << 20

ROWS = "Array.from(document.querySelectorAll('#node-table tbody tr'))"
VISIBLE = ROWS + ".filter(r => !r.hidden)"


@pytest.fixture(scope="module")
def generated():
    report, texts, times = build(1000, history_points=30)
    os.makedirs(OUT, exist_ok=True)
    for ext, text in texts.items():
        with open(os.path.join(OUT, "report." + ext), "w", encoding="utf-8") as f:
            f.write(text)
    size = len(texts["html"].encode())
    print("\n1,000 nodes: report generated in %.2f s (%s); report.html %.2f MiB"
          % (sum(times.values()), ", ".join("%s %.2f s" % kv for kv in times.items()), size / MiB))
    return report, os.path.join(OUT, "report.html"), size


@pytest.fixture(scope="module")
def browser():
    with Browser() as b:
        yield b


@pytest.fixture(scope="module")
def page(generated, browser):
    report, path, size = generated
    page = browser.open("file://" + path, width=1600, height=1000)
    timing = page.evaluate("(() => { const t = performance.timing; return [t.domContentLoadedEventEnd - t.navigationStart,"
                           " t.loadEventEnd - t.navigationStart]; })()")
    print("1,000 nodes: Chromium loaded report.html in %.2f s (DOMContentLoaded %d ms, load %d ms)" % (page.load_seconds, timing[0], timing[1]))
    page.screenshot(os.path.join(OUT, "first-screen.png"))
    return page


def test_size_and_self_contained(generated):
    report, path, size = generated
    assert size <= 5 * MiB
    with open(path, encoding="utf-8") as f:
        html = f.read()
    assert "http://" not in html and "https://" not in html and "<link" not in html and "src=" not in html


def test_first_screen_worst_first(generated, page):
    report = generated[0]
    health = report["summary"]["nodes_by_health"]
    rows = page.evaluate(ROWS + ".map(r => [r.dataset.host, r.dataset.health])")
    assert len(rows) == 1000
    order = [row[1] for row in rows]
    assert order == sorted(order, key=["critical", "failed", "warning", "ok"].index)
    assert order.count("critical") == health["critical"] and order[0] == "critical"
    # the tiles show the counts
    tiles = page.evaluate("Object.fromEntries(Array.from(document.querySelectorAll('[data-filter-health]'))"
                          ".map(a => [a.dataset.filterHealth, +a.querySelector('.n').textContent]))")
    assert tiles == health
    assert page.evaluate("document.getElementById('node-controls').hidden") is False
    assert page.evaluate("document.getElementById('node-count').textContent") == "all 1000 nodes"
    # findings grouped by code, images and trends are there
    assert page.evaluate("document.querySelectorAll('#findings tr[data-code]').length") >= 5
    assert page.evaluate("document.querySelectorAll('#images tbody tr').length") >= 10
    assert page.evaluate("document.querySelectorAll('#trends svg.chart').length") == 2
    assert page.evaluate("document.querySelectorAll('#node-table svg.spark').length") > 900
    # per-node detail: collapsed
    assert page.evaluate("document.querySelectorAll('details.node').length") == 1000
    assert page.evaluate("document.querySelectorAll('details.node[open]').length") == 0


def _click_header(page, name):
    page.evaluate("Array.from(document.querySelectorAll('#node-table thead th button')).find(b => b.textContent === %s).click()" % json.dumps(name))


def test_sort_by_usage_then_by_node(page):
    _click_header(page, "Usage")
    usages = page.evaluate(ROWS + ".map(r => r.cells[3].dataset.v).filter(v => v !== '').map(Number)")
    assert usages == sorted(usages, reverse=True) and usages[0] > usages[-1]
    assert page.evaluate("document.querySelector('#node-table th[aria-sort]').textContent") == "Usage"
    assert page.evaluate("document.querySelector('#node-table th[aria-sort]').getAttribute('aria-sort')") == "descending"
    _click_header(page, "Usage")
    usages = page.evaluate(ROWS + ".map(r => r.cells[3].dataset.v).filter(v => v !== '').map(Number)")
    assert usages == sorted(usages)
    _click_header(page, "Node")
    hosts = page.evaluate(ROWS + ".map(r => r.dataset.host)")
    assert hosts == sorted(hosts)
    _click_header(page, "#")   # back to worst first
    assert page.evaluate(ROWS + ".map(r => +r.cells[0].dataset.v)") == list(range(1, 1001))


def _filter(page, text="", health="", drift=False):
    page.evaluate("""(() => {
        const q = document.getElementById('node-filter'), h = document.getElementById('node-health'), d = document.getElementById('node-drift');
        q.value = %s; h.value = %s; d.checked = %s;
        q.dispatchEvent(new Event('input')); h.dispatchEvent(new Event('change')); d.dispatchEvent(new Event('change'));
    })()""" % (json.dumps(text), json.dumps(health), "true" if drift else "false"))
    return page.evaluate(VISIBLE + ".map(r => r.dataset.host)")


def test_filter_by_code_health_and_drift(generated, page):
    report = generated[0]
    with_code = sorted(n["host"] for n in report["nodes"] if any(f["code"] == "gc_insufficient" for f in n["findings"]))
    assert 0 < len(with_code) < 1000
    assert sorted(_filter(page, "gc_insufficient")) == with_code
    assert page.evaluate("document.getElementById('node-count').textContent") == "%d of 1000 nodes" % len(with_code)
    failed = sorted(n["host"] for n in report["nodes"] if n["status"] == "failed")
    assert sorted(_filter(page, health="failed")) == failed
    drifted = sorted(n["host"] for n in report["nodes"] if n["drift"])
    assert sorted(_filter(page, drift=True)) == drifted
    assert _filter(page, "node-0042") == ["node-0042"]
    assert _filter(page, "no-such-node") == []
    assert len(_filter(page)) == 1000


def test_tiles_and_finding_groups_filter_the_table(generated, page):
    report = generated[0]
    page.evaluate("document.querySelector('[data-filter-health=\"critical\"]').click()")
    visible = page.evaluate(VISIBLE + ".map(r => r.dataset.health)")
    assert visible and set(visible) == {"critical"} and len(visible) == report["summary"]["nodes_by_health"]["critical"]
    page.evaluate("document.querySelector('#findings tr[data-code=\"eviction_before_gc\"] details').open = true")
    page.evaluate("document.querySelector('#findings tr[data-code=\"eviction_before_gc\"] [data-filter-text]').click()")
    codes = [n["host"] for n in report["nodes"] if any(f["code"] == "eviction_before_gc" for f in n["findings"])]
    assert sorted(page.evaluate(VISIBLE + ".map(r => r.dataset.host)")) == sorted(codes)
    page.screenshot(os.path.join(OUT, "filtered.png"))
    _filter(page)


def test_host_link_opens_its_detail(page):
    page.evaluate("document.querySelector('#node-table a.host').click()")
    opened = page.evaluate("Array.from(document.querySelectorAll('details.node[open]')).map(d => d.dataset.host)")
    first = page.evaluate("document.querySelector('#node-table tbody tr').dataset.host")
    assert opened == [first]
    # and shows it: the usage bar or the error, the runtime, the findings
    assert page.evaluate("document.querySelector('details.node[open]').textContent").count("Runtime:") == 1
    assert page.evaluate("document.querySelector('details.node[open] .bar, details.node[open] .failed-box').getBoundingClientRect().height") > 0
    page.screenshot(os.path.join(OUT, "node-detail.png"))


def test_storage_breakdown_per_node_and_the_fleets_top_consumers(generated, page):
    """Issue 24: each node's disk use by category with its largest objects, and the fleet's top consumers by category."""
    report = generated[0]
    top = report["storage_top"]
    shown = page.evaluate("Object.fromEntries(Array.from(document.querySelectorAll('#storage tr[data-category]'))"
                          ".map(r => [r.dataset.category, Array.from(r.querySelectorAll('a.host')).map(a => a.textContent)]))")
    assert set(shown) == set(top) and "other_namespace_images" in shown and "unreferenced_snapshots" in shown
    for category, hosts in shown.items():
        assert hosts == [r["host"] for r in top[category]], category  # largest first, the first three and the rest folded
    assert page.evaluate("document.querySelector('#storage').getBoundingClientRect().height") > 0
    # the node with the most images in other namespaces: its detail names the category, its bytes and the largest object
    host = top["other_namespace_images"][0]["host"]
    node = next(n for n in report["nodes"] if n["host"] == host)
    page.evaluate("document.querySelectorAll('details.node[open]').forEach(d => d.open = false)")
    page.evaluate("document.querySelector('#storage a.host[href=\"#node-%s\"]').click()" % host)
    rows = page.evaluate("Array.from(document.querySelectorAll('details.node[open] table.storage tbody tr'))"
                         ".map(r => Array.from(r.cells).map(c => c.textContent))")
    by = {row[0]: row for row in rows}
    assert set(by) == {k for k, v in node["storage"]["categories"].items() if v != 0}
    assert by["other_namespace_images"][3].startswith("moby/docker.io/library/golang:1.23 ")
    assert by["k8s_images"][3].count(", ") == 2  # its three largest images
    assert page.evaluate("document.querySelector('details.node[open] table.storage').getBoundingClientRect().height") > 0
    page.evaluate("document.querySelector('details.node[open] table.storage').scrollIntoView()")
    page.screenshot(os.path.join(OUT, "node-storage.png"))
    page.evaluate("document.querySelectorAll('details.node[open]').forEach(d => d.open = false)")


def test_no_script_errors(browser, page):
    assert [e for e in browser._events if e["method"] in ("Runtime.exceptionThrown",)] == []


def test_reads_as_a_plain_table_without_javascript(generated, browser):
    report, path, size = generated
    session_page = browser.open("about:blank", width=1400, height=900)
    session_page.send("Emulation.setScriptExecutionDisabled", {"value": True})
    session_page.send("Page.navigate", {"url": "file://" + path})
    browser.wait_event("Page.loadEventFired", session_page.session)
    assert session_page.evaluate("document.querySelectorAll('#node-table tbody tr').length") == 1000
    assert session_page.evaluate("document.getElementById('node-controls').hidden") is True
    assert session_page.evaluate("document.querySelector('#node-table thead th').textContent") == "#"   # no sort buttons
    # per-node detail is there too, with the storage breakdown
    assert session_page.evaluate("document.querySelectorAll('details.node p').length") >= 1000
    assert session_page.evaluate("document.querySelectorAll('details.node table.storage').length") == sum(1 for n in report["nodes"] if n["storage"])
    session_page.screenshot(os.path.join(OUT, "no-javascript.png"))


OVERFLOWING = ("Array.from(document.querySelectorAll('.panel, .scroll, details.node, table'))"
               ".filter(el => el.getClientRects().length && el.scrollWidth > el.clientWidth + 1)"
               ".map(el => (el.id || el.className || el.tagName) + ' ' + el.scrollWidth + '>' + el.clientWidth)")


def test_no_table_scrolls_sideways_at_1400_px(generated, browser):
    """Issue 22, item 3: at 1400 px no panel, table or node detail is wider than its box (nothing scrolls sideways)."""
    report, path, size = generated
    narrow = browser.open("file://" + path, width=1400, height=900)
    assert narrow.evaluate("document.documentElement.scrollWidth") <= 1400
    assert narrow.evaluate(OVERFLOWING) == []
    narrow.screenshot(os.path.join(OUT, "width-1400.png"))
    # every node's detail open (the failed ones too): still nothing wider than its box
    narrow.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
    assert narrow.evaluate(OVERFLOWING) == []
    assert narrow.evaluate("document.documentElement.scrollWidth") <= 1400
    narrow.evaluate("document.getElementById('details').scrollIntoView()")
    narrow.screenshot(os.path.join(OUT, "width-1400-details.png"))


def test_failed_nodes_show_their_reason_only_and_info_is_never_red(generated, browser):
    """Issue 22, item 3: a failed node's detail is its reason (no thresholds, usage or signals); severity colours follow severity."""
    report, path, size = generated
    failed = [n for n in report["nodes"] if n["status"] == "failed"]
    assert failed
    page = browser.open("file://" + path, width=1400, height=900)
    texts = page.evaluate("Array.from(document.querySelectorAll('details.node')).filter(d => d.querySelector('.failed-box'))"
                          ".map(d => d.textContent)")
    assert len(texts) == len(failed)
    for text in texts:
        assert "Not audited: " in text and "threshold" not in text and "Runtime:" not in text and "Eviction signals" not in text
    red = page.evaluate("getComputedStyle(document.documentElement).getPropertyValue('--critical').trim()")
    colour = ("(() => { const el = document.createElement('div'); el.style.color = '%s'; document.body.appendChild(el);"
              " const c = getComputedStyle(el).color; el.remove(); return c; })()" % red)
    red_rgb = page.evaluate(colour)
    info = page.evaluate("Array.from(document.querySelectorAll('#findings tr')).filter(r => r.querySelector('.badge.info'))"
                         ".map(r => Array.from(r.querySelectorAll('*')).map(el => getComputedStyle(el).color))")
    assert info, "the synthetic fleet has info findings"
    assert all(red_rgb not in colours for colours in info)
