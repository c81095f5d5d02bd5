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

from functools import partial
from html import escape
from typing import Final

from gputui.snapshot.comparable import sla_bound_text
from gputui.snapshot.compare import Comparison, sweep_curve
from gputui.snapshot.compare_format import (
    Block,
    at_block,
    blocks,
    capacity_notes,
    demand_line,
    formulas,
)
from gputui.snapshot.hardware import gpu_traces
from gputui.snapshot.report_breakdown import breakdown_charts
from gputui.snapshot.report_chart import Series, line_chart
from gputui.snapshot.report_svg import chart_pair

__all__ = ["Series", "html_report", "line_chart"]

PALETTE: Final = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b")
_TRACES: Final = (
    ("temperature_c", "GPU temperature", "°C", 1.0),
    ("sm_clock_mhz", "SM clock", "MHz", 1.0),
    ("power_w", "Power", "W", 1.0),
    ("memory_used_bytes", "VRAM used", "GiB", 1.0 / (1 << 30)),
)
PHONE_PX: Final = 600
"""Below this page width the charts drawn for a phone replace the desktop's (`chart_pair`)."""
_CSS: Final = f"""
*, *::before, *::after {{ box-sizing: border-box; }}
body {{ font: 14px/1.4 system-ui, sans-serif; margin: 0 auto; padding: 16px 24px;
  max-width: 1920px; color: #222; background: #fff; overflow-wrap: break-word; }}
h1 {{ font-size: 20px; }} h2 {{ font-size: 16px; margin-top: 28px; }}
h3 {{ font-size: 13px; margin: 14px 0 4px; }}
.scroll {{ overflow-x: auto; max-width: 100%; }}
table {{ border-collapse: collapse; font-size: 12px; }}
th, td {{ border: 1px solid #ccc; padding: 3px 6px; text-align: right; white-space: nowrap; }}
th {{ background: #f2f2f2; }} .t {{ text-align: left; }}
th, td.t {{ white-space: normal; min-width: 4.5em; }}
.banner {{ background: #fff4d6; border: 1px solid #e0a800; padding: 8px 12px; margin: 12px 0; }}
.banner ul {{ padding-left: 20px; }} .banner li {{ margin: 2px 0; }}
.charts {{ display: grid; gap: 12px;
  grid-template-columns: repeat(auto-fill, minmax(min(100%, 560px), 1fr)); }}
.chart svg {{ display: block; width: 100%; height: auto; }}
.chart .narrow {{ display: none; }}
.note {{ color: #555; font-size: 12px; }}
svg text {{ font: 11px system-ui, sans-serif; fill: #333; }}
svg .title {{ font-size: 13px; font-weight: 600; }}
@media (max-width: {PHONE_PX - 1}px) {{
  body {{ padding: 10px 12px; }}
  table {{ font-size: 11px; }} th, td {{ padding: 3px 4px; }}
  .chart .wide {{ display: none; }} .chart .narrow {{ display: block; }}
}}
"""


def _x_label(modes: set[str], log_x: bool) -> str:
    unit = (
        "arrival rate (req/s)"
        if modes == {"rate"}
        else "concurrency"
        if modes == {"concurrency"}
        else "load level (concurrency or req/s)"
    )
    return unit + (" — log scale" if log_x else "")


