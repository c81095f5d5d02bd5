"""The sweep chart: output tok/s against load level, P95 TTFT and TPOT on a second (log) axis.

Every finished complete step of the current mode is a point; the current step is drawn live (◆)
from the rolling window; the SLA bounds are dashed lines on the latency axis, the knee a dashed
vertical line, and the SLA-qualified capacity a star. Each series has its own colour, marker and
line style (throughput solid ●, TTFT dotted ▲, TPOT dashed ▼), so the chart reads without colour.
Each step's 95 % intervals of those three figures are whiskers through its markers (capped ends;
an open end, too few samples, is a short dotted stub; one whisker per level, the newest step's,
and none longer than a fifth of the plot either side of its point), and a step whose SLA verdict is
inconclusive (an interval straddles a bound) has its own marker (◐, ASCII "?") and role.
Saved sessions can be overlaid (`SweepOverlay`): their curves are drawn first, dimmer, sparser,
with a hollow marker of their own, and each is named in the legend.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gputui.frontends.view import LiveView
from gputui.metrics.knee import Knee, knee_from_steps
from gputui.metrics.sla_terms import bound_text
from gputui.metrics.step import StepMode, StepResult
from gputui.session import StatsFrame
from gputui.snapshot.compare import SweepCurve
from gputui.ui.render import format as fmt
from gputui.ui.render.breakdown import knee_label
from gputui.ui.render.chart import Axis, HLine, Mark, Series, VLine, Whisker, line_chart, nice_max
from gputui.ui.render.spans import Line, fit

_DEFAULT_LATENCY = (0.005, 2.0)
MAX_OVERLAYS = 3
"""Overlays the chart keeps (one hollow marker each); a fourth replaces the oldest."""
_OVERLAY_MARKERS = ("○", "◇", "□")
_OVERLAY_MARKERS_ASCII = ("+", "x", "#")
_OTHER_MARKER = {False: "◌", True: "%"}
"""The other mode's sweep (`other_sweep`)."""
_TTFT_DASH = (1, 1)
_TPOT_DASH = (3, 2)
_OVERLAY_DASH = (1, 3)
_OVERLAY_LATENCY_ROWS = 16
"""Plot rows from which the overlays' latency curves are drawn too."""
_WHISKER_REACH = 1.4
"""How far past the points' range a whisker may stretch an axis (a factor)."""


@dataclass(frozen=True, slots=True)
class SweepOverlay:
    """A saved session's sweep, drawn under the live one for comparison."""

    label: str
    curve: SweepCurve
    path: Path | None = None
    """The snapshot file it came from (which sessions are overlaid, on the sessions screen)."""


def overlay_marker(index: int, *, ascii: bool = False) -> str:
    """The hollow marker of the overlay at `index`."""
    markers = _OVERLAY_MARKERS_ASCII if ascii else _OVERLAY_MARKERS
    return markers[index % len(markers)]


def _inconclusive_glyph(ascii: bool) -> str:
    """The throughput marker of a step whose SLA verdict is inconclusive."""
    return "?" if ascii else "◐"


def latest_per_level(steps: list[StepResult]) -> list[StepResult]:
    """The newest step of each level, by level: a revisited level draws one point, one whisker."""
    newest: dict[float, StepResult] = {}
    for step in steps:
        if step.level not in newest or step.index > newest[step.level].index:
            newest[step.level] = step
    return [newest[level] for level in sorted(newest)]


def other_sweep(view: LiveView) -> tuple[list[tuple[float, float]], Knee | None]:
    """The other mode's sweep on this mode's axis, and that sweep's own knee.

    `r` switches between concurrency and arrival rate; neither sweep is lost. A concurrency step
    sits on the rate axis at the rate it reached, a rate step on the concurrency axis at the
    load it held (Little's law: req/s x mean E2E), each with the output tok/s it measured.
    """
    other: StepMode = "rate" if view.mode == "concurrency" else "concurrency"
    steps = [s for s in view.steps if s.mode == other and not s.incomplete]
    points: list[tuple[float, float]] = []
    for s in latest_per_level(steps):
        x = s.requests_per_s if other == "concurrency" else s.requests_per_s * (s.e2e_s.mean or 0)
        if x > 0:
            points.append((x, s.output_tokens_per_s))
    knee = knee_from_steps(steps, mode=other).knee if steps else None
    return sorted(points), knee


