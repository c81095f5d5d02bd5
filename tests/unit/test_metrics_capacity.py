"""SLA-qualified capacity: the highest level whose steps met every bound, and why."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gputui.metrics.capacity import (
    Capacity,
    majority_mode,
    qualified_capacity,
    sla_violations,
)
from gputui.metrics.confidence import wilson_ci
from gputui.metrics.sla import Sla, step_meets_sla
from gputui.metrics.step import StepResult
from gputui.snapshot.models import step_from_result
from tests.support.steps import make_step

SLA = Sla(ttft_p95_s=1.0, tpot_p95_s=0.035, max_error_rate=0.01)


def sweep(
    ttft_p95_s: list[float], levels: tuple[float, ...] = (1, 2, 4, 8, 16, 32)
) -> list[StepResult]:
    return [
        make_step(x, output_tokens_per_s=100.0 * x, ttft_p95_s=t, index=i)
        for i, (x, t) in enumerate(zip(levels, ttft_p95_s, strict=True))
    ]


def test_highest_passing_level_with_its_numbers() -> None:
    steps = sweep([0.3, 0.3, 0.4, 0.6, 0.9, 1.4])
    result = qualified_capacity(steps, SLA)
    assert result.capacity == Capacity(
        level=16,
        mode="concurrency",
        output_tokens_per_s=1600.0,
        all_output_tokens_per_s=1600.0,
        requests_per_s=8.0,
        ttft_p95_s=0.9,
        tpot_p95_s=0.02,
        error_rate=0.0,
        error_rate_ci=wilson_ci(0, 100),
        below_level=8.0,
        below_verdict="pass",
        above_level=32.0,
        above_verdict="fail",
    )
    assert result.reason == (
        "concurrency 16 is the highest level that met every SLA bound;"
        " the next level failed (concurrency 32: P95 TTFT 1.4 s > 1.0 s)"
    )


def test_no_step_met_the_sla() -> None:
    result = qualified_capacity(sweep([1.4, 1.6, 2.0], (1, 2, 4)), SLA)
    assert result.capacity is None
    assert (
        result.reason == "no step met the SLA (lowest level concurrency 1: P95 TTFT 1.4 s > 1.0 s)"
    )


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        (make_step(1, ttft_p95_s=1.04), ["P95 TTFT 1.04 s > 1.00 s"]),
        (make_step(1, tpot_p95_s=0.041), ["P95 TPOT 41 ms > 35 ms"]),
        (make_step(1, tpot_p95_s=0.0354), ["P95 TPOT 35.4 ms > 35.0 ms"]),
        (make_step(1, requests_ok=97, requests_failed=3), ["error rate 3.0 % > 1.0 %"]),
        (make_step(1, ttft_p95_s=None), ["no TTFT measured"]),
        (make_step(1, requests_ok=0, requests_failed=5), ["no request succeeded"]),
        (
            make_step(1, ttft_p95_s=2.5, tpot_p95_s=0.05),
            ["P95 TTFT 2.5 s > 1.0 s", "P95 TPOT 50 ms > 35 ms"],
        ),
        (make_step(1, requests_ok=99, requests_failed=1, tpot_p95_s=0.035), []),  # inclusive
        (make_step(1, tpot_p95_s=None), []),  # every output had one token
    ],
)
def test_sla_violations_agree_with_step_meets_sla(step: StepResult, expected: list[str]) -> None:
    assert sla_violations(step, SLA) == expected
    assert step_meets_sla(step, SLA) is (not expected)


def test_a_lower_failure_is_reported_but_the_highest_pass_counts() -> None:
    steps = sweep([0.3, 0.3, 1.2, 0.6, 0.9, 1.4])  # level 4 failed: noise or instability
    result = qualified_capacity(steps, SLA)
    assert result.capacity is not None
    assert result.capacity.level == 16
    assert (
        "note: a lower level failed although 16 passed (concurrency 4: P95 TTFT 1.2 s > 1.0 s)"
        in (result.reason)
    )


def test_top_level_passing_means_capacity_may_be_higher() -> None:
    result = qualified_capacity(sweep([0.3, 0.4, 0.5], (1, 2, 4)), SLA)
    assert result.capacity is not None
    assert result.capacity.level == 4
    assert result.reason.endswith("no higher level was tested, so the capacity may be higher")


def test_incomplete_steps_are_skipped() -> None:
    steps = [*sweep([0.3, 0.4, 1.5], (1, 2, 4)), make_step(8, ttft_p95_s=0.1, incomplete=True)]
    result = qualified_capacity(steps, SLA)
    assert result.capacity is not None
    assert result.capacity.level == 2
    only_incomplete = [make_step(8, incomplete=True)]
    assert qualified_capacity(only_incomplete, SLA).reason == "no complete step to judge"


def test_a_level_with_a_failed_repeat_is_not_sustained() -> None:
    steps = [*sweep([0.3, 0.4, 0.5], (1, 2, 4)), make_step(4, ttft_p95_s=1.3)]
    result = qualified_capacity(steps, SLA)
    assert result.capacity is not None
    assert result.capacity.level == 2
    assert "the next level failed (concurrency 4: P95 TTFT 1.3 s > 1.0 s)" in result.reason


def test_repeated_passing_level_reports_its_last_step() -> None:
    steps = [make_step(4, output_tokens_per_s=400.0), make_step(4, output_tokens_per_s=420.0)]
    result = qualified_capacity(steps, SLA)
    assert result.capacity is not None
    assert result.capacity.output_tokens_per_s == 420.0


def test_modes_are_judged_separately() -> None:
    conc = sweep([0.3, 0.4, 1.5], (1, 2, 4))
    rates = [
        make_step(1.5, mode="rate", ttft_p95_s=0.5, output_tokens_per_s=300.0),
        make_step(3.0, mode="rate", ttft_p95_s=0.8, output_tokens_per_s=600.0),
    ]
    steps = [*conc, *rates]
    assert majority_mode(steps) == "concurrency"
    picked = qualified_capacity(steps, SLA)
    assert picked.capacity is not None
    assert (picked.capacity.mode, picked.capacity.level) == ("concurrency", 2)
    assert picked.reason.endswith("2 rate step(s) are judged separately")
    rate = qualified_capacity(steps, SLA, mode="rate")
    assert rate.capacity is not None
    assert (rate.capacity.mode, rate.capacity.level) == ("rate", 3.0)
    assert rate.reason.startswith("rate 3 req/s is the highest level")
    # a tie goes to the open-loop rate steps, which do not slow down with the server
    assert majority_mode([*conc[:2], *rates]) == "rate"
    assert majority_mode([]) is None
    assert qualified_capacity(conc, SLA, mode="rate").reason == "no complete rate step to judge"


def test_no_bounds_is_peak_not_interactive_capacity() -> None:
    result = qualified_capacity(sweep([5.0, 9.0, 20.0], (1, 2, 4)), Sla())
    assert result.capacity is not None
    assert result.capacity.level == 4
    assert "the SLA sets no bound, so this is peak load, not interactive capacity" in result.reason


def test_error_rate_is_carried_and_bounded() -> None:
    steps = [
        make_step(1, requests_ok=99, requests_failed=1, output_tokens_per_s=100.0),
        make_step(2, requests_ok=97, requests_failed=3, output_tokens_per_s=200.0),
    ]
    result = qualified_capacity(steps, SLA)
    assert result.capacity is not None
    assert result.capacity.level == 1
    assert result.capacity.error_rate == pytest.approx(0.01)
    assert "(concurrency 2: error rate 3.0 % > 1.0 %)" in result.reason


def measured(step: StepResult, spread: float = 0.05) -> StepResult:
    """The step with +-spread intervals on its P95s, as `aggregate_step` would give it."""

    def ci(value: float | None) -> tuple[float, float] | None:
        return None if value is None else (value * (1 - spread), value * (1 + spread))

    return replace(
        step,
        ttft_s=replace(step.ttft_s, p95_ci=ci(step.ttft_s.p95)),
        tpot_s=replace(step.tpot_s, p95_ci=ci(step.tpot_s.p95)),
    )


def test_an_error_rate_on_the_bound_is_inconclusive_not_a_pass() -> None:
    # 1 failure in 100 meets "<= 1 %" as a point estimate, but its Wilson interval reaches 5.4 %;
    # 1 in 1,000 is 0.02-0.56 %, within it.
    steps = [
        measured(make_step(1, requests_ok=999, requests_failed=1, output_tokens_per_s=100.0)),
        measured(make_step(2, requests_ok=99, requests_failed=1, output_tokens_per_s=200.0)),
    ]
    assert steps[1].error_rate == pytest.approx(0.01)
    result = qualified_capacity(steps, SLA)
    assert result.capacity is not None
    assert result.capacity.level == 1
    assert result.capacity.error_rate_ci == pytest.approx((0.000177, 0.005642), abs=1e-6)
    assert (result.capacity.above_level, result.capacity.above_verdict) == (2.0, "inconclusive")
    assert (
        "the next level was inconclusive (concurrency 2 inconclusive: error rate 95 % CI"
        " 0.2-5.4 % straddles 1 % (1/100))" in result.reason
    )


def test_a_straddling_p95_is_not_capacity() -> None:
    # P95 TTFT 0.97 s +- 5 % straddles the 1 s bound at 16: capacity stays at 8, bracketed by 16.
    steps = [measured(s) for s in sweep([0.3, 0.4, 0.6, 0.97, 1.4], (2, 4, 8, 16, 32))]
    result = qualified_capacity(steps, Sla(ttft_p95_s=1.0))
    assert result.capacity is not None
    assert result.capacity.level == 8
    assert result.capacity.ttft_p95_ci == pytest.approx((0.57, 0.63))
    assert (result.capacity.below_level, result.capacity.below_verdict) == (4.0, "pass")
    assert (result.capacity.above_level, result.capacity.above_verdict) == (16.0, "inconclusive")
    assert "the next level was inconclusive (concurrency 16 inconclusive: P95 TTFT 95 % CI" in (
        result.reason
    )


def test_a_handful_of_samples_never_qualifies() -> None:
    # Latencies far under the bounds, but P95 over 20 requests has an open upper end.
    steps = [
        replace(s, ttft_s=replace(s.ttft_s, n=20, p95_ci=(0.28, None)))
        for s in map(measured, sweep([0.3, 0.3], (1, 2)))
    ]
    result = qualified_capacity(steps, Sla(ttft_p95_s=1.0))
    assert result.capacity is None
    assert result.reason == (
        "no step met the SLA (lowest level concurrency 1 inconclusive: P95 TTFT has no upper"
        " bound on 20 samples (needs 59); 95 % CI >= 280.0 ms (open above))"
    )


def test_snapshot_steps_can_be_rejudged() -> None:
    steps = [step_from_result(s) for s in sweep([0.3, 0.3, 0.4, 0.6, 0.9, 1.4])]
    result = qualified_capacity(steps, SLA)
    assert result.capacity is not None
    assert result.capacity.level == 16
    stricter = qualified_capacity(steps, Sla(ttft_p95_s=0.5))
    assert stricter.capacity is not None
    assert stricter.capacity.level == 4
    assert "(concurrency 8: P95 TTFT 600 ms > 500 ms)" in stricter.reason
