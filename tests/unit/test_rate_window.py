"""A closed-loop step's rates are read over whole request cycles: the same at any step length.

The loop below is periodic, as fixed-length requests in a closed loop are: 4 users send together
every second, each request waits 0.5 s for its first token and then streams 10 tokens in the
second half-second. The tokens arrive at 80 tok/s half the time and not at all the other half:
40 tok/s in the mean. A window of 2.4 cycles from the first wave's end reads 80 tokens in 2.4 s
(33.3 tok/s); of 7 cycles, 40. Read over whole cycles, every length reads 40.
"""

from __future__ import annotations

import pytest

from gputui.engine.records import RequestRecord
from gputui.metrics.rate_window import whole_cycles_end
from gputui.metrics.sla import Sla
from gputui.metrics.step import StepSpec, aggregate_step
from tests.support.records import ns, rec

USERS, CYCLES = 4, 12


def periodic_loop() -> list[RequestRecord]:
    """4 users x 12 one-second cycles from t=0 (ms), tokens at 500, 550 ... 950 of each cycle."""
    return [
        rec(
            sent_ms=1000.0 * k,
            end_ms=1000.0 * (k + 1),
            tokens_ms=[1000.0 * k + 500 + 50 * j for j in range(10)],
            requested=10,
        )
        for k in range(CYCLES)
        for _ in range(USERS)
    ]


def step(seconds: float, mode: str = "concurrency") -> StepSpec:
    """Measured from 1 s (the first wave's end) for `seconds`."""
    return StepSpec(0, mode, USERS, ns(0), ns(1000), ns(1000 + 1000 * seconds))  # type: ignore[arg-type]


@pytest.mark.parametrize("seconds", [2.4, 2.6, 3.0, 4.5, 7.0, 9.9])
def test_a_closed_loop_step_reads_the_same_tok_s_at_any_length(seconds: float) -> None:
    result = aggregate_step(step(seconds), periodic_loop(), Sla(None, None, None))
    assert result.output_tokens_per_s == pytest.approx(40.0)
    assert result.goodput_output_tokens_per_s == pytest.approx(40.0)
    assert result.requests_per_s == pytest.approx(4.0)
    assert result.duration_s == pytest.approx(seconds)  # the window itself stays as measured


def test_an_open_loop_step_reads_its_whole_window() -> None:
    result = aggregate_step(step(2.4, "rate"), periodic_loop(), Sla(None, None, None))
    assert result.output_tokens_per_s == pytest.approx(80 / 2.4)


def test_the_rates_window_ends_at_the_most_whole_cycles() -> None:
    assert whole_cycles_end(True, 1000, 3400, 1000.0) == 3000
    assert whole_cycles_end(True, 1000, 3000, 1000.0) == 3000
    assert whole_cycles_end(True, 1000, 1900, 1000.0) == 1900  # under one cycle: as it is
    assert whole_cycles_end(False, 1000, 3400, 1000.0) == 3400  # open loop
    assert whole_cycles_end(True, 1000, 3400, 0.0) == 3400  # no cycle known
    assert whole_cycles_end(True, 1000, -1, 1000.0) == -1  # an open window
