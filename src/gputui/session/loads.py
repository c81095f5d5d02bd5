"""Load changes, stamped and sent where they are made: the Session's side that faces the engine.

Contract: `LoadChanges` takes each change of load in the caller's thread (the UI, a job, the
headless plan): the step's times come from `time.perf_counter_ns()` at the call, its engine
command is sent at once, and the step reaches the session loop as a message. Nothing waits for
the loop, so the engine's `Load` follows the call as closely as before the loop existed. One lock
keeps a step's index, its message and its command in the same order; it guards nothing the
session's readers read. `hold` repeats the load last sent, in a hidden step.
"""

from __future__ import annotations

import threading
import time

from gputui.engine.api import Engine
from gputui.engine.commands import Burst, Load, Pause, Reconnect, Resume
from gputui.engine.load import LoadMode
from gputui.metrics.step import StepSpec
from gputui.session.loop import SessionLoop
from gputui.session.messages import PauseChanged, RunStopping, StepOpened


class LoadChanges:
    """Stamps and sends load changes (module contract)."""

    def __init__(self, engine: Engine, loop: SessionLoop, warmup_s: float) -> None:
        self._engine = engine
        self._loop = loop
        self._warmup_ns = int(warmup_s * 1e9)
        """Until the step settles (or for good, with a fixed warm-up): its unmeasured start."""
        self._order = threading.Lock()
        self._next_index = 0
        self._sent: StepSpec | None = None
        """The load last sent while the run goes on (what `hold` keeps)."""

    def set_load(self, mode: LoadMode, level: float) -> StepSpec:
        """Close the current step and open one at this load (stamped now)."""
        return self._open(mode, float(level), hidden=False, now_ns=time.perf_counter_ns())

    def hold(self) -> StepSpec | None:
        """Close the current step and open a hidden one at the same load (None: no load)."""
        now = time.perf_counter_ns()
        sent = self._sent
        if sent is None:
            return None
        return self._open(sent.mode, sent.level, hidden=True, now_ns=now)

    def _open(self, mode: LoadMode, level: float, *, hidden: bool, now_ns: int) -> StepSpec:
        with self._order:
            step = StepSpec(
                index=self._next_index,
                mode=mode,
                level=level,
                start_ns=now_ns,
                measure_start_ns=now_ns + self._warmup_ns,
                end_ns=-1,
            )
            self._next_index += 1
            self._sent = step
            self._loop.post(StepOpened(step, hidden))
            self._engine.send(Load(mode, level, step.index))
        return step

    @property
    def sent(self) -> StepSpec | None:
        """The load last sent while the run goes on (None before the first and after `end`)."""
        return self._sent

    def pause(self) -> None:
        """Stop sending new requests (the step stays open)."""
        self._loop.post(PauseChanged(paused=True))
        self._engine.send(Pause())

    def resume(self) -> None:
        """Send again."""
        self._loop.post(PauseChanged(paused=False))
        self._engine.send(Resume())

    def burst(self, count: int) -> None:
        """Fire `count` requests at once on top of the load."""
        self._engine.send(Burst(count))

    def reconnect(self) -> None:
        """Close the engine's idle connections: the next requests connect afresh."""
        self._engine.send(Reconnect())

    def end(self, *, interrupted: bool) -> None:
        """The run ends now: the open step closes (incomplete if `interrupted`); no more holds."""
        now = time.perf_counter_ns()
        with self._order:
            self._sent = None
            self._loop.post(RunStopping(now, interrupted=interrupted))
