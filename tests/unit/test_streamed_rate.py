"""The live tok/s from the engine's running token count (issue 31)."""

from __future__ import annotations

import pytest

from gputui.metrics.streamed_rate import StreamedRate

S = 1_000_000_000


def test_a_steady_stream_reads_its_rate_over_the_window() -> None:
    live = StreamedRate(30.0)
    assert live.rate(0) is None
    for k in range(0, 61):  # 626 tokens/s, a sample a second
        live.add(k * S, 626 * k)
    assert live.rate(60 * S) == pytest.approx(626.0)
    # half a second later, no new sample yet: the last half second counts as nothing arrived
    assert live.rate(60 * S + S // 2) == pytest.approx(626.0 * 29.5 / 30)


def test_the_window_start_is_interpolated_and_a_young_run_uses_its_age() -> None:
    live = StreamedRate(10.0)
    live.add(0, 0)
    live.add(4 * S, 400)
    assert live.rate(4 * S) == pytest.approx(100.0)  # younger than the window
    live.add(12 * S, 2000)  # 200/s from 4 s on: at 2 s the count was 200
    assert live.rate(12 * S) == pytest.approx((2000 - 200) / 10)


def test_a_count_that_falls_starts_again() -> None:
    live = StreamedRate(10.0)
    live.add(0, 5000)
    live.add(S, 5100)
    live.add(2 * S, 10)
    assert live.rate(2 * S) is None
    live.add(3 * S, 60)
    assert live.rate(3 * S) == pytest.approx(50.0)