def _sweep_charts(cmp: Comparison) -> list[str]:
    """Output tok/s, P95 TTFT and P95 TPOT over load; a step with no answer is a gap, not 0."""
    curves = [(n.name, n.snapshot, sweep_curve(n.snapshot)) for n in cmp.snapshots]
    levels = [x for _, _, c in curves for x in c.levels]
    log_x = bool(levels) and min(levels) > 0 and max(levels) / min(levels) >= 4
    x_label = _x_label({c.mode for _, _, c in curves if c.mode is not None}, log_x)
    charts = []
    for n, (title, y_label, scale, pick, bound) in enumerate(
        (
            ("Output throughput vs load", "out tok/s", 1.0, "tok", None),
            ("P95 TTFT vs load", "P95 TTFT (ms)", 1e3, "ttft", "ttft_p95_s"),
            ("P95 TPOT vs load", "P95 TPOT (ms)", 1e3, "tpot", "tpot_p95_s"),
        )
    ):
        series = []
        for i, (name, snap, c) in enumerate(curves):
            values = {"tok": c.output_tokens_per_s, "ttft": c.ttft_p95_s, "tpot": c.tpot_p95_s}
            answered = c.requests_ok or (1,) * len(c.levels)
            points = tuple(
                (x, y * scale if y is not None and ok > 0 else None)
                for x, y, ok in zip(c.levels, values[pick], answered, strict=True)
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
            bounds = sorted({getattr(s.snapshot.sla, bound) for s in cmp.snapshots} - {None})
            hlines = [(b * scale, f"SLA {sla_bound_text(b)}") for b in bounds]
        charts.append(
            chart_pair(
                f"s{n}",
                partial(line_chart, title, x_label, y_label, series, log_x=log_x, hlines=hlines),
            )
        )
    return charts


def _trace_charts(cmp: Comparison) -> list[str]:
    """Each GPU's temperature, SM clock, power and VRAM over the run, every run overlaid."""
    traces = [(n.name, gpu_traces(n.snapshot)) for n in cmp.snapshots]
    if not any(t for _, t in traces):
        return []
    charts = []
    for n, (field, title, unit, scale) in enumerate(_TRACES):
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
        charts.append(
            chart_pair(
                f"t{n}", partial(line_chart, f"{title} over the run", "time (s)", unit, series)
            )
        )
    return charts


def table_html(block: Block) -> str:
    """A block as a table in a box that scrolls sideways on its own (the page never does)."""

    def cell(tag: str, i: int, text: str) -> str:
        align = ' class="t"' if i < block.left else ""
        return f"<{tag}{align}>{escape(text)}</{tag}>"

    head = "".join(cell("th", i, h) for i, h in enumerate(block.headers))
    body = "".join(
        "<tr>" + "".join(cell("td", i, c) for i, c in enumerate(row)) + "</tr>"
        for row in block.rows
    )
    return (
        f'<div class="scroll"><table><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table></div>"
    )


def _heading(cmp: Comparison, session: bool) -> str:
    names = " vs ".join(r.label for r in cmp.rows)
    return f"gputui session: {names}" if session else f"gputui compare: {names}"


def _tables(cmp: Comparison) -> list[str]:
    parts = ['<h2 id="capacity">Qualified capacity table</h2>']
    parts += [f"<h3>{escape(b.title)}</h3>{table_html(b)}" for b in blocks(cmp)]
    notes = capacity_notes(cmp)
    if notes:
        items = "".join(f"<li>{escape(n)}</li>" for n in notes)
        parts.append(f'<ul class="note capacity-notes">{items}</ul>')
    demand = demand_line(cmp)
    if demand is not None:
        parts.append(f'<p class="note">{escape(demand)}</p>')
    parts += [f'<p class="note">{escape(text)}</p>' for text in formulas(cmp)]
    extra = at_block(cmp)
    if extra is not None:
        parts.append(f"<h2>{escape(extra.title)}</h2>{table_html(extra)}")
    return parts


def _charts(cmp: Comparison) -> list[str]:
    parts = [
        '<h2 id="sweeps">Sweeps</h2>',
        '<p class="note">Rings mark each run\'s knee, squares its SLA-qualified capacity; dashed'
        " red lines are the SLA bounds; a gap is a step with no answered request.</p>",
        '<div class="charts">' + "".join(_sweep_charts(cmp)) + "</div>",
    ]
    breakdowns = breakdown_charts(cmp)
    if breakdowns:
        parts.append('<h2 id="ttft">Where TTFT went</h2>')
        parts.append(
            '<p class="note">Mean TTFT at each step, stacked: network (RTT probe), the server\'s'
            " queue and prefill (its histograms), and the client's remainder; under the bars the"
            " steps' bottleneck verdicts.</p>"
        )
        parts.append('<div class="charts">' + "".join(breakdowns) + "</div>")
    parts.append('<h2 id="traces">GPU traces</h2>')
    traces = _trace_charts(cmp)
    if traces:
        parts.append('<div class="charts">' + "".join(traces) + "</div>")
    else:
        parts.append('<p class="note">No GPU traces in these snapshots.</p>')
    return parts


def html_report(cmp: Comparison, *, session: bool = False) -> str:
    """The whole page (see the module docstring); `session` titles it as one TUI session's."""
    heading = escape(_heading(cmp, session))
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{heading}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>{heading}</h1>",
    ]
    if cmp.warnings:
        items = "".join(f"<li>{escape(w)}</li>" for w in cmp.warnings)
        parts.append(
            f'<div class="banner" role="alert"><strong>Warnings</strong><ul>{items}</ul></div>'
        )
    parts += _tables(cmp)
    parts += _charts(cmp)
    parts.append('<h2 id="sources">Sources</h2><ul>')
    for n, r in zip(cmp.snapshots, cmp.rows, strict=True):
        where = f"{n.path}, " if n.path is not None else ""
        reason = f" Capacity: {r.capacity_reason}." if r.capacity_reason else ""
        parts.append(
            f"<li>{escape(n.name)}: {escape(where)}{escape(r.created_at)}.{escape(reason)}</li>"
        )
    parts.append("</ul></body></html>")
    return "\n".join(parts) + "\n"
