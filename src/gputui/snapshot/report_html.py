"""`gputui compare --format html`: one self-contained page with the table and SVG charts.

Contract: `html_report(comparison)` returns a complete HTML5 document that loads nothing from the
network (inline CSS, inline SVG, no script, no font, no image URL), so it can be mailed or
archived and opened anywhere. It shows the warnings in a banner, the qualified capacity table,
the cost-planning and equal-throughput lines, and charts with every snapshot overlaid: output
tok/s, P95 TTFT and P95 TPOT against load (SLA bounds as dashed lines, knees as rings and
qualified capacities as squares), then each GPU's temperature, SM clock, power and VRAM over the
run. It is a pure function of the comparison (no clock, no randomness): the same input gives
the same bytes, which the tests pin.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from typing import Final

from gputui.snapshot.comparable import sla_bound_text
from gputui.snapshot.compare import Comparison, sweep_curve
from gputui.snapshot.compare_diagnosis import breakdown_charts
from gputui.snapshot.compare_format import (
    FORMULA,
    Block,
    at_block,
    blocks,
    capacity_notes,
    demand_line,
)
from gputui.snapshot.hardware import gpu_traces

PALETTE: Final = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b")
WIDTH: Final = 640
HEIGHT: Final = 300
_PAD_L, _PAD_R, _PAD_T, _PAD_B = 64, 16, 34, 44
_TRACES: Final = (
    ("temperature_c", "GPU temperature", "°C", 1.0),
    ("sm_clock_mhz", "SM clock", "MHz", 1.0),
    ("power_w", "Power", "W", 1.0),
    ("memory_used_bytes", "VRAM used", "GiB", 1.0 / (1 << 30)),
)
_CSS: Final = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #222; background: #fff; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 28px; }
h3 { font-size: 13px; margin: 14px 0 4px; }
table { border-collapse: collapse; font-size: 12px; }
th, td { border: 1px solid #ccc; padding: 3px 6px; text-align: right; white-space: nowrap; }
th { background: #f2f2f2; } .t { text-align: left; }
.banner { background: #fff4d6; border: 1px solid #e0a800; padding: 8px 12px; margin: 12px 0; }
.banner li { margin: 2px 0; }
.charts { display: grid; grid-template-columns: repeat(2, 660px); gap: 12px; }
.note { color: #555; font-size: 12px; }
svg text { font: 11px system-ui, sans-serif; fill: #333; }
svg .title { font-size: 13px; font-weight: 600; }
"""


@dataclass(frozen=True, slots=True)
class Series:
    """One line of a chart, with the points to ring (knee) and box (capacity)."""

    name: str
    color: str
    points: tuple[tuple[float, float], ...]
    knee_x: float | None = None
    capacity_x: float | None = None
    dots: bool = True
    """A dot per point (sweeps); off for dense traces."""


def _nice_step(span: float, ticks: int = 5) -> float:
    raw = span / ticks
    power = 10.0 ** math.floor(math.log10(raw))
    return next(m * power for m in (1.0, 2.0, 2.5, 5.0, 10.0) if m * power >= raw)


def _fmt(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:g}"


def _axis(lo: float, hi: float) -> tuple[float, float, list[float]]:
    if hi <= lo:
        hi = lo + 1.0
    step = _nice_step(hi - lo)
    start = math.floor(lo / step) * step
    end = math.ceil(hi / step) * step
    count = round((end - start) / step)
    return start, end, [start + i * step for i in range(count + 1)]


@dataclass(frozen=True, slots=True)
class _Frame:
    """Data to pixel coordinates of one chart's plot area."""

    x_lo: float
    x_hi: float
    y_lo: float
    y_hi: float
    log_x: bool

    def px(self, x: float) -> float:
        t = math.log2(x) if self.log_x else x
        return _PAD_L + (t - self.x_lo) / (self.x_hi - self.x_lo) * (WIDTH - _PAD_L - _PAD_R)

    def py(self, y: float) -> float:
        plot_h = HEIGHT - _PAD_T - _PAD_B
        return _PAD_T + plot_h - (y - self.y_lo) / (self.y_hi - self.y_lo) * plot_h


