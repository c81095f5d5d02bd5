"""The auto-sweep planner: which load level to run next, as a pure state machine.

Contract: `AutoSweep.decide(steps)` looks only at the finished steps it is given (complete steps
of its own mode; for a repeated level the last one counts) and returns a `SweepDecision`: the next
level to run, or None when the sweep is done, with its state and a sentence saying why. The same
steps always give the same decision, so the engine can re-plan after a crash from the journal, and
a step that was interrupted is simply asked for again. `next_level(steps)` is `decide` that also
remembers the decision for `state`, `reason`, `last_good` and `first_bad`.

The plan:
1. *Ramp*: start, start x factor, ... capped at `max_level` (levels are whole numbers for
   concurrency). A ramp step is *bad* when it breaks the SLA (`step_meets_sla`: a P95 bound, the
   error-rate bound, or no successful request). The ramp also stops, without a bad level, when
   output tok/s grows less than `stall_gain` per doubling of load (the knee's measure) for
   `stall_steps` consecutive steps: the server is saturated and more load only adds queueing. It
   stops at `max_level` too. The planner judges on point estimates; wherever the three-way verdict
   (`metrics.verdict`) is decisive it agrees with them, and an "inconclusive" step is placed by
   its point estimate, so `last_good` may be inconclusive while `metrics.capacity` (which needs
   a "pass") reports a lower level.
2. *Bisect* between the last good and the first bad ramp level: midpoints (integers for
   concurrency) until hi - lo <= `bisect_min_gap` for concurrency (default 1: neighbouring
   integers) or hi / lo < 1 + `bisect_min_gap` for rates (default 0.1: within 10 %).
3. *Done*: `last_good` is the highest level shown to hold the SLA, `first_bad` the lowest shown
   to break it above that. When the first level already fails, there is nothing lower to try.

Steps run: at most the ramp's length plus ~log2(gap) bisections, so it always terminates.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from gputui.metrics.capacity import CapacityStep, level_text, sla_violations
from gputui.metrics.knee import gain_per_doubling
from gputui.metrics.sla import Sla, step_meets_sla
from gputui.metrics.step import StepMode

SweepState = Literal["ramp", "bisect", "done"]

#: Default bisection stop: neighbouring integers for concurrency, 10 % apart for rates.
_DEFAULT_GAP = {"concurrency": 1.0, "rate": 0.1}


@dataclass(frozen=True, slots=True)
class SweepDecision:
    """What to run next (None = done), where the sweep stands, and why."""

    level: float | None
    state: SweepState
    reason: str
    last_good: float | None = None
    first_bad: float | None = None


@dataclass(slots=True, kw_only=True)
class AutoSweep:
    """A geometric ramp until the SLA breaks or throughput stalls, then a bisection."""

    max_level: float
    sla: Sla
    mode: StepMode = "concurrency"
    start: float = 1.0
    factor: float = 2.0
    stall_steps: int = 2
    stall_gain: float = 0.05
    bisect_min_gap: float | None = None
    """Absolute for concurrency, relative for rates; None = the default of the mode."""
    _last: SweepDecision = field(
        init=False, default=SweepDecision(None, "ramp", "no step planned yet")
    )

    def __post_init__(self) -> None:
        if self.start <= 0 or self.max_level < self.start:
            raise ValueError(f"need 0 < start <= max_level, got {self.start}, {self.max_level}")
        if self.factor <= 1:
            raise ValueError(f"factor must be > 1, got {self.factor}")
        if self.stall_steps < 1:
            raise ValueError(f"stall_steps must be >= 1, got {self.stall_steps}")
        if self.mode == "concurrency" and self.start != round(self.start):
            raise ValueError(f"a concurrency start must be a whole number, got {self.start}")
        if self.gap <= 0:
            raise ValueError(f"bisect_min_gap must be > 0, got {self.gap}")

    @property
    def gap(self) -> float:
        """The bisection stop gap in force (see `bisect_min_gap`)."""
        return _DEFAULT_GAP[self.mode] if self.bisect_min_gap is None else self.bisect_min_gap

    @property
    def state(self) -> SweepState:
        """State after the last `next_level` call."""
        return self._last.state

    @property
    def reason(self) -> str:
        """Why the last `next_level` call chose what it chose."""
        return self._last.reason

    @property
    def last_good(self) -> float | None:
        """Highest level shown to hold the SLA so far (by the last `next_level` call)."""
        return self._last.last_good

    @property
    def first_bad(self) -> float | None:
        """Lowest level above `last_good` shown to break the SLA so far."""
        return self._last.first_bad

    def ramp_levels(self) -> tuple[float, ...]:
        """The ramp: start x factor^k, whole and strictly rising for concurrency, <= max_level."""
        levels: list[float] = []
        level = self.start
        while True:
            value = float(round(level)) if self.mode == "concurrency" else level
            if levels and value <= levels[-1]:
                value = levels[-1] + 1
            value = min(value, self.max_level)
            if levels and value <= levels[-1]:
                break
            levels.append(value)
            if value >= self.max_level:
                break
            level *= self.factor
        return tuple(levels)

    def next_level(self, finished_steps: Sequence[CapacityStep]) -> float | None:
        """The next level to run (None when done), remembering the decision for `reason`."""
        self._last = self.decide(finished_steps)
        return self._last.level

    def decide(self, finished_steps: Sequence[CapacityStep]) -> SweepDecision:
        """The decision these finished steps lead to (pure: the same steps, the same answer)."""
        seen: dict[float, CapacityStep] = {}
        for finished in finished_steps:
            if finished.mode == self.mode and not finished.incomplete:
                seen[self._key(finished.level)] = finished
        prev: CapacityStep | None = None
        stalled = 0
        for level in self.ramp_levels():
            step = seen.get(self._key(level))
            if step is None:
                return self._ramp(level, prev)
            if not step_meets_sla(step, self.sla):
                why = ", ".join(sla_violations(step, self.sla))
                if prev is None:
                    return SweepDecision(
                        None,
                        "done",
                        f"the lowest level, {self._text(level)}, already broke the SLA ({why})",
                        first_bad=level,
                    )
                return self._bisect(seen, prev.level, level, why)
            if prev is not None:
                gain = gain_per_doubling(
                    prev.level, level, prev.output_tokens_per_s, step.output_tokens_per_s
                )
                stalled = stalled + 1 if gain < self.stall_gain else 0
                if stalled >= self.stall_steps:
                    return SweepDecision(
                        None,
                        "done",
                        f"output tok/s grew less than {self.stall_gain * 100:g} % per doubling for"
                        f" {stalled} consecutive steps up to {self._text(level)} while every SLA"
                        " bound held: the server is saturated",
                        last_good=level,
                    )
            prev = step
        top = self.ramp_levels()[-1]
        return SweepDecision(
            None,
            "done",
            f"reached the maximum, {self._text(top)}, with every SLA bound held",
            last_good=top,
        )

    def _ramp(self, level: float, prev: CapacityStep | None) -> SweepDecision:
        if prev is None:
            return SweepDecision(level, "ramp", f"ramp: start at {self._text(level)}")
        held = f"{self._text(prev.level)} held the SLA at {prev.output_tokens_per_s:,.0f} tok/s"
        return SweepDecision(level, "ramp", f"ramp: {held}; next {level:g}", last_good=prev.level)

    def _bisect(
        self, seen: dict[float, CapacityStep], good: float, bad: float, why: str
    ) -> SweepDecision:
        lo, hi = good, bad
        while not self._close(lo, hi):
            mid = self._mid(lo, hi)
            step = seen.get(self._key(mid))
            if step is None:
                return SweepDecision(
                    mid,
                    "bisect",
                    f"bisect: {lo:g} held the SLA, {hi:g} broke it ({why}); next {mid:g}",
                    last_good=lo,
                    first_bad=hi,
                )
            if step_meets_sla(step, self.sla):
                lo = mid
            else:
                hi, why = mid, ", ".join(sla_violations(step, self.sla))
        return SweepDecision(
            None,
            "done",
            f"{self._text(lo)} is the highest level that held the SLA; {hi:g} broke it ({why})",
            last_good=lo,
            first_bad=hi,
        )

    def _close(self, lo: float, hi: float) -> bool:
        if self.mode == "concurrency":
            return hi - lo <= max(self.gap, 1.0)
        return hi / lo < 1.0 + self.gap

    def _mid(self, lo: float, hi: float) -> float:
        if self.mode == "concurrency":
            return float(math.floor((lo + hi) / 2))
        return (lo + hi) / 2

    def _key(self, level: float) -> float:
        # Levels come back from the engine as floats; round away representation noise.
        return float(round(level)) if self.mode == "concurrency" else round(level, 9)

    def _text(self, level: float) -> str:
        return level_text(self.mode, level)
