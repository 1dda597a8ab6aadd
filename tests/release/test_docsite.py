# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Headless Chromium renders the docs site's image_gc module page and an audit report.html.

scripts/release-checks.sh docs builds the site and runs this with KUBENODE_GC_DOCSITE (the HTML
directory) and KUBENODE_GC_ARTIFACTS (where the screenshots go). The report comes from the real
audit playbook against a real containerd (the fixtures of the ansible-core smoke test), so the
check holds whatever the report's design: the page loads, has a title and a heading, and asks
for nothing outside itself.
"""

import os
import re
import shutil
import subprocess
import tempfile
from html.parser import HTMLParser

import pytest

from tests.compat.test_smoke import node, run  # noqa: F401  pylint: disable=unused-import

DOCSITE = os.environ.get("KUBENODE_GC_DOCSITE")
ARTIFACTS = os.environ.get("KUBENODE_GC_ARTIFACTS") or tempfile.mkdtemp(prefix="kubenode-gc-docsite-")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    # any request that leaves the machine fails instead of hanging
    "--host-resolver-rules=MAP * ~NOTFOUND",
]


def chromium():
    path = shutil.which("chromium")
    if path is None:
        pytest.fail("Debian's chromium is not installed (scripts/setup.sh installs it)")
    return path


def render(url, name):
    """Dump the DOM Chromium builds for ``url`` and save a screenshot as <ARTIFACTS>/<name>.png."""
    with tempfile.TemporaryDirectory() as profile:
        base = [chromium(), *CHROMIUM_FLAGS, "--user-data-dir=" + profile]
        dom = subprocess.run(base + ["--virtual-time-budget=5000", "--dump-dom", url], capture_output=True, text=True, timeout=120, check=True).stdout
    shot = os.path.join(ARTIFACTS, name + ".png")
    with tempfile.TemporaryDirectory() as profile:
        base = [chromium(), *CHROMIUM_FLAGS, "--user-data-dir=" + profile]
        subprocess.run(base + ["--window-size=1280,1600", "--screenshot=" + shot, url], capture_output=True, timeout=120, check=True)
    with open(os.path.join(ARTIFACTS, name + ".dom.html"), "w", encoding="utf-8") as f:
        f.write(dom)
    return dom, shot


class Page(HTMLParser):
    """Title, headings, text and every URL the page would load."""

    def __init__(self):
        super().__init__()
        self.title, self.headings, self.text, self.loads = "", [], [], []
        self._in = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag in ("title", "h1", "h2"):
            self._in = tag
            if tag != "title":
                self.headings.append("")
        if tag in ("script", "img", "iframe", "source", "audio", "video", "embed") and attrs.get("src"):
            self.loads.append(attrs["src"])
        if tag == "link" and attrs.get("href") and set((attrs.get("rel") or "").split()) & {"stylesheet", "icon", "preload", "prefetch", "manifest"}:
            self.loads.append(attrs["href"])
        if tag == "style":
            self._in = "style"
        if attrs.get("style"):
            self.loads.extend(re.findall(r"url\(\s*['\"]?([^'\")]+)", attrs["style"]))

    def handle_endtag(self, tag):
        if tag == self._in:
            self._in = None

    def handle_data(self, data):
        self.text.append(data)
        if self._in == "title":
            self.title += data
        elif self._in in ("h1", "h2"):
            self.headings[-1] += data
        elif self._in == "style":
            self.loads.extend(re.findall(r"url\(\s*['\"]?([^'\")]+)|@import\s+['\"]([^'\"]+)", data))


def parse(dom):
    page = Page()
    page.feed(dom)
    page.loads = [u if isinstance(u, str) else next(x for x in u if x) for u in page.loads]
    page.text = " ".join(" ".join(page.text).split())
    return page


def external(urls):
    return [u for u in urls if re.match(r"^(https?:)?//", u.strip(), re.I)]


@pytest.fixture(scope="module")
def site():
    if not DOCSITE:
        pytest.skip("KUBENODE_GC_DOCSITE is not set: run `bash scripts/release-checks.sh docs`")
    return DOCSITE


def test_image_gc_module_page_renders(site):
    path = os.path.join(site, "image_gc_module.html")
    assert os.path.isfile(path), sorted(os.listdir(site))
    dom, shot = render("file://" + path, "image_gc_module")
    page = parse(dom)
    assert "kubenode.gc.image_gc" in page.title
    assert any("kubenode.gc.image_gc module" in h for h in page.headings), page.headings
    # the option table, the examples and the return values made it through antsibull-docs and Sphinx
    for text in ("high_threshold_percent", "keep_images", "Examples", "Return Values", "bytes_freed_measured"):
        assert text in page.text, text
    assert external(page.loads) == [], "the page loads resources from outside the site"
    assert os.path.getsize(shot) > 10000


def test_index_links_every_content_type(site):
    page = parse(open(os.path.join(site, "index.html"), encoding="utf-8").read())
    for text in ("image_gc", "gc_summary", "audit_report", "kubelet_gc", "Playbooks", "execution environment"):
        assert text in page.text, text


def test_audit_report_renders(site, run):  # noqa: F811  (fixture)
    assert run["proc"].returncode == 0, run["proc"].stdout + run["proc"].stderr
    path = run["work"] / "report" / "report.html"
    source = path.read_text(encoding="utf-8")
    dom, shot = render(path.as_uri(), "audit_report")
    page = parse(dom)
    assert page.title.strip(), "report.html has no title"
    assert any(h.strip() for h in page.headings), "report.html has no h1/h2 heading"
    assert "smoke-node" in page.text  # the audited node is in the rendered page
    # self-contained: nothing fetched from anywhere, in the source or the DOM scripts built
    assert external(parse(source).loads) == [] and external(page.loads) == []
    assert os.path.getsize(shot) > 5000
