"""The pure render functions, on exact output strings."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from gputui.snapshot.compare import sweep_curve
from gputui.snapshot.store import load_snapshot
from gputui.ui.render import format as fmt
from gputui.ui.render.bars import bar, gauge, level_role
from gputui.ui.render.chart import Axis, HLine, Series, VLine, line_chart, nice_max
from gputui.ui.render.events import events_lines
from gputui.ui.render.gpu import gpu_lines
from gputui.ui.render.spans import fit, texts
from gputui.ui.render.spark import sparkline
from gputui.ui.render.status import header_lines
from gputui.ui.render.steps import steps_lines
from gputui.ui.render.sweep import SweepOverlay, sweep_lines
from gputui.ui.render.tables import latency_lines, sla_role
from gputui.ui.replay import load_views

FIXTURE = Path(__file__).parent / "fixtures" / "sweep-a100.json"
SAVED = Path(__file__).parents[1] / "fixtures" / "snapshots"


def _num(v: float) -> str:
    return f"{v:g}"


def test_braille_chart_draws_a_rising_line() -> None:
    lines = line_chart(
        [Series([(1, 0), (4, 10)], "s1")],
        12,
        3,
        x=Axis(1, 4, fmt=_num),
        left=Axis(0, 10, fmt=_num),
        x_ticks=[1, 4],
    )
    assert texts(lines) == ["10│    ⢀⡠⠤⠒⠉", " 0│⣀⠤⠒⠊⠁    ", "   1       4"]
    assert lines[0] == [("10│", "dim"), ("    ", ""), ("⢀⡠⠤⠒⠉", "s1")]


def test_ascii_chart_with_markers() -> None:
    lines = line_chart(
        [Series([(1, 0), (4, 10)], "s1", marker="o")],
        16,
        5,
        x=Axis(1, 4, fmt=_num),
        left=Axis(0, 10, fmt=_num),
        x_ticks=[1, 4],
        ascii=True,
    )
    assert texts(lines) == [
        "10|          ..o",
        "  |      ....   ",
        "  |  ....       ",
        " 0|o.           ",
        "   1           4",
    ]


def test_chart_second_axis_hline_and_vline() -> None:
    lines = line_chart(
        [Series([(1, 1.0), (2, 1.0)], "s2", axis="right")],
        20,
        4,
        x=Axis(1, 2, fmt=_num),
        left=Axis(0, 1, fmt=_num),
        right=Axis(0.1, 10, log=True, fmt=_num),
        hlines=[HLine(0.1, "dim")],
        vlines=[VLine(1.5, "knee", "k")],
        ascii=True,
    )
    text = texts(lines)
    assert all(len(t) == 20 for t in text)
    assert text == [
        "1|      |k      |10 ",
        " |..............|   ",  # 1.0 sits mid-height on the log axis
        "0|- - - | - - - |0.1",  # the dashed line at 0.1 and the knee line
        "                    ",
    ]


def test_chart_too_small_is_blank() -> None:
    assert texts(line_chart([], 5, 2, x=Axis(0, 1), left=Axis(0, 1))) == ["     ", "     "]


def test_sparkline_scales_and_pads() -> None:
    assert sparkline([0, 1, 2, 3, 4, 5, 6, 7, 8], 9, lo=0) == "▁▁▂▃▄▅▆▇█"
    assert sparkline([1, 2], 5, ascii=True) == "   _#"
    assert sparkline([], 3) == "   "
    assert sparkline([5, 5, 5], 3) == "▁▁▁"


def test_bars_and_gauges() -> None:
    assert bar(0.5, 10) == ("█████", "░░░░░")
    assert bar(0.55, 4) == ("██▎", "░")
    assert bar(0.5, 10, ascii=True) == ("#####", "-----")
    assert bar(None, 3) == ("", "···")
    assert gauge("KV", 0.25, 20, "25%", role="ok") == [
        ("KV    ", "label"),
        ("██▎", "ok"),
        ("░░░░░░", "dim"),
        (" 25% ", ""),
    ]
    assert [level_role(f) for f in (None, 0.5, 0.85, 0.99)] == ["dim", "ok", "warn", "crit"]


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(None, "-"), (0.0005, "500us"), (0.0421, "42.1ms"), (0.312, "312ms"), (1.25, "1.25s")],
)
def test_duration_format(seconds: float | None, text: str) -> None:
    assert fmt.duration(seconds) == text


def test_other_formats() -> None:
    assert [fmt.rate(v) for v in (0.67, 12.34, 897.0, 12_400.0)] == ["0.67", "12.3", "897", "12.4k"]
    assert fmt.clock(3725) == "1:02:05"
    assert fmt.percent(0.125) == "12.5%"
    assert fmt.scaled(1500) == "1.5k"
    assert nice_max(1651 * 1.05) == 2000.0
    assert fit([("abc", "x"), ("def", "")], 4) == [("abc", "x"), ("d", "")]
    assert fit([("ab", "")], 4) == [("ab", ""), ("  ", "")]


def test_sla_roles() -> None:
    assert sla_role(None, 1.0) == ""
    assert sla_role(0.5, None) == ""
    assert sla_role(0.5, 1.0) == "ok"
    assert sla_role(0.9, 1.0) == "warn"
    assert sla_role(1.1, 1.0) == "crit"


def test_panels_from_the_replayed_sweep() -> None:
    view = load_views(FIXTURE)[-1]
    header = texts(header_lines(view, 130))
    assert header[0].startswith(
        "● 64 concurrent ×2  step 9 12s measuring n=65  in flight 64  0:01:16"
    )
    assert "NVIDIA A100 80GB PCIe" in header[1]

    latency = texts(latency_lines(view, 60, 9))
    assert latency[0].split() == ["p50", "p90", "p95", "p99", "n"]
    # a legacy step (no intervals): no ± column; the P95 is judged on its point estimate
    assert latency[1].split() == ["TTFT", "355ms", "514ms", "603ms", "608ms", "65"]
    assert latency[2].split()[0:2] == ["TPOT", "62.9ms!"]  # over the 35 ms bound

    steps = texts(steps_lines(view, 100, 10))
    assert steps[0].split()[:4] == ["#", "level", "ok/fail", "tok/s"]
    # the marks lead the step's number: ★ the capacity, ┊ the knee
    assert steps[5].split()[:2] == ["★5", "16"] and steps[5].split()[-2:] == ["pass", "-"]
    assert steps[7].split()[:2] == ["┊7", "64"] and steps[7].split()[-2:] == ["fail", "-"]

    sweep = texts(sweep_lines(view, 90, 16))
    assert sweep[0].startswith("● out tok/s  ▲ P95 TTFT  ▼ P95 TPOT  -- SLA  ┊ knee  ★ capacity")
    assert "knee 64" in sweep[1]
    assert sweep[-1].split() == ["1", "2", "4", "8", "16", "32", "64", "128"]
    assert all(len(line) == 90 for line in sweep)

    gpu = texts(gpu_lines(view, 70, 9))
    assert gpu[0].startswith("GPU0 NVIDIA A100 80GB PCIe  util 89%")
    assert gpu[4].startswith("thrott none")
    assert gpu[5].startswith("VRAM") and gpu[5].endswith(" 71.6/80.0 GiB ")
    assert gpu[7].split() == ["running", "64", "waiting", "16", "preempted", "24"]

    events = texts(events_lines(view.events, 60, 6))
    # the live rules: step 8's warning (wrapped whole) and missed SLA, then the load at the knee
    heads = [e for e in events if e[:1].isdigit()]
    assert [e.split()[1] for e in heads] == ["warning", "sla", "info"]
    assert "load 64 concurrent" in heads[2]
    assert " ".join(" ".join(events[:4]).split()).endswith("hold a level with h to run it longer")


def test_gpu_panel_without_telemetry_names_the_source_state() -> None:
    view = replace(load_views(FIXTURE)[0], telemetry=None, traces=None)
    lines = texts(gpu_lines(view, 50, 3))
    assert lines[0].startswith("GPU   n/a: no telemetry")
    assert lines[1].startswith("KV    n/a: no telemetry")


def test_a_dashed_line_skips_dots() -> None:
    lines = line_chart(
        [Series([(0, 0), (11, 0)], "s2", dash=(1, 2))],
        14,
        3,
        x=Axis(0, 11, fmt=_num),
        left=Axis(0, 1, fmt=_num),
        ascii=True,
    )
    assert texts(lines)[1] == "0|.  .  .  . ."  # the end point is always drawn


def _roles_of(lines: list, glyph: str) -> set[str]:  # type: ignore[type-arg]
    return {role for line in lines for text, role in line if glyph in text}


@pytest.mark.parametrize("ascii", [False, True], ids=["braille", "ascii"])
def test_series_differ_by_glyph_not_only_colour(ascii: bool) -> None:
    """--no-color: throughput, TTFT and TPOT each have their own marker, in the legend too."""
    view = load_views(FIXTURE)[-1]
    lines = sweep_lines(view, 90, 16, ascii=ascii)
    glyphs = ("o", "^", "v") if ascii else ("●", "▲", "▼")
    legend = texts(lines)[0]
    for glyph, role, name in zip(
        glyphs, ("s1", "s2", "s3"), ("out tok/s", "TTFT", "TPOT"), strict=True
    ):
        assert f"{glyph} " in legend and name in legend
        assert _roles_of(lines[1:], glyph) == {role}, glyph


def test_overlays_are_drawn_dim_and_named_in_a_second_legend_row() -> None:
    view = load_views(FIXTURE)[-1]
    rtx = load_snapshot(SAVED / "rtx4090-48gb.json")
    curve = sweep_curve(rtx)
    by_rate = SweepOverlay("by rate", replace(curve, mode="rate"))
    lines = sweep_lines(view, 100, 18, overlays=(SweepOverlay("rtx", curve), by_rate))
    text = texts(lines)
    assert len(text) == 18 and all(len(t) == 100 for t in text)
    assert text[1].startswith("saved:  ○ rtx  ◇ by rate (by rate: not drawn)")
    assert _roles_of(lines[2:], "○") == {"o1"}
    assert _roles_of(lines[2:], "◇") == set()  # another mode's curve is named, not drawn
    # The overlay's peak (810 tok/s at 64) lies under the live one (1651): same axes as before.
    plain = texts(sweep_lines(view, 100, 17))
    assert text[2].split("│")[0] == plain[1].split("│")[0] == "2.0k"


def test_latency_table_shows_ttfat_and_reasoning_share_for_reasoning_streams() -> None:
    view = load_views(FIXTURE)[-1]
    assert view.frame is not None
    window = view.frame.window
    ttfat = replace(window.ttft_s, p50=0.9, p90=1.0, p95=1.1, p99=1.2)
    frame = replace(view.frame, window=replace(window, ttfat_s=ttfat, reasoning_share=0.6))
    latency = texts(latency_lines(replace(view, frame=frame), 90, 10))
    assert latency[1].split()[0] == "TTFT"
    assert latency[2].split() == ["TTFAT", "900ms", "1.00s", "1.10s", "1.20s", "65"]
    assert latency[3].split()[0] == "TPOT"
    assert any("reasoning 60.0%" in line for line in latency)
    plain = texts(latency_lines(view, 90, 10))
    assert not any("TTFAT" in line or "reasoning" in line for line in plain)
