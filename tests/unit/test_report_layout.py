"""The HTML report's text layout in numbers: labels thinned, legends wrapped, lines kept in the
plot, gaps for steps with no data, and a session titled and described as what it was."""

from __future__ import annotations

import math
import re
from itertools import pairwise

from gputui.snapshot.comparable import comparability_warnings, run_state
from gputui.snapshot.compare import build_comparison, name_snapshots
from gputui.snapshot.report_breakdown import breakdown_chart
from gputui.snapshot.report_chart import Series, line_chart
from gputui.snapshot.report_html import html_report
from gputui.snapshot.report_svg import NARROW, fit_text, text_width, thin_labels, wrap_text
from tests.support.report_sessions import five_sessions
from tests.unit.test_compare import CURVE, make_snap

NUMBER = r"(-?[\d.]+)"


def _plot(svg: str) -> tuple[float, float, float, float]:
    x, y, w, h = map(
        float,
        re.search(  # type: ignore[union-attr]
            rf'<rect class="plot" x="{NUMBER}" y="{NUMBER}" width="{NUMBER}" height="{NUMBER}"',
            svg,
        ).groups(),
    )
    return x, y, x + w, y + h


def _centred_texts(svg: str, y: float) -> list[tuple[float, str]]:
    """The middle-anchored labels on the baseline `y` (an axis' tick labels)."""
    found = re.findall(rf'<text x="{NUMBER}" y="{y:.1f}" text-anchor="middle">([^<]*)<', svg)
    return [(float(x), text) for x, text in found]


def test_text_is_shortened_or_wrapped_to_its_width() -> None:
    assert text_width("0123456789") == 10 * 0.636 * 11  # DejaVu Sans digits at 11 px
    assert text_width("ab", bold=True) > text_width("ab")
    short = fit_text("rtx4090-48gb power-limited to 350 W, node-17 rack B", 120)
    assert short.endswith("…") and text_width(short) <= 120 < text_width(short + "x")
    assert fit_text("fits", 100) == "fits"
    title = "TTFT breakdown per step: demo a100-80gb-pcie llama-3.1-8b"
    lines = wrap_text(title, 200)
    assert lines == ["TTFT breakdown per step: demo", "a100-80gb-pcie llama-3.1-8b"]
    assert all(text_width(line) <= 200 for line in lines)
    lines = wrap_text(title, 150)
    assert len(lines) == 2 and lines[1].endswith("…") and text_width(lines[1]) <= 150


def test_log_axis_labels_15_and_16_never_both_show() -> None:
    levels = [float(n) for n in range(1, 17)]
    xs = [40 + math.log2(v) / 4 * 300 for v in levels]  # 16 levels across a phone's 300 px
    labels = [(x, f"{v:g}") for x, v in zip(xs, levels, strict=True)]
    keep = thin_labels(labels, rank=lambda i: 0 if math.log2(levels[i]).is_integer() else 1)
    kept = [text for (_, text), k in zip(labels, keep, strict=True) if k]
    assert kept[0] == "1" and kept[-1] == "16" and "15" not in kept
    assert {"2", "4", "8"} <= set(kept)  # the powers of two come before their neighbours
    boxes = sorted(
        (x - text_width(t) / 2, x + text_width(t) / 2)
        for (x, t), k in zip(labels, keep, strict=True)
        if k
    )
    assert all(a[1] + 6 <= b[0] for a, b in pairwise(boxes))


def test_a_step_with_no_data_breaks_the_line_and_lines_stay_in_the_plot() -> None:
    points = ((1.0, 100.0), (2.0, 180.0), (4.0, None), (8.0, 300.0), (16.0, 310.0))
    svg = line_chart("tok/s", "concurrency", "tok/s", [Series("a", "#000", points)], log_x=True)
    lines = re.findall(r'<polyline points="([^"]+)"', svg)
    assert len(lines) == 2  # 1-2, then 8-16: no point at 4, and no zero
    assert svg.count('r="2.5"') == 4
    left, top, right, bottom = _plot(svg)
    for line in lines:
        for pair in line.split():
            x, y = map(float, pair.split(","))
            assert left <= x <= right and top <= y <= bottom
    assert 'clip-path="url(#clip-c)"' in svg and '<clipPath id="clip-c">' in svg
    # A trace that starts 2 ms before its origin is clamped to the axis, not drawn past it.
    trace = line_chart("t", "time (s)", "W", [Series("g", "#000", ((-0.002, 1.0), (93.0, 2.0)))])
    first = re.search(r'<polyline points="([\d.]+),', trace)
    assert first is not None and float(first.group(1)) == _plot(trace)[0]


