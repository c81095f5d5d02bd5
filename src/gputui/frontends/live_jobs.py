"""The live controller's hold and auto sweep (issue 16): who sets the load, kept apart.

Contract: `gputui.frontends.live.LiveController` owns one `LiveJobs`, built with its collaborators:
the Session, the settings, the lock that guards the load's mode and level, and the controller as
its `LoadHost` (the level now, follow a step's level, whether a job may start), and the event log.
`LiveJobs` runs the jobs on the Session through its own `AutoControl` and keeps `control`
("operator", "holding" or "auto"). Every load command takes control back first (`take_control`),
and a job is refused, with an event, while not connected or paused.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol

from gputui.control.auto import AutoControl
from gputui.engine.load import LoadMode
from gputui.frontends.live_settings import LiveSettings
from gputui.frontends.view import EventKind
from gputui.metrics.hold_looks import HOLD_LOOKS
from gputui.metrics.outcome import hold_outcome
from gputui.session import Session
from gputui.session.steady import UNMEASURED


class LoadHost(Protocol):
    """What the jobs ask of the controller that sets the load."""

    def load_level(self) -> float:
        """The level the operator's load is at now."""
        ...

    def follow_step(self, mode: LoadMode, level: float) -> None:
        """Take a job's last mode and level as the operator's (called under the lock)."""
        ...

    def measure_again(self) -> None:
        """Open a step at the load as it is (no step is open after a hold)."""
        ...

    def ready_for(self, what: str) -> bool:
        """Whether a job may start now (connected, not paused); says why not in an event."""
        ...


class LiveJobs:
    """Hold and auto sweep of a LiveController (module contract)."""

    def __init__(
        self,
        session: Session,
        settings: LiveSettings,
        lock: threading.Lock,
        host: LoadHost,
        event: Callable[[EventKind, str], None],
    ) -> None:
        self._session = session
        self._settings = settings
        self._lock = lock
        self._host = host
        self._event = event
        self._control = "operator"
        self._jobs = AutoControl(
            session,
            target_precision=settings.target_precision,
            max_step_s=settings.max_step_s,
            on_end=self._job_ended,
        )

    @property
    def control(self) -> str:
        """Who sets the load: "operator", "holding" (until precise) or "auto" (the sweep)."""
        return self._control

    def hold_until_precise(self) -> None:
        """Keep the current level until its step is precise (`target_precision`)."""
        if not self._host.ready_for("hold"):
            return
        if self._control == "auto":
            self.cancel_auto()  # hold where the sweep has got to
        target = self._settings.target_precision
        frame = self._session.latest
        if frame is not None and frame.step_phase == UNMEASURED:
            self._host.measure_again()  # after a hold no step is open: the operator opens one
        self._control = "holding"  # before the job starts: it may end at once
        level = self._host.load_level()
        looks = "/".join(str(n) for n in HOLD_LOOKS)
        self._event(
            "info",
            f"holding {level:g}: its verdict looked at after {looks} requests; ends at the first "
            f"pass or fail while ±{target * 100:g} %, else at the last look or at the time "
            "limit (a final look there)",
        )
        self._jobs.hold_until_precise(target)

    def start_auto(self) -> None:
        """Start the auto sweep from the current level; the chart fills as its steps finish."""
        if not self._host.ready_for("auto sweep"):
            return
        self._control = "auto"  # before the job starts: it may end at once
        level = self._host.load_level()
        self._event("info", f"auto sweep from {level:g} (a load key stops it)")
        self._jobs.start_auto(level)

    def cancel_auto(self) -> None:
        """End the auto sweep or the hold; the load stays at the level it had reached."""
        with self._lock:
            was, self._control = self._control, "operator"
        if was == "operator":
            return
        self._jobs.cancel()
        current = self._session.sent_load  # never waits
        with self._lock:
            if current is not None:
                self._host.follow_step(current.mode, current.level)
        what = "auto sweep" if was == "auto" else "hold"
        self._event("info", f"{what} ended: operator control")

    def take_control(self) -> None:
        """A load command ends the auto sweep or the hold first (from the level it reached)."""
        if self._control != "operator":
            self.cancel_auto()

    def _job_ended(self, phase: str) -> None:
        """The hold or the auto sweep ended by itself (on the job's thread): control goes back."""
        current = self._session.sent_load  # never waits
        with self._lock:
            if self._control != phase:
                return  # the operator took control first
            self._control = "operator"
            if current is not None:
                self._host.follow_step(current.mode, current.level)
        steps = self._session.finished_steps()
        held = hold_outcome(steps[-1] if steps else None, len(steps))
        self._event("info", "auto sweep finished: operator control" if phase == "auto" else held)
