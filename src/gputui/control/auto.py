"""The TUI's jobs on a Session: `hold_until_precise` and `start_auto` (its keys), on their thread.

Contract: one job at a time; starting one cancels the one before. `cancel` (any manual load change,
or the session stopping) is a message to the session (`Session.cancel_job`): the job's watched
step ends there, and the session refuses the job's later load changes under the lock that orders
the operator's, so nothing the job does follows the cancel; the load stays where it is and control
goes back to the operator. A job that ends by itself (swept, or precise) says so through
`on_end`, on its own thread: its owner never has to infer the end from frames. `phase` is
"holding" or "auto" while a job runs; the session is told (`Session.set_job_phase`), so its
frames carry it as `step_phase`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from gputui.control.plans import HoldStep, KneeSweepPlan
from gputui.control.rules import hold_limits, step_limits
from gputui.control.runner import Plan, PlanRunner, Stop
from gputui.metrics.knee_sweep import KneeDecision
from gputui.metrics.precision import DEFAULT_TARGET_PRECISION
from gputui.session.loads import JobCancelled

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
        self._stop = Stop()
        self._job = 0
        """The running job's number (`Session.begin_job`; 0: none yet)."""
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        """A job is running."""
        return self._thread is not None and self._thread.is_alive()

    def cancel(self) -> None:
        """Stop the running job (the load stays as it is); returns at once, never joins it."""
        if self._job:
            self.session.cancel_job(self._job)  # before the stop: the job may not act past it
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
        stop = Stop()
        job = self.session.begin_job()
        self._stop, self._job = stop, job
        self._set_phase(phase)

        def body() -> None:
            try:
                PlanRunner(self.session, stop, job).run(plan)
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
