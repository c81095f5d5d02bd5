"""SLA-qualified capacity: the highest load level whose step held every SLA bound (domain.md §4).

Contract of `qualified_capacity(steps, sla, mode=None)`:

- Only complete steps are judged (an interrupted step's numbers are partial), and only steps of one
  mode: a concurrency level and an arrival rate are different units, so each mode has its own
  capacity. `mode=None` picks the mode most complete steps have; on a tie it picks "rate",
  because an open-loop rate is what real traffic does (a closed loop slows down with the server
  and hides queueing, §3).
- A step passes when its three-way verdict (`metrics.verdict.judge_step`: the 95 % intervals lie
  within every bound) is "pass"; a step on too few samples is "inconclusive" and cannot qualify.
  A held step (`h`, its `verdict_basis` set) is judged by the verdict its hold's looks saved
  (`capacity_verdict`), not by its nominal intervals: the hold stopped at a look that decided,
  so the intervals over the whole step, read once more, would look again without the error
  split between looks (`metrics.hold_looks`), and a hold saved "inconclusive" could pass.
  A level's verdict combines its complete steps: a repeat that failed means the level is not
  *sustained* (fail beats pass), while an inconclusive step is no evidence either way, so a
  decisive verdict of another step at that level (the auto sweep re-runs an inconclusive level)
  stands; the capacity's numbers, and its intervals, are those of the last step at that level.
- The capacity is the highest passing level, even if a lower level failed: the reason then names
  the lower failure, because such a result is noise or instability and worth a re-run. It is
  reported with the tested levels that bracket it (`below_*`, `above_*`) and their verdicts.
- The result always carries a sentence: why this level (and which level failed above it), or why
  there is none, e.g. "no step met the SLA (lowest level concurrency 1: P95 TTFT 1.40 s > 1.00 s)".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from gputui.metrics.confidence import Interval, wilson_ci
from gputui.metrics.sla import Sla, StepLike, error_rate, ttfat_stats
from gputui.metrics.step import StepMode
from gputui.metrics.verdict import Judgement, Verdict, VerdictStep, combine, judge_step


class CapacityStep(VerdictStep, Protocol):
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

    @property
    def output_tokens_per_s_ci(self) -> Interval | None: ...

    @property
    def goodput_output_tokens_per_s(self) -> float: ...

    @property
    def goodput_output_tokens_per_s_ci(self) -> Interval | None: ...

    @property
    def requests_per_s_ci(self) -> Interval | None: ...

    @property
    def error_rate_ci(self) -> Interval | None: ...


@dataclass(frozen=True, slots=True)
class Capacity:
    """The SLA-qualified operating point: its level and the numbers measured there."""

    level: float
    mode: StepMode
    output_tokens_per_s: float
    """The qualified output: tokens of good requests per second (the step's goodput), the basis
    of the cost per million output tokens and of the servers needed."""
    requests_per_s: float
    ttft_p95_s: float | None
    tpot_p95_s: float | None
    error_rate: float | None
    output_tokens_per_s_ci: Interval | None = None
    """95 % interval of the qualified throughput (None: saved before intervals existed)."""
    all_output_tokens_per_s: float | None = None
    """Every output token at that level (failed, over-SLA and short requests' too)."""
    requests_per_s_ci: Interval | None = None
    ttft_p95_ci: Interval | None = None
    tpot_p95_ci: Interval | None = None
    error_rate_ci: Interval | None = None
    below_level: float | None = None
    """The next lower tested level and its verdict (None: the capacity is the lowest level)."""
    below_verdict: Verdict | None = None
    above_level: float | None = None
    """The next higher tested level and its verdict (None: nothing higher was tested)."""
    above_verdict: Verdict | None = None
    provisional: bool = False
    """No step was decisive: the level rests on point estimates (`capacity_caveats`)."""
    provisional_reason: str | None = None
    caveats: tuple[str, ...] = ()
    """What the capacity is worth: a lower level failed, a SUSPECT or throttled step."""


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
    for name, stats, limit in (
        ("E2E", step.e2e_s, sla.e2e_p95_s),
        ("TTFAT", ttfat_stats(step) or step.ttft_s, sla.ttfat_p95_s),
    ):
        if limit is None:
            continue
        p95 = stats.p95
        if p95 is None:
            broken.append(f"no {name} measured")
        elif p95 > limit:
            value, bound = _duration_pair(p95, limit)
            broken.append(f"P95 {name} {value} > {bound}")
    if sla.max_error_rate is not None:
        rate = error_rate(step.requests_ok, step.requests_failed)
        if rate is not None and rate > sla.max_error_rate:
            broken.append(f"error rate {rate * 100:.1f} % > {sla.max_error_rate * 100:.1f} %")
    return broken


def has_data(step: CapacityStep) -> bool:
    """A request finished in it: a "no data" step neither passes nor fails (`metrics.outcome`)."""
    return step.requests_ok + step.requests_failed > 0


def majority_mode(steps: Sequence[CapacityStep]) -> StepMode | None:
    """The mode most complete steps have ("rate" on a tie); None when no step is complete."""
    complete = [s.mode for s in steps if not s.incomplete]
    if not complete:
        return None
    rate = complete.count("rate")
    return "rate" if 2 * rate >= len(complete) else "concurrency"


def capacity_from_step(
    step: CapacityStep,
    below: tuple[float, Verdict] | None,
    above: tuple[float, Verdict] | None,
) -> Capacity:
    """The capacity at `step`, bracketed by the levels `below` and `above` and their verdicts."""
    return Capacity(
        level=step.level,
        mode=step.mode,
        output_tokens_per_s=step.goodput_output_tokens_per_s,
        requests_per_s=step.requests_per_s,
        ttft_p95_s=step.ttft_s.p95,
        tpot_p95_s=step.tpot_s.p95,
        error_rate=error_rate(step.requests_ok, step.requests_failed),
        output_tokens_per_s_ci=step.goodput_output_tokens_per_s_ci,
        all_output_tokens_per_s=step.output_tokens_per_s,
        requests_per_s_ci=step.requests_per_s_ci,
        ttft_p95_ci=step.ttft_s.p95_ci,
        tpot_p95_ci=step.tpot_s.p95_ci,
        error_rate_ci=step.error_rate_ci
        or wilson_ci(step.requests_failed, step.requests_ok + step.requests_failed),
        below_level=None if below is None else below[0],
        below_verdict=None if below is None else below[1],
        above_level=None if above is None else above[0],
        above_verdict=None if above is None else above[1],
    )


def _verdict_basis(step: object) -> str | None:
    """A held step's `verdict_basis` (a `StepResult` field, a saved step's extra key)."""
    basis = getattr(step, "verdict_basis", None)
    if basis is None:
        extra = getattr(step, "model_extra", None)
        basis = extra.get("verdict_basis") if isinstance(extra, dict) else None
    return basis if isinstance(basis, str) and basis else None


def capacity_verdict(step: VerdictStep, sla: Sla) -> Judgement:
    """The step's verdict for capacity: its hold's looks' when it was held, else its intervals'."""
    basis = _verdict_basis(step)
    saved = getattr(step, "sla_verdict", None)
    if basis is not None and saved in ("pass", "fail", "inconclusive"):
        return Judgement(saved, () if saved == "pass" else (f"hold: {basis}",))
    return judge_step(step, sla)


def _failure(mode: StepMode, level: float, failed: CapacityStep, sla: Sla) -> str:
    why = sla_violations(failed, sla) or list(capacity_verdict(failed, sla).reasons)
    return f"{level_text(mode, level)}: {', '.join(why)}"


def _why(mode: StepMode, level: float, bad: tuple[CapacityStep, Judgement], sla: Sla) -> str:
    """Why a level did not pass: its broken bounds, or which intervals straddle them."""
    step, judged = bad
    if judged.verdict == "fail":
        return _failure(mode, level, step, sla)
    return f"{level_text(mode, level)} inconclusive: {', '.join(judged.reasons)}"


def _level_verdict(so_far: Verdict | None, verdict: Verdict) -> Verdict:
    """Fail beats pass beats inconclusive (an inconclusive step carries no evidence)."""
    if so_far is None or so_far == "inconclusive":
        return verdict
    if verdict == "inconclusive":
        return so_far
    return combine([so_far, verdict])


def qualified_capacity(
    steps: Sequence[CapacityStep], sla: Sla, mode: StepMode | None = None
) -> CapacityResult:
    """The highest level of one mode whose steps all met the SLA, with the reason."""
    chosen = majority_mode(steps) if mode is None else mode
    if chosen is None:
        return CapacityResult(None, "no complete step to judge")
    mine = [s for s in steps if s.mode == chosen and not s.incomplete and has_data(s)]
    if not mine:
        return CapacityResult(None, f"no complete {chosen} step to judge")

    last: dict[float, CapacityStep] = {}
    verdicts: dict[float, Verdict] = {}
    first_bad: dict[float, tuple[CapacityStep, Judgement]] = {}
    for step in mine:
        last[step.level] = step
        judged = capacity_verdict(step, sla)
        verdicts[step.level] = _level_verdict(verdicts.get(step.level), judged.verdict)
        held = first_bad.get(step.level)
        if judged.verdict != "pass" and (held is None or held[1].verdict != "fail"):
            first_bad[step.level] = (step, judged)  # a failure explains a level best
    levels = sorted(last)
    passing = [x for x in levels if verdicts[x] == "pass"]
    if not passing:
        lowest = levels[0]
        why = _why(chosen, lowest, first_bad[lowest], sla)
        return CapacityResult(None, f"no step met the SLA (lowest level {why})")

    best = passing[-1]
    parts = [f"{level_text(chosen, best)} is the highest level that met every SLA bound"]
    higher = [x for x in levels if x > best]
    lower = [x for x in levels if x < best]
    if higher:
        above = higher[0]
        word = "failed" if verdicts[above] == "fail" else "was inconclusive"
        parts.append(f"the next level {word} ({_why(chosen, above, first_bad[above], sla)})")
    else:
        parts.append("no higher level was tested, so the capacity may be higher")
    lower_failures = [x for x in lower if verdicts[x] == "fail"]
    if lower_failures:
        x = lower_failures[0]
        failed = _failure(chosen, x, first_bad[x][0], sla)
        parts.append(
            f"note: a lower level failed although {best:g} passed ({failed}); the results are"
            " noisy or the server is unstable, re-run to confirm"
        )
    if sla == Sla():
        parts.append("the SLA sets no bound, so this is peak load, not interactive capacity")
    others = sum(1 for s in steps if s.mode != chosen and not s.incomplete)
    if others:
        other = "rate" if chosen == "concurrency" else "concurrency"
        parts.append(f"{others} {other} step(s) are judged separately")
    below = (lower[-1], verdicts[lower[-1]]) if lower else None
    above_pair = (higher[0], verdicts[higher[0]]) if higher else None
    return CapacityResult(capacity_from_step(last[best], below, above_pair), "; ".join(parts))
