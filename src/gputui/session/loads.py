"""Load changes, stamped and sent where they are made: the Session's side that faces the engine.

Contract: `LoadChanges` takes each change of load in the caller's thread (the UI, a job, the
headless plan): the step's times come from `time.perf_counter_ns()` at the call, its engine
command is sent at once, and the step reaches the session loop as a message. Nothing waits for
the loop, so the engine's `Load` follows the call as closely as before the loop existed. One lock
keeps a step's index, its message and its command in the same order; it guards nothing the
session's readers read. `hold` repeats the load last sent, in a hidden step.

The hand-over (issue 28: a step measures exactly its own load): a change to another level closes
the open step at once (it takes no new measured request) but does not start the new level yet.
The engine runs the old load on, its requests counted in the new step (sent before that step's
start, so unmeasured), and the new step is `pending` until the session loop sees every measured
request of the steps before it back; the loop then calls `switch`, which starts the new level and
moves the step's start there. A second change while one is pending only replaces its level, so
quick presses collapse to the last. A change to the same load needs no hand-over.

Jobs (the TUI's hold and auto sweep, `control.auto`): a load change made for a job carries its
number; `cancel_job` refuses every later one of that job, under the same lock as the operator's
changes, so nothing a cancelled job does can follow the change that cancelled it
(`JobCancelled`), and tells the loop to stop watching its step (a message, `StopWatching`).
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace

from gputui.engine.api import Engine
from gputui.engine.commands import Burst, Load, Pause, Reconnect, Resume
from gputui.engine.load import LoadMode
from gputui.metrics.step import StepSpec
from gputui.session.loop import SessionLoop
from gputui.session.messages import (
    BurstFired,
    PauseChanged,
    PendingLevel,
    RunStopping,
    StepOpened,
    StopWatching,
    WatchRequest,
    WatchStep,
)


class JobCancelled(Exception):
    """A cancelled job tried to change the load or watch a step: it stops there."""


class LoadChanges:
    """Stamps and sends load changes (module contract)."""

    def __init__(self, engine: Engine, loop: SessionLoop, warmup_s: float) -> None:
        self._engine = engine
        self._loop = loop
        self._warmup_ns = int(warmup_s * 1e9)
        """Until the step settles (or for good, with a fixed warm-up): its unmeasured start."""
        self._order = threading.RLock()
        """Re-entered when the loop runs inline and a posted step starts at once (`switch`)."""
        self._next_index = 0
        self._sent: StepSpec | None = None
        """The load last asked for while the run goes on (what `hold` keeps)."""
        self._running: StepSpec | None = None
        """The step whose load the engine runs now (the old one while a step is pending)."""
        self._pending: StepSpec | None = None
        self._burst_after = 0
        """A burst that fires once the hand-over is over (`burst` with `resettle`)."""
        self._jobs = 0
        self._cancelled: set[int] = set()

    def begin_job(self) -> int:
        """A new job's number (its load changes carry it; 0 is the operator's and the run's)."""
        with self._order:
            self._jobs += 1
            return self._jobs

    def cancel_job(self, job: int) -> None:
        """Refuse job `job`'s later changes, and end its watched step (module contract)."""
        with self._order:
            self._cancelled.add(job)
            self._loop.post(StopWatching(job))

    def set_load(self, mode: LoadMode, level: float, watch: WatchRequest | None = None) -> StepSpec:
        """Close the current step and open one at this load (stamped now; module contract)."""
        now = time.perf_counter_ns()
        with self._order:
            self._check(watch)
            pending = self._pending
            if pending is not None:  # still handing over: this level replaces the pending one
                spec = replace(pending, mode=mode, level=float(level))
                self._pending = self._sent = spec
                self._loop.post(PendingLevel(spec))
                if watch is not None:
                    self._loop.post(WatchStep(replace(watch, index=spec.index)))
                return spec
            running = self._running
            handover = running is not None and (running.mode, running.level) != (mode, level)
            return self._open(
                mode, float(level), hidden=False, now_ns=now, handover=handover, watch=watch
            )

    def keep(self, watch: WatchRequest) -> None:
        """Watch a step already open, as `watch` says (refused once its job is cancelled)."""
        with self._order:
            self._check(watch)
            self._loop.post(WatchStep(watch))

    def close(self, index: int, job: int) -> StepSpec | None:
        """Close step `index` keeping its load, for job `job` (None: it is no longer running).

        The session loop calls this when a watched step's rules end it (`session.watch`).
        """
        now = time.perf_counter_ns()
        with self._order:
            sent = self._sent
            running = sent is not None and sent.index == index and self._pending is None
            if job in self._cancelled or sent is None or not running:
                return None
            return self._open(sent.mode, sent.level, hidden=True, now_ns=now, handover=False)

    def _check(self, watch: WatchRequest | None) -> None:
        if watch is not None and watch.job in self._cancelled:
            raise JobCancelled

    def hold(self) -> StepSpec | None:
        """Close the current step and open a hidden one at the same load (None: no load)."""
        now = time.perf_counter_ns()
        with self._order:
            sent = self._sent
            if sent is None or self._pending is not None:
                return None
            return self._open(sent.mode, sent.level, hidden=True, now_ns=now, handover=False)

    def _open(
        self,
        mode: LoadMode,
        level: float,
        *,
        hidden: bool,
        now_ns: int,
        handover: bool,
        watch: WatchRequest | None = None,
    ) -> StepSpec:
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
        if handover and self._running is not None:
            self._pending = step
            # The old load runs on; what it sends from now is the new step's, unmeasured.
            self._engine.send(Load(self._running.mode, self._running.level, step.index))
            self._loop.post(StepOpened(step, hidden, pending=True, watch=watch))
        else:
            self._running = step
            self._loop.post(StepOpened(step, hidden, watch=watch))
            self._engine.send(Load(mode, level, step.index))
        return step

    def switch(self, index: int) -> StepSpec | None:
        """The hand-over is over: start pending step `index`'s level now (None: not pending)."""
        with self._order:
            pending = self._pending
            if pending is None or pending.index != index:
                return None
            now = time.perf_counter_ns()
            step = replace(pending, start_ns=now, measure_start_ns=now + self._warmup_ns)
            self._pending = None
            self._sent = self._running = step
            self._engine.send(Load(step.mode, step.level, step.index))
            if self._burst_after:
                self._fire(step.index, self._burst_after, resettle=True)
                self._burst_after = 0
        return step

    @property
    def sent(self) -> StepSpec | None:
        """The load last asked for while the run goes on (None before the first, after `end`)."""
        return self._sent

    def pause(self) -> None:
        """Stop sending new requests (the step stays open)."""
        self._loop.post(PauseChanged(paused=True))
        self._engine.send(Pause())

    def resume(self) -> None:
        """Send again."""
        self._loop.post(PauseChanged(paused=False))
        self._engine.send(Resume())

    def burst(self, count: int, *, resettle: bool = False) -> None:
        """Fire `count` requests at once on top of the load.

        `resettle` (the TUI's `b`): the open step closes first and hands over like a change of
        level; the burst fires when its measured requests are back, and the same level opens a
        step that settles only once the burst's requests are back too (`session.steady`).
        Without it (`gputui run --burst`) the open step stays open and leaves the burst's window
        out of its figures (`metrics.burst_window`).
        """
        now = time.perf_counter_ns()
        with self._order:
            running = self._running
            if resettle and self._pending is not None:
                self._burst_after += count  # fires when the hand-over under way is over
                return
            if resettle and running is not None:
                self._burst_after = count
                self._open(running.mode, running.level, hidden=False, now_ns=now, handover=True)
                return
            self._fire(running.index if running is not None else -1, count)

    def _fire(self, index: int, count: int, *, resettle: bool = False) -> None:
        self._engine.send(Burst(count))
        self._loop.post(BurstFired(index, count, time.perf_counter_ns(), resettle))

    def reconnect(self) -> None:
        """Close the engine's idle connections: the next requests connect afresh."""
        self._engine.send(Reconnect())

    def end(self, *, interrupted: bool) -> None:
        """The run ends now: the open step closes (incomplete if `interrupted`); no more holds."""
        now = time.perf_counter_ns()
        with self._order:
            self._sent = self._running = self._pending = None
            self._burst_after = 0
            self._loop.post(RunStopping(now, interrupted=interrupted))
