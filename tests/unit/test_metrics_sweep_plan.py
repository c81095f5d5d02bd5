"""The auto-sweep planner driven by a toy server model, step by step."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

from gputui.metrics.sla import Sla
from gputui.metrics.step import StepMode, StepResult
from gputui.metrics.sweep_plan import AutoSweep
from tests.support.steps import make_step

SLA = Sla(ttft_p95_s=1.0, tpot_p95_s=0.035, max_error_rate=0.01)
Server = Callable[[float, int], StepResult]


def toy_server(
    *,
    ttft_breaks_above: float = 24,
    cap_tokens_per_s: float = 1500.0,
    errors_above: float = math.inf,
    mode: StepMode = "concurrency",
) -> Server:
    """Throughput = min(100 x, cap); P95 TTFT 0.4 s up to the break, 1.6 s past it."""

    def run(level: float, index: int) -> StepResult:
        return make_step(
            level,
            output_tokens_per_s=min(100.0 * level, cap_tokens_per_s),
            ttft_p95_s=0.4 if level <= ttft_breaks_above else 1.6,
            requests_ok=95 if level > errors_above else 100,
            requests_failed=5 if level > errors_above else 0,
            mode=mode,
            index=index,
        )

    return run


def drive(plan: AutoSweep, server: Server, limit: int = 100) -> list[StepResult]:
    """Run the planner to the end against the server, the way the engine will."""
    steps: list[StepResult] = []
    while (level := plan.next_level(steps)) is not None:
        assert len(steps) < limit, "the planner did not terminate"
        steps.append(server(level, len(steps)))
    return steps


def test_ramp_then_bisect_to_the_last_good_level() -> None:
    plan = AutoSweep(max_level=256, sla=SLA)
    steps = drive(plan, toy_server())
    # ramp 1..32 (32 breaks TTFT), then bisect [16, 32]: 24 ok, 28, 26, 25 break.
    assert [s.level for s in steps] == [1, 2, 4, 8, 16, 32, 24, 28, 26, 25]
    assert (plan.state, plan.last_good, plan.first_bad) == ("done", 24, 25)
    assert plan.reason == (
        "concurrency 24 is the highest level that held the SLA; 25 broke it"
        " (P95 TTFT 1.6 s > 1.0 s)"
    )


def test_reasons_along_the_way() -> None:
    plan = AutoSweep(max_level=256, sla=SLA)
    server = toy_server()
    assert plan.next_level([]) == 1
    assert (plan.state, plan.reason) == ("ramp", "ramp: start at concurrency 1")
    steps = [server(x, i) for i, x in enumerate([1, 2, 4, 8, 16])]
    assert plan.next_level(steps) == 32
    assert plan.reason == "ramp: concurrency 16 held the SLA at 1,500 tok/s; next 32"
    steps.append(server(32, 5))
    assert plan.next_level(steps) == 24
    assert plan.state == "bisect"
    assert plan.reason == "bisect: 16 held the SLA, 32 broke it (P95 TTFT 1.6 s > 1.0 s); next 24"
    assert (plan.last_good, plan.first_bad) == (16, 32)


def test_error_rate_bound_breaks_the_ramp() -> None:
    plan = AutoSweep(max_level=256, sla=SLA)
    steps = drive(plan, toy_server(ttft_breaks_above=math.inf, errors_above=12))
    # 16 fails (5 % errors > 1 %): bisect [8, 16]: 12 ok, 14 and 13 fail.
    assert [s.level for s in steps] == [1, 2, 4, 8, 16, 12, 14, 13]
    assert (plan.last_good, plan.first_bad) == (12, 13)
    assert plan.reason.endswith("(error rate 5.0 % > 1.0 %)")


def test_throughput_stall_ends_the_ramp_without_a_bisection() -> None:
    plan = AutoSweep(max_level=1024, sla=SLA)
    steps = drive(plan, toy_server(ttft_breaks_above=math.inf))
    # 16 -> 32 and 32 -> 64 both grow 0 % (< 5 %): two stalled steps in a row.
    assert [s.level for s in steps] == [1, 2, 4, 8, 16, 32, 64]
    assert (plan.state, plan.last_good, plan.first_bad) == ("done", 64, None)
    assert plan.reason == (
        "output tok/s grew less than 5 % per doubling for 2 consecutive steps up to"
        " concurrency 64 while every SLA bound held: the server is saturated"
    )


def test_max_level_caps_the_ramp() -> None:
    plan = AutoSweep(max_level=20, sla=SLA)
    steps = drive(plan, toy_server(ttft_breaks_above=math.inf))
    assert [s.level for s in steps] == [1, 2, 4, 8, 16, 20]
    assert plan.last_good == 20
    assert plan.reason == "reached the maximum, concurrency 20, with every SLA bound held"


def test_first_level_failing_ends_at_once() -> None:
    plan = AutoSweep(max_level=64, sla=SLA)
    steps = drive(plan, toy_server(ttft_breaks_above=0.5))
    assert [s.level for s in steps] == [1]
    assert (plan.state, plan.last_good, plan.first_bad) == ("done", None, 1)
    assert plan.reason == (
        "the lowest level, concurrency 1, already broke the SLA (P95 TTFT 1.6 s > 1.0 s)"
    )


def test_rate_mode_bisects_to_a_relative_gap() -> None:
    plan = AutoSweep(max_level=64, sla=SLA, mode="rate", start=0.5)
    steps = drive(plan, toy_server(ttft_breaks_above=5.0, mode="rate"))
    # ramp 0.5..8 (8 breaks); bisect [4, 8]: 6 breaks, 5 ok, 5.5 breaks (5.5/5 = 1.1, not
    # < 1.1), 5.25 breaks: 5.25 / 5 = 1.05 < 1.1 stops.
    assert [s.level for s in steps] == [0.5, 1, 2, 4, 8, 6, 5, 5.5, 5.25]
    assert (plan.last_good, plan.first_bad) == (5.0, 5.25)
    assert plan.reason.startswith("rate 5 req/s is the highest level that held the SLA")


@pytest.mark.parametrize("breaks_above", [1, 2, 3, 5, 7, 24, 31, 33, 63, 64, 100, 127, 200])
def test_finds_the_boundary_within_max_level_in_bounded_steps(breaks_above: int) -> None:
    plan = AutoSweep(max_level=128, sla=SLA)
    server = toy_server(ttft_breaks_above=breaks_above, cap_tokens_per_s=math.inf)
    steps = drive(plan, server)
    levels = [s.level for s in steps]
    assert max(levels) <= 128
    assert len(levels) == len(set(levels)), "a level was run twice"
    # 8 ramp levels (1..128) plus at most log2(64) = 6 bisections
    assert len(steps) <= 8 + 6
    assert plan.last_good == min(breaks_above, 128)
    assert plan.first_bad == (None if breaks_above >= 128 else breaks_above + 1)


def test_decisions_are_pure_and_interrupted_steps_are_rerun() -> None:
    plan = AutoSweep(max_level=256, sla=SLA)
    server = toy_server()
    steps = [server(x, i) for i, x in enumerate([1, 2, 4, 8, 16, 32])]
    assert plan.decide(steps) == plan.decide(list(steps))
    assert plan.decide(steps).level == 24
    steps.append(make_step(24, ttft_p95_s=0.1, incomplete=True))
    assert plan.decide(steps).level == 24  # the interrupted step is asked for again
    # another mode's steps and off-plan levels do not disturb the plan
    steps.append(make_step(24, mode="rate", ttft_p95_s=9.0))
    steps.append(server(3, 99))
    assert plan.decide(steps).level == 24


def test_ramp_levels() -> None:
    assert AutoSweep(max_level=48, sla=SLA).ramp_levels() == (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 48.0)
    # factor 1.5 on whole numbers: 1, 1.5 -> 2, 2.25 -> 3 (kept rising), 3.4 -> 4, 5.1 -> 5, ...
    levels = AutoSweep(max_level=20, sla=SLA, factor=1.5).ramp_levels()
    assert levels == (1.0, 2.0, 3.0, 4.0, 5.0, 8.0, 11.0, 17.0, 20.0)
    assert AutoSweep(max_level=1, sla=SLA).ramp_levels() == (1.0,)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_level": 0.5}, "start <= max_level"),
        ({"max_level": 8, "factor": 1.0}, "factor"),
        ({"max_level": 8, "stall_steps": 0}, "stall_steps"),
        ({"max_level": 8, "start": 1.5}, "whole number"),
        ({"max_level": 8, "bisect_min_gap": 0.0}, "bisect_min_gap"),
    ],
)
def test_invalid_settings(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        AutoSweep(sla=SLA, **kwargs)
