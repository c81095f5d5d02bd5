"""Validation and burst verdicts on synthetic traces with known answers."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from gputui.control.sweep import burst_recoveries
from gputui.engine.records import RequestRecord
from gputui.metrics.validation import queue_verdict

S = 1_000_000_000


def test_a_level_queue_is_bounded() -> None:
    rng = np.random.default_rng(0)
    t = np.arange(0, 30, 0.25)
    in_flight = 10 + rng.poisson(3, t.size)
    verdict = queue_verdict(t, in_flight.astype(float))
    assert verdict.queue_bounded is True
    assert verdict.in_flight_mean == pytest.approx(13, abs=0.5)


def test_a_growing_queue_is_not_bounded() -> None:
    t = np.arange(0, 30, 0.25)
    in_flight = 5 + 2.0 * t  # arrivals outpace service: 60 more requests queued after 30 s
    verdict = queue_verdict(t, in_flight)
    assert verdict.queue_bounded is False
    assert verdict.in_flight_growth == pytest.approx(59.5, abs=0.1)
    assert "kept growing" in verdict.queue_reason


def record(sent_s: float, ttft_s: float) -> RequestRecord:
    sent = int(sent_s * S)
    first = sent + int(ttft_s * S)
    return RequestRecord(
        request_id=0, step_index=0, sent_ns=sent, end_ns=first + S, ok=True, first_token_ns=first
    )


def test_burst_recovery_is_the_later_of_ttft_and_queue() -> None:
    # Requests every 0.1 s; the burst at t=10 s pushes TTFT to 2 s until t=13.0, then 0.1 s again.
    records = [record(t, 2.0 if 10.0 <= t < 13.0 else 0.1) for t in np.arange(0, 20, 0.1)]
    times = np.arange(0, 20, 0.25)
    in_flight = [4 if t < 10 or t >= 14.0 else 20 for t in times]  # queue drains at t=14
    frames = ([int(t * S) for t in times], in_flight)
    (burst,) = burst_recoveries([10 * S], 16, records, frames, ttft_bound_s=1.0, origin_ns=0)
    assert burst.at_s == 10.0
    assert burst.ttft_recovery_s == pytest.approx(3.0, abs=0.11)
    assert burst.queue_recovery_s == pytest.approx(4.0, abs=0.01)
    assert burst.recovery_s == pytest.approx(4.0, abs=0.01)
    assert burst.recovered is True


def test_a_burst_that_never_recovers() -> None:
    records = [record(t, 2.0 if t >= 10.0 else 0.1) for t in np.arange(0, 20, 0.1)]
    t_ns = [int(t * S) for t in np.arange(0, 20, 0.25)]
    frames = (t_ns, [4] * len(t_ns))
    (burst,) = burst_recoveries([10 * S], 16, records, frames, ttft_bound_s=1.0, origin_ns=0)
    assert burst.ttft_recovery_s is None
    assert burst.recovered is False
    assert burst.recovery_s is None


def test_a_step_shorter_than_three_request_lifetimes_is_flagged() -> None:
    from gputui.metrics.step_quality import step_warnings
    from tests.support.steps import make_step

    step = make_step(16, output_tokens_per_s=900.0)
    long_requests = replace(step, e2e_s=replace(step.e2e_s, p50=9.0), duration_s=15.0)
    (line,) = step_warnings(long_requests)
    assert "under 3 request lifetimes (E2E p50 9.0 s)" in line
    assert step_warnings(replace(step, e2e_s=replace(step.e2e_s, p50=4.0), duration_s=15.0)) == []
