"""The knee-and-capacity sweep planner: ramp past the SLA to the knee, then bisect by verdicts.

Contract: `KneeSweep.decide(steps)` is pure (the same finished steps, the same decision) and
reads complete steps of its mode at or above `start`; for a level run more than once the last
attempt counts, and `attempts` says how many there were. `passed_below` is the highest level
under `start` that passed before the sweep began (the TUI's operator, by hand): it bounds the
bisection from below as a pass would. With `bisect_on_miss` and no pass under the miss, the
sweep halves the level until one passes.

1. *Ramp*: start, start x 2, ... up to `max_level`, on past the SLA boundary, until output tok/s
   grows less than `knee_gain` (10 %) per doubling between two ramp levels (the planner's `knee`
   is the lower of the two: it only chooses levels; the knee every view reports is
   `metrics.knee_summary`'s over all the steps), or a level's error rate (timeouts included)
   passes the bound (`--max-error-rate`, else 5 %), or `max_level` is reached. `gains` holds
   the evidence: the gain per doubling at each ramp level. With `bisect_on_miss` (the TUI's
   `a`, started from the operator's level) the ramp also ends at the first level that misses
   the SLA (or is inconclusive above a pass): it bisects at once between the last pass and the
   miss rather than doubling the load past it.
2. *Bisect* the SLA boundary by the three-way verdicts (`sla_verdict`): `hi` is the lowest level
   judged "fail" (or still "inconclusive" after `max_attempts` runs), `lo` the highest level under
   it judged "pass". An "inconclusive" level between them is run again (the runner lengthens it)
   before it counts, the highest first; it never counts as a pass. The midpoints stop once
   hi - lo <= max(1, `bisect_gap` x lo) (concurrency) or hi / lo < 1 + `bisect_gap` (rates).
3. *Done*: `lo` is the capacity (`metrics.capacity` reports the same highest "pass").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from gputui.metrics.capacity import level_text
from gputui.metrics.knee import gain_per_doubling
from gputui.metrics.step import StepMode, StepResult

SweepState = Literal["ramp", "bisect", "done"]
"""Where the sweep is: ramping up, bisecting toward the knee, or done."""
KNEE_GAIN = 0.10
RAMP_ERROR_BOUND = 0.05
"""The ramp's error-rate stop when the SLA sets no `max_error_rate`."""


@dataclass(frozen=True, slots=True)
class KneeDecision:
    """What to run next (None = done), the how-many-th attempt it is, and why."""

    level: float | None
    state: SweepState
    reason: str
    attempt: int = 1
    knee: float | None = None
    gains: tuple[tuple[float, float], ...] = ()
    """(level, output tok/s gain per doubling from the ramp level below it)."""
    capacity: float | None = None
    first_bad: float | None = None


