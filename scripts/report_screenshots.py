"""Make screenshots/report-{two,five}-{1280,768,390}.png: the HTML report at three widths.

The reports are those of the browser test (tests/support/report_sessions.py: the two saved
sweeps, and five sessions with a diagnosed run, a dense sweep and an interrupted one with a step
that answered nothing); headless Chromium lays each out at a desktop's 1280 px, a tablet's 768
px and a phone's 390 px (emulated over the DevTools protocol) and captures the whole page (of
the five, the sweep and TTFT breakdown charts only). Each
line printed is one PNG with the page's own checks: scrollWidth against the width, and how many
pairs of chart texts overlap. Usage: `python scripts/report_screenshots.py [OUT_DIR]` (default
screenshots/); needs `chromium` on PATH.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.support: the same reports and browser as the test

from tests.support.chromium import LAYOUT_PROBE, Chromium, find_browser  # noqa: E402
from tests.support.report_sessions import five_sessions, two_sessions  # noqa: E402

from gputui.snapshot.report_html import html_report  # noqa: E402

WIDTHS = (1280, 768, 390)


def main(out: Path) -> int:
    """Write the PNGs into `out`; 1 when no Chromium is installed."""
    binary = find_browser()
    if binary is None:
        sys.stderr.write("report_screenshots: no Chromium on PATH (apt-get install chromium)\n")
        return 1
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        with Chromium(binary, folder / "profile") as browser:
            for name, cmp in (("two", two_sessions()), ("five", five_sessions())):
                page = folder / f"{name}.html"
                page.write_text(html_report(cmp))
                for width in WIDTHS:
                    browser.open(page.as_uri(), width)
                    probe = browser.evaluate(LAYOUT_PROBE)
                    path = out / f"report-{name}-{width}.png"
                    # Five runs: their charts (the tables are the two's, longer).
                    span = ("#sweeps", "#ttft + p + .charts") if name == "five" else None
                    path.write_bytes(browser.screenshot(width, span))
                    shown = path.relative_to(ROOT) if ROOT in path.parents else path
                    sys.stdout.write(
                        f"{shown}  scrollWidth {probe['scrollWidth']} / {probe['innerWidth']}"
                        f"  overlapping texts {len(probe['overlaps'])}\n"
                    )
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "screenshots"))
