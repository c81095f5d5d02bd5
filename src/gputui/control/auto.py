"""The TUI's jobs on a Session: `hold_until_precise` and `start_auto` (its keys), on their thread.

Contract: one job at a time; starting one cancels the one before. `cancel` (any manual load change,
or the session stopping) stops the job within a moment and leaves the load where it is: control goes
back to the operator. A job that ends by itself (swept, or precise) says so through `on_end`, on its
own thread: its owner never has to infer the end from frames. `phase` is "holding" or "auto" while a
job runs; the session is told (`Session.set_job_phase`), so its frames carry it as `step_phase`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from gputui.control.plans import HoldStep, KneeSweepPlan
from gputui.control.rules import hold_limits, step_limits
from gputui.control.runner import Plan, PlanRunner
from gputui.engine.load import LoadMode
from gputui.engine.records import RequestRecord
from gputui.metrics.error_log import ErrorLog
from gputui.metrics.knee_sweep import KneeDecision
from gputui.metrics.precision import DEFAULT_TARGET_PRECISION, StepPrecision
from gputui.metrics.sla import Sla
from gputui.metrics.step import StepResult, StepSpec
from gputui.metrics.verdict import Verdict

if TYPE_CHECKING:
    from gputui.session import Session

DEFAULT_MAX_LEVEL = 256.0


class AutoControl:
    """Runs one background job on a Session (module contract)."""

    def __init__(
        self,
        session: Session,
        *,
        target_precision: float = DEFAULT_TARGET_PRECISION,
        max_step_s: float | None = None,
        on_end: Callable[[str], None] | None = None,
    ) -> None:
        self.session = session
        self._on_end = on_end
        session.add_stop_listener(self.cancel)
        self.max_step_s = max_step_s
        """`--max-step-seconds`: each auto step's and each hold's longest run (None: defaults)."""
        self.max_level = DEFAULT_MAX_LEVEL
        self.target_precision = target_precision
        """`--target-precision`: what the auto sweep's steps run to."""
        self.phase = "measuring"
        self._auto: KneeSweepPlan | None = None
        self._stop = threading.Event()
        self._guard = threading.Lock()
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        """A job is running."""
        return self._thread is not None and self._thread.is_alive()

    def cancel(self) -> None:
        """Stop the running job (the load stays as it is); returns at once, never joins it.

        The job changes the load only through a `_JobView` that refuses once `cancel` has set the
        job's stop under the same lock, so nothing the job does can follow the operator's change.
        """
        with self._guard:
            self._stop.set()
        self._set_phase("measuring")

    @property
    def reason(self) -> str | None:
        """Why the last auto sweep ended ("interrupted" while it runs)."""
        return self._auto.reason if self._auto is not None else None

    @property
    def decision(self) -> KneeDecision | None:
        """The last auto sweep's latest decision."""
        return self._auto.last if self._auto is not None else None

    def hold_until_precise(self, target_precision: float) -> None:
        """Keep the current step open until precise and decided, then close it (same level)."""
        current = self.session.current_step
        if current is None:
            return
        limits = hold_limits(target_precision, self.max_step_s)
        self._start("holding", HoldStep(current.index, limits))

    def start_auto(self, from_level: float) -> None:
        """The auto sweep from `from_level` (concurrency), on this object's thread."""
        limits = step_limits(self.target_precision, self.max_step_s, None, precise=True)
        self._auto = KneeSweepPlan.from_level(
            from_level,
            self.session.finished_steps(),
            self.session.sla,
            max_level=self.max_level,
            limits=limits,
        )
        self._start("auto", self._auto)

    def _start(self, phase: str, plan: Plan) -> None:
        self.cancel()
        stop = threading.Event()
        self._stop = stop
        self._set_phase(phase)
        view = _JobView(self.session, stop, self._guard)

        def body() -> None:
            try:
                PlanRunner(view, stop).run(plan)
            except JobCancelled:
                pass  # cancelled between two of its load changes: nothing more to do
            finally:
                if self._stop is stop:
                    self._set_phase("measuring")
                    if not stop.is_set() and self._on_end is not None:
                        self._on_end(phase)  # ended by itself, not cancelled

        self._thread = threading.Thread(target=body, name=f"gputui-{phase}", daemon=True)
        self._thread.start()

    def _set_phase(self, phase: str) -> None:
        self.phase = phase
        self.session.set_job_phase(phase)


class JobCancelled(Exception):
    """A cancelled job tried to change the load: it stops there."""


class _JobView:
    """The Session as one job sees it: reads pass through, load changes stop once cancelled."""

    def __init__(self, session: Session, stop: threading.Event, guard: threading.Lock) -> None:
        self._session = session
        self._stop = stop
        self._guard = guard

    @property
    def warmup_s(self) -> float | None:
        return self._session.warmup_s

    @property
    def max_warmup_s(self) -> float:
        return self._session.max_warmup_s

    @property
    def current_step(self) -> StepSpec | None:
        return self._session.current_step

    def step_specs(self) -> list[StepSpec]:
        return self._session.step_specs()

    def finished_steps(self) -> list[StepResult]:
        return self._session.finished_steps()

    def unreported_steps(self) -> frozenset[int]:
        return self._session.unreported_steps()

    def settled(self, index: int) -> bool:
        return self._session.settled(index)

    def current_precision(self, target_precision: float) -> tuple[StepPrecision | None, int]:
        return self._session.current_precision(target_precision)

    @property
    def sla(self) -> Sla:
        return self._session.sla

    @property
    def error_log(self) -> ErrorLog:
        return self._session.error_log

    def step_so_far(self) -> StepResult | None:
        return self._session.step_so_far()

    def open_step_records(self) -> tuple[StepSpec | None, list[RequestRecord]]:
        return self._session.open_step_records()

    def set_load(self, mode: LoadMode, level: float) -> StepSpec:
        with self._guard:
            self._check()
            return self._session.set_load(mode, level)

    def hold(self) -> StepSpec | None:
        with self._guard:
            self._check()
            return self._session.hold()

    def set_step_target(self, index: int, target_precision: float) -> None:
        with self._guard:
            self._check()
            self._session.set_step_target(index, target_precision)

    def set_step_verdict(self, index: int, verdict: Verdict, basis: str) -> None:
        with self._guard:
            self._check()
            self._session.set_step_verdict(index, verdict, basis)

    def _check(self) -> None:
        if self._stop.is_set():
            raise JobCancelled
