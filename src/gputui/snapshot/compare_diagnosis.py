"""What bound each compared run, and where its TTFT went: the comparison's diagnosis slice.

Contract: `diagnosed_step(snapshot)` picks the step a comparison explains: the knee's bound,
the first step past the knee with data and a verdict (`compare.knee_bound_of`: the rule of the
live view and of the saved knee, so every screen names one cause), else the qualified capacity's
step when it was diagnosed, else the last diagnosed step with data (None for a snapshot saved
before issue 18: then nothing is shown for it).
`diagnosis_rows(cmp)` gives the "bound by" slice of the table (verdict, the level it is read at,
TTFT and its network/queue/prefill/server other/client parts, decode bandwidth and prefill
compute use), or None when no snapshot was diagnosed, so older comparisons render as before (a
snapshot saved before the server's other time was split shows "-" there).
`PARTS` names the breakdown's parts and their colours (the HTML report's stacked bars,
`snapshot.report_breakdown`, draw them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from gputui.metrics.json_read import number
from gputui.metrics.ttft_breakdown import part_text
from gputui.snapshot.compare import Comparison, knee_bound_of
from gputui.snapshot.models import Snapshot, Step

TITLE: Final = (
    "What bound it (past the knee, else at the qualified level; TTFT = network + queue + "
    "prefill + server other + client)"
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


def diagnosed_step(snapshot: Snapshot) -> Step | None:
    """The step whose verdict speaks for the run (see the module docstring)."""
    bound = knee_bound_of(snapshot)
    if bound is not None:
        return next(s for s in snapshot.steps if s.index == bound.step_index)
    steps = [s for s in snapshot.steps if s.bottleneck and s.requests_ok + s.requests_failed > 0]
    if not steps:
        return None
    cap = snapshot.capacity
    if cap is not None:
        at = [s for s in steps if s.mode == cap.mode and s.level == cap.level]
        if at:
            return at[-1]
    return steps[-1]


def _ms(value: object) -> str:
    return "-" if not isinstance(value, int | float) else f"{value * 1e3:.1f} ms"


def _part(breakdown: Mapping[str, object], key: str) -> str:
    """A part in ms; one below zero says whether that is within the noise (`part_text`)."""
    value = number(breakdown, key)
    if value is None or value >= 0.0:
        return _ms(breakdown.get(key))
    return part_text(value, number(breakdown, "noise_s"))


def _share(value: object) -> str:
    return "-" if not isinstance(value, int | float) else f"{value:.0%}"


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
        parts = {key: _part(b, key) for key, _, _ in PARTS}
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
