"""A Session on an injected engine (`engine.api.Engine`): no process, the records a test gives."""

from __future__ import annotations

from collections.abc import Callable

from gputui.engine.client import ClientConfig
from gputui.engine.commands import Command
from gputui.engine.handle import BatchCallback
from gputui.engine.load import RequestShape
from gputui.engine.process import EngineConfig, EngineStatus
from gputui.engine.records import RequestRecord
from gputui.engine.target import parse_target
from gputui.metrics.sla import Sla
from gputui.metrics.step import StepResult
from gputui.session import Session
from tests.support.records import MS, T0, rec

CONFIG = EngineConfig(
    client=ClientConfig(target=parse_target("http://127.0.0.1:9"), model="m"),
    shape=RequestShape(16, 8),
)


class FakeEngine:
    """An engine that keeps the commands it is sent; the test plays its reader thread."""

    def __init__(self, on_batch: BatchCallback) -> None:
        self.on_batch = on_batch
        self.commands: list[Command] = []
        self.started = False

    def start(self) -> None:
        self.started = True

    def wait_ready(self, timeout_s: float) -> bool:
        return self.started

    def send(self, command: Command) -> None:
        self.commands.append(command)

    def stop(self, *, cancel: bool, timeout_s: float) -> EngineStatus | None:
        return None

    def deliver(self, records: list[RequestRecord], sent_by_step: dict[int, int]) -> None:
        status = EngineStatus(
            in_flight=0,
            step_index=max(sent_by_step),
            cpu_s=0.0,
            wall_s=1.0,
            loop_lag_max_ms=0.0,
            connections_opened=1,
            uvloop=False,
            paused=False,
        )
        self.on_batch(records, sent_by_step, status, [None] * len(records))


def records_after(after_ns: int, step: int, count: int) -> list[RequestRecord]:
    """`count` good requests of `step`, 10 ms apart, each sent after `after_ns`."""
    base_ms = (after_ns - T0) / MS + 1.0
    return [
        rec(
            sent_ms=base_ms + 10 * i,
            end_ms=base_ms + 10 * i + 50,
            tokens_ms=[base_ms + 10 * i + 20 + t for t in range(8)],
            step=step,
        )
        for i in range(count)
    ]


def session_on_fake_engine(
    on_step_finished: Callable[[StepResult], None] | None = None,
) -> tuple[Session, FakeEngine]:
    """A Session (SLA 1 s / 0.1 s / 0.1 s, no warm-up) whose engine is a `FakeEngine`."""
    engines: list[FakeEngine] = []

    def build(on_batch: BatchCallback) -> FakeEngine:
        engines.append(FakeEngine(on_batch))
        return engines[-1]

    session = Session(
        CONFIG,
        Sla(1.0, 0.1, 0.1),
        warmup_s=0.0,
        engine=build,
        on_step_finished=on_step_finished,
    )
    return session, engines[0]
