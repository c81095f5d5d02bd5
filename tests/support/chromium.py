"""Headless Chromium driven over the DevTools protocol on a pipe: one browser, many page widths.

Why a pipe: `--remote-debugging-pipe` needs no port and no websocket library; the browser reads
NUL-terminated JSON commands on fd 3 and writes replies and events on fd 4. Why the protocol at
all: headless Chromium keeps a window at least 500 px wide, and only
`Emulation.setDeviceMetricsOverride` lays a page out at a phone's 390 px.

`Chromium(binary, profile)` starts the browser; `page.open(url, width)` lays the page out at that
CSS width; `page.evaluate(js)` returns a JSON value; `page.screenshot()` the whole page as PNG.
`LAYOUT_PROBE` is the script the report's browser test and `scripts/report_screenshots.py` run.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

_ON_FDS_3_4 = """
import fcntl, os, sys
ends = [fcntl.fcntl(int(fd), fcntl.F_DUPFD, 10) for fd in sys.argv[1:3]]
os.dup2(ends[0], 3)
os.dup2(ends[1], 4)
os.execv(sys.argv[3], sys.argv[3:])
"""
"""Puts the pipe's two ends on fds 3 and 4 (what the browser reads and writes), then runs it."""
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")


def find_browser() -> str | None:
    """The first Chromium-like binary on PATH (None: the browser tests skip)."""
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


class Chromium:
    """One headless browser and one page in it (see the module docstring)."""

    def __init__(self, binary: str, profile: Path, timeout_s: float = 60.0) -> None:
        self._timeout_s = timeout_s
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--remote-debugging-pipe",
            f"--user-data-dir={profile}",
            "about:blank",
        ]
        ends = (str(to_browser_r), str(from_browser_w))
        self._log = (profile.parent / f"{profile.name}.log").open("wb")  # why it failed, if it did
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _ON_FDS_3_4, *ends, binary, *args],
            pass_fds=(to_browser_r, from_browser_w),
            stdout=subprocess.DEVNULL,
            stderr=self._log,
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        target = self._call("Target.createTarget", {"url": "about:blank"})["targetId"]
        attached = self._call("Target.attachToTarget", {"targetId": target, "flatten": True})
        self._session = attached["sessionId"]
        self.call("Page.enable")

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise TimeoutError("Chromium did not answer")
            chunk = os.read(self._from_browser, 1 << 16)
            if not chunk:
                raise RuntimeError("Chromium closed its pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        decoded: dict[str, Any] = json.loads(message)
        return decoded

    def _call(
        self, method: str, params: dict[str, Any] | None = None, session: str | None = None
    ) -> dict[str, Any]:
        self._next_id += 1
        request: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session is not None:
            request["sessionId"] = session
        os.write(self._to_browser, json.dumps(request).encode() + b"\0")
        deadline = time.monotonic() + self._timeout_s
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """One DevTools command on the page; its result."""
        return self._call(method, params, self._session)

    def evaluate(self, expression: str) -> Any:
        """The JSON value of a script run in the page."""
        result = self.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def open(self, url: str, width: int, height: int = 900) -> None:
        """Load `url` laid out `width` CSS px wide (a phone's metrics below 500 px)."""
        self.resize(width, height)
        self.call("Page.navigate", {"url": url})
        deadline = time.monotonic() + self._timeout_s
        while self.evaluate("document.readyState") != "complete":
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} did not load")
            time.sleep(0.02)

    def resize(self, width: int, height: int) -> None:
        """Emulate a viewport of `width` x `height` CSS px (mobile below 500 px)."""
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 500},
        )

    def screenshot(self, width: int, span: tuple[str, str] | None = None) -> bytes:
        """The whole page at `width` CSS px, as PNG; or from the top of the element the first
        selector of `span` matches to the bottom of the second's."""
        height = int(self.evaluate("document.documentElement.scrollHeight"))
        self.resize(width, height)
        params: dict[str, Any] = {"format": "png"}
        if span is not None:
            top, bottom = (
                self.evaluate(
                    f"document.querySelector({json.dumps(selector)}).getBoundingClientRect()"
                    f".{edge} + scrollY"
                )
                for selector, edge in zip(span, ("top", "bottom"), strict=True)
            )
            params["clip"] = {"x": 0, "y": top, "width": width, "height": bottom - top, "scale": 1}
        shot = self.call("Page.captureScreenshot", params)
        return base64.b64decode(shot["data"])

    def close(self) -> None:
        """Ask the browser to quit; kill it if it lingers."""
        with contextlib.suppress(RuntimeError, TimeoutError, OSError):
            self._call("Browser.close")
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        os.close(self._to_browser)
        os.close(self._from_browser)
        self._log.close()

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


LAYOUT_PROBE = """
(() => {
  const box = (r) => ({l: r.left, t: r.top, r: r.right, b: r.bottom});
  const seen = (r) => r.width > 0 && r.height > 0;
  const charts = [...document.querySelectorAll('svg')].filter(s => seen(s.getBoundingClientRect()));
  const overlaps = [], outside = [], lines = [], clipped = [];
  charts.forEach((svg, n) => {
    const frame = svg.getBoundingClientRect();
    const texts = [...svg.querySelectorAll('text')]
      .map(t => ({s: t.textContent, r: t.getBoundingClientRect()})).filter(t => seen(t.r));
    for (let i = 0; i < texts.length; i++) {
      const a = texts[i].r;
      if (a.left < frame.left - 0.5 || a.right > frame.right + 0.5 ||
          a.top < frame.top - 0.5 || a.bottom > frame.bottom + 0.5) outside.push(texts[i].s);
      for (let j = i + 1; j < texts.length; j++) {
        const b = texts[j].r;
        const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
        const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
        if (w > 0.5 && h > 0.5) overlaps.push([n, texts[i].s, texts[j].s]);
      }
    }
    const plot = svg.querySelector('rect.plot');
    if (!plot) return;
    const p = plot.getBoundingClientRect();
    svg.querySelectorAll('polyline, line.bound').forEach(el => {
      const r = el.getBoundingClientRect();
      lines.push(1);
      if (r.left < p.left - 1 || r.right > p.right + 1 || r.top < p.top - 1 ||
          r.bottom > p.bottom + 1) clipped.push([n, el.getAttribute('class'), box(r), box(p)]);
    });
  });
  return {
    scrollWidth: document.documentElement.scrollWidth,
    innerWidth: window.innerWidth,
    charts: charts.length,
    texts: charts.reduce((k, s) => k + s.querySelectorAll('text').length, 0),
    overlaps, outside, lines: lines.length, clipped,
  };
})()
"""
"""What the report test asserts from the page: widths, overlapping chart texts, stray lines."""
