"""The operator's load keys (`frontends.live_levels`): ×f then ÷f comes back where it left."""

from __future__ import annotations

import pytest

from gputui.frontends.live_levels import FACTORS, scaled_level


@pytest.mark.parametrize("factor", FACTORS)
@pytest.mark.parametrize("rate", [10.53, 0.07, 1.234, 7.77, 42.125, 999.999])
def test_a_rate_scaled_up_then_down_keeps_its_label(rate: float, factor: float) -> None:
    up = scaled_level("rate", rate, factor)
    assert scaled_level("rate", up, 1 / factor) == rate
    assert f"{scaled_level('rate', up, 1 / factor):g}" == f"{rate:g}"


def test_x4_then_div4_keeps_10_53() -> None:
    assert scaled_level("rate", 10.53, 4.0) == 42.12
    assert f"{scaled_level('rate', 42.12, 0.25):g}" == "10.53"


@pytest.mark.parametrize("factor", FACTORS)
def test_concurrency_moves_at_least_one_either_way_and_comes_back(factor: float) -> None:
    for level in range(1, 200):
        up = scaled_level("concurrency", float(level), factor)
        assert up >= level + 1
        assert scaled_level("concurrency", up, 1 / factor) == level
    assert scaled_level("concurrency", 2.0, 1 / 1.25) == 1.0  # round(1.6) = 2 would not move
    assert scaled_level("concurrency", 1.0, 0.25) == 1.0  # never under one
