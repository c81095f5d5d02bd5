"""SLA verdicts per request (goodput) and per step (capacity)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from gputui.metrics.sla import Sla, error_rate, meets_sla, step_meets_sla
from gputui.metrics.summary import EMPTY_SUMMARY, Summary


def test_meets_sla_per_request() -> None:
    ttft = np.array([0.5, 1.5, 0.5, 0.5, np.nan])
    tpot = np.array([0.02, 0.02, 0.05, np.nan, 0.02])  # the 4th is a 1-token output
    good = meets_sla(ttft, tpot, Sla(ttft_p95_s=1.0, tpot_p95_s=0.035))
    assert good.tolist() == [True, False, False, True, False]


def test_bounds_that_are_none_are_no_constraint() -> None:
    ttft = np.array([9.0, np.nan])
    tpot = np.array([9.0, np.nan])
    assert meets_sla(ttft, tpot, Sla()).tolist() == [True, True]
    assert meets_sla(ttft, tpot, Sla(tpot_p95_s=10.0)).tolist() == [True, True]


def test_bound_is_inclusive() -> None:
    assert meets_sla([1.0], [0.035], Sla(ttft_p95_s=1.0, tpot_p95_s=0.035)).tolist() == [True]


@dataclass(frozen=True)
class FakeStep:
    requests_ok: int
    requests_failed: int
    ttft_s: Summary
    tpot_s: Summary
    e2e_s: Summary = EMPTY_SUMMARY
    ttfat_s: Summary | None = None


def p95(value: float | None) -> Summary:
    return Summary(
        mean=value, p50=value, p90=value, p95=value, p99=value, n=0 if value is None else 1
    )


@pytest.mark.parametrize(
    ("step", "sla", "expected"),
    [
        (FakeStep(10, 0, p95(0.9), p95(0.03)), Sla(1.0, 0.035, 0.01), True),
        (FakeStep(10, 0, p95(1.1), p95(0.03)), Sla(1.0, 0.035, 0.01), False),
        (FakeStep(10, 0, p95(0.9), p95(0.04)), Sla(1.0, 0.035, 0.01), False),
        (FakeStep(9, 1, p95(0.9), p95(0.03)), Sla(1.0, 0.035, 0.05), False),
        (FakeStep(19, 1, p95(0.9), p95(0.03)), Sla(1.0, 0.035, 0.05), True),
        (FakeStep(10, 0, p95(0.9), EMPTY_SUMMARY), Sla(1.0, 0.035), True),  # all 1-token outputs
        (FakeStep(10, 0, EMPTY_SUMMARY, p95(0.03)), Sla(1.0), False),  # no TTFT to judge
        (FakeStep(0, 0, EMPTY_SUMMARY, EMPTY_SUMMARY), Sla(), False),  # nothing ok
        (FakeStep(0, 5, EMPTY_SUMMARY, EMPTY_SUMMARY), Sla(), False),
        (FakeStep(5, 5, p95(9.0), p95(9.0)), Sla(), True),
    ],
)
def test_step_meets_sla(step: FakeStep, sla: Sla, expected: bool) -> None:
    assert step_meets_sla(step, sla) is expected


def test_error_rate() -> None:
    assert error_rate(3, 1) == 0.25
    assert error_rate(0, 0) is None


def test_e2e_and_ttfat_bounds_per_request() -> None:
    ttft = np.array([0.2, 0.2, 0.2])
    tpot = np.array([0.01, 0.01, 0.01])
    e2e = np.array([3.0, 9.0, 3.0])
    ttfat = np.array([1.0, 1.0, 6.0])  # the third thought for 6 s before answering
    sla = Sla(ttft_p95_s=1.0, e2e_p95_s=5.0, ttfat_p95_s=2.0)
    assert meets_sla(ttft, tpot, sla, e2e, ttfat).tolist() == [True, False, False]
    # TTFT alone passes all three
    assert meets_sla(ttft, tpot, Sla(ttft_p95_s=1.0), e2e, ttfat).tolist() == [True] * 3


def test_step_e2e_and_ttfat_bounds() -> None:
    ok = FakeStep(10, 0, p95(0.3), p95(0.02), e2e_s=p95(8.0), ttfat_s=p95(4.0))
    assert step_meets_sla(ok, Sla(ttft_p95_s=1.0)) is True
    assert step_meets_sla(ok, Sla(ttft_p95_s=1.0, e2e_p95_s=5.0)) is False
    assert step_meets_sla(ok, Sla(ttft_p95_s=1.0, ttfat_p95_s=2.0)) is False
    assert step_meets_sla(ok, Sla(ttft_p95_s=1.0, e2e_p95_s=9.0, ttfat_p95_s=5.0)) is True
    # No thinking: TTFAT is TTFT
    plain = FakeStep(10, 0, p95(0.3), p95(0.02), e2e_s=p95(8.0))
    assert step_meets_sla(plain, Sla(ttfat_p95_s=0.5)) is True
    assert step_meets_sla(plain, Sla(ttfat_p95_s=0.2)) is False
