"""The Session API the TUI calls: settling, hold until precise, the auto sweep and its cancel."""

from __future__ import annotations

import time

from gputui.control.auto import AutoControl
from gputui.engine.client import ClientConfig
from gputui.engine.load import RequestShape
from gputui.engine.process import EngineConfig
from gputui.engine.target import parse_target
from gputui.metrics.sla import Sla
from gputui.session import Session, StatsFrame
from gputui.sim.runner import SimProcess


def make_session(url: str, frames: list[StatsFrame]) -> Session:
    config = EngineConfig(
        client=ClientConfig(target=parse_target(url), model="sim", extra_body={"ignore_eos": True}),
        shape=RequestShape(16, 8),  # 20 + 7 x 5 = 55 ms a request on the fixed profile
    )
    return Session(config, Sla(0.5, 0.05, None), warmup_s=None, on_frame=frames.append)


def _wait(condition: object, timeout_s: float) -> bool:
    deadline = time.perf_counter() + timeout_s
    while time.perf_counter() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


def test_hold_until_precise_closes_a_precise_step_and_keeps_the_level(
    fixed_sim: SimProcess,
) -> None:
    frames: list[StatsFrame] = []
    session = make_session(fixed_sim.url, frames)
    session.start(frame_interval_s=0.25)
    try:
        session.set_load("concurrency", 4)
        AutoControl(session).hold_until_precise(0.10)
        assert _wait(lambda: session.finished_steps(), 30.0)
        (step,) = session.finished_steps()[:1]
        assert step.level == 4 and step.imprecise is False
        assert step.sla_verdict == "pass"  # the hold waits for a decided verdict too
        assert step.precision is not None and max(v or 1 for v in step.precision.values()) <= 0.10
        assert 0.03 <= step.warmup_s <= 0.5  # the first wave of 4 took about one lifetime
        current = session.current_step
        assert current is not None and current.level == 4  # the level carries on
    finally:
        session.stop(cancel=True, drain_timeout_s=5)
    phases = {f.step_phase for f in frames}
    assert "holding" in phases
    measuring = [f for f in frames if f.step_phase == "holding" and f.precision is not None]
    assert measuring and measuring[-1].measured_n > 0
    progress = [f.verdict_progress for f in measuring if f.verdict_progress is not None]
    assert progress and progress[-1].needed == 59 and progress[-1].n > 0


def test_start_auto_fills_steps_until_cancelled(fixed_sim: SimProcess) -> None:
    frames: list[StatsFrame] = []
    session = make_session(fixed_sim.url, frames)
    session.start(frame_interval_s=0.25)
    try:
        session.set_load("concurrency", 1)
        jobs = AutoControl(session)
        jobs.start_auto(2)
        assert _wait(lambda: len(session.finished_steps()) >= 2, 60.0)
        jobs.cancel()
        count = len(session.step_specs())
        time.sleep(1.0)
        assert len(session.step_specs()) == count  # control is back with the operator
    finally:
        session.stop(cancel=True, drain_timeout_s=5)
    levels = [s.level for s in session.finished_steps()]
    # The ramp from the level it was started at; 1, left while it settled, is no step.
    assert levels[:2] == [2.0, 4.0]
    assert "1: left after 0 s, nothing measured" in [e.text for e in session.events.items()]
    assert "auto" in {f.step_phase for f in frames}
    assert frames[-1].step_phase != "auto"
