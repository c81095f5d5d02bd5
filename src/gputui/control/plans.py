"""Plans: what step comes next, given the finished ones (`control.runner` plays them).

Contract: a plan's `next(progress)` returns the next move or None when it is done; it reads only
its own finished steps and its last move's `Ended`, and ends itself once `progress.stopped`.
- `FixedLevels`: one step per level, in order; it stops after a step flooded with rejections.
- `KneeSweepPlan`: the auto sweep (`metrics.knee_sweep`), each step to the precision limits; a
  re-run of an inconclusive level gets its attempt number times the maximum length, and with a
  deadline no step outlasts it (the sweep stops when under min(10 s, the maximum) is left).
- `ValidateRate`: holds an open-loop rate (90 % of the capacity: `at_capacity`) and judges
  whether the SLA holds and the queue stays bounded (`validation`).
- `HoldStep`: the TUI's hold: the open step until precise and decided, then closed.
- `Repeats`: a plan `count` times, `fresh` between, each repeat's steps, capacity and knee in a
  `RepeatTally` (with more than one, each repeat's open step is finished for the spread).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

from gputui.control.rules import StepLimits
from gputui.control.runner import Ended, Keep, Move, Open, Plan, Progress
from gputui.engine.load import LoadMode
from gputui.metrics.capacity import qualified_capacity
from gputui.metrics.knee_summary import knee_of
from gputui.metrics.knee_sweep import KneeDecision, KneeSweep, last_pass_below
from gputui.metrics.repeats import RepeatSpread, repeat_spread
from gputui.metrics.sla import Sla
from gputui.metrics.step import StepResult
from gputui.metrics.validation import ValidationHold, queue_verdict, validation_hold


class FixedLevels:
    """One step per level, each as long as `limits` says (module contract)."""

    def __init__(self, mode: LoadMode, levels: Sequence[float], limits: StepLimits) -> None:
        self.mode = mode
        self.limits = limits
        self._left = list(levels)

    def next(self, progress: Progress) -> Move | None:
        if progress.last is not None and progress.last.flooded:
            return None  # the next level's requests would be rejected alike
        if progress.stopped or not self._left:
            return None
        return Open(self.mode, self._left.pop(0), self.limits, finish=False)


class KneeSweepPlan:
    """The auto sweep: ramp to the knee, then bisect the SLA boundary (module contract)."""

    def __init__(self, planner: KneeSweep, limits: StepLimits, deadline_ns: int | None) -> None:
        self.planner = planner
        self.limits = limits
        self.deadline_ns = deadline_ns
        self.last: KneeDecision | None = None
        self.reason = "interrupted"
        """Why the sweep ended."""

    @classmethod
    def for_run(
        cls, sla: Sla, *, max_level: float, limits: StepLimits, deadline_ns: int
    ) -> KneeSweepPlan:
        """`gputui run --auto`: from concurrency 1, under the `--max-minutes` deadline."""
        planner = KneeSweep(max_level=max_level, max_error_rate=sla.max_error_rate)
        return cls(planner, limits, deadline_ns)

    @classmethod
    def from_level(
        cls,
        level: float,
        finished: Sequence[StepResult],
        sla: Sla,
        *,
        max_level: float,
        limits: StepLimits,
    ) -> KneeSweepPlan:
        """The TUI's `a`: from the operator's level; it bisects under a miss, never doubles."""
        start = max(float(round(level)), 1.0)
        planner = KneeSweep(
            max_level=max(max_level, level),
            max_error_rate=sla.max_error_rate,
            start=start,
            bisect_on_miss=True,
            passed_below=last_pass_below(finished, start, "concurrency"),
        )
        return cls(planner, limits, None)

    @property
    def gains(self) -> tuple[tuple[float, float], ...]:
        """The knee's evidence: gain per doubling by level."""
        return self.last.gains if self.last else ()

    @property
    def knee(self) -> float | None:
        """The knee's level (None: not found)."""
        return self.last.knee if self.last else None

    def next(self, progress: Progress) -> Move | None:
        if progress.stopped:
            return None
        decision = self.planner.decide(progress.finished)
        self.last = decision
        if decision.level is None:
            self.reason = decision.reason
            return None
        max_s = self.limits.max_s * decision.attempt
        if self.deadline_ns is not None:
            left_s = (self.deadline_ns - time.perf_counter_ns()) / 1e9
            if left_s < min(10.0, self.limits.max_s):
                self.reason = f"stopped at the time bound ({decision.reason})"
                return None
            max_s = min(max_s, left_s)
        limits = StepLimits(self.limits.target_precision, max_s, self.limits.step_s)
        return Open(self.planner.mode, decision.level, limits)


InFlight = Callable[[int, int], tuple[np.ndarray, np.ndarray]]
"""(t_s from lo, requests in flight) of the frames in [lo, hi): `Session.in_flight_between`."""