def _frame(
    xs: Sequence[float], ys: Sequence[float], log_x: bool
) -> tuple[_Frame, list[float], list[float]]:
    """The frame and the x and y ticks (a log axis ticks at the measured levels)."""
    y_lo, y_hi, y_ticks = _axis(0.0, max(ys) * 1.05 if ys else 1.0)
    if log_x:
        lo, hi = math.log2(min(xs)), math.log2(max(xs))
        lo, hi = (lo - 0.25, hi + 0.25) if lo != hi else (lo - 1, hi + 1)
        return _Frame(lo, hi, y_lo, y_hi, True), sorted(set(xs)), y_ticks
    lo, hi = min(xs), max(xs)
    # A trace that starts a few ms before its origin still starts the axis at 0.
    x_lo, x_hi, x_ticks = _axis(0.0 if lo > -0.01 * max(hi - lo, 1e-9) else lo, hi)
    return _Frame(x_lo, x_hi, y_lo, y_hi, False), x_ticks, y_ticks


def line_chart(
    title: str,
    x_label: str,
    y_label: str,
    series: Sequence[Series],
    *,
    log_x: bool = False,
    hlines: Sequence[tuple[float, str]] = (),
) -> str:
    """An SVG line chart of the series overlaid, with labelled dashed horizontal lines."""
    xs = [x for s in series for x, _ in s.points]
    ys = [y for s in series for _, y in s.points] + [v for v, _ in hlines]
    if not xs:
        return _empty_chart(title)
    f, x_ticks, y_ticks = _frame(xs, ys, log_x and min(xs) > 0)
    plot_w, plot_h = WIDTH - _PAD_L - _PAD_R, HEIGHT - _PAD_T - _PAD_B
    right, base = WIDTH - _PAD_R, _PAD_T + plot_h
    out = [
        f'<svg width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(title)}">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="#fff"/>',
        f'<text class="title" x="{_PAD_L}" y="18">{escape(title)}</text>',
    ]
    out += [
        f'<line x1="{_PAD_L}" x2="{right}" y1="{f.py(y):.1f}" y2="{f.py(y):.1f}" '
        'stroke="#e6e6e6"/>'
        f'<text x="{_PAD_L - 6}" y="{f.py(y) + 4:.1f}" text-anchor="end">{_fmt(y)}</text>'
        for y in y_ticks
    ]
    out += [
        f'<line x1="{f.px(x):.1f}" x2="{f.px(x):.1f}" y1="{base}" y2="{base + 4}" stroke="#888"/>'
        f'<text x="{f.px(x):.1f}" y="{base + 16}" text-anchor="middle">{_fmt(x)}</text>'
        for x in x_ticks
    ]
    out.append(
        f'<line x1="{_PAD_L}" x2="{right}" y1="{base}" y2="{base}" stroke="#888"/>'
        f'<text x="{_PAD_L + plot_w / 2:.1f}" y="{HEIGHT - 8}" text-anchor="middle">'
        f"{escape(x_label)}</text>"
        f'<text transform="translate(14 {_PAD_T + plot_h / 2:.1f}) rotate(-90)" '
        f'text-anchor="middle">{escape(y_label)}</text>'
    )
    out += [
        f'<line x1="{_PAD_L}" x2="{right}" y1="{f.py(v):.1f}" y2="{f.py(v):.1f}" '
        'stroke="#b00020" stroke-dasharray="6 4"/>'
        f'<text x="{right - 4}" y="{f.py(v) - 4:.1f}" text-anchor="end" '
        f'style="fill:#b00020">{escape(label)}</text>'
        for v, label in hlines
    ]
    out += [_series_svg(s, f) for s in series]
    out += [_legend(series), "</svg>"]
    return "".join(out)


