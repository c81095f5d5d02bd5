"""A capacity rather than none, and what it is worth: provisional capacities and their caveats.

Contract of `judged_capacity(steps, sla, mode=None, diagnoses=None)`:

- When `capacity.qualified_capacity` finds a level whose intervals pass, that is the capacity.
- When no level is decisive (every step too short for its P95 to be decided, a hand-paced TUI
  session of 12-20 s steps), the capacity is *provisional*: the highest level whose point
  estimates meet every bound (`sla.step_meets_sla`) and that no step failed decisively, with
  `provisional_reason` saying what a verdict still needs ("P95 on 14 requests; 59 decide it").
  Its cost then rests on point estimates too.
- Either capacity carries `caveats`, one sentence each: a lower level failed (the capacity lies
  above a failure: noise or instability), a lower level gave more good output tok/s than the
  capacity (beyond the capacity's interval, where it has one: the extra load bought nothing),
  the step at that level was client-bound (SUSPECT: the load generator's own queueing is in its
  numbers; on a contended host, that wait) or measured while throttled. The diagnoses
  (`steps[].bottleneck`, from `diagnoses` by step index or the step's own `bottleneck`) give the
  last two.

`capacity_notes_lines(capacity)` says both in lines for `gputui run`'s summary.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Protocol

from gputui.metrics.capacity import (
    Capacity,
    CapacityResult,
    CapacityStep,
    capacity_from_step,
    capacity_verdict,
    has_data,
    level_text,
    majority_mode,
    qualified_capacity,
)
from gputui.metrics.confidence import min_n_two_sided
from gputui.metrics.sla import Sla, step_meets_sla
from gputui.metrics.step import StepMode
from gputui.metrics.step_diagnosis import StepDiagnosis
from gputui.metrics.verdict import Verdict

P95_DECIDING_N = min_n_two_sided(0.95)
"""Requests a P95 needs before its interval has an upper end (59)."""


def judged_capacity(
    steps: Sequence[CapacityStep],
    sla: Sla,
    mode: StepMode | None = None,
    diagnoses: Mapping[int, StepDiagnosis] | None = None,
) -> CapacityResult:
    """The qualified capacity, else a provisional one, with its caveats (module contract)."""
    result = qualified_capacity(steps, sla, mode)
    if result.capacity is None:
        result = _provisional(steps, sla, mode) or result
    capacity = result.capacity
    if capacity is None:
        return result
    caveats = _caveats(steps, sla, capacity, diagnoses or {})
    return CapacityResult(replace(capacity, caveats=tuple(caveats)), result.reason)


def _mine(steps: Sequence[CapacityStep], mode: StepMode | None) -> list[CapacityStep]:
    chosen = majority_mode(steps) if mode is None else mode
    return [s for s in steps if s.mode == chosen and not s.incomplete and has_data(s)]


def _provisional(
    steps: Sequence[CapacityStep], sla: Sla, mode: StepMode | None
) -> CapacityResult | None:
    """The highest level whose point estimates meet the SLA and that no step failed."""
    mine = _mine(steps, mode)
    failed = {s.level for s in mine if capacity_verdict(s, sla).verdict == "fail"}
    last: dict[float, CapacityStep] = {}
    for step in mine:
        last[step.level] = step
    meeting = [x for x in sorted(last) if x not in failed and step_meets_sla(last[x], sla)]
    if not meeting:
        return None
    best = meeting[-1]
    step = last[best]
    higher = [x for x in sorted(last) if x > best]
    lower = [x for x in sorted(last) if x < best]
    above: tuple[float, Verdict] | None = None
    if higher:
        above = (higher[0], "fail" if higher[0] in failed else "inconclusive")
    below: tuple[float, Verdict] | None = (lower[-1], "inconclusive") if lower else None
    why = needs_text(step)
    bracketed = capacity_from_step(step, below, above)
    capacity = replace(bracketed, provisional=True, provisional_reason=why)
    reason = (
        f"provisional: {level_text(step.mode, best)} is the highest level whose point estimates "
        f"meet every SLA bound, but no step was decisive ({why})"
    )
    return CapacityResult(capacity, reason)


def needs_text(step: CapacityStep) -> str:
    """What a verdict still needs: 'P95 on 14 requests; 59 decide it', or the straddling bound."""
    n = min(step.ttft_s.n, step.tpot_s.n) if step.tpot_s.n else step.ttft_s.n
    if n < P95_DECIDING_N:
        return f"P95 on {n} requests; {P95_DECIDING_N} decide it"
    return f"the P95 intervals straddle the bounds on {n} requests: a longer step decides it"


def _caveats(
    steps: Sequence[CapacityStep],
    sla: Sla,
    capacity: Capacity,
    diagnoses: Mapping[int, StepDiagnosis],
) -> list[str]:
    mine = _mine(steps, capacity.mode)
    lower_failed = sorted(
        {
            s.level
            for s in mine
            if s.level < capacity.level and capacity_verdict(s, sla).verdict == "fail"
        }
    )
    out: list[str] = []
    if lower_failed:
        levels = " and ".join(f"{x:g}" for x in lower_failed)
        verb = "fails" if len(lower_failed) == 1 else "fail"
        out.append(
            f"{levels} {verb} below it: the results are noisy or the server unstable; re-run"
        )
    better = _better_below(mine, capacity)
    if better is not None:
        out.append(
            f"{level_text(better.mode, better.level)} gave more good output "
            f"({better.goodput_output_tokens_per_s:.1f} tok/s against "
            f"{capacity.output_tokens_per_s:.1f}): the extra load bought nothing"
        )
    at = [s for s in mine if s.level == capacity.level]
    verdicts = [_bottleneck(s, diagnoses) for s in at]
    suspect = [v for v in verdicts if v.get("suspect") or v.get("verdict") == "client"]
    if any(v.get("client_state") == "host-contended" for v in suspect):
        out.append(  # not the client's own CPU: more workers would not help (metrics.client_state)
            "SUSPECT: measured on a contended host (the client waited for a CPU); that wait is "
            "in the numbers"
        )
    elif suspect:
        out.append(
            "SUSPECT: measured while the client was saturated; its queueing is in the numbers"
        )
    if any(v.get("throttled") or v.get("verdict") == "throttled" for v in verdicts):
        out.append("throttled: measured while the GPU was throttled; a cooler card may do better")
    return out


def _better_below(steps: Sequence[CapacityStep], capacity: Capacity) -> CapacityStep | None:
    """The lower level with the most good output, if it beat the capacity's (and its interval)."""
    ci = capacity.output_tokens_per_s_ci
    top = ci[1] if ci is not None and ci[1] is not None else capacity.output_tokens_per_s
    lower = [s for s in steps if s.level < capacity.level]
    best = max(lower, key=lambda s: s.goodput_output_tokens_per_s, default=None)
    if best is None or best.goodput_output_tokens_per_s <= max(top, capacity.output_tokens_per_s):
        return None
    return best


def _bottleneck(step: CapacityStep, diagnoses: Mapping[int, StepDiagnosis]) -> Mapping[str, object]:
    index = getattr(step, "index", None)
    found = diagnoses.get(index) if isinstance(index, int) else None
    verdict = found.bottleneck if found is not None else getattr(step, "bottleneck", None)
    return verdict if isinstance(verdict, Mapping) else {}


class MarkedCapacity(Protocol):
    """What `capacity_notes_lines` reads (a metrics `Capacity` or a snapshot's capacity)."""

    @property
    def provisional(self) -> bool: ...

    @property
    def provisional_reason(self) -> str | None: ...

    @property
    def caveats(self) -> Sequence[str]: ...


def capacity_notes_lines(capacity: MarkedCapacity, indent: str = "  ") -> list[str]:
    """'  provisional: on point estimates (P95 on 14 requests; 59 decide it)', then each caveat."""
    lines = []
    if capacity.provisional:
        lines.append(f"{indent}provisional: on point estimates ({capacity.provisional_reason})")
    lines += [f"{indent}caveat: {c}" for c in capacity.caveats]
    return lines
