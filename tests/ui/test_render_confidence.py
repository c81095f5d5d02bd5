"""Issue 16 on screen: CI whiskers, ± and n, the inconclusive role, the step's state."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from gputui.frontends.live import LiveView
from gputui.session.frames import Handover
from gputui.ui.render.chart import Axis, Whisker, line_chart
from gputui.ui.render.spans import Line, texts
from gputui.ui.render.status import header_lines
from gputui.ui.render.sweep import sweep_lines
from gputui.ui.render.tables import latency_lines
from gputui.ui.replay import load_views

CI_FIXTURE = Path(__file__).parent / "fixtures" / "sweep-a100-ci.json"


def _views() -> list[LiveView]:
    return load_views(CI_FIXTURE)


def _roles(lines: list[Line], needle: str) -> set[str]:
    return {role for line in lines for text, role in line if needle in text}


def test_latency_table_shows_the_p95_half_width_and_n() -> None:
    view = _views()[-1]  # back at the knee: 256 requests at 64 concurrent
    lines = latency_lines(view, 60, 9)
    text = texts(lines)
    assert text[0].split() == ["p50", "p90", "p95", "±p95", "p99", "n"]
    ttft = text[1].split()
    assert ttft[0] == "TTFT" and ttft[4].startswith("±") and ttft[-1] == "256"
    ci = view.frame.window.ttft_s.p95_ci if view.frame else None
    assert ci is not None and ci[0] is not None and ci[1] is not None
    assert ttft[4] == f"±{(ci[1] - ci[0]) / 2 * 1000:.1f}ms"
    assert text[2].split()[3] == "63.6ms!"  # TPOT's whole interval is over the 35 ms bound
    assert all(len(t) == 60 for t in text)
    narrow = texts(latency_lines(view, 44, 9))  # the side panel at 120x40: p90 gives way
    assert narrow[0].split() == ["p50", "p95", "±p95", "p99", "n"]
    assert all(len(t) == 44 for t in narrow)


def test_an_open_interval_is_inconclusive_in_its_own_role() -> None:
    view = _views()[0]  # step 1 live: 13 requests, too few for a two-sided P95 interval
    lines = latency_lines(view, 60, 9)
    ttft = texts(lines)[1].split()
    assert ttft[3].endswith("?") and ttft[4] == "open"
    assert _roles(lines[1:2], "?") == {"inconclusive"}


def test_sweep_chart_draws_whiskers_and_marks_inconclusive_steps() -> None:
    view = _views()[-1]
    verdicts = [s.sla_verdict for s in view.steps]
    assert verdicts[:3] == ["inconclusive"] * 3 and verdicts[3:5] == ["pass", "pass"]
    lines = sweep_lines(view, 100, 22)
    legend = texts(lines)[0]
    assert "┿ 95% CI" in legend and "◐ inconclusive" in legend
    assert _roles(lines[1:], "◐") == {"inconclusive"}
    assert sum(t.count("◐") for t in texts(lines[1:])) == 3  # one per inconclusive step
    plain = texts(sweep_lines(view, 100, 22, ascii=True))
    assert "? inconclusive" in plain[0] and ": 95% CI" in plain[0]
    assert sum(t.count(":") for t in plain[1:-1]) > 12  # whiskers, readable without colour
    no_ci = replace(view, steps=tuple(replace(s, output_tokens_per_s_ci=None) for s in view.steps))
    assert "95% CI" in texts(sweep_lines(no_ci, 100, 22))[0]  # the latency whiskers remain


def _column(lines: list[str], col: int) -> str:
    return "".join(line[col] if col < len(line) else " " for line in lines)


def test_a_whisker_is_solid_between_its_ends_and_an_open_end_is_a_short_stub() -> None:
    x, y = Axis(0.0, 10.0), Axis(0.0, 100.0)
    closed = texts(
        line_chart([], 30, 12, x=x, left=y, whiskers=[Whisker(5.0, 20.0, 80.0, "s1")], ascii=True)
    )
    plot = [line.split("|")[1] for line in closed[:-1]]
    col = round(0.5 * (len(plot[0]) - 1))
    column = _column(plot, col)
    assert column.strip() == ":" * len(column.strip())
    assert 6 <= len(column.strip()) <= 8  # 20..80 of 0..100 on 11 rows
    opened = texts(
        line_chart([], 30, 12, x=x, left=y, whiskers=[Whisker(5.0, 20.0, None, "s1")], ascii=True)
    )
    stub = _column([line.split("|")[1] for line in opened[:-1]], col)
    assert stub[0] == " "  # it does not run to the top
    assert stub.strip().startswith(":") and " " in stub.strip()  # dotted above the closed end


def test_header_shows_settling_then_measuring_with_n_and_precision() -> None:
    view = _views()[-1]
    assert view.frame is not None
    settling = replace(view.frame, in_warmup=True, settle_remaining_s=2.1)
    assert (
        "step 9 12s settling ≤2 s  in flight"  # the warm-up's longest; steady state may end it
        in texts(header_lines(replace(view, frame=settling), 120))[0]
    )
    verdict = replace(settling, first_verdict_s=18.2)  # when its first verdict can come
    assert (
        "settling ≤2 s, verdict ~19 s" in texts(header_lines(replace(view, frame=verdict), 120))[0]
    )
    measuring = replace(view.frame, measured_n=143, precision=0.032)
    line = header_lines(replace(view, frame=measuring), 120)[0]
    assert "measuring n=143 ±3.2 %  in flight" in texts([line])[0]
    assert _roles([line], "±3.2 %") == {"ok"}  # within the 5 % target
    loose = header_lines(replace(view, frame=replace(measuring, precision=0.2)), 120)
    assert _roles(loose, "±20.0 %") == {"inconclusive"}
    auto = header_lines(replace(view, control="auto"), 120)
    assert "12s AUTO measuring" in texts(auto)[0]


def test_header_names_the_capacity_and_the_verdict_above_it() -> None:
    view = _views()[-1]
    line = header_lines(view, 120)[1]
    assert "  capacity 16 (32: fail)  backend" in texts([line])[0]
    assert _roles([line], "(32: fail)") == {"crit"}
    assert view.capacity is not None
    unsure = replace(view, capacity=replace(view.capacity, above_verdict="inconclusive"))
    assert _roles(header_lines(unsure, 120)[1:], "(32: inconclusive)") == {"inconclusive"}


def test_header_shows_the_hand_over_of_the_closing_step() -> None:
    view = _views()[-1]
    assert view.frame is not None
    closing = Handover(index=8, level=64, requests_left=12, eta_s=3.4, next_level=128)
    line = header_lines(replace(view, frame=replace(view.frame, handover=closing)), 120)[0]
    assert "step 9 closing: 12 requests finishing at 64, ~4 s, then 128" in texts([line])[0]
    assert _roles([line], " closing: ") == {"warn"}
    one = replace(closing, requests_left=1, eta_s=None)
    line = header_lines(replace(view, frame=replace(view.frame, handover=one)), 120)[0]
    assert "step 9 closing: 1 request finishing at 64, then 128" in texts([line])[0]


def test_a_narrow_header_keeps_the_hand_over_in_short() -> None:
    view = _views()[-1]
    assert view.frame is not None
    closing = Handover(index=8, level=64, requests_left=12, eta_s=3.4, next_level=128)
    shown = replace(view, frame=replace(view.frame, handover=closing))
    assert "step 9 closing: 12 left at 64, ~4 s, then 128" in texts(header_lines(shown, 80))[0]
