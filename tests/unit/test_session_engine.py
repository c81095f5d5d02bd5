"""The Session on an injected engine (`engine.api.Engine`): no process, the records we hand it."""

from __future__ import annotations

import time
from collections.abc import Callable

from gputui.control.auto import AutoControl
from gputui.engine.commands import Load
from tests.support.fake_engine import records_after, session_on_fake_engine


def test_a_session_runs_its_steps_on_an_injected_engine() -> None:
    session, engine = session_on_fake_engine()
    session.start(frame_interval_s=None)
    first = session.set_load("concurrency", 2)
    assert engine.commands == [Load("concurrency", 2.0, 0)]
    time.sleep(0.1)  # the six requests below were sent and back within the step
    engine.deliver(records_after(first.start_ns, 0, 6), {0: 6})
    second = session.set_load("concurrency", 4)  # closes step 0: all its 6 requests are back
    assert engine.commands[-1] == Load("concurrency", 2.0, 1)  # 2 runs on: the hand-over
    engine.deliver([], {0: 6, 1: 0})  # the engine has it, nothing of step 0 is out
    started = session.current_step  # (read once the loop has the batch)
    assert engine.commands[-1] == Load("concurrency", 4.0, 1)  # so 4 starts now
    assert started is not None and started.start_ns > second.start_ns
    time.sleep(0.1)  # step 1's requests below were sent and back within it
    engine.deliver(records_after(started.start_ns, 1, 3), {0: 6, 1: 3})
    (step,) = session.finished_steps()
    assert (step.index, step.level, step.requests_ok, step.requests_failed) == (0, 2.0, 6, 0)
    time.sleep(0.1)
    session.stop(cancel=False, drain_timeout_s=0.0)
    assert [s.requests_ok for s in session.finished_steps()] == [6, 3]


def _wait(condition: Callable[[], object], timeout_s: float) -> bool:
    deadline = time.perf_counter() + timeout_s
    while time.perf_counter() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return False


def test_a_job_that_ends_by_itself_says_so_without_any_frame() -> None:
    """No frames at all: the owner still learns that the hold ended (control.auto's `on_end`)."""
    session, engine = session_on_fake_engine()
    ended: list[str] = []
    jobs = AutoControl(session, max_step_s=0.2, on_end=ended.append)
    session.start(frame_interval_s=None)
    first = session.set_load("concurrency", 2)
    jobs.hold_until_precise(0.05)  # 3 requests only: the step ends at its 0.2 s maximum
    engine.deliver(records_after(first.start_ns, 0, 3), {0: 3})
    assert _wait(lambda: len(session.step_specs()) == 2, 5.0)  # closed, its load held on
    engine.deliver([], {0: 3, 1: 0})  # the reader's next batch: step 0 has all it sent
    assert _wait(lambda: ended, 5.0)
    assert ended == ["holding"] and not jobs.running
    (step,) = session.finished_steps()
    assert step.index == 0 and step.imprecise
    session.stop(cancel=True, drain_timeout_s=0.0)
    assert ended == ["holding"]  # stopping is not a second end


def test_cancelling_a_job_returns_at_once_and_no_load_change_follows() -> None:
    session, engine = session_on_fake_engine()
    jobs = AutoControl(session, max_step_s=0.05)
    session.start(frame_interval_s=None)
    session.set_load("concurrency", 1)
    jobs.start_auto(2)
    assert _wait(lambda: len(engine.commands) >= 2, 5.0)  # the sweep opened its first step
    started = time.perf_counter()
    jobs.cancel()
    assert time.perf_counter() - started < 0.05  # the UI loop is not held up
    count = len(session.step_specs())
    for index in range(len(engine.commands) + 2):  # the sweep's steps may now all finish
        engine.deliver([], dict.fromkeys(range(index + 1), 0))
    time.sleep(0.3)
    assert len(session.step_specs()) == count  # nothing the cancelled job did came after
    assert jobs.phase == "measuring"
    session.stop(cancel=True, drain_timeout_s=0.0)


def test_a_level_left_before_it_measured_anything_is_an_event_not_a_step() -> None:
    session, engine = session_on_fake_engine()
    session.start(frame_interval_s=None)
    session.set_load("concurrency", 16)
    time.sleep(0.05)
    session.set_load("concurrency", 32)  # left before a single request came back
    engine.deliver([], {0: 0, 1: 0})
    started = session.current_step
    assert started is not None and started.level == 32
    assert session.finished_steps() == []  # no 0/0 row, chart point or knee
    assert 0 in session.unreported_steps()
    texts = [e.text for e in session.events.items()]
    assert "16: left after 0 s, nothing measured" in texts
    time.sleep(0.1)
    engine.deliver(records_after(started.start_ns, 1, 3), {0: 0, 1: 3})
    session.stop(cancel=False, drain_timeout_s=0.0)
    assert [(s.level, s.requests_ok) for s in session.finished_steps()] == [(32.0, 3)]
