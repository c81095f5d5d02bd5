"""Plans played by the one runner (`control.plans`, `control.runner`) on a fake session."""

from __future__ import annotations

import threading
import time
from dataclasses import replace

import pytest

from gputui.control.plans import (
    FixedLevels,
    HoldStep,
    KneeSweepPlan,
    Repeats,
    RepeatTally,
    ValidateRate,
)
from gputui.control.rules import StepLimits
from gputui.control.runner import Open, Plan, PlanRunner, Progress, Stop
from gputui.metrics.knee_sweep import KneeSweep
from gputui.metrics.step import StepResult, StepSpec
from gputui.metrics.verdict import Verdict
from gputui.session.in_flight import InFlightSample, InFlightTrace
from tests.support.driven import FakeSession, rejections
from tests.support.steps import make_step

SHORT = StepLimits(None, 0.05, 0.05)
"""Each step measures 0.05 s (the fake session ends it on a timer)."""


def _levels(session: FakeSession) -> list[float]:
    return [s.level for s in session.specs if s.index not in session.hidden]


def test_fixed_levels_open_each_level_in_turn_and_never_wait_for_figures() -> None:
    session = FakeSession()
    started = time.perf_counter()
    PlanRunner(session, Stop()).run(FixedLevels("concurrency", [1, 2, 4], SHORT))
    assert _levels(session) == [1.0, 2.0, 4.0]
    assert session.holds == 0 and session.current_step is not None  # the last one stays open
    assert time.perf_counter() - started < 3.0


def test_fixed_levels_stop_after_a_flooded_step() -> None:
    session = FakeSession()
    session.error_log.add(rejections(0, 16))  # step 0's requests are all refused
    PlanRunner(session, Stop()).run(FixedLevels("concurrency", [1, 2, 4], SHORT))
    assert _levels(session) == [1.0]


def _tokens_by_level(session: FakeSession, tokens: dict[float, float]) -> None:
    def result(spec: StepSpec) -> StepResult:
        step = make_step(spec.level, output_tokens_per_s=tokens[spec.level], index=spec.index)
        return replace(step, sla_ok=True, sla_verdict="pass")

    session.result_for = result


def test_the_knee_sweep_ramps_finishes_each_step_and_stops_at_the_knee() -> None:
    session = FakeSession()
    _tokens_by_level(session, {1: 100.0, 2: 200.0, 4: 210.0, 8: 215.0})
    plan = KneeSweepPlan(KneeSweep(max_level=8), SHORT, None)
    PlanRunner(session, Stop()).run(plan)
    assert _levels(session) == [1.0, 2.0, 4.0]
    assert session.holds == 3  # each step closed keeping its load, for its figures
    assert plan.knee == 2.0 and plan.gains == ((2.0, 1.0), (4.0, 0.05))
    assert plan.reason.startswith(
        "ramp stopped at concurrency 4: output tok/s grew +5 % per doubling from concurrency 2"
    )


def _progress(steps: list[StepResult]) -> Progress:
    return Progress(steps, None, Stop())


def test_an_inconclusive_level_runs_again_twice_as_long_within_the_deadline() -> None:
    verdicts: list[tuple[float, Verdict]] = [(1, "pass"), (2, "pass"), (4, "inconclusive")]
    steps = [
        replace(make_step(level, output_tokens_per_s=100.0 * level, index=i), sla_verdict=v)
        for i, (level, v) in enumerate(verdicts)
    ]
    limits = StepLimits(0.05, 40.0, 40.0)
    move = KneeSweepPlan(KneeSweep(max_level=4), limits, None).next(_progress(steps))
    assert move == Open("concurrency", 4.0, StepLimits(0.05, 80.0, 40.0))
    soon = time.perf_counter_ns() + 30_000_000_000
    move = KneeSweepPlan(KneeSweep(max_level=4), limits, soon).next(_progress(steps))
    assert isinstance(move, Open) and 29.0 < move.limits.max_s <= 30.0
    plan = KneeSweepPlan(KneeSweep(max_level=4), limits, soon - 25_000_000_000)
    assert plan.next(_progress(steps)) is None
    assert plan.reason.startswith("stopped at the time bound (reached the maximum, concurrency 4")


def test_the_tuis_sweep_starts_from_the_operators_level() -> None:
    earlier = [replace(make_step(2, index=0), sla_verdict="pass")]
    plan = KneeSweepPlan.from_level(6.4, earlier, FakeSession().sla, max_level=256, limits=SHORT)
    assert plan.planner.start == 6.0 and plan.planner.passed_below == 2.0
    assert plan.next(_progress([])) == Open("concurrency", 6.0, SHORT)


