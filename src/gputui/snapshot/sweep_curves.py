"""A run's sweep as curves over load, and the run read at one output throughput.

Contract: `sweep_curve(snapshot)` is the one reading of a run's sweep that the compare tables,
the HTML charts and the TUI's overlay share: the last complete step at each level of the knee's
(else the capacity's, else the majority) load mode, ascending. `at_throughput` interpolates that
rising curve at a target output tok/s (`metrics.cost.interpolate_at_throughput`) and says why
there is no reading when the target is below the lowest step or above the peak. Pure functions;
re-exported by `snapshot.compare`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gputui.metrics.capacity import level_text, majority_mode
from gputui.metrics.cost import interpolate_at_throughput
from gputui.metrics.step import StepMode
from gputui.snapshot.models import KneeModel, Snapshot, Step


@dataclass(frozen=True, slots=True)
class SweepCurve:
    """A run's sweep as curves over load: one point per level (the last complete step there)."""

    levels: tuple[float, ...]
    output_tokens_per_s: tuple[float, ...]
    ttft_p95_s: tuple[float | None, ...]
    tpot_p95_s: tuple[float | None, ...]
    knee: KneeModel | None
    mode: StepMode | None
    """"concurrency" or "rate" (the unit of `levels`); None when no step is complete."""
    requests_ok: tuple[int, ...] = ()
    """Answered requests per level: 0 marks a step with no data (a gap in a chart, not a 0)."""


def sweep_curve(snapshot: Snapshot) -> SweepCurve:
    """The curve to plot or overlay: complete steps of the knee's (else capacity's) mode."""
    steps = snapshot.steps
    mode = (
        snapshot.knee.mode
        if snapshot.knee is not None
        else snapshot.capacity.mode
        if snapshot.capacity is not None
        else majority_mode(steps)
    )
    last: dict[float, Step] = {}
    for step in steps:
        if step.mode == mode and not step.incomplete:
            last[step.level] = step
    picked = [last[level] for level in sorted(last)]
    knee = snapshot.knee if snapshot.knee is not None and snapshot.knee.mode == mode else None
    return SweepCurve(
        levels=tuple(s.level for s in picked),
        output_tokens_per_s=tuple(s.output_tokens_per_s for s in picked),
        ttft_p95_s=tuple(s.ttft_s.p95 for s in picked),
        tpot_p95_s=tuple(s.tpot_s.p95 for s in picked),
        knee=knee,
        mode=mode,
        requests_ok=tuple(s.requests_ok for s in picked),
    )


AtStatus = Literal["ok", "cannot reach", "not measured", "no steps"]


@dataclass(frozen=True, slots=True)
class AtThroughputRow:
    """A run read at one output throughput (equal-throughput comparison)."""

    output_tokens_per_s: float
    status: AtStatus
    level: float | None = None
    mode: StepMode | None = None
    ttft_p95_s: float | None = None
    tpot_p95_s: float | None = None
    detail: str = ""
    """Why there is no reading, e.g. "peak 812.3 out tok/s"."""


def at_throughput(curve: SweepCurve, target: float) -> AtThroughputRow:
    """P95 TTFT, P95 TPOT and load level where the rising sweep reaches `target` tok/s."""
    if not curve.levels:
        return AtThroughputRow(target, "no steps", detail="no complete step")
    ttft = interpolate_at_throughput(
        curve.levels, curve.output_tokens_per_s, curve.ttft_p95_s, target
    )
    if ttft is None:
        lowest = curve.output_tokens_per_s[0]
        if target < lowest:
            where = level_text(curve.mode or "concurrency", curve.levels[0])
            return AtThroughputRow(
                target, "not measured", detail=f"lowest step gives {lowest:.1f} ({where})"
            )
        peak = max(curve.output_tokens_per_s)
        return AtThroughputRow(target, "cannot reach", detail=f"peak {peak:.1f} out tok/s")
    tpot = interpolate_at_throughput(
        curve.levels, curve.output_tokens_per_s, curve.tpot_p95_s, target
    )
    return AtThroughputRow(
        target,
        "ok",
        level=ttft.level,
        mode=curve.mode,
        ttft_p95_s=ttft.value,
        tpot_p95_s=tpot.value if tpot is not None else None,
    )
