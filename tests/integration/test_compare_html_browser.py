"""The HTML report renders in a real browser: headless Chromium parses it and screenshots it.

Skipped only when no Chromium binary is installed (Debian: `apt-get install chromium`). With
GPUTUI_UPDATE_SCREENSHOTS=1 the screenshot replaces screenshots/compare-report.png.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from gputui.snapshot.report_html import html_report
from tests.unit.test_compare_format import full

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
SCREENSHOT = Path(__file__).resolve().parents[2] / "screenshots" / "compare-report.png"
SIZE = (1400, 2600)


def browser() -> str:
    found = next((path for name in BROWSERS if (path := shutil.which(name))), None)
    if found is None:
        pytest.skip("no Chromium binary (apt-get install chromium)")
    return found


def headless(binary: str, profile: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    command = [
        binary,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        *args,
    ]
    return subprocess.run(command, capture_output=True, timeout=90, check=False)


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


@pytest.mark.slow
@pytest.mark.browser
def test_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    binary = browser()
    page = tmp_path / "report.html"
    page.write_text(html_report(full()))
    url = page.as_uri()

    dom = headless(binary, tmp_path / "profile-dom", "--dump-dom", url)
    assert dom.returncode == 0, dom.stderr.decode(errors="replace")[-2000:]
    text = dom.stdout.decode()
    assert text.count("<svg") == 7
    assert "gputui compare: rtx4090-48gb vs a100-80gb-pcie" in text
    assert "<td>2.07</td>" in text

    shot = tmp_path / "report.png"
    width, height = SIZE
    result = headless(
        binary,
        tmp_path / "profile-shot",
        f"--screenshot={shot}",
        f"--window-size={width},{height}",
        url,
    )
    assert result.returncode == 0, result.stderr.decode(errors="replace")[-2000:]
    data = shot.read_bytes()
    assert png_size(data) == SIZE
    assert len(data) > 50_000  # a blank page compresses to a few kB; this one has 7 charts
    if os.environ.get("GPUTUI_UPDATE_SCREENSHOTS"):
        SCREENSHOT.parent.mkdir(exist_ok=True)
        shutil.copyfile(shot, SCREENSHOT)