def _series_svg(s: Series, f: _Frame) -> str:
    path = " ".join(f"{f.px(x):.1f},{f.py(y):.1f}" for x, y in s.points)
    parts = [
        f'<polyline points="{path}" fill="none" stroke="{s.color}" stroke-width="2"/>',
        *(
            f'<circle cx="{f.px(x):.1f}" cy="{f.py(y):.1f}" r="2.5" fill="{s.color}"/>'
            for x, y in (s.points if s.dots else ())
        ),
    ]
    for x, y in s.points:
        cx, cy = f.px(x), f.py(y)
        if s.knee_x is not None and x == s.knee_x:
            parts.append(
                f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="7" fill="none" '
                f'stroke="{s.color}" stroke-width="2"/>'
                f'<text x="{cx + 9:.1f}" y="{cy - 8:.1f}" style="fill:{s.color}">knee</text>'
            )
        if s.capacity_x is not None and x == s.capacity_x:
            parts.append(
                f'<rect x="{cx - 5:.1f}" y="{cy - 5:.1f}" width="10" height="10" '
                f'fill="none" stroke="{s.color}" stroke-width="2"/>'
            )
    return "".join(parts)


def _legend(series: Sequence[Series]) -> str:
    parts = []
    x = float(_PAD_L + 8)
    for s in series:
        parts.append(
            f'<rect x="{x:.1f}" y="{_PAD_T - 2}" width="12" height="3" fill="{s.color}"/>'
            f'<text x="{x + 16:.1f}" y="{_PAD_T + 2}">{escape(s.name)}</text>'
        )
        x += 28 + 6.5 * len(s.name)
    return "".join(parts)


def _empty_chart(title: str) -> str:
    return (
        f'<svg width="{WIDTH}" height="60" role="img" '
        f'aria-label="{escape(title)}"><text class="title" x="8" y="18">{escape(title)}</text>'
        '<text x="8" y="42">no data in these snapshots</text></svg>'
    )


def _sweep_charts(cmp: Comparison) -> list[str]:
    curves = [(n.name, n.snapshot, sweep_curve(n.snapshot)) for n in cmp.snapshots]
    levels = [x for _, _, c in curves for x in c.levels]
    log_x = bool(levels) and min(levels) > 0 and max(levels) / min(levels) >= 4
    modes = {c.mode for _, _, c in curves if c.mode is not None}
    x_label = (
        "arrival rate (req/s)"
        if modes == {"rate"}
        else "concurrency"
        if modes == {"concurrency"}
        else "load level (concurrency or req/s)"
    ) + (" — log scale" if log_x else "")
    charts = []
    for title, y_label, scale, pick, bound in (
        ("Output throughput vs load", "out tok/s", 1.0, "tok", None),
        ("P95 TTFT vs load", "P95 TTFT (ms)", 1e3, "ttft", "ttft_p95_s"),
        ("P95 TPOT vs load", "P95 TPOT (ms)", 1e3, "tpot", "tpot_p95_s"),
    ):
        series = []
        for i, (name, snap, c) in enumerate(curves):
            values = {"tok": c.output_tokens_per_s, "ttft": c.ttft_p95_s, "tpot": c.tpot_p95_s}
            points = tuple(
                (x, y * scale) for x, y in zip(c.levels, values[pick], strict=True) if y is not None
            )
            cap = snap.capacity
            series.append(
                Series(
                    name,
                    PALETTE[i % len(PALETTE)],
                    points,
                    knee_x=c.knee.level if c.knee is not None else None,
                    capacity_x=cap.level if cap is not None and cap.mode == c.mode else None,
                )
            )
        hlines: list[tuple[float, str]] = []
        if bound is not None:
            bounds = sorted({getattr(n.snapshot.sla, bound) for n in cmp.snapshots} - {None})
            hlines = [(b * scale, f"SLA {sla_bound_text(b)}") for b in bounds]
        charts.append(line_chart(title, x_label, y_label, series, log_x=log_x, hlines=hlines))
    return charts


