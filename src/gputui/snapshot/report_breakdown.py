"""The HTML report's "where TTFT went" charts: one run's mean TTFT per step as stacked bars.

Contract: `breakdown_chart(name, snapshot, width=...)` draws the parts of `compare_diagnosis.PARTS`
stacked per step, a black mark at the client's mean TTFT, the level under each bar (thinned until
none touches another) and the bottleneck verdicts under them: one label per run of steps with the
same verdict, shortened to the run's width (each bar's tooltip has it whole). None when the run
has no breakdown. `breakdown_charts(cmp)` gives each diagnosed run's chart for desktop and phone.
Inline SVG, deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape
from typing import Final

from gputui.metrics.json_read import number
from gputui.metrics.ttft_breakdown import part_text
from gputui.snapshot.compare import Comparison
from gputui.snapshot.compare_diagnosis import PARTS
from gputui.snapshot.models import Snapshot, Step
from gputui.snapshot.report_svg import (
    WIDTH,
    axis,
    chart_head,
    chart_pair,
    fit_text,
    svg_open,
    text_width,
    thin_labels,
)

_MARK: Final = ("mean TTFT (client)", "#000")
_BELOW: Final = 40
"""Room under the plot: the levels, then the verdicts."""


def _seconds(step: Step, key: str) -> float:
    """A breakdown's part in seconds (0 where it has none or a negative one)."""
    return max(number(step.ttft_breakdown, key) or 0.0, 0.0)


def _verdict(step: Step) -> str:
    return str((step.bottleneck or {}).get("verdict", "") or "")


def _runs(values: Sequence[str]) -> list[tuple[int, int, str]]:
    """(first, last, value) of each run of equal neighbours."""
    runs: list[tuple[int, int, str]] = []
    for i, v in enumerate(values):
        if runs and runs[-1][2] == v:
            runs[-1] = (runs[-1][0], i, v)
        else:
            runs.append((i, i, v))
    return runs


def breakdown_chart(
    name: str, snapshot: Snapshot, *, width: int = WIDTH, uid: str = "b"
) -> str | None:
    """Stacked bars of the TTFT breakdown at each step of one run; None without breakdowns."""
    steps = [s for s in snapshot.steps if s.ttft_breakdown]
    if not steps:
        return None
    totals = [max(sum(_seconds(s, k) for k, _, _ in PARTS), _seconds(s, "ttft_s")) for s in steps]
    plot_h = 180 if width >= 480 else 150
    _, top_s, ticks = axis(0.0, max(max(totals), 1e-6) * 1.05 * 1e3, 5)
    labels = [f"{t:g} ms" for t in ticks]
    left = 14 + max(text_width(t) for t in labels)
    right = width - 12
    items = [(label, colour) for _, label, colour in PARTS] + [_MARK]
    title = f"TTFT breakdown per step: {name}"
    head = chart_head(title, items, width=width, plot=(left, right, plot_h), uid=uid)
    base = head.plot_top + plot_h
    height = base + _BELOW
    out = [svg_open(width, height, title, "chart breakdown"), *head.parts]
    out += [
        f'<line x1="{left:.1f}" x2="{right:.1f}" y1="{base - t / top_s * plot_h:.1f}" '
        f'y2="{base - t / top_s * plot_h:.1f}" stroke="#e6e6e6"/>'
        f'<text x="{left - 6:.1f}" y="{base - t / top_s * plot_h + 4:.1f}" '
        f'text-anchor="end">{text}</text>'
        for t, text in zip(ticks, labels, strict=True)
    ]
    slot = (right - left) / len(steps)
    out.append(f'<g clip-path="url(#{head.clip})">')
    for i, step in enumerate(steps):
        out += _bar(step, left + i * slot + slot * 0.2, slot * 0.6, base, plot_h / (top_s / 1e3))
    out.append("</g>")
    out.append(f'<line x1="{left:.1f}" x2="{right:.1f}" y1="{base}" y2="{base}" stroke="#999"/>')
    out += _under_bars(steps, left, slot, base)
    out.append("</svg>")
    return "".join(out)


def _part(step: Step, key: str) -> str:
    """A part's tooltip: its ms, or, drawn as nothing below zero, whether that is noise."""
    raw = number(step.ttft_breakdown, key)
    if raw is None or raw >= 0.0:
        return f"{max(raw or 0.0, 0.0) * 1e3:.1f} ms"
    return part_text(raw, number(step.ttft_breakdown, "noise_s")) + ", drawn as 0"


def _bar(step: Step, x: float, w: float, base: float, px_per_s: float) -> list[str]:
    """One step's stacked parts and its mean-TTFT mark, each with a tooltip."""
    out = []
    y = base
    where = f"{step.level:g}: {_verdict(step) or 'no verdict'}"
    for key, label, colour in PARTS:
        value = _seconds(step, key)
        height = value * px_per_s
        y -= height
        out.append(
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{height:.1f}" '
            f'fill="{colour}"><title>{escape(where)}; {label} {_part(step, key)}</title></rect>'
        )
    ttft = _seconds(step, "ttft_s")
    if ttft > 0:  # the client's mean TTFT: parts that overshoot it show above this mark
        mark = base - ttft * px_per_s
        out.append(
            f'<line x1="{x - 3:.1f}" y1="{mark:.1f}" x2="{x + w + 3:.1f}" y2="{mark:.1f}" '
            f'stroke="#000" stroke-width="2"><title>{escape(where)}; client TTFT '
            f"{ttft * 1e3:.1f} ms</title></line>"
        )
    return out


def _under_bars(steps: Sequence[Step], left: float, slot: float, base: float) -> list[str]:
    """The levels (thinned) and one verdict label per run of equal verdicts."""
    centres = [left + (i + 0.5) * slot for i in range(len(steps))]
    levels = [(x, f"{s.level:g}") for x, s in zip(centres, steps, strict=True)]
    power = [0 if s.level > 0 and math.log2(s.level).is_integer() else 1 for s in steps]
    keep = thin_labels(levels, rank=power.__getitem__, within=(left - 4, math.inf))
    out = [
        f'<text x="{x:.1f}" y="{base + 14:.1f}" text-anchor="middle">{text}</text>'
        for (x, text), shown in zip(levels, keep, strict=True)
        if shown
    ]
    for first, last, verdict in _runs([_verdict(s) for s in steps]):
        x0, x1 = left + first * slot + 2, left + (last + 1) * slot - 2
        shown = fit_text(verdict, x1 - x0)
        if len(shown) < 3:  # too narrow to say anything: the bars' tooltips carry it
            continue
        out.append(
            f'<line x1="{x0:.1f}" x2="{x1:.1f}" y1="{base + 19:.1f}" y2="{base + 19:.1f}" '
            'stroke="#bbb"/>'
            f'<text x="{(x0 + x1) / 2:.1f}" y="{base + 31:.1f}" text-anchor="middle">'
            f"{escape(shown)}<title>{escape(verdict)}</title></text>"
        )
    return out


def _drawn(name: str, snapshot: Snapshot, *, width: int, uid: str) -> str:
    return breakdown_chart(name, snapshot, width=width, uid=uid) or ""


def breakdown_charts(cmp: Comparison) -> list[str]:
    """One stacked chart per diagnosed run (desktop and phone), in the comparison's order."""
    charts = []
    for n, named in enumerate(cmp.snapshots):
        if breakdown_chart(named.name, named.snapshot) is None:
            continue
        charts.append(
            chart_pair(
                f"b{n}",
                lambda width, uid, s=named: (
                    breakdown_chart(s.name, s.snapshot, width=width, uid=uid) or ""
                ),
            )
        )
    return charts
