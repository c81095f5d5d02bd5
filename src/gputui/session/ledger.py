"""The step ledger: every step's spec, its records and counts, and which steps are finished.

Contract: one `StepLedger` per Session, written only by the session loop (`session.loop`), so it
holds no lock. A step opens with `open` (its spec is built where the load changed, at that
instant) and closes with `close_current`; records arrive with `add_records` and the engine's
per-step send counts with `set_sent`. `finish_ready` is the one place that decides a step is
finished: it is closed *and* every request sent during it has come back *and* the engine has
acknowledged a later step (or `force`, at the end of the run, when what is missing is
`incomplete`); that is also where the step gets its one telemetry summary of its measured
window (`window_telemetry`, set by `session.diagnosis`). Hidden steps (`Session.hold`) are
kept and finished like any other but reported nowhere (`visible_finished`); so is a step that
finished without a single measured request (the operator left its level while it settled): it
is `unmeasured`, an event and nothing else.

A step opened at a new level is `pending` while the steps before it hand over (`handing_over`:
closed, measured, not yet finished): its level is not running yet, and `start_pending` moves its
start to the moment it does (`session.loads`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import replace

from gputui.engine.process import EngineStatus
from gputui.engine.records import REASON_CANCELLED, RequestRecord
from gputui.metrics.precision import mark_precision
from gputui.metrics.rejudge import rejudge_step
from gputui.metrics.sla import Sla
from gputui.metrics.step import StepResult, StepSpec, aggregate_step
from gputui.metrics.verdict import Verdict
from gputui.telemetry.step_telemetry import StepTelemetry

WindowTelemetry = Callable[[int, int], StepTelemetry | None]
"""(measure start ns, end ns) -> the telemetry summary of that window."""


class StepLedger:
    """Steps, their records and counts (module contract)."""

    def __init__(self) -> None:
        self.specs: list[StepSpec] = []
        self.records: dict[int, list[RequestRecord]] = {}
        self.received: Counter[int] = Counter()
        self.sent: dict[int, int] = {}
        self.finished: dict[int, StepResult] = {}
        self.targets: dict[int, float] = {}
        """Precision targets by step index (a watched step's limits, `session.watch`): judged
        when finished."""
        self.verdicts: dict[int, tuple[Verdict, str]] = {}
        """Verdicts set from outside by step index (a hold's looks): they replace the intervals'."""
        self.hidden: set[int] = set()
        self.cancelled = 0
        """Requests aborted because the run was interrupted: excluded from every statistic."""
        self.cancelled_by_step: Counter[int] = Counter()
        self.interrupted: int | None = None
        """The step that was running when an interrupted run stopped (it is incomplete)."""
        self.version = 0
        """Changes whenever a finished step is added or re-judged."""
        self.unmeasured: list[StepSpec] = []
        """Steps closed before they measured anything, oldest first: hidden, and said in the
        event log only (`session.events.unmeasured_event`)."""
        self.bursts: dict[int, tuple[int, int]] = {}
        """Bursts by the step they fired in: (requests, when); their records are `burst`."""
        self.resettled: set[int] = set()
        """Steps opened for a burst (the TUI's `b`): they measure from after its last request.
        A step a burst fires in otherwise (`gputui run --burst`) keeps its window, less the
        burst's (`metrics.burst_window`)."""
        self.pending: int | None = None
        """The step opened at a new level whose load waits for the hand-over (module contract)."""
        self.window_telemetry: WindowTelemetry | None = None
        """Summarizes a finished step's measured window (None: no telemetry)."""

    @property
    def current(self) -> StepSpec | None:
        """The open step, if any."""
        return self.specs[-1] if self.specs and self.specs[-1].end_ns < 0 else None

    @property
    def last(self) -> StepSpec | None:
        """The latest step, open or closed."""
        return self.specs[-1] if self.specs else None

    def open(self, spec: StepSpec, *, hidden: bool, pending: bool = False) -> None:
        """Close the open step at `spec.start_ns` and open `spec` (its index is the next one)."""
        self.close_current(spec.start_ns)
        if hidden:
            self.hidden.add(spec.index)
        self.specs.append(spec)
        if pending:
            self.pending = spec.index

    def replace_pending(self, spec: StepSpec) -> bool:
        """Another level for the pending step (quick presses: the last wins); False: too late."""
        if self.pending != spec.index:
            return False
        self.specs[spec.index] = spec
        return True

    def start_pending(self, spec: StepSpec) -> None:
        """The hand-over is over: the pending step's level runs from `spec.start_ns`."""
        if self.pending == spec.index:
            self.specs[spec.index] = spec
            self.pending = None

    def handing_over(self) -> list[StepSpec]:
        """Closed visible steps that measured and wait for requests: the next level waits."""
        return [
            s
            for s in self.specs
            if s.end_ns >= 0
            and s.measure_start_ns < s.end_ns
            and s.index not in self.finished
            and s.index not in self.hidden
        ]

    def burst_records(self, index: int) -> list[RequestRecord]:
        """The records of the burst fired in step `index` that are back."""
        return [r for r in self.records.get(index, []) if r.burst]

    def outstanding(self, index: int) -> int:
        """Requests of step `index` sent and not back yet."""
        return max(self.sent.get(index, 0) - self.received[index], 0)

    def close_current(self, now_ns: int) -> None:
        """Close the open step at `now_ns`, if one is open."""
        step = self.current
        if step is not None and step.index == self.pending:
            self.pending = None  # its level never ran: it measured nothing
            step = replace(step, measure_start_ns=now_ns)
        if step is not None:
            # A step closed before it settled: its whole length was warm-up (none measured).
            start = min(step.measure_start_ns, now_ns)
            self.specs[-1] = replace(step, end_ns=now_ns, measure_start_ns=start)

    def interrupt(self, now_ns: int) -> None:
        """An interrupted run: the open step is incomplete, and closed at `now_ns`."""
        if self.current is not None:
            self.interrupted = self.specs[-1].index
        self.close_current(now_ns)

    def move_measure_start(self, index: int, measure_start_ns: int) -> None:
        """The step settled: its measured window starts at `measure_start_ns` (if still inside)."""
        step = self.specs[index]
        if step.end_ns < 0 or measure_start_ns < step.end_ns:
            self.specs[index] = replace(step, measure_start_ns=measure_start_ns)

    def add_records(self, records: list[RequestRecord]) -> list[RequestRecord]:
        """File the finished requests by step; returns those counted (cancelled ones are not)."""
        kept: list[RequestRecord] = []
        for record in records:
            if record.error == REASON_CANCELLED:
                self.cancelled += 1
                self.cancelled_by_step[record.step_index] += 1
                continue
            self.records.setdefault(record.step_index, []).append(record)
            self.received[record.step_index] += 1
            kept.append(record)
        return kept

    def set_sent(self, sent_by_step: dict[int, int]) -> None:
        """The engine's per-step send counts, as of its latest batch."""
        self.sent = sent_by_step

    def finish_ready(
        self, status: EngineStatus | None, sla: Sla, *, force: bool
    ) -> list[StepResult]:
        """Finish every step now complete (module contract); returns the visible ones, in order."""
        done: list[StepResult] = []
        for step in self.specs:
            if step.end_ns < 0 or step.index in self.finished:
                continue
            outstanding = self.sent.get(step.index, 0) - self.received[step.index]
            acknowledged = status is not None and status.step_index > step.index
            if not force and (outstanding > 0 or not acknowledged):
                continue
            incomplete = (
                outstanding > 0
                or self.cancelled_by_step[step.index] > 0
                or step.index == self.interrupted
            )
            result = aggregate_step(
                step, self.records.get(step.index, []), sla, incomplete=incomplete
            )
            if step.index in self.targets:
                result = mark_precision(result, self.targets[step.index])
            if step.index in self.verdicts:
                verdict, basis = self.verdicts[step.index]
                result = replace(result, sla_verdict=verdict, verdict_basis=basis)
            if self.window_telemetry is not None and step.end_ns > step.measure_start_ns:
                summary = self.window_telemetry(step.measure_start_ns, step.end_ns)
                result = replace(result, telemetry=summary)
            self.finished[step.index] = result
            self.version += 1
            if step.index in self.hidden:
                continue
            if result.requests_ok + result.requests_failed == 0 and result.ended_early is None:
                # Left before it measured anything: not a step (no row, point or knee).
                self.hidden.add(step.index)
                self.unmeasured.append(step)
                continue
            done.append(result)
        return done

    def rejudge(self, sla: Sla) -> None:
        """Judge every finished step again by `sla` (its figures do not change)."""
        for index, result in list(self.finished.items()):
            records = self.records.get(index, [])
            rejudged = rejudge_step(result, self.specs[index], records, sla)
            # New bounds: a hold's looks judged the old ones; the intervals judge the new.
            self.finished[index] = replace(rejudged, verdict_basis=None)
        self.verdicts.clear()
        self.version += 1

    def adopt(self, result: StepResult) -> None:
        """Take an already aggregated step as finished (a replay feeds its steps so)."""
        self.finished[result.index] = result
        self.version += 1

    def visible_finished(self) -> tuple[StepResult, ...]:
        """Finished steps in order, hidden ones left out."""
        return tuple(self.finished[i] for i in sorted(self.finished) if i not in self.hidden)

    def number(self, index: int) -> int:
        """Step `index`'s number on every screen and in every file: 1 + the visible steps before.

        Hidden carry-on steps (a hold's, a plan's between two steps) take no number, so the
        event log, the Steps table and a saved snapshot (`snapshot.assemble.renumbered`) agree.
        """
        if not any(s.index == index for s in self.specs):
            return index + 1  # a replayed step (`adopt`): its file numbered it already
        return 1 + sum(1 for s in self.specs if s.index < index and s.index not in self.hidden)

    def latest_finished(self) -> StepResult | None:
        """The most recently opened finished step, hidden ones included."""
        return self.finished[max(self.finished)] if self.finished else None

    def all_records(self) -> list[RequestRecord]:
        """Every record counted so far, by step."""
        return [r for i in sorted(self.records) for r in self.records[i]]
