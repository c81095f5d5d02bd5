"""The one runner: it plays a plan's moves on a session, each step until the session's loop ends it.

Contract: `PlanRunner.run(plan)` asks the plan for a move, plays it, and hands the plan what came
of it (`Progress`), until the plan says None. A move opens a step at a level (`Open`) or keeps the
open one (`Keep`: the TUI's hold, the end of a repeat); the message that does so carries the
move's `StepLimits`, the session's loop ends the step by its rules (`session.step_end`), closes it
keeping its load when `finish` says, and answers with a `StepEnded` (its figures once they are
in). The runner only waits for that answer, or for `stop` (a `Stop`): once stop is set it tells
the loop to end the step ("interrupted", a message) and plans read `Progress.stopped` to end
themselves (the runner plays whatever they still ask, as they ask it). It runs in the caller's
thread. Both front ends drive a session only through this: `gputui run`'s plans and the TUI's
jobs.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Protocol

from gputui.control.driven import DrivenSession
from gputui.engine.load import LoadMode
from gputui.metrics.step import StepResult
from gputui.session.step_end import StepEnded, StepLimits

Ended = StepEnded
"""A step the loop ended for a move: as the session has it then, why, its figures if waited for."""
_END_TIMEOUT_S = 60.0
"""How long a stopped runner waits for the loop to answer that the step ended."""


class Stop(threading.Event):
    """A stop that also wakes a runner waiting for its step's end (set it from any thread)."""

    def __init__(self) -> None:
        super().__init__()
        self._wakers: list[threading.Event] = []
        """No lock: `set` may run in a signal handler, on the thread that holds it."""

    def set(self) -> None:
        """Stop, and wake whoever waits."""
        super().set()
        for waker in tuple(self._wakers):
            waker.set()

    def wake(self, waker: threading.Event) -> None:
        """Set `waker` when this is set (at once if it is)."""
        self._wakers.append(waker)
        if self.is_set():
            waker.set()

    def unwake(self, waker: threading.Event) -> None:
        """No longer set `waker`."""
        if waker in self._wakers:
            self._wakers.remove(waker)


@dataclass(frozen=True, slots=True)
class Open:
    """Open a step at `level` and run it under `limits`; `finish`: wait for its figures."""

    mode: LoadMode
    level: float
    limits: StepLimits
    finish: bool = True


@dataclass(frozen=True, slots=True)
class Keep:
    """Keep step `index` open (None: whichever is open) under `limits` (None: end it now)."""

    index: int | None = None
    limits: StepLimits | None = None
    finish: bool = True


Move = Open | Keep


@dataclass(frozen=True, slots=True)
class Progress:
    """What a plan reads to choose its next move."""

    finished: Sequence[StepResult]
    """The finished steps of the plan's own `Open` moves, in order."""
    last: Ended | None
    """Its last move's step (None before the first, or when a `Keep` found no open step)."""
    stop: Stop

    @property
    def stopped(self) -> bool:
        """The run is being stopped: a plan asks for nothing more it does not have to."""
        return self.stop.is_set()


class Plan(Protocol):
    """Chooses the next move from what the finished steps say, or None when done."""

    def next(self, progress: Progress) -> Move | None: ...


class PlanRunner:
    """Plays plans on a session (module contract)."""

    def __init__(self, session: DrivenSession, stop: Stop, job: int = 0) -> None:
        self.session = session
        self.stop = stop
        self.job = job
        """Whose steps these are (`Session.begin_job`; 0: the run's own)."""

    def run(self, plan: Plan) -> None:
        """Play `plan` until it says None."""
        opened: set[int] = set()
        last: Ended | None = None
        while True:
            mine = [s for s in self.session.finished_steps() if s.index in opened]
            move = plan.next(Progress(mine, last, self.stop))
            if move is None:
                return
            last = self.play(move)
            if isinstance(move, Open) and last is not None:
                opened.add(last.spec.index)

    def play(self, move: Move) -> Ended | None:
        """Open or keep a step and wait for the loop's answer: how it ended (None: no step)."""
        session, job = self.session, self.job
        if isinstance(move, Open):
            reply = session.open_step(
                move.mode, move.level, move.limits, finish=move.finish, job=job
            )
        else:
            reply = session.keep_step(move.index, move.limits, finish=move.finish, job=job)
        return self.wait(reply)

    def wait(self, reply: Future[Ended | None]) -> Ended | None:
        """The loop's answer, or, once stopped, the loop's answer to `end_watch`."""
        woke = threading.Event()
        reply.add_done_callback(lambda _: woke.set())
        self.stop.wake(woke)
        try:
            woke.wait()
        finally:
            self.stop.unwake(woke)
        if not reply.done():
            self.session.end_watch(self.job)  # a message: the loop ends the step, interrupted
        try:
            return reply.result(timeout=_END_TIMEOUT_S)
        except FutureTimeout:
            return None
