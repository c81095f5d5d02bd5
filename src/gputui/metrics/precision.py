"""Is a step precise enough to end? The check behind adaptive steps (`--target-precision`).

Contract of `step_precision(step, target_precision)`: the relative half-widths ((hi - lo) / 2 /
value, `confidence.relative_half_width`) of the 95 % intervals of P95 TTFT, P95 TPOT and output
tok/s, so the UI can show "±3.2 %"; `precise` is True when each of them is within the target.
An open-ended interval (too few samples) has an infinite half-width and is never precise; a
missing TTFT or throughput interval is not precise either. P95 TPOT is left out when no request
had two tokens (TPOT undefined), as in the SLA. Reads a `StepResult` or a snapshot `Step`: a
caller with the records so far runs `aggregate_step` on them first (it is cheap).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Final, Protocol

from gputui.metrics.confidence import Interval, relative_half_width
from gputui.metrics.verdict import HasP95Interval

if TYPE_CHECKING:
    from gputui.metrics.step import StepResult

DEFAULT_TARGET_PRECISION: Final = 0.05


class PrecisionStep(Protocol):
    """What `step_precision` reads from a step."""

    @property
    def ttft_s(self) -> HasP95Interval: ...

    @property
    def tpot_s(self) -> HasP95Interval: ...

    @property
    def output_tokens_per_s(self) -> float: ...

    @property
    def output_tokens_per_s_ci(self) -> Interval | None: ...


@dataclass(frozen=True, slots=True)
class StepPrecision:
    """Relative half-widths (inf: open interval; None: not measured) against the target."""

    target: float
    ttft_p95: float | None
    tpot_p95: float | None
    """None when TPOT is undefined for every request (then it is not required)."""
    output_tokens_per_s: float | None
    precise: bool

    @property
    def worst(self) -> float | None:
        """The largest relative half-width that counts (what limits the step)."""
        values = [
            v for v in (self.ttft_p95, self.tpot_p95, self.output_tokens_per_s) if v is not None
        ]
        return max(values) if values else None

    def text(self) -> str:
        """The worst half-width as people read it: "±3.2 %", "±inf" or "n/a"."""
        worst = self.worst
        if worst is None:
            return "n/a"
        return "±inf" if math.isinf(worst) else f"±{worst * 100:.1f} %"


def step_precision(
    step: PrecisionStep, target_precision: float = DEFAULT_TARGET_PRECISION
) -> StepPrecision:
    """Whether P95 TTFT, P95 TPOT and output tok/s are known to within `target_precision`."""
    if not target_precision > 0:
        raise ValueError(f"target_precision must be > 0, got {target_precision}")
    ttft = _latency(step.ttft_s)
    tpot = _latency(step.tpot_s) if step.tpot_s.n > 0 else None
    tokens = relative_half_width(step.output_tokens_per_s, step.output_tokens_per_s_ci)
    required = [ttft, tokens] + ([tpot] if step.tpot_s.n > 0 else [])
    precise = all(v is not None and v <= target_precision for v in required)
    return StepPrecision(target_precision, ttft, tpot, tokens, precise)


def _latency(stats: HasP95Interval) -> float | None:
    if stats.n <= 0 or stats.p95 is None:
        return None
    return relative_half_width(stats.p95, stats.p95_ci)


def mark_precision(result: StepResult, target_precision: float) -> StepResult:
    """The finished step with the precision it reached against its target (`imprecise`).

    The verdict stays the intervals' own (a "pass" means the whole interval lies within the
    bound, however wide it is, and too few samples already give "inconclusive"), except that a
    step cut short before its window held a single request says nothing about the SLA: its
    "fail" (no request succeeded) becomes "inconclusive".
    """
    reached = step_precision(result, target_precision)
    figures = {
        "ttft_p95": reached.ttft_p95,
        "tpot_p95": reached.tpot_p95,
        "output_tokens_per_s": reached.output_tokens_per_s,
    }
    precision = {k: _finite(v) for k, v in figures.items() if v is not None}
    verdict = result.sla_verdict
    if not reached.precise:
        measured = result.requests_ok + result.requests_failed
        if verdict == "fail" and measured == 0:
            verdict = "inconclusive"
    return replace(result, imprecise=not reached.precise, precision=precision, sla_verdict=verdict)


def _finite(value: float) -> float | None:
    """JSON has no infinity: an open interval's half-width is recorded as null."""
    return None if math.isinf(value) else round(value, 4)
