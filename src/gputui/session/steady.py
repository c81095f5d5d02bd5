"""The open step's progress: where its measured window starts, and its precision so far.

Contract: the session loop owns one `StepProgress`, built on the Session's `StepLedger` (it reads
the ledger's steps and records, and moves a step's measured start there once it settles). `open`
starts the settling of each new step (a `session.settling.SettleTracker`, unless the warm-up is
fixed), `on_batch` feeds it the engine's send and in-flight counts, `settle` decides (on each
frame, and when a plan asks `settled`). `phase` is the frame's step phase, settling countdown,
measured count, precision and verdict so far; the precision is re-aggregated at most once a
second (`forget` asks for it at once, e.g. after an SLA change). Only the loop calls these.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from gputui.engine.records import RequestRecord
from gputui.metrics.precision import step_precision
from gputui.metrics.sla import Sla
from gputui.metrics.steady import SteadyStart
from gputui.metrics.step import StepResult, StepSpec, aggregate_step
from gputui.metrics.verdict_progress import VerdictProgress, verdict_progress
from gputui.session.ledger import StepLedger
from gputui.session.settling import SettleTracker, first_verdict_s, settle_bound_s

PRECISION_EVERY_NS = 1_000_000_000
DEFAULT_FRAME_TARGET = 0.05
"""The precision the frame reports against when the step has no target of its own."""


UNMEASURED = "unmeasured"
"""The frame's `step_phase` after a hold (or between a plan's steps): the load runs on, but no
step is open; the next load key opens one."""


@dataclass(frozen=True, slots=True)
class StepPhase:
    """The open step's phase fields of a frame (`session.frames.StatsFrame`)."""

    step_phase: str = "measuring"
    settle_remaining_s: float | None = None
    measured_n: int = 0
    precision: float | None = None
    verdict_progress: VerdictProgress | None = None
    first_verdict_s: float | None = None
    """While settling: about how long until the step's first verdict can come."""


def step_so_far(
    step: StepSpec | None, records: Sequence[RequestRecord], sla: Sla, now_ns: int
) -> StepResult | None:
    """The open step's figures up to `now_ns` (None while settling or without an open step)."""
    if step is None or step.end_ns >= 0 or now_ns <= step.measure_start_ns:
        return None
    return aggregate_step(replace(step, end_ns=now_ns), list(records), sla)