def _whiskers(steps: list[StepResult]) -> list[Whisker]:
    """The 95 % intervals of each step's output tok/s, P95 TTFT and P95 TPOT."""
    out: list[Whisker] = []
    for s in steps:
        if s.output_tokens_per_s_ci is not None:
            lo, hi = s.output_tokens_per_s_ci
            out.append(Whisker(s.level, lo, hi, "s1", mid=s.output_tokens_per_s))
        for summary, role in ((s.ttft_s, "s2"), (s.tpot_s, "s3")):
            if summary.p95 is not None and summary.p95_ci is not None:
                low, high = summary.p95_ci
                out.append(Whisker(s.level, low, high, role, axis="right", mid=summary.p95))
    return out


def _glyphs(ascii: bool) -> tuple[str, str, str]:
    """Markers of throughput, TTFT and TPOT."""
    return ("o", "^", "v") if ascii else ("●", "▲", "▼")


def _legend(
    ascii: bool, *, knee: bool, best: bool, ci: bool = False, inconclusive: bool = False
) -> Line:
    point, ttft, tpot = _glyphs(ascii)
    live, star = ("@", "*") if ascii else ("◆", "★")
    parts: Line = [(f"{point} out tok/s", "s1"), ("  ", ""), (f"{ttft} P95 TTFT", "s2")]
    parts += [("  ", ""), (f"{tpot} P95 TPOT", "s3"), ("  ", ""), ("-- SLA", "dim")]
    if ci:
        parts += [("  ", ""), (": 95% CI" if ascii else "┿ 95% CI", "dim")]
    if inconclusive:
        parts += [("  ", ""), (f"{_inconclusive_glyph(ascii)} inconclusive", "inconclusive")]
    if knee:
        parts += [("  ", ""), ("| knee" if ascii else "┊ knee", "knee")]
    if best:
        parts += [("  ", ""), (f"{star} capacity", "best")]
    parts += [("  ", ""), (f"{live} now", "live")]
    return parts


def _other_legend(view: LiveView, knee: Knee | None, ascii: bool) -> Line:
    """'◌ by rate, knee 12/s (r)': the other mode's sweep, kept while this one is shown."""
    other = "rate" if view.mode == "concurrency" else "concurrency"
    unit = "/s" if other == "rate" else ""
    tail = f", knee {knee.level:g}{unit}" if knee is not None else ""
    return [(f"{_OTHER_MARKER[ascii]} by {other}{tail} (r)", "o1")]


def _overlay_legend(ascii: bool, overlays: tuple[SweepOverlay, ...], mode: str) -> Line:
    """The second legend row: each overlay's marker and name (x clears them)."""
    parts: Line = [("saved:", "dim")]
    for i, overlay in enumerate(overlays):
        hidden = "" if overlay.curve.mode == mode else f" (by {overlay.curve.mode}: not drawn)"
        parts += [("  ", ""), (f"{overlay_marker(i, ascii=ascii)} {overlay.label}{hidden}", "o1")]
    return parts


_SHORT = {" out tok/s": " tok/s", " P95 TTFT": " TTFT", " P95 TPOT": " TPOT", " 95% CI": " CI"}
"""Shorter legend labels, for when even single spaces do not fit."""


def _tight(line: Line, width: int) -> Line:
    """One space between legend items instead of two when two do not fit; then short labels."""
    if sum(len(text) for text, _ in line) <= width:
        return line
    tight = [(" " if text == "  " and role == "" else text, role) for text, role in line]
    if sum(len(text) for text, _ in tight) <= width:
        return tight
    out: Line = []
    for text, role in tight:
        for long, short in _SHORT.items():
            if text.endswith(long):
                text = text[: -len(long)] + short
        out.append((text, role))
    return out


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


def _overlay_series(
    overlays: list[SweepOverlay], ascii: bool, *, latency: bool = True
) -> list[Series]:
    """The overlays' throughput (hollow marker) and latency curves, dim and sparse."""
    series: list[Series] = []
    for i, overlay in enumerate(overlays):
        c = overlay.curve
        for values, role in ((c.ttft_p95_s, "o2"), (c.tpot_p95_s, "o3")) if latency else ():
            points = [(x, y) for x, y in zip(c.levels, values, strict=True) if y is not None]
            series.append(Series(points, role, axis="right", dash=_OVERLAY_DASH))
        throughput = list(zip(c.levels, c.output_tokens_per_s, strict=True))
        marker = overlay_marker(i, ascii=ascii)
        series.append(Series(throughput, "o1", marker=marker, dash=_OVERLAY_DASH))
    return series


