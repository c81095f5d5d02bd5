"""What bound each compared run, and where its TTFT went: the comparison's diagnosis slice.

Contract: `diagnosed_step(snapshot)` picks the step a comparison explains: the qualified
capacity's step when it was diagnosed, else the first diagnosed step past the knee, else the last
diagnosed step (None for a snapshot saved before issue 18: then nothing is shown for it).
`diagnosis_rows(cmp)` gives the "bound by" slice of the table (verdict, the level it is read at,
TTFT and its network/queue/prefill/server other/client parts, decode bandwidth and prefill
compute use), or None when no snapshot was diagnosed, so older comparisons render as before (a
snapshot saved before the server's other time was split shows "-" there).
`breakdown_chart(name, snapshot)` draws one run's TTFT breakdown per step as stacked bars, a black
mark at the client's mean TTFT (inline SVG, deterministic) for the HTML report.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Final

from gputui.metrics.json_read import number
from gputui.snapshot.compare import Comparison
from gputui.snapshot.models import Snapshot, Step

TITLE: Final = (
    "What bound it (at the qualified level; TTFT = network + queue + prefill + server other + "
    "client)"
)
HEADERS: Final = (
    "snapshot", "bound by", "at", "TTFT", "network", "queue", "prefill", "server other",
    "client", "decode BW", "prefill FLOP/s",
)  # fmt: skip
PARTS: Final = (
    ("network_s", "network", "#9467bd"),
    ("queue_s", "queue", "#d62728"),
    ("prefill_s", "prefill", "#1f77b4"),
    ("server_other_s", "server other", "#ff7f0e"),
    ("client_s", "client", "#7f7f7f"),
)
"""A snapshot saved before the server's other time was split has no `server_other_s` ("-", 0)."""
_W, _H, _PAD_L, _PAD_B, _PAD_T = 640, 260, 64, 40, 30


def diagnosed_step(snapshot: Snapshot) -> Step | None:
    """The step whose verdict speaks for the run (see the module docstring)."""
    steps = [s for s in snapshot.steps if s.bottleneck and not s.incomplete]
    if not steps:
        return None
    cap = snapshot.capacity
    if cap is not None:
        at = [s for s in steps if s.mode == cap.mode and s.level == cap.level]
        if at:
            return at[-1]
    if snapshot.knee is not None:
        past = sorted((s for s in steps if s.level > snapshot.knee.level), key=lambda s: s.level)
        if past:
            return past[0]
    return steps[-1]


def _ms(value: object) -> str:
    return "-" if not isinstance(value, int | float) else f"{value * 1e3:.1f} ms"


def _share(value: object) -> str:
    return "-" if not isinstance(value, int | float) else f"{value:.0%}"


def _seconds(part: Mapping[str, object] | None, key: str) -> float:
    """A breakdown's part in seconds (0 where it has none)."""
    return number(part, key) or 0.0


def diagnosis_rows(cmp: Comparison) -> list[list[str]] | None:
    """The "bound by" slice, one row per snapshot; None when no snapshot was diagnosed."""
    rows = []
    any_found = False
    for named, row in zip(cmp.snapshots, cmp.rows, strict=True):
        step = diagnosed_step(named.snapshot)
        if step is None or step.bottleneck is None:
            rows.append([row.label, "not diagnosed", *["-"] * (len(HEADERS) - 2)])
            continue
        any_found = True
        verdict = str(step.bottleneck.get("verdict"))
        if step.bottleneck.get("suspect"):
            verdict += " (suspect)"
        elif step.bottleneck.get("throttled"):
            verdict += " (throttled)"
        b = step.ttft_breakdown or {}
        roof = step.roofline or {}
        parts = {key: _ms(b.get(key)) for key, _, _ in PARTS}
        if b.get("unsplit"):  # no server TTFT: the client's part holds the server's rest too
            parts["client_s"] += " (+server)"
        rows.append(
            [
                row.label,
                verdict,
                f"{step.level:g}",
                _ms(b.get("ttft_s")),
                *parts.values(),
                _share(roof.get("decode_bandwidth_utilization")),
                _share(roof.get("prefill_compute_utilization")),
            ]
        )
    return rows if any_found else None


