"""The session loop is the one writer: load changes never wait for it, readers never lock."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from gputui.engine.commands import Load
from gputui.metrics.step import StepResult
from gputui.session import Session
from tests.support.fake_engine import records_after, session_on_fake_engine


def test_a_load_change_is_sent_at_once_while_the_loop_is_busy() -> None:
    release = threading.Event()
    delivered: list[int] = []

    def slow_subscriber(result: StepResult) -> None:  # runs on the loop: holds it up
        delivered.append(result.index)
        release.wait(5.0)

    session, engine = session_on_fake_engine(slow_subscriber)
    session.start(frame_interval_s=None)
    first = session.set_load("concurrency", 2)
    engine.deliver(records_after(first.start_ns, 0, 3), {0: 3})
    time.sleep(0.1)  # the requests above were sent within the step
    session.set_load("concurrency", 4)
    reader = threading.Thread(target=engine.deliver, args=([], {0: 3, 1: 0}))
    reader.start()  # the reader's batch finishes step 0: the loop is now in the subscriber
    deadline = time.monotonic() + 5.0
    while not delivered and time.monotonic() < deadline:
        time.sleep(0.005)
    assert delivered == [0]
    started = time.perf_counter()
    third = session.set_load("concurrency", 8)
    assert time.perf_counter() - started < 0.05  # did not wait for the busy loop
    # Step 1 is still pending (its hand-over ends after the subscriber): 8 replaces its 4, and
    # the engine still runs step 0's load, counted in step 1 (unmeasured).
    assert third.index == 1
    assert engine.commands[-1] == Load("concurrency", 2.0, 1)
    other: list[float] = []
    watcher = threading.Thread(target=lambda: other.append(_timed(session.finished_steps)))
    watcher.start()  # a thread that posted nothing reads the published state: no waiting
    watcher.join(5.0)
    assert other and other[0] < 0.05
    release.set()
    reader.join(5.0)
    deadline = time.monotonic() + 5.0
    while engine.commands[-1] != Load("concurrency", 8.0, 1) and time.monotonic() < deadline:
        time.sleep(0.005)
    assert engine.commands[-1] == Load("concurrency", 8.0, 1)  # the hand-over is over
    current = session.current_step
    assert current is not None and current.level == 8.0 and current.start_ns > third.start_ns
    session.stop(cancel=True, drain_timeout_s=0.0)
    assert [s.index for s in session.finished_steps()] == [0]  # 1 measured nothing: no step
    assert 1 in session.unreported_steps()


def _timed(read: Callable[[], object]) -> float:
    started = time.perf_counter()
    read()
    return time.perf_counter() - started


def test_subscribers_on_the_loop_may_read_thesession_on_fake_engine() -> None:
    """A subscriber runs on the loop thread: its reads answer there, with no deadlock."""
    seen: list[tuple[int, int]] = []
    holder: list[Session] = []

    def reads(result: StepResult) -> None:
        session = holder[0]
        seen.append((len(session.step_specs()), len(session.all_records())))

    session, engine = session_on_fake_engine(reads)
    holder.append(session)
    session.start(frame_interval_s=None)
    first = session.set_load("concurrency", 2)
    engine.deliver(records_after(first.start_ns, 0, 4), {0: 4})
    time.sleep(0.1)  # the requests above were sent within the step
    session.set_load("concurrency", 3)
    engine.deliver([], {0: 4, 1: 0})
    assert [s.index for s in session.finished_steps()] == [0]
    assert seen == [(2, 4)]
    session.stop(cancel=True, drain_timeout_s=0.0)


def test_before_start_messages_are_handled_in_the_callers_thread() -> None:
    session, engine = session_on_fake_engine()
    step = session.set_load("rate", 5)
    assert session.current_step == step and session.step_specs() == [step]
    assert engine.commands == [Load("rate", 5.0, 0)]
    session.stop(cancel=True, drain_timeout_s=0.0)
    (spec,) = session.step_specs()
    assert spec.end_ns >= spec.start_ns
    # Stopped before it measured anything: finished, but a line in the event log, not a step.
    assert session.finished_steps() == [] and session.unreported_steps() == {0}
    assert "5 req/s: left after 0 s, nothing measured" in [e.text for e in session.events.items()]