def test_x_labels_keep_clear_of_the_y_labels() -> None:
    # A TUI session's GPU trace starts seconds before its origin: the axis starts at -25 s,
    # whose label would sit over the y axis' "0".
    trace = line_chart("t", "time (s)", "W", [Series("g", "#000", ((-3.0, 0.0), (140.0, 9.0)))])
    left, _, _, bottom = _plot(trace)
    ticks = _centred_texts(trace, bottom + 16)
    assert ticks[0][1] == "0"  # -25 dropped
    assert ticks[0][0] == round(left + 25 / 175 * (_plot(trace)[2] - left), 1)
    assert all(x - text_width(t) / 2 >= left - 4 for x, t in ticks)


def test_long_legends_wrap_into_rows_and_push_the_plot_down() -> None:
    names = ["rtx4090-48gb", "a100-80gb-pcie", "demo a100-80gb-pcie llama-3.1-8b", "b" * 80]
    series = [Series(n, "#000", ((1.0, 1.0), (2.0, 2.0))) for n in names]
    wide = line_chart("t", "x", "y", series)
    narrow = line_chart("t", "x", "y", series, width=NARROW)
    legend_rows = {
        svg: sorted(set(re.findall(r'<rect x="[\d.]+" y="([\d.]+)" width="12" height="8"', svg)))
        for svg in (wide, narrow)
    }
    assert len(legend_rows[wide]) == 2 and len(legend_rows[narrow]) == 3
    assert _plot(narrow)[1] - _plot(wide)[1] == 16  # one more row of 16 px
    assert "<title>" + "b" * 80 + "</title>" in narrow  # the shortened name keeps a tooltip


def test_sla_labels_of_close_bounds_do_not_overlap() -> None:
    series = [Series("a", "#000", ((1.0, 100.0), (2.0, 2000.0)))]
    svg = line_chart("t", "x", "ms", series, hlines=[(1000.0, "SLA 1 s"), (1010.0, "SLA 1.01 s")])
    found = re.findall(rf'<text x="{NUMBER}" y="{NUMBER}" text-anchor="end" style', svg)
    assert len(found) == 2
    (x1, y1), (x2, y2) = ((float(x), float(y)) for x, y in found)
    apart_y = abs(y1 - y2) >= 11
    apart_x = x2 <= x1 - text_width("SLA 1 s") or x1 <= x2 - text_width("SLA 1.01 s")
    assert apart_y or apart_x


def test_breakdown_verdicts_are_one_label_per_run_and_levels_thin_on_a_phone() -> None:
    dense = five_sessions().snapshots[3].snapshot  # 16 levels, 15 of them decode-bandwidth
    svg = breakdown_chart("dense", dense, width=NARROW)
    assert svg is not None
    assert svg.count(">decode-bandwidth<title>") == 1  # one label under its 15 bars
    bottom = _plot(svg)[3]
    levels = [t for _, t in _centred_texts(svg, bottom + 14)]
    assert levels[0] == "1" and levels[-1] == "16" and len(levels) < 16 and "15" not in levels


def test_a_tui_session_is_titled_as_a_session_and_interrupted_only_when_it_was() -> None:
    snap = make_snap(CURVE, label="node-a")
    mid = snap.model_copy(update={"complete": False})  # the TUI's `w` or `s`: it went on
    stopped = snap.model_copy(update={"complete": False, "interrupted_by": "SIGHUP"})
    assert [run_state(s) for s in (snap, mid, stopped)] == [
        "complete",
        "saved mid-session",
        "interrupted (SIGHUP)",
    ]
    assert not [w for w in comparability_warnings([("node-a", mid)]) if "interrupted" in w]
    page = html_report(build_comparison(name_snapshots([(mid, None)])), session=True)
    assert "<title>gputui session: node-a</title>" in page and "interrupted" not in page
    assert '<td class="t">saved mid-session</td>' in page
    page = html_report(build_comparison(name_snapshots([(stopped, None)])), session=True)
    assert "node-a: the run was interrupted (SIGHUP); its last step is partial" in page
