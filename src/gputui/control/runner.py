"""The one runner: it plays a plan's moves on a session, each step until its rules end it.

Contract: `PlanRunner.run(plan)` asks the plan for a move, plays it, and hands the plan what came
of it (`Progress`), until the plan says None. A move opens a step at a level (`Open`) or keeps the
open one (`Keep`: the TUI's hold, the end of a repeat); the step runs while its `StepRules` (from
the move's `StepLimits`) say go on, polled every 0.1 s; with `finish` the runner then closes it
keeping its load (`DrivenSession.hold`) and waits for its finished figures. It runs in the
caller's thread and sleeps on `stop`: once stop is set a step ends at once, and plans read
`Progress.stopped` to end themselves (the runner plays whatever they still ask, as they ask it).
Both front ends drive a session only through this: `gputui run`'s plans and the TUI's jobs.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from gputui.control.driven import DrivenSession
from gputui.control.rules import OpenStep, StepLimits, StepRules
from gputui.engine.load import LoadMode
from gputui.metrics.step import StepResult, StepSpec

POLL_S = 0.1


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
class Ended:
    """A step the runner ended: as the session has it then, why, and its figures if waited for."""

    spec: StepSpec
    reason: str
    ended_ns: int
    """When its rules ended it (before any finishing)."""
    flooded: bool
    """Its requests were rejected: a next level would be alike."""
    result: StepResult | None


@dataclass(frozen=True, slots=True)
class Progress:
    """What a plan reads to choose its next move."""

    finished: Sequence[StepResult]
    """The finished steps of the plan's own `Open` moves, in order."""
    last: Ended | None
    """Its last move's step (None before the first, or when a `Keep` found no open step)."""
    stop: threading.Event

    @property
    def stopped(self) -> bool:
        """The run is being stopped: a plan asks for nothing more it does not have to."""
        return self.stop.is_set()


class Plan(Protocol):
    """Chooses the next move from what the finished steps say, or None when done."""

    def next(self, progress: Progress) -> Move | None: ...


class PlanRunner:
    """Plays plans on a session (module contract)."""

    def __init__(self, session: DrivenSession, stop: threading.Event) -> None:
        self.session = session
        self.stop = stop

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
        """Open or keep a step, wait while its rules say go on, and close it as the move says."""
        if isinstance(move, Open):
            index = self.session.set_load(move.mode, move.level).index
        elif move.index is not None:
            index = move.index
        else:
            current = self.session.current_step
            if current is None:
                return None
            index = current.index
        reason = "ended by its plan" if move.limits is None else self.wait(index, move.limits)
        ended_ns = time.perf_counter_ns()
        flooded = self.session.error_log.flooded(index) is not None
        result = self.finish(index) if move.finish else None
        spec = next(s for s in self.session.step_specs() if s.index == index)
        return Ended(spec, reason, ended_ns, flooded, result)

    def wait(self, index: int, limits: StepLimits) -> str:
        """Wait while the open step `index` runs to its rules; returns why it ended."""
        opened_ns = time.perf_counter_ns()
        rules = StepRules.for_step(limits, self.session, index)
        while not self.stop.is_set():
            now = time.perf_counter_ns()
            current = self.session.current_step
            if current is not None and current.index == index:
                # After a hand-over its level starts later than asked: its limits count from then.
                opened_ns = max(opened_ns, current.start_ns)
            reason = rules.check(OpenStep(self.session, index, opened_ns, now))
            if reason is not None:
                return reason
            self.stop.wait(POLL_S)
        return "interrupted"

    def finish(self, index: int) -> StepResult | None:
        """Close step `index` keeping its load, and wait for its finished figures."""
        current = self.session.current_step
        if current is not None and current.index == index:
            self.session.hold()
        while not self.stop.is_set():
            for result in self.session.finished_steps():
                if result.index == index:
                    return result
            if index in self.session.unreported_steps():
                return None  # it measured nothing: no figures will come
            self.stop.wait(POLL_S)
        return None