@dataclass(slots=True, kw_only=True)
class KneeSweep:
    """Ramp x2 to the knee, then bisect the SLA boundary (module contract)."""

    max_level: float
    max_error_rate: float | None = None
    mode: StepMode = "concurrency"
    start: float = 1.0
    knee_gain: float = KNEE_GAIN
    bisect_gap: float = 0.125
    max_attempts: int = 2
    bisect_on_miss: bool = False
    passed_below: float | None = None
    _steps: dict[float, list[StepResult]] = field(default_factory=dict, init=False)

    def ramp_levels(self) -> tuple[float, ...]:
        """Start x 2^k up to max_level (whole numbers for concurrency), max_level last."""
        levels: list[float] = []
        level = max(self.start, 1.0) if self.mode == "concurrency" else self.start
        while level < self.max_level:
            levels.append(float(round(level)) if self.mode == "concurrency" else level)
            level *= 2
        levels.append(float(self.max_level))
        return tuple(dict.fromkeys(levels))

    def decide(self, finished: Sequence[StepResult]) -> KneeDecision:
        """The next decision (pure; module contract)."""
        self._steps = {}
        for done in finished:
            if done.mode == self.mode and not done.incomplete and done.level >= self._floor():
                self._steps.setdefault(self._key(done.level), []).append(done)
        gains: list[tuple[float, float]] = []
        knee: float | None = None
        why = ""
        prev: StepResult | None = None
        for level in self.ramp_levels():
            step = self._last(level)
            if step is None:
                return KneeDecision(
                    level, "ramp", f"ramp: next {self._text(level)}", gains=tuple(gains)
                )
            if prev is not None:
                gain = gain_per_doubling(
                    prev.level, level, prev.output_tokens_per_s, step.output_tokens_per_s
                )
                gains.append((level, round(gain, 4)))
                if gain < self.knee_gain:
                    knee = prev.level
                    why = (
                        f"ramp stopped at {self._text(level)}: output tok/s grew "
                        f"{gain * 100:+.0f} % per doubling from {self._text(prev.level)}"
                    )
                    break
            rate = step.error_rate or 0.0
            bound = RAMP_ERROR_BOUND if self.max_error_rate is None else self.max_error_rate
            if rate > bound:
                why = f"errors at {self._text(level)}: {rate:.1%} > {bound:.0%}"
                break
            if self.bisect_on_miss and self._missed(level):
                why = f"SLA missed at {self._text(level)}"
                break
            prev = step
        else:
            why = f"reached the maximum, {self._text(self.max_level)}, without a knee"
        return self._bisect(why, knee, tuple(gains))

    def _bisect(
        self, why: str, knee: float | None, gains: tuple[tuple[float, float], ...]
    ) -> KneeDecision:
        verdicts = {level: self._verdict(level) for level in self._steps}
        bad = [lv for lv, v in verdicts.items() if v == "fail"]
        hi = min(bad) if bad else None
        passed = [lv for lv, v in verdicts.items() if v == "pass" and (hi is None or lv < hi)]
        if self.passed_below is not None and (hi is None or self.passed_below < hi):
            passed.append(self._key(self.passed_below))
        lo = max(passed) if passed else None
        pending = sorted(
            lv
            for lv, v in verdicts.items()
            if v == "retry" and (lo is None or lv > lo) and (hi is None or lv < hi)
        )

        def make(level: float | None, reason: str, attempt: int = 1) -> KneeDecision:
            state: SweepState = "done" if level is None else "bisect"
            return KneeDecision(level, state, reason, attempt, knee, gains, lo, hi)

        if pending:
            level = pending[-1]  # the one nearest the boundary decides the most
            again = f"{why}; {self._text(level)} was inconclusive: run it again"
            return make(level, again, len(self._steps[level]) + 1)
        if hi is None:
            return make(None, f"{why}; no level broke the SLA")
        if lo is None and self.bisect_on_miss and self.mode == "concurrency" and hi > 1:
            down = float(max(1, math.floor(hi / 2)))  # nothing passed under the miss yet: halve
            return make(down, f"{why}; nothing under {self._text(hi)} passed: try {down:g}")
        if lo is None:
            return make(None, f"{why}; no level under {self._text(hi)} passed the SLA")
        if self._close(lo, hi):
            return make(
                None,
                f"{why}; {self._text(lo)} is the highest level that passed the SLA, "
                f"{self._text(hi)} did not",
            )
        mid = self._mid(lo, hi)
        return make(mid, f"{why}; bisect: {self._text(lo)} passed, {self._text(hi)} did not")

    def _verdict(self, level: float) -> str:
        """Pass, fail, or retry (inconclusive with attempts left)."""
        runs = self._steps[level]
        verdict = runs[-1].sla_verdict or ("pass" if runs[-1].sla_ok else "fail")
        if verdict == "inconclusive":
            return "retry" if len(runs) < self.max_attempts else "fail"
        return verdict

    def _floor(self) -> float:
        """The lowest level read: `start`, or any under a miss (`bisect_on_miss`)."""
        return 0.0 if self.bisect_on_miss else self.start

    def _missed(self, level: float) -> bool:
        """`level` failed the SLA, or is inconclusive above a level that passed."""
        verdict = self._verdict(self._key(level))
        if verdict == "fail":
            return True
        below = [lv for lv in self._steps if lv < self._key(level)]
        passed = self.passed_below is not None or any(self._verdict(lv) == "pass" for lv in below)
        return verdict == "retry" and passed

    def _last(self, level: float) -> StepResult | None:
        runs = self._steps.get(self._key(level))
        return runs[-1] if runs else None

    def _close(self, lo: float, hi: float) -> bool:
        if self.mode == "concurrency":
            return hi - lo <= max(1.0, self.bisect_gap * lo)
        return hi / lo < 1.0 + self.bisect_gap

    def _mid(self, lo: float, hi: float) -> float:
        if self.mode == "concurrency":
            return float(math.floor((lo + hi) / 2))
        return (lo + hi) / 2

    def _key(self, level: float) -> float:
        return float(round(level)) if self.mode == "concurrency" else round(level, 9)

    def _text(self, level: float) -> str:
        return level_text(self.mode, level)


def last_pass_below(steps: Sequence[StepResult], level: float, mode: StepMode) -> float | None:
    """The highest level under `level` whose last complete step of `mode` passed the SLA."""
    last: dict[float, StepResult] = {}
    for step in steps:
        if step.mode == mode and not step.incomplete and step.level < level:
            last[step.level] = step
    passed = [lv for lv, s in last.items() if (s.sla_verdict or "") == "pass"]
    return max(passed) if passed else None


def gains_line(gains: Sequence[tuple[float, float]]) -> str:
    """The knee's evidence as `gputui run` prints it: "knee evidence: 2 +96 %, 4 +90 %, ..."."""
    if not gains:
        return "knee evidence: fewer than two ramp levels"
    parts = ", ".join(f"{level:g} {gain * 100:+.0f} %" for level, gain in gains)
    return f"knee evidence (output tok/s gain per doubling, by level): {parts}"