@dataclass(frozen=True, slots=True)
class _Scene:
    """What the chart shows of the view: this mode's steps, the live point, overlays, markers."""

    steps: list[StepResult]
    other_points: list[tuple[float, float]]
    other_knee: Knee | None
    frame: StatsFrame | None
    live: bool
    drawn: list[SweepOverlay]
    levels: list[float]
    ticks: list[float]
    knee: Knee | None
    best: StepResult | None
    whiskers: list[Whisker]
    unsure: list[StepResult]


def _scene(view: LiveView, overlays: tuple[SweepOverlay, ...]) -> _Scene:
    """Gather the chart's points, levels and markers from the view."""
    steps = latest_per_level([s for s in view.steps if s.mode == view.mode and not s.incomplete])
    other_points, other_knee = other_sweep(view)
    frame = view.frame
    live = frame is not None and frame.mode == view.mode and not frame.paused
    # Overlays are drawn by their order in `overlays` (the marker follows it), when of this mode.
    drawn = [o for o in overlays if o.curve.mode == view.mode and o.curve.levels]
    levels = [s.level for s in steps] + ([frame.level] if live and frame else [])
    levels += [x for o in drawn for x in o.curve.levels]
    # The other sweep's points are not levels of this mode: they label the axis only alone.
    ticks = sorted(set(levels)) or sorted({float(f"{x:.2g}") for x, _ in other_points})
    levels += [x for x, _ in other_points]
    best = view.steps[view.best_step_index] if view.best_step_index is not None else None
    return _Scene(
        steps=steps,
        other_points=other_points,
        other_knee=other_knee,
        frame=frame,
        live=live,
        drawn=drawn,
        levels=levels,
        ticks=ticks,
        knee=view.knee if view.knee is not None and view.knee.mode == view.mode else None,
        best=best if best is not None and best.mode == view.mode else None,
        whiskers=_whiskers(steps),
        unsure=[s for s in steps if s.sla_verdict == "inconclusive"],
    )


def _legend_rows(
    view: LiveView,
    scene: _Scene,
    width: int,
    ascii: bool,
    overlays: tuple[SweepOverlay, ...],
) -> list[Line]:
    """The legend: one row, or two when overlays or the other sweep's key do not fit in one."""
    key = _legend(
        ascii,
        knee=scene.knee is not None,
        best=scene.best is not None,
        ci=bool(scene.whiskers),
        inconclusive=bool(scene.unsure),
    )
    second: Line = _overlay_legend(ascii, overlays, view.mode) if overlays else []
    if scene.other_points:
        other = _other_legend(view, scene.other_knee, ascii)
        if sum(len(t) for t, _ in _tight([*key, ("  ", ""), *other], width)) <= width:
            key += [("  ", ""), *other]
        else:
            second = [*other, ("  ", ""), *second] if second else other
    legend = [fit(_tight(key, width), width)]
    if second:
        legend.append(fit(second, width))
    return legend


def _marks(view: LiveView, scene: _Scene, ascii: bool) -> list[Mark]:
    """The live point (throughput, TTFT, TPOT), the inconclusive steps and the best step."""
    marks: list[Mark] = []
    live_char = "@" if ascii else "◆"
    frame = scene.frame
    if scene.live and frame is not None:
        window = frame.window
        marks.append(Mark(frame.level, window.output_tokens_per_s, live_char, "live"))
        for value, role in ((window.ttft_s.p95, "s2"), (window.tpot_s.p95, "s3")):
            if value is not None:
                marks.append(Mark(frame.level, value, live_char, role, axis="right"))
    glyph = _inconclusive_glyph(ascii)
    marks += [Mark(s.level, s.output_tokens_per_s, glyph, "inconclusive") for s in scene.unsure]
    best = scene.best
    if best is not None and best.mode == view.mode:
        marks.append(Mark(best.level, best.output_tokens_per_s, "*" if ascii else "★", "best"))
    return marks


