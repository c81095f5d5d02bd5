"""The step a plan waits on, ended by the session's loop (`session.watch`): no poll, no callback."""

from __future__ import annotations

import time

import pytest

from gputui.control.rules import hold_limits
from gputui.engine.commands import Load
from gputui.session.loads import JobCancelled
from gputui.session.step_end import StepLimits
from tests.support.fake_engine import records_after, session_on_fake_engine


def test_the_loop_ends_a_fixed_step_closes_it_and_answers_with_its_figures() -> None:
    session, engine = session_on_fake_engine()
    session.start(frame_interval_s=None)  # no frames: the loop's own watch tick ends the step
    started = time.perf_counter()
    reply = session.open_step("concurrency", 2, StepLimits(None, 0.3, 0.3), finish=True)
    spec = session.current_step
    assert spec is not None
    time.sleep(0.05)
    engine.deliver(records_after(spec.start_ns, 0, 4), {0: 4})
    time.sleep(0.4)  # the step measured its 0.3 s: the loop closed it keeping its load
    assert engine.commands == [Load("concurrency", 2.0, 0), Load("concurrency", 2.0, 1)]
    engine.deliver([], {0: 4, 1: 0})  # every request of step 0 is back: its figures
    ended = reply.result(timeout=5.0)
    assert ended is not None and not ended.flooded
    # No warm-up here: its bound (settling + 0.3 s) and its 0.3 s measured come at one tick.
    assert ended.reason in ("measured 0.3 s", "reached its maximum, 0.3 s")
    assert ended.result is not None and ended.result.requests_ok == 4
    assert 0.3 <= (ended.ended_ns - spec.start_ns) / 1e9 < 0.3 + 0.1 + 0.2  # one tick late at most
    assert [s.index for s in session.finished_steps()] == [0]  # published before the answer
    assert time.perf_counter() - started < 3.0
    session.stop(cancel=True, drain_timeout_s=0.0)


def test_a_hold_tells_its_verdict_and_target_on_the_loop_and_a_cancel_ends_it() -> None:
    session, engine = session_on_fake_engine()
    session.start(frame_interval_s=None)
    spec = session.set_load("concurrency", 2)
    time.sleep(0.05)
    engine.deliver(records_after(spec.start_ns, 0, 3), {0: 3})
    job = session.begin_job()
    reply = session.keep_step(None, hold_limits(0.05, 20.0), finish=True, job=job)
    session.cancel_job(job)  # a message: the watch ends, nothing is closed
    ended = reply.result(timeout=5.0)
    assert ended is not None and ended.reason == "interrupted" and ended.result is None
    assert len(session.step_specs()) == 1  # no load change followed the cancel
    with pytest.raises(JobCancelled):
        session.open_step("concurrency", 4, StepLimits(None, 1.0, 1.0), finish=True, job=job)
    session.stop(cancel=True, drain_timeout_s=0.0)
    (step,) = session.finished_steps()  # the hold's verdict so far, told on the loop
    assert (step.requests_ok, step.sla_verdict) == (3, "inconclusive")
    assert step.verdict_basis == "no look yet (the first at 120 requests)"
    assert step.imprecise is not None  # judged against the hold's target


def test_keeping_no_open_step_answers_none_and_a_run_end_answers_a_waiting_plan() -> None:
    session, _engine = session_on_fake_engine()
    session.start(frame_interval_s=None)
    assert session.keep_step(None, None, finish=True).result(timeout=5.0) is None
    reply = session.open_step("concurrency", 1, StepLimits(None, 60.0, 60.0), finish=True)
    session.end_watch()  # the run is being stopped: its plan stops waiting
    ended = reply.result(timeout=5.0)
    assert ended is not None and ended.reason == "interrupted"
    session.stop(cancel=True, drain_timeout_s=0.0)


def test_drained_is_answered_by_the_loop_once_nothing_is_in_flight() -> None:
    session, engine = session_on_fake_engine()
    session.start(frame_interval_s=None)
    spec = session.set_load("concurrency", 2)
    session.pause()
    drained = session.drained()
    assert not drained.done()  # no batch yet: the engine has not said
    time.sleep(0.05)
    engine.deliver(records_after(spec.start_ns, 0, 2), {0: 2})  # its status: 0 in flight
    drained.result(timeout=5.0)
    assert session.drained().result(timeout=5.0) is None  # already drained: answered at once
    session.stop(cancel=True, drain_timeout_s=0.0)


def test_a_watched_steps_limits_count_from_when_its_level_starts_after_a_hand_over() -> None:
    session, engine = session_on_fake_engine()
    session.start(frame_interval_s=None)
    first = session.set_load("concurrency", 2)
    time.sleep(0.05)
    engine.deliver(records_after(first.start_ns, 0, 3), {0: 5})  # 2 of step 0 still out
    reply = session.open_step("concurrency", 4, StepLimits(None, 0.2, 0.2), finish=False)
    time.sleep(0.5)  # past its 0.2 s: but its level waits for step 0's last 2 requests
    assert not reply.done()
    assert engine.commands[-1] == Load("concurrency", 2.0, 1)  # the old level runs on
    engine.deliver(records_after(first.start_ns, 0, 2), {0: 5, 1: 0})  # step 0 is all back
    ended = reply.result(timeout=5.0)
    assert engine.commands[-1] == Load("concurrency", 4.0, 1)  # the level started
    assert ended is not None and ended.reason == "reached its maximum, 0.2 s"
    assert 0.2 <= (ended.ended_ns - ended.spec.start_ns) / 1e9 < 0.5  # from the level's start
    session.stop(cancel=True, drain_timeout_s=0.0)
