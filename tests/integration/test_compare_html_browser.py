"""The HTML report lays out in a real browser at a desktop's, a tablet's and a phone's width.

One headless Chromium, driven over the DevTools protocol (tests/support/chromium.py), opens the
reports of two and of five sessions at 1920, 1280, 768, 390 and 360 px (phones through
`Emulation.setDeviceMetricsOverride`: a headless window is at least 500 px wide) and asserts
from the page itself: the page never scrolls sideways, no two texts of a chart overlap or leave
it, every line stays inside its plot area, and the cost table fits a phone. Skipped only when no
Chromium is installed (Debian: `apt-get install chromium`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from gputui.snapshot.report_html import html_report
from tests.support.chromium import LAYOUT_PROBE, Chromium, find_browser
from tests.support.report_sessions import five_sessions, two_sessions

WIDTHS = (1920, 1280, 768, 390, 360)
TABLE_FITS = """
[...document.querySelectorAll('h3')].filter(h => h.textContent === 'Cost')
  .map(h => { const box = h.nextElementSibling; return [box.scrollWidth, box.clientWidth]; })
"""

pytestmark = [pytest.mark.slow, pytest.mark.browser]


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chromium]:
    binary = find_browser()
    if binary is None:
        pytest.skip("no Chromium binary (apt-get install chromium)")
    with Chromium(binary, tmp_path_factory.mktemp("chromium")) as chromium:
        yield chromium


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("reports")
    urls = {}
    for name, cmp in (("two", two_sessions()), ("five", five_sessions())):
        page = folder / f"{name}.html"
        page.write_text(html_report(cmp))
        urls[name] = page.as_uri()
    return urls


def layout(browser: Chromium, url: str, width: int) -> dict[str, Any]:
    browser.open(url, width)
    probe: dict[str, Any] = browser.evaluate(LAYOUT_PROBE)
    return probe


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize(("sessions", "charts"), [("two", 7), ("five", 9)])
def test_report_fits_the_width(
    browser: Chromium, pages: dict[str, str], sessions: str, charts: int, width: int
) -> None:
    probe = layout(browser, pages[sessions], width)
    assert probe["innerWidth"] == width
    assert probe["scrollWidth"] <= probe["innerWidth"]
    # 3 sweeps + 4 GPU traces, and the five's two diagnosed runs' TTFT breakdowns: one drawing
    # of each is shown (the desktop's or the phone's).
    assert probe["charts"] == charts
    assert probe["texts"] > 10 * charts
    assert probe["overlaps"] == []
    assert probe["outside"] == []
    assert probe["lines"] >= 7 and probe["clipped"] == []
    assert browser.evaluate(TABLE_FITS) == [[w, w] for w, _ in browser.evaluate(TABLE_FITS)]


def test_a_step_with_no_data_is_a_gap_and_the_phone_sees_every_level(
    browser: Chromium, pages: dict[str, str]
) -> None:
    layout(browser, pages["five"], 390)
    labels = browser.evaluate(
        "[...document.querySelectorAll('.chart')][0].querySelector('.narrow svg').textContent"
    )
    assert "128" in labels and "concurrency — log scale" in labels
    # The interrupted run's step at 64 answered nothing: its line stops at 32, 128 is a dot.
    gap_run = "#ff7f0e"  # the fifth run's colour
    lines = browser.evaluate(
        "[...document.querySelectorAll('.chart')][0].querySelectorAll("
        f"'.narrow polyline[stroke=\"{gap_run}\"]').length"
    )
    assert lines == 1
