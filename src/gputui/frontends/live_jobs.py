"""The live controller's hold and auto sweep (issue 16): who sets the load, kept apart.

Contract: `gputui.frontends.live.LiveController` inherits `LiveJobsMixin`. `control.auto` runs
the jobs on the Session (`AutoControl`); this mixin starts and ends them and keeps
`control` ("operator", "holding" or "auto"). Any load command takes control back first
(`_take_control`), and a job is refused, with an event, while not connected or paused.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from gputui.control.auto import AutoControl
from gputui.engine.load import LoadMode
from gputui.frontends.live_settings import LiveSettings
from gputui.frontends.view import EventKind
from gputui.metrics.outcome import hold_outcome
from gputui.session import Session


class LiveJobsMixin:
    """Hold and auto sweep of a LiveController (module contract)."""

    settings: LiveSettings
    _session: Session
    _jobs: AutoControl
    _lock: threading.Lock
    _mode: LoadMode
    _level: float
    _paused: bool
    _running: bool
    _connected: bool
    _control: str
    _event: Callable[[EventKind, str], None]

    def hold_until_precise(self) -> None:
        """Keep the current level until its step is precise (`target_precision`)."""
        if not self._ready("hold"):
            return
        if self._control == "auto":
            self.cancel_auto()  # hold where the sweep has got to
        target = self.settings.target_precision
        self._control = "holding"  # before the job starts: it may end at once
        self._event("info", f"holding {self._level:g} until ±{target * 100:g} % and decided")
        self._jobs.hold_until_precise(target)

    def start_auto(self) -> None:
        """Start the auto sweep from the current level; the chart fills as its steps finish."""
        if not self._ready("auto sweep"):
            return
        self._control = "auto"  # before the job starts: it may end at once
        self._event("info", f"auto sweep from {self._level:g} (a load key stops it)")
        self._jobs.start_auto(self._level)

    def cancel_auto(self) -> None:
        """End the auto sweep or the hold; the load stays at the level it had reached."""
        with self._lock:
            was, self._control = self._control, "operator"
        if was == "operator":
            return
        self._jobs.cancel()
        current = self._session.current_step
        with self._lock:
            if current is not None:
                self._mode, self._level = current.mode, current.level
        self._event("info", f"{'auto sweep' if was == 'auto' else 'hold'} ended: operator control")

    def _job_ended(self, phase: str) -> None:
        """The hold or the auto sweep ended by itself (on the job's thread): control goes back."""
        current = self._session.current_step
        with self._lock:
            if self._control != phase:
                return  # the operator took control first
            self._control = "operator"
            if current is not None:
                self._mode, self._level = current.mode, current.level
        steps = self._session.finished_steps()
        held = hold_outcome(steps[-1] if steps else None, len(steps))
        self._event("info", "auto sweep finished: operator control" if phase == "auto" else held)

    @property
    def control(self) -> str:
        """Who sets the load: "operator", "holding" (until precise) or "auto" (the sweep)."""
        return self._control

    def _take_control(self) -> None:
        """A load command ends the auto sweep or the hold first (from the level it reached)."""
        if self._control != "operator":
            self.cancel_auto()

    def _ready(self, what: str) -> bool:
        if self._running and self._connected and not self._paused:
            return True
        self._event("info", f"no {what}: not connected or paused")
        return False
