"""The engine process's CPU use and run-queue wait, from its successive status reports.

Contract: the session loop feeds each batch's `EngineStatus` to `update`; `percent` is the CPU the
engine used over the last interval (100 = one core), `run_wait_percent` the share of that wall
time it waited for a CPU (`engine.schedstat`), None until two reports span some time.
`worker_figures` gives the same figures for each process of a pool.
"""

from __future__ import annotations

from collections.abc import Callable

from gputui.engine.pool import WorkerPool
from gputui.engine.process import EngineStatus
from gputui.engine.ray_pool import RayPool
from gputui.engine.schedstat import wait_percent


class EngineCpu:
    """CPU use and run-queue wait of one engine (module contract)."""

    def __init__(self) -> None:
        self.percent = 0.0
        self.run_wait_percent: float | None = None
        self._prev: tuple[float, float] | None = None
        self._wait_prev: EngineStatus | None = None

    def update(self, status: EngineStatus) -> None:
        """Take the engine's latest status report."""
        if self._wait_prev is not None and status.wall_s > self._wait_prev.wall_s:
            self.run_wait_percent = wait_percent(status, self._wait_prev)
        self._wait_prev = status
        if self._prev is not None:
            cpu_prev, wall_prev = self._prev
            if status.wall_s > wall_prev:
                self.percent = 100.0 * (status.cpu_s - cpu_prev) / (status.wall_s - wall_prev)
        self._prev = (status.cpu_s, status.wall_s)


WorkerFigures = Callable[[float, float | None], tuple[list[float], list[float | None]]]
"""Each engine process's CPU % and run-queue wait %, given the single engine's own figures."""


def worker_figures(engine: object) -> WorkerFigures:
    """A pool reports each of its processes; a single engine is the figures it is given."""

    def figures(cpu: float, wait: float | None) -> tuple[list[float], list[float | None]]:
        if isinstance(engine, WorkerPool | RayPool):
            return engine.worker_cpu_percent, engine.worker_run_wait_percent
        return [cpu], [wait]

    return figures
