"""What the control layer needs of the session it drives (`DrivenSession`).

A `gputui.session.Session` satisfies it; tests pass a fake. The runner reaches the session only
through it: it opens or keeps a step with its limits, and waits for the `StepEnded` the session's
loop answers with (`session.watch`). No rule calls back into the session.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Protocol

from gputui.engine.load import LoadMode
from gputui.metrics.step import StepResult
from gputui.session.step_end import StepEnded, StepLimits


class DrivenSession(Protocol):
    """What a plan needs of the session it drives."""

    def open_step(
        self, mode: LoadMode, level: float, limits: StepLimits, *, finish: bool, job: int = 0
    ) -> Future[StepEnded | None]: ...
    def keep_step(
        self, index: int | None, limits: StepLimits | None, *, finish: bool, job: int = 0
    ) -> Future[StepEnded | None]: ...
    def end_watch(self, job: int = 0) -> None: ...
    def finished_steps(self) -> list[StepResult]: ...