def _widen_for_whiskers(
    left_values: list[float], latencies: list[float], whiskers: list[Whisker]
) -> None:
    """Whisker ends widen the axes a little, never so far that the points flatten.

    A wider interval is clipped at the edge, uncapped (it reads as "beyond").
    """
    top_point = max(left_values, default=0.0)
    left_values += [
        min(w.hi, top_point * _WHISKER_REACH)
        for w in whiskers
        if w.axis == "left" and w.hi is not None
    ]
    if latencies:
        lat_lo, lat_hi = min(latencies), max(latencies)
        for w in whiskers:
            if w.axis == "right":
                ends = [v for v in (w.lo, w.hi) if v is not None and v > 0]
                latencies += [
                    min(max(v, lat_lo / _WHISKER_REACH), lat_hi * _WHISKER_REACH) for v in ends
                ]


def sweep_lines(
    view: LiveView,
    width: int,
    height: int,
    *,
    ascii: bool = False,
    overlays: tuple[SweepOverlay, ...] = (),
) -> list[Line]:
    """The chart under its legend (two rows with overlays), exactly `height` lines of `width`."""
    if height < 5 or width < 20:
        return [fit([], width) for _ in range(max(height, 0))]
    scene = _scene(view, overlays)
    legend = _legend_rows(view, scene, width, ascii, overlays)
    rows = height - len(legend)
    if not scene.levels:
        blank = [fit([], width) for _ in range(rows)]
        blank[(rows - 1) // 2] = fit(
            [("  no finished step yet: press + to step the load up", "dim")], width
        )
        return [*legend, *blank]
    return [*legend, *_chart(view, scene, width, rows, ascii)]


def _chart(view: LiveView, scene: _Scene, width: int, rows: int, ascii: bool) -> list[Line]:
    """The chart's `rows` lines: throughput on the left axis, TTFT and TPOT p95 on the right."""
    steps = scene.steps
    ttft = [(s.level, s.ttft_s.p95) for s in steps if s.ttft_s.p95 is not None]
    tpot = [(s.level, s.tpot_s.p95) for s in steps if s.tpot_s.p95 is not None]
    throughput = [(s.level, s.output_tokens_per_s) for s in steps]
    marks = _marks(view, scene, ascii)
    sla = view.sla
    bounds = [b for b in (sla.ttft_p95_s, sla.tpot_p95_s) if b is not None]
    # A short chart (80x24) draws only the overlays' throughput: their latency curves would
    # tangle with the live ones in so few rows.
    ghosts = _overlay_series(scene.drawn, ascii, latency=rows >= _OVERLAY_LATENCY_ROWS)
    if scene.other_points:
        ghosts.append(
            Series(scene.other_points, "o1", marker=_OTHER_MARKER[ascii], dash=_OVERLAY_DASH)
        )
    ghost_left = [y for g in ghosts if g.axis == "left" for _, y in g.points]
    ghost_right = [y for g in ghosts if g.axis == "right" for _, y in g.points]
    latencies = [v for _, v in ttft + tpot] + [m.y for m in marks if m.axis == "right"] + bounds
    left_values = [y for _, y in throughput] + [m.y for m in marks if m.axis == "left"]
    _widen_for_whiskers(left_values, latencies, scene.whiskers)
    peak = max([*left_values, *ghost_left, 1.0])
    hlines = [
        HLine(b, role, label=bound_text(name, b))
        for name, b, role in (("TTFT", sla.ttft_p95_s, "s2"), ("TPOT", sla.tpot_p95_s, "s3"))
        if b is not None
    ]
    vlines = [VLine(scene.knee.level, "knee", knee_label(view))] if scene.knee else []
    point, ttft_glyph, tpot_glyph = _glyphs(ascii)
    return line_chart(
        [
            *ghosts,
            Series(ttft, "s2", axis="right", marker=ttft_glyph, dash=_TTFT_DASH),
            Series(tpot, "s3", axis="right", marker=tpot_glyph, dash=_TPOT_DASH),
            Series(throughput, "s1", marker=point),
        ],
        width,
        rows,
        x=_x_axis(scene.levels),
        left=Axis(0.0, nice_max(peak * 1.05), fmt=fmt.scaled),
        right=_latency_axis(latencies + ghost_right),
        hlines=hlines,
        vlines=vlines,
        marks=marks,
        x_ticks=scene.ticks,
        ascii=ascii,
        whiskers=scene.whiskers,
    )