class StepProgress:
    """Settling and precision of the open step (module contract)."""

    def __init__(self, ledger: StepLedger, *, warmup_s: float | None, max_warmup_s: float) -> None:
        self._ledger = ledger
        self._warmup_s = warmup_s
        self._max_warmup_s = max_warmup_s
        self._tracker: SettleTracker | None = None
        self._cached: tuple[int, int, StepPhase] | None = None
        self._settled: int | None = None
        """The step whose settling is decided and applied."""
        self._first_verdict: tuple[int, int] | None = None
        """(step index, when) its first verdict can come (`settling.first_verdict_s`)."""
        """(step index, when, phase) of the last precision aggregation."""

    @property
    def settle_bound_s(self) -> float:
        """The longest any step settles: the fixed warm-up, else the session's maximum."""
        return self._max_warmup_s if self._warmup_s is None else self._warmup_s

    def open(self, step: StepSpec) -> None:
        """Start settling a step just opened (nothing to do with a fixed warm-up)."""
        if self._warmup_s is not None:
            return
        # The latest finished step's lifetime (hidden holds included) sizes the trend window
        # and the longest settling (`settle_bound_s`: a hand's pace, not a fixed 30 s).
        previous = self._ledger.latest_finished()
        hint = previous.e2e_s.p50 if previous is not None else None
        alike = previous is not None and previous.mode == step.mode
        bound_s = settle_bound_s(
            self._max_warmup_s, hint, step.level, previous.level if alike and previous else None
        )
        self._ledger.move_measure_start(step.index, step.start_ns + int(bound_s * 1e9))
        verdict_s = first_verdict_s(
            step.mode, step.level, hint, previous.level if alike and previous else None
        )
        if verdict_s is not None:
            self._first_verdict = (step.index, step.start_ns + int(verdict_s * 1e9))
        self._tracker = SettleTracker(
            index=step.index,
            mode=step.mode,
            level=step.level,
            change_ns=step.start_ns,
            max_warmup_s=bound_s,
            lifetime_hint_s=hint,
            sent_before=self._ledger.sent.get(step.index, 0),
        )

    def on_batch(self, arrived_ns: int, sent_by_step: dict[int, int], in_flight: int) -> None:
        """An engine batch reached the session at `arrived_ns`."""
        tracker = self._tracker
        if tracker is not None:
            tracker.on_batch(arrived_ns, sent_by_step.get(tracker.index, 0), in_flight)

    def settle(self, now_ns: int) -> SteadyStart | None:
        """Whether the open step has settled; once it has, its window starts there.

        A step a burst fired in (`session.loads`: the TUI's `b`) settles only once every one of
        the burst's requests is back (or at its bound): its window starts after the last.
        """
        tracker, last = self._tracker, self._ledger.last
        if tracker is None or last is None or last.index != tracker.index:
            return None
        if self._settled == tracker.index:
            return tracker.result
        found = tracker.decide(now_ns, self._ledger.records.get(tracker.index, []))
        if found is None:
            return None
        start = found.measure_start_ns
        burst = self._ledger.bursts.get(tracker.index)
        if burst is not None:
            ends = [r.end_ns for r in self._ledger.burst_records(tracker.index)]
            if len(ends) < burst[0] and now_ns < tracker.bound_ns:
                return None  # the burst is still out: the load has not recovered
            start = max([start, *ends])
        self._ledger.move_measure_start(tracker.index, start)
        self._settled = tracker.index
        return found

    def settled(self, index: int, now_ns: int) -> bool:
        """Whether step `index` has settled (a fixed warm-up: once it has passed)."""
        specs = self._ledger.specs
        if not 0 <= index < len(specs) or index == self._ledger.pending:
            return False  # a pending step's level has not started (`session.loads`)
        tracker = self._tracker
        if tracker is not None and tracker.index == index:
            return self.settle(now_ns) is not None
        return now_ns >= specs[index].measure_start_ns

    def forget(self) -> None:
        """Aggregate the precision and verdict afresh on the next `phase` (the SLA changed)."""
        self._cached = None

    def so_far(self, now_ns: int, sla: Sla) -> StepResult | None:
        """The open step's figures so far."""
        step = self._ledger.current
        records = self._ledger.records.get(step.index, []) if step is not None else []
        return step_so_far(step, records, sla, now_ns)

    def phase(self, now_ns: int, job_phase: str, sla: Sla) -> StepPhase:
        """The latest step's phase fields for a frame built at `now_ns`."""
        step = self._ledger.last
        if step is None:
            return StepPhase()
        if step.index == self._ledger.pending:
            return StepPhase(step_phase="handover" if job_phase == "measuring" else job_phase)
        if now_ns < step.measure_start_ns:
            verdict = self._first_verdict
            return StepPhase(
                step_phase="settling" if job_phase == "measuring" else job_phase,
                settle_remaining_s=(step.measure_start_ns - now_ns) / 1e9,
                first_verdict_s=max(verdict[1] - now_ns, 0) / 1e9
                if verdict is not None and verdict[0] == step.index
                else None,
            )
        cached = self._cached
        # At most once a second (aggregating the step so far is not free), and at once per step.
        if cached is None or cached[0] != step.index or now_ns - cached[1] >= PRECISION_EVERY_NS:
            target = self._ledger.targets.get(step.index, DEFAULT_FRAME_TARGET)
            so_far = self.so_far(now_ns, sla)
            reached = step_precision(so_far, target) if so_far is not None else None
            figures = StepPhase(
                measured_n=so_far.requests_ok + so_far.requests_failed if so_far else 0,
                precision=reached.worst if reached is not None else None,
                verdict_progress=verdict_progress(so_far, sla) if so_far is not None else None,
            )
            cached = (step.index, now_ns, figures)
            self._cached = cached
        return replace(cached[2], step_phase=job_phase)