def breakdown_chart(name: str, snapshot: Snapshot) -> str | None:
    """Stacked bars of the TTFT breakdown at each step of one run; None without breakdowns."""
    steps = [s for s in snapshot.steps if s.ttft_breakdown]
    if not steps:
        return None
    totals = [max(sum(max(_seconds(s.ttft_breakdown, k), 0.0) for k, _, _ in PARTS), 1e-9)
              for s in steps]  # fmt: skip
    top = max(totals) * 1.1
    plot_w, plot_h = _W - _PAD_L - 16, _H - _PAD_T - _PAD_B
    slot = plot_w / len(steps)
    out = [
        f'<svg width="{_W}" height="{_H}" role="img" aria-label="TTFT breakdown: {escape(name)}" '
        f'xmlns="http://www.w3.org/2000/svg">',
        f'<text class="title" x="{_PAD_L}" y="18">TTFT breakdown per step: {escape(name)}</text>',
        f'<line x1="{_PAD_L}" y1="{_PAD_T + plot_h}" x2="{_PAD_L + plot_w}" '
        f'y2="{_PAD_T + plot_h}" stroke="#999"/>',
        f'<text x="{_PAD_L - 6}" y="{_PAD_T + 4}" text-anchor="end">{top * 1e3:.0f} ms</text>',
        f'<text x="{_PAD_L - 6}" y="{_PAD_T + plot_h}" text-anchor="end">0</text>',
    ]
    for i, step in enumerate(steps):
        b = step.ttft_breakdown or {}
        x = _PAD_L + i * slot + slot * 0.2
        y = float(_PAD_T + plot_h)
        for key, label, colour in PARTS:
            value = max(_seconds(b, key), 0.0)
            height = value / top * plot_h
            y -= height
            out.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{slot * 0.6:.1f}" height="{height:.1f}" '
                f'fill="{colour}"><title>{label} {value * 1e3:.1f} ms</title></rect>'
            )
        ttft = _seconds(b, "ttft_s")
        if ttft > 0:  # the client's mean TTFT: parts that overshoot it show above this mark
            mark = _PAD_T + plot_h - ttft / top * plot_h
            out.append(
                f'<line x1="{x - 4:.1f}" y1="{mark:.1f}" x2="{x + slot * 0.6 + 4:.1f}" '
                f'y2="{mark:.1f}" stroke="#000" stroke-width="2">'
                f"<title>client TTFT {ttft * 1e3:.1f} ms</title></line>"
            )
        verdict = (step.bottleneck or {}).get("verdict", "")
        cx = x + slot * 0.3
        out.append(
            f'<text x="{cx:.1f}" y="{_PAD_T + plot_h + 14}" text-anchor="middle">'
            f"{step.level:g}</text>"
            f'<text x="{cx:.1f}" y="{_PAD_T + plot_h + 28}" text-anchor="middle">'
            f"{escape(str(verdict))}</text>"
        )
    out.append(_legend())
    out.append("</svg>")
    return "".join(out)


def _legend() -> str:
    items = []
    for i, (_, label, colour) in enumerate(PARTS):
        x = _W - 16 - (len(PARTS) - i) * 78
        items.append(
            f'<rect x="{x}" y="8" width="10" height="10" fill="{colour}"/>'
            f'<text x="{x + 14}" y="17">{label}</text>'
        )
    return "".join(items)


def breakdown_charts(cmp: Comparison) -> Sequence[str]:
    """One stacked chart per diagnosed snapshot, in the comparison's order."""
    charts = (breakdown_chart(n.name, n.snapshot) for n in cmp.snapshots)
    return [c for c in charts if c is not None]
