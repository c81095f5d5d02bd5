"""The HTML report's line chart: series overlaid over load or time, fitted to a given width.

Contract: `line_chart(title, x_label, y_label, series, width=...)` returns one inline SVG with a
viewBox of `width` px: a wrapped title, the legend in rows under it, axes whose labels are
thinned until none touches another, SLA bounds as dashed lines with labels that dodge each other,
and the series clipped to the plot area. A point whose y is None (a step with no data) breaks
its line: a gap, never a zero. Knees are rings and qualified capacities squares, each with a
tooltip. Pure and deterministic; `uid` makes the clipPath's id unique in the page.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from typing import Final

from gputui.snapshot.report_svg import (
    FONT_PX,
    WIDTH,
    axis,
    chart_head,
    fit_text,
    fmt_number,
    svg_open,
    text_width,
    thin_labels,
)

_BELOW: Final = 40
"""Room under the plot: tick labels and the x axis' title."""


@dataclass(frozen=True, slots=True)
class Series:
    """One line of a chart, with the points to ring (knee) and box (capacity)."""

    name: str
    color: str
    points: tuple[tuple[float, float | None], ...]
    """(x, y); y None where the step has no data (the line breaks there)."""
    knee_x: float | None = None
    capacity_x: float | None = None
    dots: bool = True
    """A dot per point (sweeps); off for dense traces."""


@dataclass(frozen=True, slots=True)
class _Frame:
    """Data to pixel coordinates of one chart's plot area (clamped to it)."""

    x_lo: float
    x_hi: float
    y_lo: float
    y_hi: float
    log_x: bool
    box: tuple[float, float, float, float]
    """left, top, right, bottom in px."""
    width: float
    """The whole chart's."""

    def px(self, x: float) -> float:
        left, _, right, _ = self.box
        t = math.log2(x) if self.log_x and x > 0 else x
        at = left + (t - self.x_lo) / (self.x_hi - self.x_lo) * (right - left)
        return min(max(at, left), right)

    def py(self, y: float) -> float:
        _, top, _, bottom = self.box
        at = bottom - (y - self.y_lo) / (self.y_hi - self.y_lo) * (bottom - top)
        return min(max(at, top), bottom)


def _x_range(xs: Sequence[float], log_x: bool, ticks: int) -> tuple[float, float, list[float]]:
    """The x range and ticks (a log axis ticks at the measured levels)."""
    if log_x:
        lo, hi = math.log2(min(xs)), math.log2(max(xs))
        lo, hi = (lo - 0.25, hi + 0.25) if lo != hi else (lo - 1, hi + 1)
        return lo, hi, sorted(set(xs))
    lo, hi = min(xs), max(xs)
    # A trace that starts a few ms before its origin still starts the axis at 0 (clamped there).
    return axis(0.0 if lo > -0.01 * max(hi - lo, 1e-9) else lo, hi, ticks)


def _power_of_two_rank(values: Sequence[float]) -> list[int]:
    return [0 if v > 0 and math.log2(v).is_integer() else 1 for v in values]