def _trace_charts(cmp: Comparison) -> list[str]:
    traces = [(n.name, gpu_traces(n.snapshot)) for n in cmp.snapshots]
    if not any(t for _, t in traces):
        return []
    charts = []
    for field, title, unit, scale in _TRACES:
        series = []
        for i, (name, per_gpu) in enumerate(traces):
            for trace in per_gpu:
                points = tuple(
                    (t, v * scale)
                    for t, v in zip(trace.t_s, trace.values[field], strict=True)
                    if v is not None
                )
                label = name if len(per_gpu) == 1 else f"{name} GPU {trace.index}"
                if points:
                    color = PALETTE[i % len(PALETTE)]
                    series.append(Series(label, color, points, dots=len(points) <= 40))
        charts.append(line_chart(f"{title} over the run", "time (s)", unit, series))
    return charts


def _table(block: Block) -> str:
    """A block as an HTML table; its text columns left-aligned, numbers right-aligned."""

    def cell(tag: str, i: int, text: str) -> str:
        return (
            f'<{tag} class="t">{escape(text)}</{tag}>'
            if i < block.left
            else (f"<{tag}>{escape(text)}</{tag}>")
        )

    head = "".join(cell("th", i, h) for i, h in enumerate(block.headers))
    body = "".join(
        "<tr>" + "".join(cell("td", i, c) for i, c in enumerate(row)) + "</tr>"
        for row in block.rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def html_report(cmp: Comparison) -> str:
    """The whole page (see the module docstring)."""
    names = " vs ".join(r.label for r in cmp.rows)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>gputui compare: {escape(names)}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>gputui compare: {escape(names)}</h1>",
    ]
    if cmp.warnings:
        items = "".join(f"<li>{escape(w)}</li>" for w in cmp.warnings)
        parts.append(
            f'<div class="banner" role="alert"><strong>Warnings</strong><ul>{items}</ul></div>'
        )
    parts.append("<h2>Qualified capacity table</h2>")
    parts += [f"<h3>{escape(b.title)}</h3>{_table(b)}" for b in blocks(cmp)]
    notes = capacity_notes(cmp)
    if notes:
        items = "".join(f"<li>{escape(n)}</li>" for n in notes)
        parts.append(f'<ul class="note capacity-notes">{items}</ul>')
    demand = demand_line(cmp)
    if demand is not None:
        parts.append(f'<p class="note">{escape(demand)}</p>')
    parts.append(f'<p class="note">{escape(FORMULA)}</p>')
    extra = at_block(cmp)
    if extra is not None:
        parts.append(f"<h2>{escape(extra.title)}</h2>{_table(extra)}")
    parts.append("<h2>Sweeps</h2>")
    parts.append(
        '<p class="note">Rings mark each run\'s knee, squares its SLA-qualified capacity; dashed'
        " red lines are the SLA bounds.</p>"
    )
    parts.append('<div class="charts">' + "".join(_sweep_charts(cmp)) + "</div>")
    breakdowns = breakdown_charts(cmp)
    if breakdowns:
        parts.append("<h2>Where TTFT went</h2>")
        parts.append(
            '<p class="note">Mean TTFT at each step, stacked: network (RTT probe), the server\'s'
            " queue and prefill (its histograms), and the client's remainder; under each bar the"
            " step's bottleneck verdict.</p>"
        )
        parts.append('<div class="charts">' + "".join(breakdowns) + "</div>")
    parts.append("<h2>GPU traces</h2>")
    traces = _trace_charts(cmp)
    if traces:
        parts.append('<div class="charts">' + "".join(traces) + "</div>")
    else:
        parts.append('<p class="note">No GPU traces in these snapshots.</p>')
    parts.append("<h2>Sources</h2><ul>")
    for n, r in zip(cmp.snapshots, cmp.rows, strict=True):
        where = f"{n.path}, " if n.path is not None else ""
        reason = f" Capacity: {r.capacity_reason}." if r.capacity_reason else ""
        parts.append(
            f"<li>{escape(n.name)}: {escape(where)}{escape(r.created_at)}.{escape(reason)}</li>"
        )
    parts.append("</ul></body></html>")
    return "\n".join(parts) + "\n"