class ValidateRate:
    """Hold an open-loop rate; judge whether the SLA holds and the queue stays bounded."""

    def __init__(self, rate: float, seconds: float, in_flight: InFlight) -> None:
        self.rate = rate
        self.seconds = seconds
        self.in_flight = in_flight
        self.validation: ValidationHold | None = None
        """The snapshot's `validation` (None until held to the end)."""
        self._asked = False

    @classmethod
    def at_capacity(
        cls, steps: Sequence[StepResult], sla: Sla, seconds: float, in_flight: InFlight
    ) -> ValidateRate | None:
        """Hold 90 % of the qualified capacity's req/s (None: no capacity)."""
        rate = capacity_rate(steps, sla)
        return None if rate is None else cls(rate, seconds, in_flight)

    def next(self, progress: Progress) -> Move | None:
        if not self._asked:
            self._asked = True
            # Without a target the step measures `seconds` once settled; max_s is not used.
            return Open("rate", self.rate, StepLimits(None, self.seconds, self.seconds))
        last = progress.last
        if last is not None and last.result is not None:
            self.validation = self._judge(last, last.result)
        return None

    def _judge(self, held: Ended, result: StepResult) -> ValidationHold:
        t_s, in_flight = self.in_flight(held.spec.measure_start_ns, held.ended_ns)
        queue = queue_verdict(t_s, in_flight)
        return validation_hold(self.rate, self.seconds, held.spec.index, result, queue)


def capacity_rate(steps: Sequence[StepResult], sla: Sla) -> float | None:
    """90 % of the qualified capacity's req/s: the rate an automatic validation holds."""
    capacity = qualified_capacity(steps, sla).capacity
    if capacity is None or capacity.requests_per_s <= 0:
        return None
    return round(0.9 * capacity.requests_per_s, 3)


class HoldStep:
    """Keep step `index` open until its rules end it (`hold_limits`), then close it."""

    def __init__(self, index: int, limits: StepLimits) -> None:
        self.index = index
        self.limits = limits
        self._asked = False

    def next(self, progress: Progress) -> Move | None:  # noqa: ARG002 (one move, whatever came)
        if self._asked:
            return None
        self._asked = True
        return Keep(self.index, self.limits)


class RepeatTally:
    """Each repeat's steps, capacity and knee, for the spread (`metrics.repeats`)."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.runs: list[list[StepResult]] = []
        self.capacities: list[float | None] = []
        self.knees: list[float | None] = []

    def add(self, finished: Sequence[StepResult], sla: Sla) -> None:
        """A repeat whose own finished steps are `finished` has ended.

        Its knee is `metrics.knee_summary`'s, as every view names it (an auto sweep's planner
        only chose the levels).
        """
        steps = [s for s in finished if s.mode == "concurrency"]
        capacity = qualified_capacity(steps, sla).capacity if steps else None
        knee = knee_of(steps, "concurrency")[0] if steps else None
        self.runs.append(steps)
        self.capacities.append(capacity.level if capacity is not None else None)
        self.knees.append(knee.level if knee is not None else None)

    def spread(self) -> RepeatSpread:
        """The spread across the repeats (the snapshot's `repeats` key)."""
        return repeat_spread(self.runs, self.capacities, self.knees)


class Repeats:
    """A plan `count` times over (module contract)."""

    def __init__(
        self,
        count: int,
        make: Callable[[int], Plan],
        *,
        sla: Sla,
        tally: RepeatTally,
        fresh: Callable[[int], None],
        on_end: Callable[[Plan], None],
    ) -> None:
        self.count = count
        self.make = make
        self.sla = sla
        self.tally = tally
        self.fresh = fresh
        """Readies repeat `n` (from the second): `control.repeats.fresh_start`."""
        self.on_end = on_end
        """Each repeat's plan once it is done (or stopped)."""
        self._repeat = -1
        self._inner: Plan | None = None
        self._closing = False
        self._indexes: set[int] = set()

    def next(self, progress: Progress) -> Move | None:
        if self._inner is not None and not self._closing:
            if progress.last is not None:
                self._indexes.add(progress.last.spec.index)
            return self._ask(self._inner, self._own(progress))
        if self._inner is not None:  # the open step is finished: this repeat is complete
            self.tally.add(self._own(progress).finished, self.sla)
        return self._begin(progress)

    def _begin(self, progress: Progress) -> Move | None:
        self._repeat += 1
        if self._repeat >= self.count or progress.stopped:
            self._inner = None
            return None
        if self._repeat:
            self.fresh(self._repeat)
        self._inner, self._closing, self._indexes = self.make(self._repeat), False, set()
        return self._ask(self._inner, Progress((), None, progress.stop))

    def _ask(self, inner: Plan, progress: Progress) -> Move | None:
        move = inner.next(progress)
        if move is not None:
            return move
        self.on_end(inner)
        last = progress.last
        if self.count > 1 and last is not None and last.result is None:
            # The plan left its last step open unfinished (fixed levels): its figures, for the
            # spread. A plan that finished it (the knee sweep, a validation hold) left only its
            # hidden carry-on step open, whose figures are reported nowhere: waiting for them
            # would never end.
            self._closing = True
            return Keep(last.spec.index)
        self.tally.add(progress.finished, self.sla)
        return self._begin(progress)

    def _own(self, progress: Progress) -> Progress:
        finished = [s for s in progress.finished if s.index in self._indexes]
        return Progress(finished, progress.last, progress.stop)
