"""What a Session needs of an engine: one process, the worker pool and the Ray pool all fit it.

Contract: `start` spawns the engine and returns at once; `wait_ready` says whether its loop runs;
`send` passes a command (ignored once it has gone); `stop` ends it and returns its last status.
Finished records come back, on the engine's reader thread(s), through the `BatchCallback` an
`EngineFactory` is given, so a test can build a Session on a fake engine instead of a process.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from gputui.engine.commands import Command
from gputui.engine.handle import BatchCallback, EngineHandle
from gputui.engine.pool import WorkerPool
from gputui.engine.process import EngineConfig, EngineStatus
from gputui.engine.ray_pool import RayPool


class Engine(Protocol):
    """The engine side of a Session (module contract)."""

    def start(self) -> None: ...
    def wait_ready(self, timeout_s: float) -> bool: ...
    def send(self, command: Command) -> None: ...
    def stop(self, *, cancel: bool, timeout_s: float) -> EngineStatus | None: ...


EngineFactory = Callable[[BatchCallback], Engine]
"""Builds the engine that will hand its batches to the callback (the Session's)."""


def engine_factory(config: EngineConfig, workers: int, ray_address: str | None) -> EngineFactory:
    """One engine process, a pool of `workers` processes, or a pool of Ray actors."""

    def build(on_batch: BatchCallback) -> Engine:
        if ray_address is not None:
            return RayPool(config, workers, on_batch, ray_address)
        if workers > 1:
            return WorkerPool(config, workers, on_batch)
        return EngineHandle(config, on_batch)

    return build
