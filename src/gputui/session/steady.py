"""The Session's steady-state, precision and auto-sweep methods (issue 16), kept apart.

Contract: `gputui.session.Session` inherits these; they read the Session's own state under its
lock. `settle` opens the open step's window once the load has settled (`session.settling`), the
frame fields come from `_phase_fields`. A job that drives the session (`control.auto`'s hold
and auto sweep) reports its phase with `set_job_phase` and is cancelled through `add_stop_listener`
when the session stops.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from gputui.engine.commands import Reconnect
from gputui.engine.records import RequestRecord
from gputui.metrics.precision import StepPrecision, step_precision
from gputui.metrics.sla import Sla
from gputui.metrics.steady import SteadyStart
from gputui.metrics.step import StepResult, StepSpec, aggregate_step
from gputui.metrics.verdict_progress import VerdictProgress, verdict_progress
from gputui.session.settling import SettleTracker

if TYPE_CHECKING:
    from collections.abc import Callable

    from gputui.engine.api import Engine

PRECISION_EVERY_NS = 1_000_000_000
DEFAULT_FRAME_TARGET = 0.05
"""The precision the frame reports against when the step has no target of its own."""


class SteadyStateMixin:
    """Steady state, precision and the auto sweep of a Session (module contract)."""

    sla: Sla
    warmup_s: float | None
    max_warmup_s: float
    _lock: threading.Lock
    _steps: list[StepSpec]
    _records: dict[int, list[RequestRecord]]
    _finished: dict[int, StepResult]
    _settle: SettleTracker | None
    _targets: dict[int, float]
    _precision_at: tuple[int, int, float | None, int, VerdictProgress | None]
    _job_phase: str
    _stop_listeners: list[Callable[[], None]]
    _engine: Engine

    def _new_tracker(self, step: StepSpec) -> SettleTracker | None:
        """A settling tracker for a step without a fixed warm-up (lock held)."""
        if self.warmup_s is not None:
            return None
        # The latest finished step's lifetime (hidden holds included) sizes the trend window.
        previous = self._finished[max(self._finished)] if self._finished else None
        return SettleTracker(
            index=step.index,
            mode=step.mode,
            level=step.level,
            change_ns=step.start_ns,
            max_warmup_s=self.max_warmup_s,
            lifetime_hint_s=previous.e2e_s.p50 if previous is not None else None,
        )

    def settle(self) -> SteadyStart | None:
        """Decide whether the open step has settled; once it has, its window starts there.

        Called on the frame thread (and by plans that poll); the warm-up a finished step records
        (`warmup_s`) is then the one actually used.
        """
        with self._lock:
            tracker = self._settle
            if tracker is None or not self._steps or self._steps[-1].index != tracker.index:
                return None
            if tracker.result is not None:
                return tracker.result
            records = list(self._records.get(tracker.index, []))
        found = tracker.decide(time.perf_counter_ns(), records)
        if found is None:
            return None
        with self._lock:
            step = self._steps[tracker.index]
            if step.end_ns < 0 or found.measure_start_ns < step.end_ns:
                self._steps[tracker.index] = replace(step, measure_start_ns=found.measure_start_ns)
        return found

    def settled(self, index: int) -> bool:
        """Whether step `index` has settled (a fixed warm-up: once it has passed)."""
        with self._lock:
            tracker = self._settle
            step = self._steps[index] if 0 <= index < len(self._steps) else None
        if step is None:
            return False
        if tracker is not None and tracker.index == index:
            return self.settle() is not None
        return time.perf_counter_ns() >= step.measure_start_ns

    def set_step_target(self, index: int, target_precision: float) -> None:
        """Judge step `index` against this precision target when it finishes (`imprecise`)."""
        with self._lock:
            self._targets[index] = target_precision

    def current_precision(self, target_precision: float) -> tuple[StepPrecision | None, int]:
        """The open step's precision so far and its measured requests (None while settling)."""
        so_far = self.step_so_far()
        if so_far is None:
            return None, 0
        measured = so_far.requests_ok + so_far.requests_failed
        return step_precision(so_far, target_precision), measured

    def step_so_far(self) -> StepResult | None:
        """The open step's figures so far (None while settling or without an open step)."""
        now = time.perf_counter_ns()
        with self._lock:
            step = self._steps[-1] if self._steps else None
            if step is None or step.end_ns >= 0 or now <= step.measure_start_ns:
                return None
            records = list(self._records.get(step.index, []))
        return aggregate_step(replace(step, end_ns=now), records, self.sla)

    def _phase_fields(self) -> dict[str, Any]:
        """The frame's step phase, settling countdown, measured n, precision and verdict so far.

        `for_step` names the step they are of (the load may change before the frame is built).
        """
        now = time.perf_counter_ns()
        with self._lock:
            step = self._steps[-1] if self._steps else None
        if step is None:
            return {}
        phase = self._job_phase
        if now < step.measure_start_ns:
            return {
                "for_step": step.index,
                "step_phase": "settling" if phase == "measuring" else phase,
                "settle_remaining_s": (step.measure_start_ns - now) / 1e9,
            }
        index, at_ns, precision, measured, verdict = self._precision_at
        # At most once a second (aggregating the step so far is not free), and at once per step.
        if index != step.index or now - at_ns >= PRECISION_EVERY_NS:
            target = self._targets.get(step.index, DEFAULT_FRAME_TARGET)
            so_far = self.step_so_far()
            reached = step_precision(so_far, target) if so_far is not None else None
            measured = so_far.requests_ok + so_far.requests_failed if so_far is not None else 0
            precision = reached.worst if reached is not None else None
            verdict = verdict_progress(so_far, self.sla) if so_far is not None else None
            self._precision_at = (step.index, now, precision, measured, verdict)
        return {
            "for_step": step.index,
            "step_phase": phase,
            "measured_n": measured,
            "precision": precision,
            "verdict_progress": verdict,
        }

    def set_job_phase(self, phase: str) -> None:
        """What frames report while a job drives the load ("holding", "auto"), or "measuring"."""
        self._job_phase = phase

    def add_stop_listener(self, listener: Callable[[], None]) -> None:
        """Call `listener` first thing in `stop`: a job must not change the load past it."""
        self._stop_listeners.append(listener)

    def reconnect(self) -> None:
        """Close the engine's idle connections: the next requests connect afresh (`--repeats`)."""
        self._engine.send(Reconnect())
