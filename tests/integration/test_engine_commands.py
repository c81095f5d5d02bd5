"""The engine's commands are a closed set: an unknown one is an error, never ignored."""

from __future__ import annotations

import queue
import threading
from typing import Any, cast

import pytest

from gputui.engine.client import ClientConfig
from gputui.engine.commands import Load, Stop, UnknownCommand
from gputui.engine.handle import EngineHandle
from gputui.engine.load import RequestShape
from gputui.engine.process import EngineConfig, EngineStatus, run_engine
from gputui.engine.target import parse_target
from gputui.sim.runner import SimProcess


class _Pipe:
    def __init__(self) -> None:
        self.inbox: queue.Queue[Any] = queue.Queue()
        self.outbox: queue.Queue[Any] = queue.Queue()

    def send(self, obj: Any) -> None:
        self.outbox.put(obj)

    def recv(self) -> Any:
        return self.inbox.get()


def _config(url: str) -> EngineConfig:
    return EngineConfig(
        client=ClientConfig(target=parse_target(url), model="sim"), shape=RequestShape(16, 4)
    )


def _final(pipe: _Pipe) -> tuple[EngineStatus, int]:
    """The engine's last status and how many records it sent before it."""
    records = 0
    while True:
        message = pipe.outbox.get(timeout=30)
        if message[0] == "batch":
            records += len(message[1])
        elif message[0] == "stopped":
            return message[1], records


def test_an_unknown_command_stops_the_engine_and_says_why(fixed_sim: SimProcess) -> None:
    pipe = _Pipe()
    engine = threading.Thread(target=run_engine, args=(pipe, _config(fixed_sim.url)))
    engine.start()
    pipe.inbox.put(Load("concurrency", 2, 0))
    pipe.inbox.put(("load", "concurrency", 4, 1))  # the old tuple form: not a command any more
    status, _ = _final(pipe)
    engine.join(timeout=30)
    assert status.error == "unknown engine command: ('load', 'concurrency', 4, 1)"
    assert status.step_index == 0  # the unknown load was never applied


def test_known_commands_run_the_load(fixed_sim: SimProcess) -> None:
    pipe = _Pipe()
    engine = threading.Thread(target=run_engine, args=(pipe, _config(fixed_sim.url)))
    engine.start()
    pipe.inbox.put(Load("concurrency", 2, 0))
    threading.Event().wait(0.5)
    pipe.inbox.put(Stop(False))
    status, records = _final(pipe)
    engine.join(timeout=30)
    assert status.error is None
    assert records > 5  # 2 streams of 20 ms + 3 x 5 ms requests for half a second


def test_the_sender_refuses_a_non_command() -> None:
    handle = EngineHandle(_config("http://127.0.0.1:9"), lambda *a: None)
    with pytest.raises(UnknownCommand, match="unknown engine command"):
        handle.send(cast(Any, ("pause",)))
