# Copyright (c) kubenode.gc contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Headless Chromium driven over the DevTools protocol on a pipe (--remote-debugging-pipe): no port, no network,
no extra package. Chromium reads commands from fd 3 and writes replies and events to fd 4, one JSON object per
message, each ended by a NUL byte.

    with Browser() as browser:
        page = browser.open("file:///tmp/report.html", width=1400, height=900)
        page.evaluate("document.title")
        page.screenshot("/tmp/report.png")
"""

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio"]


def chromium_binary():
    return shutil.which("chromium") or shutil.which("chromium-browser")


class CdpError(RuntimeError):
    pass


class Browser:
    def __init__(self, binary=None, timeout=180.0):
        self.binary = binary or chromium_binary()
        self.timeout = timeout
        self.proc = None
        self.profile = None
        self._next = 0
        self._buffer = b""
        self._events = []

    def __enter__(self):
        # Chromium sometimes dies while it starts on a machine busy with containers (the pipe breaks at the first
        # message): one more launch, then the error with what it printed.
        for attempt in (1, 2):
            try:
                self.start()
                return self
            except OSError as exc:
                printed = self._stderr_tail()
                self.close()
                if attempt == 2:
                    raise CdpError("chromium died while starting (%s); it printed: %s" % (exc, printed or "nothing")) from None
        return self

    def _stderr_tail(self):
        if self.profile is None:
            return ""
        try:
            with open(os.path.join(self.profile, "stderr.log"), encoding="utf-8", errors="replace") as f:
                return f.read()[-2000:]
        except OSError:
            return ""

    def __exit__(self, *exc):
        self.close()

    def start(self):
        if not self.binary:
            raise CdpError("chromium is not installed (Debian package chromium; scripts/setup.sh installs it).")
        self.profile = tempfile.mkdtemp(prefix="kgc-chromium-")
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        # high, distinct numbers first, so the dup2 onto 3 and 4 in the child cannot clobber one another
        high_r = fcntl.fcntl(to_child_r, fcntl.F_DUPFD, 100)
        high_w = fcntl.fcntl(from_child_w, fcntl.F_DUPFD, 100)
        os.close(to_child_r)
        os.close(from_child_w)

        def wire():
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        args = [self.binary] + FLAGS + ["--user-data-dir=" + self.profile, "--remote-debugging-pipe", "about:blank"]
        with open(os.path.join(self.profile, "stderr.log"), "wb") as stderr:
            self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
                                         preexec_fn=wire, pass_fds=(3, 4, high_r, high_w))  # pylint: disable=subprocess-popen-preexec-fn
        os.close(high_r)
        os.close(high_w)
        self._out = to_child_w
        self._in = from_child_r
        self.send("Target.setDiscoverTargets", {"discover": True})
        return self

    def close(self):
        if self.proc is not None:
            try:
                self.send("Browser.close", timeout=5)
            except (CdpError, OSError):
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            for fd in (self._out, self._in):
                try:
                    os.close(fd)
                except OSError:
                    pass
            self.proc = None
        if self.profile:
            shutil.rmtree(self.profile, ignore_errors=True)
            self.profile = None

    def _read_message(self, deadline):
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise CdpError("Chromium did not answer in time.")
            ready = select.select([self._in], [], [], left)[0]
            if ready:
                chunk = os.read(self._in, 1 << 20)
                if not chunk:
                    raise CdpError("Chromium closed the DevTools pipe (exit code %s)." % self.proc.poll())
                self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def send(self, method, params=None, session=None, timeout=None):
        self._next += 1
        message = {"id": self._next, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        data = json.dumps(message).encode() + b"\0"
        while data:
            data = data[os.write(self._out, data):]
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise CdpError("%s failed: %s" % (method, reply["error"].get("message")))
                return reply.get("result", {})
            if "method" in reply:
                self._events.append(reply)

    def wait_event(self, method, session=None, timeout=None):
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            for i, event in enumerate(self._events):
                if event["method"] == method and (session is None or event.get("sessionId") == session):
                    return self._events.pop(i)
            reply = self._read_message(deadline)
            if "method" in reply:
                self._events.append(reply)

    def open(self, url, width=1400, height=900):
        """A new tab showing ``url``; returns a Page once its load event fired (Page.load_seconds: navigation to load)."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, session)
        page.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        page.send("Page.enable")
        page.send("Runtime.enable")
        start = time.monotonic()
        page.send("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired", session)
        page.load_seconds = time.monotonic() - start
        return page


class Page:
    def __init__(self, browser, session):
        self.browser = browser
        self.session = session
        self.load_seconds = None

    def send(self, method, params=None):
        return self.browser.send(method, params, session=self.session)

    def evaluate(self, expression):
        """The value of a JavaScript expression (awaited when it is a promise); raises on exceptions."""
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in result:
            raise CdpError("JavaScript error: %s" % result["exceptionDetails"].get("exception", {}).get("description")
                           or result["exceptionDetails"].get("text"))
        return result["result"].get("value")

    def screenshot(self, path, full_page=False):
        params = {"format": "png"}
        if full_page:
            params["captureBeyondViewport"] = True
        data = self.send("Page.captureScreenshot", params)["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
        return path