def line_chart(
    title: str,
    x_label: str,
    y_label: str,
    series: Sequence[Series],
    *,
    log_x: bool = False,
    hlines: Sequence[tuple[float, str]] = (),
    width: int = WIDTH,
    uid: str = "c",
) -> str:
    """An SVG line chart of the series overlaid (module contract)."""
    xs = [x for s in series for x, y in s.points if y is not None]
    ys = [y for s in series for _, y in s.points if y is not None] + [v for v, _ in hlines]
    if not xs:
        return _empty_chart(title, width)
    log_x = log_x and min(xs) > 0
    plot_h = 220 if width >= 480 else 180
    y_lo, y_hi, y_ticks = axis(0.0, max(ys) * 1.05 if ys else 1.0, max(3, plot_h // 45))
    left = 30 + max(text_width(fmt_number(y)) for y in y_ticks)
    x_lo, x_hi, x_ticks = _x_range(xs, log_x, max(2, min(6, int((width - left) // 90))))
    right = width - max(12.0, text_width(fmt_number(x_ticks[-1])) / 2 + 4)
    items = [(s.name, s.color) for s in series]
    head = chart_head(title, items, width=width, plot=(left, right, plot_h), uid=uid)
    box = (left, head.plot_top, right, head.plot_top + plot_h)
    f = _Frame(x_lo, x_hi, y_lo, y_hi, log_x, box, width)
    height = head.plot_top + plot_h + _BELOW
    out = [svg_open(width, height, title, "chart"), *head.parts]
    out += _grid(f, x_ticks, y_ticks, log_x)
    out += _axis_titles(f, x_label, y_label, height)
    out.append(f'<g clip-path="url(#{head.clip})">')
    out += _bounds(f, hlines)
    out += [_series_svg(s, f) for s in series]
    out.append("</g>")
    out += [_markers(s, f) for s in series]
    out += _bound_labels(f, hlines)
    out.append("</svg>")
    return "".join(out)


def _grid(f: _Frame, x_ticks: Sequence[float], y_ticks: Sequence[float], log_x: bool) -> list[str]:
    left, _, right, base = f.box
    out = [
        f'<line x1="{left:.1f}" x2="{right:.1f}" y1="{f.py(y):.1f}" y2="{f.py(y):.1f}" '
        'stroke="#e6e6e6"/>'
        f'<text x="{left - 6:.1f}" y="{f.py(y) + 4:.1f}" text-anchor="end">{fmt_number(y)}</text>'
        for y in y_ticks
    ]
    labels = [(f.px(x), fmt_number(x)) for x in x_ticks]
    rank = _power_of_two_rank(x_ticks) if log_x else [0] * len(x_ticks)
    # Right of the y axis' labels (they end 6 px left of the plot) and inside the chart.
    keep = thin_labels(labels, rank=rank.__getitem__, within=(left - 4, f.width - 2))
    for (x, text), shown in zip(labels, keep, strict=True):
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{base}" y2="{base + 4}" stroke="#888"/>')
        if shown:
            out.append(f'<text x="{x:.1f}" y="{base + 16:.1f}" text-anchor="middle">{text}</text>')
    out.append(f'<line x1="{left:.1f}" x2="{right:.1f}" y1="{base}" y2="{base}" stroke="#888"/>')
    return out


def _axis_titles(f: _Frame, x_label: str, y_label: str, height: float) -> list[str]:
    left, top, right, base = f.box
    x_text = fit_text(x_label, right - left)
    y_text = fit_text(y_label, base - top)
    return [
        f'<text x="{(left + right) / 2:.1f}" y="{height - 6:.1f}" text-anchor="middle">'
        f"{escape(x_text)}</text>",
        f'<text transform="translate(16 {(top + base) / 2:.1f}) rotate(-90)" '
        f'text-anchor="middle">{escape(y_text)}</text>',
    ]


def _bounds(f: _Frame, hlines: Sequence[tuple[float, str]]) -> list[str]:
    left, _, right, _ = f.box
    return [
        f'<line class="bound" x1="{left:.1f}" x2="{right:.1f}" y1="{f.py(v):.1f}" '
        f'y2="{f.py(v):.1f}" stroke="#b00020" stroke-dasharray="6 4"/>'
        for v, _ in hlines
    ]


def _bound_labels(f: _Frame, hlines: Sequence[tuple[float, str]]) -> list[str]:
    """Each bound's label: right end above its line, else below, else further left."""
    left, top, right, bottom = f.box
    placed: list[tuple[float, float, float, float]] = []
    out = []
    for value, label in sorted(hlines, key=lambda h: -h[0]):
        text = fit_text(label, right - left - 8)
        w = text_width(text)
        y_line = f.py(value)
        spot = None
        end = right - 4
        while spot is None and end - w >= left + 4:
            for base in (y_line - 4, y_line + 4 + FONT_PX):
                box = (end - w, base - FONT_PX, end, base + 3)
                clear = all(
                    box[2] <= a or box[0] >= c or box[3] <= b or box[1] >= d
                    for a, b, c, d in placed
                )
                if clear and box[1] >= top and box[3] <= bottom:
                    spot = (end, base, box)
                    break
            end -= w + 8 if spot is None else 0
        if spot is None:
            continue  # no room anywhere: the dashed line speaks alone
        end, base, box = spot
        placed.append(box)
        out.append(
            f'<text x="{end:.1f}" y="{base:.1f}" text-anchor="end" '
            f'style="fill:#b00020">{escape(text)}</text>'
        )
    return out


def _segments(s: Series) -> list[list[tuple[float, float]]]:
    """The series' runs of points with data (None breaks the line)."""
    runs: list[list[tuple[float, float]]] = [[]]
    for x, y in s.points:
        if y is None:
            if runs[-1]:
                runs.append([])
        else:
            runs[-1].append((x, y))
    return [r for r in runs if r]


def _series_svg(s: Series, f: _Frame) -> str:
    parts = []
    for run in _segments(s):
        if len(run) > 1:
            path = " ".join(f"{f.px(x):.1f},{f.py(y):.1f}" for x, y in run)
            parts.append(
                f'<polyline points="{path}" fill="none" stroke="{s.color}" stroke-width="2"/>'
            )
        parts += [
            f'<circle cx="{f.px(x):.1f}" cy="{f.py(y):.1f}" r="2.5" fill="{s.color}"/>'
            for x, y in run
            if s.dots or len(run) == 1
        ]
    return "".join(parts)


def _markers(s: Series, f: _Frame) -> str:
    """The knee's ring and the capacity's square, with tooltips (unclipped: kept whole)."""
    parts = []
    for x, y in s.points:
        if y is None:
            continue
        cx, cy = f.px(x), f.py(y)
        if s.knee_x is not None and x == s.knee_x:
            parts.append(
                f'<circle class="knee" cx="{cx:.1f}" cy="{cy:.1f}" r="7" fill="none" '
                f'stroke="{s.color}" stroke-width="2"><title>{escape(s.name)}: knee at '
                f"{x:g}</title></circle>"
            )
        if s.capacity_x is not None and x == s.capacity_x:
            parts.append(
                f'<rect class="capacity" x="{cx - 5:.1f}" y="{cy - 5:.1f}" width="10" '
                f'height="10" fill="none" stroke="{s.color}" stroke-width="2">'
                f"<title>{escape(s.name)}: qualified capacity at {x:g}</title></rect>"
            )
    return "".join(parts)


def _empty_chart(title: str, width: int) -> str:
    return (
        svg_open(width, 60, title, "chart")
        + f'<text class="title" x="8" y="18">{escape(fit_text(title, width - 16, 13.0))}</text>'
        '<text x="8" y="42">no data in these snapshots</text></svg>'
    )
