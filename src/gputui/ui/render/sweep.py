"""The sweep chart: output tok/s against load level, P95 TTFT and TPOT on a second (log) axis.

Every finished complete step of the current mode is a point; the current step is drawn live (◆)
from the rolling window; the SLA bounds are dashed lines on the latency axis, the knee a dashed
vertical line, and the SLA-qualified capacity a star.
"""

from __future__ import annotations

from gputui.live import LiveView
from gputui.ui.render import format as fmt
from gputui.ui.render.chart import Axis, HLine, Mark, Series, VLine, line_chart, nice_max
from gputui.ui.render.spans import Line, fit

_DEFAULT_LATENCY = (0.005, 2.0)


def _legend(ascii: bool, *, knee: bool, best: bool) -> Line:
    point, live, star = ("o", "@", "*") if ascii else ("●", "◆", "★")
    dash = "-" if ascii else "─"
    parts: Line = [(f"{point} out tok/s", "s1"), ("  ", ""), (f"{dash} P95 TTFT", "s2")]
    parts += [("  ", ""), (f"{dash} P95 TPOT", "s3"), ("  ", ""), ("-- SLA", "dim")]
    if knee:
        parts += [("  ", ""), ("| knee" if ascii else "┊ knee", "knee")]
    if best:
        parts += [("  ", ""), (f"{star} capacity", "best")]
    parts += [("  ", ""), (f"{live} now", "live")]
    return parts


def _x_axis(levels: list[float]) -> Axis:
    lo, hi = min(levels), max(levels)
    if hi / lo < 1.5:
        lo, hi = lo / 1.5, hi * 1.5
    return Axis(lo, hi, log=True, fmt=lambda v: f"{v:g}")


def _latency_axis(values: list[float]) -> Axis:
    positive = [v for v in values if v > 0]
    lo, hi = (min(positive), max(positive)) if positive else _DEFAULT_LATENCY
    lo, hi = lo / 1.6, hi * 1.6
    return Axis(lo, max(hi, lo * 4), log=True, fmt=fmt.duration)


def sweep_lines(view: LiveView, width: int, height: int, *, ascii: bool = False) -> list[Line]:
    """The chart with its legend row, exactly `height` lines of `width` cells."""
    if height < 4 or width < 20:
        return [fit([], width) for _ in range(max(height, 0))]
    steps = sorted(
        (s for s in view.steps if s.mode == view.mode and not s.incomplete),
        key=lambda s: s.level,
    )
    frame = view.frame
    live = frame is not None and frame.mode == view.mode and not frame.paused
    levels = [s.level for s in steps] + ([frame.level] if live and frame else [])
    knee = view.knee if view.knee is not None and view.knee.mode == view.mode else None
    best = view.steps[view.best_step_index] if view.best_step_index is not None else None
    legend = fit(_legend(ascii, knee=knee is not None, best=best is not None), width)
    if not levels:
        blank = [fit([], width) for _ in range(height - 1)]
        blank[(height - 1) // 2] = fit(
            [("  no finished step yet: press + to step the load up", "dim")], width
        )
        return [legend, *blank]

    ttft = [(s.level, s.ttft_s.p95) for s in steps if s.ttft_s.p95 is not None]
    tpot = [(s.level, s.tpot_s.p95) for s in steps if s.tpot_s.p95 is not None]
    throughput = [(s.level, s.output_tokens_per_s) for s in steps]
    marks: list[Mark] = []
    live_char = "@" if ascii else "◆"
    if live and frame is not None:
        window = frame.window
        marks.append(Mark(frame.level, window.output_tokens_per_s, live_char, "live"))
        for value, role in ((window.ttft_s.p95, "s2"), (window.tpot_s.p95, "s3")):
            if value is not None:
                marks.append(Mark(frame.level, value, live_char, role, axis="right"))
    if best is not None and best.mode == view.mode:
        marks.append(Mark(best.level, best.output_tokens_per_s, "*" if ascii else "★", "best"))

    sla = view.sla
    bounds = [b for b in (sla.ttft_p95_s, sla.tpot_p95_s) if b is not None]
    latencies = [v for _, v in ttft + tpot] + [m.y for m in marks if m.axis == "right"] + bounds
    peak = max([y for _, y in throughput] + [m.y for m in marks if m.axis == "left"] + [1.0])
    hlines = [
        HLine(b, role)
        for b, role in ((sla.ttft_p95_s, "s2"), (sla.tpot_p95_s, "s3"))
        if b is not None
    ]
    vlines = [VLine(knee.level, "knee", f"knee {knee.level:g}")] if knee else []
    chart = line_chart(
        [
            Series(ttft, "s2", axis="right"),
            Series(tpot, "s3", axis="right"),
            Series(throughput, "s1", marker="o" if ascii else "●"),
        ],
        width,
        height - 1,
        x=_x_axis(levels),
        left=Axis(0.0, nice_max(peak * 1.05), fmt=fmt.scaled),
        right=_latency_axis(latencies),
        hlines=hlines,
        vlines=vlines,
        marks=marks,
        x_ticks=sorted(set(levels)),
        ascii=ascii,
    )
    return [legend, *chart]