def test_a_stopped_sweep_asks_for_nothing_more() -> None:
    session = FakeSession()
    stop = Stop()
    plan = KneeSweepPlan(KneeSweep(max_level=8), SHORT, None)
    timer = threading.Timer(0.02, stop.set)
    timer.start()
    PlanRunner(session, stop).run(plan)
    timer.join()
    assert _levels(session) == [1.0] and plan.reason == "interrupted"


def test_a_validation_hold_judges_the_sla_and_the_queue() -> None:
    session = FakeSession()
    now = time.perf_counter_ns()
    # 4 in flight, every 10 ms around the hold
    trace = InFlightTrace(
        [InFlightSample(now + i * 10_000_000, 4, False, 0.0, False) for i in range(-20, 200)]
    )
    plan = ValidateRate(2.5, 0.3, trace.between)
    PlanRunner(session, Stop()).run(plan)
    assert session.specs[0].mode == "rate" and session.specs[0].level == 2.5
    validation = plan.validation
    assert validation is not None
    assert (validation.rate, validation.seconds, validation.step_index) == (2.5, 0.3, 0)
    assert validation.queue.queue_bounded is True and validation.queue.in_flight_mean == 4.0
    assert validation.holds is True and validation.sla_ok is True


def test_the_validation_rate_is_90_percent_of_the_capacity() -> None:
    session = FakeSession()
    steps = [make_step(level, index=i, sla=session.sla) for i, level in enumerate([1, 2, 4])]
    steps = [replace(s, sla_verdict="pass") for s in steps]
    plan = ValidateRate.at_capacity(steps, session.sla, 30.0, InFlightTrace().between)
    assert plan is not None and plan.rate == pytest.approx(0.9 * steps[-1].requests_per_s)
    assert ValidateRate.at_capacity([], session.sla, 30.0, InFlightTrace().between) is None


def test_the_hold_keeps_the_open_step_and_then_closes_it() -> None:
    session = FakeSession()
    step = session.set_load("concurrency", 8)
    PlanRunner(session, Stop()).run(HoldStep(step.index, SHORT))
    assert [s.index for s in session.finished] == [step.index] and session.holds == 1
    current = session.current_step
    assert current is not None and current.level == 8.0  # the level carries on


def test_repeats_run_the_plan_again_fresh_and_tally_each_run() -> None:
    session = FakeSession()
    tally = RepeatTally(2)
    fresh: list[int] = []
    ended: list[Plan] = []

    def make(_repeat: int) -> Plan:
        return FixedLevels("concurrency", [1, 2], SHORT)

    plan = Repeats(2, make, sla=session.sla, tally=tally, fresh=fresh.append, on_end=ended.append)
    PlanRunner(session, Stop()).run(plan)
    assert fresh == [1] and len(ended) == 2
    assert _levels(session) == [1.0, 2.0, 1.0, 2.0]
    assert session.holds == 2  # each repeat's last step is finished for the spread
    assert [[s.level for s in run] for run in tally.runs] == [[1.0, 2.0], [1.0, 2.0]]
    assert [[s.index for s in run] for run in tally.runs] == [[0, 1], [3, 4]]
    assert tally.spread().count == 2


def test_a_single_repeat_finishes_nothing_extra() -> None:
    session = FakeSession()
    tally = RepeatTally(1)
    plan = Repeats(
        1,
        lambda _: FixedLevels("concurrency", [1], SHORT),
        sla=session.sla,
        tally=tally,
        fresh=lambda _: None,
        on_end=lambda _: None,
    )
    PlanRunner(session, Stop()).run(plan)
    assert session.holds == 0 and len(tally.runs) == 1


def test_repeats_of_a_finished_plan_go_straight_to_the_next_repeat() -> None:
    # A validation hold finishes its own step and leaves a hidden carry-on step open: the end of
    # a repeat must not wait for that one's figures (it waited until Ctrl-C).
    session = FakeSession()
    tally = RepeatTally(2)
    stop = Stop()
    guard = threading.Timer(5.0, stop.set)
    guard.start()
    plan = Repeats(
        2,
        lambda _: ValidateRate(2.5, 0.2, InFlightTrace().between),
        sla=session.sla,
        tally=tally,
        fresh=lambda _: None,
        on_end=lambda _: None,
    )
    PlanRunner(session, stop).run(plan)
    guard.cancel()
    assert not stop.is_set()  # ended by itself, not by the guard
    assert session.holds == 2  # one finish per validation hold, none for the carry-on steps
    assert len(tally.runs) == 2
    assert [s.index for s in session.finished] == [0, 2]  # each repeat's own hold, measured
