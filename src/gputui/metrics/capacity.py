"""SLA-qualified capacity: the highest load level whose step held every SLA bound (domain.md §4).

Contract of `qualified_capacity(steps, sla, mode=None)`:

- Only complete steps are judged (an interrupted step's numbers are partial), and only steps of one
  mode: a concurrency level and an arrival rate are different units, so each mode has its own
  capacity. `mode=None` picks the mode most complete steps have; on a tie it picks "rate",
  because an open-loop rate is what real traffic does (a closed loop slows down with the server
  and hides queueing, §3).
- A step passes when `step_meets_sla` says so. A level passes when every complete step at that
  level passed (a repeat that failed means the level is not *sustained*); the capacity's numbers
  are those of the last step at that level.
- The capacity is the highest passing level, even if a lower level failed: the reason then names
  the lower failure, because such a result is noise or instability and worth a re-run.
- The result always carries a sentence: why this level (and which level failed above it), or why
  there is none, e.g. "no step met the SLA (lowest level concurrency 1: P95 TTFT 1.40 s > 1.00 s)".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from gputui.metrics.sla import Sla, StepLike, error_rate, step_meets_sla
from gputui.metrics.step import StepMode


class CapacityStep(StepLike, Protocol):
    """What capacity reads from a step (a `StepResult` or a snapshot's `Step`)."""

    @property
    def mode(self) -> StepMode: ...

    @property
    def level(self) -> float: ...

    @property
    def incomplete(self) -> bool: ...

    @property
    def output_tokens_per_s(self) -> float: ...

    @property
    def requests_per_s(self) -> float: ...


@dataclass(frozen=True, slots=True)
class Capacity:
    """The SLA-qualified operating point: its level and the numbers measured there."""

    level: float
    mode: StepMode
    output_tokens_per_s: float
    requests_per_s: float
    ttft_p95_s: float | None
    tpot_p95_s: float | None
    error_rate: float | None


@dataclass(frozen=True, slots=True)
class CapacityResult:
    """The capacity (None when no level qualified) and a sentence saying why."""

    capacity: Capacity | None
    reason: str


def _duration_pair(value: float, bound: float) -> tuple[str, str]:
    """Value and bound in one unit, with enough decimals that they do not print the same."""
    scale, unit = (1.0, "s") if max(value, bound) >= 1.0 else (1000.0, "ms")
    for decimals in range(1 if unit == "s" else 0, 7):
        text_v, text_b = f"{value * scale:.{decimals}f}", f"{bound * scale:.{decimals}f}"
        if text_v != text_b:
            break
    return f"{text_v} {unit}", f"{text_b} {unit}"


def level_text(mode: StepMode, level: float) -> str:
    """A level with its unit, e.g. "concurrency 24" or "rate 3.5 req/s"."""
    return f"concurrency {level:g}" if mode == "concurrency" else f"rate {level:g} req/s"


def sla_violations(step: StepLike, sla: Sla) -> list[str]:
    """Each SLA bound a step broke, as text; empty exactly when `step_meets_sla` is True."""
    if step.requests_ok <= 0:
        return ["no request succeeded"]
    broken = []
    if sla.ttft_p95_s is not None:
        ttft = step.ttft_s.p95
        if ttft is None:
            broken.append("no TTFT measured")
        elif ttft > sla.ttft_p95_s:
            value, bound = _duration_pair(ttft, sla.ttft_p95_s)
            broken.append(f"P95 TTFT {value} > {bound}")
    if sla.tpot_p95_s is not None:
        tpot = step.tpot_s.p95
        if tpot is not None and tpot > sla.tpot_p95_s:
            value, bound = _duration_pair(tpot, sla.tpot_p95_s)
            broken.append(f"P95 TPOT {value} > {bound}")
    if sla.max_error_rate is not None:
        rate = error_rate(step.requests_ok, step.requests_failed)
        if rate is not None and rate > sla.max_error_rate:
            broken.append(f"error rate {rate * 100:.1f} % > {sla.max_error_rate * 100:.1f} %")
    return broken


def majority_mode(steps: Sequence[CapacityStep]) -> StepMode | None:
    """The mode most complete steps have ("rate" on a tie); None when no step is complete."""
    complete = [s.mode for s in steps if not s.incomplete]
    if not complete:
        return None
    rate = complete.count("rate")
    return "rate" if 2 * rate >= len(complete) else "concurrency"


def _capacity(step: CapacityStep) -> Capacity:
    return Capacity(
        level=step.level,
        mode=step.mode,
        output_tokens_per_s=step.output_tokens_per_s,
        requests_per_s=step.requests_per_s,
        ttft_p95_s=step.ttft_s.p95,
        tpot_p95_s=step.tpot_s.p95,
        error_rate=error_rate(step.requests_ok, step.requests_failed),
    )


def _failure(mode: StepMode, level: float, failed: CapacityStep, sla: Sla) -> str:
    return f"{level_text(mode, level)}: {', '.join(sla_violations(failed, sla))}"


def qualified_capacity(
    steps: Sequence[CapacityStep], sla: Sla, mode: StepMode | None = None
) -> CapacityResult:
    """The highest level of one mode whose steps all met the SLA, with the reason."""
    chosen = majority_mode(steps) if mode is None else mode
    if chosen is None:
        return CapacityResult(None, "no complete step to judge")
    mine = [s for s in steps if s.mode == chosen and not s.incomplete]
    if not mine:
        return CapacityResult(None, f"no complete {chosen} step to judge")

    last: dict[float, CapacityStep] = {}
    first_failed: dict[float, CapacityStep] = {}
    for step in mine:
        last[step.level] = step
        if not step_meets_sla(step, sla):
            first_failed.setdefault(step.level, step)
    levels = sorted(last)
    passing = [x for x in levels if x not in first_failed]
    if not passing:
        lowest = levels[0]
        why = _failure(chosen, lowest, first_failed[lowest], sla)
        return CapacityResult(None, f"no step met the SLA (lowest level {why})")

    best = passing[-1]
    parts = [f"{level_text(chosen, best)} is the highest level that met every SLA bound"]
    higher = [x for x in levels if x > best]
    if higher:
        above = higher[0]
        parts.append(f"the next level failed ({_failure(chosen, above, first_failed[above], sla)})")
    else:
        parts.append("no higher level was tested, so the capacity may be higher")
    lower_failures = [x for x in levels if x < best and x in first_failed]
    if lower_failures:
        x = lower_failures[0]
        lower = _failure(chosen, x, first_failed[x], sla)
        parts.append(
            f"note: a lower level failed although {best:g} passed ({lower}); the results are"
            " noisy or the server is unstable, re-run to confirm"
        )
    if sla == Sla():
        parts.append("the SLA sets no bound, so this is peak load, not interactive capacity")
    others = sum(1 for s in steps if s.mode != chosen and not s.incomplete)
    if others:
        other = "rate" if chosen == "concurrency" else "concurrency"
        parts.append(f"{others} {other} step(s) are judged separately")
    return CapacityResult(_capacity(last[best]), "; ".join(parts))
