"""Steady-state detectors and the precision check, on synthetic records and in-flight traces."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import pytest

from gputui.metrics.precision import step_precision
from gputui.metrics.sla import Sla
from gputui.metrics.steady import (
    SteadyStart,
    closed_loop_measure_start,
    open_loop_measure_start,
)
from gputui.metrics.step import StepResult, StepSpec, aggregate_step
from tests.support.records import rec

S = 1_000_000_000
FloatArray = npt.NDArray[np.float64]
MAX = 20 * S


def test_closed_loop_waits_for_the_first_wave() -> None:
    # Concurrency 4 from t = 10 s: four requests start at once and end at 11.0-12.5 s; each slot
    # then sends its next request as its first one ends.
    change = 10 * S
    sent = [9 * S, change, change, change + 1000, change + 2000, 11 * S, 12 * S]
    end = [10_500_000_000, 11 * S, 12 * S, 12_500_000_000, 11_800_000_000, 13 * S, 14 * S]
    got = closed_loop_measure_start(
        sent, end, change_ns=change, level=4, now_ns=14 * S, max_warmup_ns=MAX,
        oldest_in_flight_sent_ns=None,
    )  # fmt: skip
    assert got is not None
    assert got.measure_start_ns == 12_500_000_000  # the last of the first four
    assert got.warmup_s == pytest.approx(2.5)
    assert got.reason == "first wave completed"


def test_closed_loop_is_unknown_while_a_wave_member_is_in_flight() -> None:
    change = 10 * S
    sent = [change, change, change, 11 * S, 12 * S]
    end = [11 * S, 12 * S, 12_500_000_000, 13 * S, 14 * S]

    # The fourth request of the wave (sent at the change) has not come back yet.
    def at(now_ns: int) -> SteadyStart | None:
        return closed_loop_measure_start(
            sent,
            end,
            change_ns=change,
            level=4,
            now_ns=now_ns,
            max_warmup_ns=MAX,
            oldest_in_flight_sent_ns=change,
        )

    assert at(14 * S) is None
    # Bounded by the maximum: after 20 s the window starts at change + 20 s regardless.
    late = at(change + MAX)
    assert late is not None
    assert (late.measure_start_ns, late.reason) == (change + MAX, "maximum warm-up")


def test_closed_loop_wave_longer_than_the_maximum_is_capped() -> None:
    got = closed_loop_measure_start(
        [0, 0], [30 * S, 31 * S], change_ns=0, level=2, now_ns=31 * S, max_warmup_ns=MAX,
        oldest_in_flight_sent_ns=None,
    )  # fmt: skip
    assert got is not None
    assert (got.measure_start_ns, got.warmup_s, got.reason) == (MAX, 20.0, "maximum warm-up")


def _trace(
    seconds: float, level: Callable[[FloatArray], FloatArray], seed: int
) -> tuple[npt.NDArray[np.int64], FloatArray]:
    """In-flight samples at 4 Hz: Poisson counts around `level(t)`."""
    rng = np.random.default_rng(seed)
    t = np.arange(0.0, seconds, 0.25)
    return (t * S).astype(np.int64), rng.poisson(level(t)).astype(np.float64)


def test_open_loop_settles_after_the_ramp() -> None:
    # In flight climbs from 10 to 60 over the first 5 s (one lifetime), then holds with Poisson
    # noise: the first level 4-s window starts near the end of the ramp.
    t_ns, y = _trace(30.0, lambda t: np.minimum(10 + 10 * t, 60.0), seed=1)
    got = open_loop_measure_start(
        t_ns, y, change_ns=0, now_ns=30 * S, window_ns=4 * S, max_warmup_ns=MAX
    )
    assert got is not None
    assert got.reason == "in flight stopped trending"
    assert 3.0 <= got.warmup_s <= 6.5, got.warmup_s
    # Before a whole window has elapsed after the ramp, there is no answer yet.
    early = open_loop_measure_start(
        t_ns[t_ns < 5 * S], y[t_ns < 5 * S], change_ns=0, now_ns=5 * S, window_ns=4 * S,
        max_warmup_ns=MAX,
    )  # fmt: skip
    assert early is None


def test_open_loop_overload_never_settles() -> None:
    # The server falls behind: the queue grows by 5 requests a second throughout. Over 8-s
    # windows (about two lifetimes) the trend stands out of the Poisson noise at every level
    # (checked on 200 seeds: none settles within 40 s).
    t_ns, y = _trace(40.0, lambda t: 10 + 5 * t, seed=2)

    def at(now_ns: int) -> SteadyStart | None:
        return open_loop_measure_start(
            t_ns, y, change_ns=0, now_ns=now_ns, window_ns=8 * S, max_warmup_ns=60 * S
        )

    assert at(40 * S) is None
    got = at(60 * S)
    assert got is not None and got.reason == "maximum warm-up"
    assert got.measure_start_ns == 60 * S


def test_open_loop_flat_from_the_start() -> None:
    t_ns, y = _trace(10.0, lambda t: np.full_like(t, 40.0), seed=3)
    got = open_loop_measure_start(
        t_ns + 100 * S, y, change_ns=100 * S, now_ns=110 * S, window_ns=3 * S, max_warmup_ns=MAX
    )
    assert got is not None and got.warmup_s <= 1.0


def _steady_step(count: int, ttft_spread: float) -> StepResult:
    rng = np.random.default_rng(count)
    records = []
    for i in range(count):
        sent = i * 20.0
        ttft = 200.0 + ttft_spread * rng.random()
        stamps = [sent + ttft + 20.0 * k for k in range(16)]
        records.append(rec(sent_ms=sent, end_ms=stamps[-1], tokens_ms=stamps))
    end_ms = count * 20.0
    spec = StepSpec(
        0,
        "concurrency",
        8,
        records[0].sent_ns,
        records[0].sent_ns,
        records[0].sent_ns + round(end_ms * 1e6),
    )
    return aggregate_step(spec, records, Sla())


def test_precision_grows_with_samples() -> None:
    few = step_precision(_steady_step(30, 50.0), 0.05)
    assert few.ttft_p95 == math.inf  # n = 30: P95's interval is open above
    assert not few.precise
    assert few.text() == "±inf"
    many = step_precision(_steady_step(3000, 50.0), 0.05)
    assert many.ttft_p95 is not None and many.ttft_p95 < 0.05
    assert many.tpot_p95 is not None and many.output_tokens_per_s is not None
    assert many.precise, many
    assert many.text().startswith("±") and many.text().endswith(" %")
    strict = step_precision(_steady_step(3000, 50.0), 0.0005)
    assert not strict.precise
    with pytest.raises(ValueError, match="target_precision"):
        step_precision(_steady_step(10, 1.0), 0.0)
