"""The HTML report: self-contained, deterministic, with the table, the overlays and the markers."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from gputui.snapshot.compare import build_comparison, name_snapshots
from gputui.snapshot.report_html import Series, html_report, line_chart
from tests.unit.test_compare import CURVE, make_snap
from tests.unit.test_compare_format import full


class _Collector(HTMLParser):
    """Tags, attributes and the open-tag stack, to check the document is well nested."""

    VOID = frozenset({"meta", "br", "img", "input", "link", "hr"})
    SVG_EMPTY = frozenset({"line", "rect", "circle", "polyline", "path"})

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []
        self.stack: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs += attrs
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs += attrs

    def handle_endtag(self, tag: str) -> None:
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes {self.stack[-1:]}"
        self.stack.pop()


def parsed(text: str) -> _Collector:
    collector = _Collector()
    collector.feed(text)
    collector.close()
    assert collector.stack == []
    return collector


def test_report_is_self_contained_and_deterministic() -> None:
    text = html_report(full())
    assert text == html_report(full())
    assert text.startswith("<!DOCTYPE html>\n")
    for needle in ("http:", "https:", "//", "@import", "<script", "<link", "<img", "src="):
        assert needle not in text.replace("</", ""), needle
    assert re.findall(r"url\((?!#clip-[a-z0-9]+\))", text) == []  # only the page's own clips
    tags = parsed(text).tags
    assert tags.count("svg") == 2 * 7  # 3 sweeps + 4 GPU traces, for a desktop and a phone
    assert tags.count("table") == 6  # 5 blocks + the equal-throughput table
    ids = re.findall(r'<clipPath id="([^"]+)"', text)
    assert len(ids) == len(set(ids)) == 2 * 7  # one clipPath per chart, each its own id


def test_report_shows_table_sla_lines_knees_and_capacities() -> None:
    text = html_report(full())
    assert "<h3>SLA-qualified capacity (latencies and errors at that level)</h3>" in text
    assert "<td>3.74</td>" in text and "<td>2.38</td>" in text  # good output (issue 31)
    assert "SLA 1 s</text>" in text and "SLA 35 ms</text>" in text
    # Both runs, three sweep charts, two drawings: a ring at each knee, a square at each capacity.
    assert len(re.findall(r'<circle class="knee"', text)) == 12
    assert len(re.findall(r'<rect class="capacity"', text)) == 12
    assert "rtx4090-48gb: knee at 64</title>" in text
    assert "a100-80gb-pcie: qualified capacity at 16</title>" in text
    assert "GPU temperature over the run" in text and "VRAM used over the run" in text
    assert 'class="banner"' not in text


def test_warnings_are_a_visible_banner_and_text_is_escaped() -> None:
    a = make_snap(CURVE, label="<b>a</b>")
    b = make_snap(CURVE, label="b", model="qwen")
    text = html_report(build_comparison(name_snapshots([(a, None), (b, None)])))
    assert '<div class="banner" role="alert"><strong>Warnings</strong><ul><li>' in text
    assert "not comparable: different model (&lt;b&gt;a&lt;/b&gt;: llama; b: qwen)" in text
    assert "<b>a</b>" not in text
    assert "No GPU traces in these snapshots." in text
    parsed(text)


def test_line_chart_axes() -> None:
    log = line_chart(
        "t", "x", "y", [Series("s", "#000", ((1, 1.0), (4, 2.0), (16, 3.0)))], log_x=True
    )
    assert list(re.findall(r'text-anchor="middle">([\d,.]+)</text>', log)) == [
        "1",
        "4",
        "16",
    ]
    linear = line_chart("t", "x", "y", [Series("s", "#000", ((-0.002, 1.0), (93.0, 2.0)))])
    ticks = re.findall(r'text-anchor="middle">(-?[\d,.]+)</text>', linear)
    assert ticks[0] == "0" and ticks[-1] == "100"
    assert "no data in these snapshots" in line_chart("t", "x", "y", [Series("s", "#000", ())])
