"""Cost per million output tokens, servers needed, and reading a sweep at one throughput."""

from __future__ import annotations

import math

import pytest

from gputui.metrics.cost import (
    AtThroughput,
    cost_per_million_output_tokens,
    demand_output_tokens_per_s,
    interpolate_at_throughput,
    servers_needed,
)


def test_cost_examples_from_the_domain() -> None:
    # 4 / (80 x 3600) x 1e6 = 13.888...; 7 / (160 x 3600) x 1e6 = 12.152...
    assert cost_per_million_output_tokens(4.0, 80.0) == pytest.approx(13.8889, abs=1e-4)
    assert round(cost_per_million_output_tokens(4.0, 80.0), 1) == 13.9
    assert round(cost_per_million_output_tokens(7.0, 160.0), 1) == 12.2
    assert cost_per_million_output_tokens(0.0, 80.0) == 0.0


@pytest.mark.parametrize(
    ("price", "tokens_per_s", "match"),
    [(4.0, 0.0, "output_tokens_per_s"), (4.0, -1.0, "output_tokens_per_s"), (-1.0, 80.0, "price")],
)
def test_cost_rejects_meaningless_inputs(price: float, tokens_per_s: float, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        cost_per_million_output_tokens(price, tokens_per_s)


def test_demand_example_from_the_domain() -> None:
    assert demand_output_tokens_per_s(90, 240) == 360.0


@pytest.mark.parametrize(
    ("per_server", "headroom", "expected"),
    [
        (468.0, 0.3, 1),  # 360 x 1.3 = 468 exactly (468.00000000000006 in floats): one server
        (467.0, 0.3, 2),
        (160.0, 0.3, 3),  # 468 / 160 = 2.925
        (180.0, 0.0, 2),  # 360 / 180 = 2 exactly
        (80.0, 0.3, 6),  # 468 / 80 = 5.85
    ],
)
def test_servers_needed(per_server: float, headroom: float, expected: int) -> None:
    assert servers_needed(90, 240, per_server, headroom=headroom) == expected


def test_servers_needed_edges() -> None:
    assert servers_needed(0, 240, 100.0) == 0
    with pytest.raises(ValueError, match="qualified_tokens_per_s"):
        servers_needed(90, 240, 0.0)
    with pytest.raises(ValueError, match="headroom"):
        servers_needed(90, 240, 100.0, headroom=-0.1)


LEVELS = [1.0, 2.0, 4.0, 8.0, 16.0]
TOKENS = [100.0, 200.0, 400.0, 700.0, 800.0]
TTFT = [0.2, 0.25, 0.3, 0.5, 0.9]


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        (550.0, AtThroughput(550.0, 6.0, 0.4)),  # halfway from 400 (level 4) to 700 (level 8)
        (100.0, AtThroughput(100.0, 1.0, 0.2)),  # exactly the first step
        (800.0, AtThroughput(800.0, 16.0, 0.9)),  # exactly the peak
        (150.0, AtThroughput(150.0, 1.5, 0.225)),
    ],
)
def test_interpolate_linear_in_throughput(target: float, expected: AtThroughput) -> None:
    got = interpolate_at_throughput(LEVELS, TOKENS, TTFT, target)
    assert got is not None
    assert got.output_tokens_per_s == expected.output_tokens_per_s
    assert got.level == pytest.approx(expected.level)
    assert got.value == pytest.approx(expected.value)


@pytest.mark.parametrize("target", [800.1, 5000.0, 99.0, math.nan])
def test_out_of_reach_or_below_the_sweep_is_none(target: float) -> None:
    assert interpolate_at_throughput(LEVELS, TOKENS, TTFT, target) is None


def test_only_the_rising_part_of_the_curve_is_used() -> None:
    # Peak 800 at 8, then 600 at 16: 700 tok/s is read at 4 -> 8 (t = 0.75), not at 8 -> 16.
    got = interpolate_at_throughput(LEVELS, [100, 200, 400, 800, 600], [1, 2, 3, 4, 9], 700.0)
    assert got is not None
    assert got.level == pytest.approx(7.0)
    assert got.value == pytest.approx(3.75)


def test_first_crossing_wins_over_a_noisy_dip() -> None:
    # 100, 300, 250, 400: 280 is first reached between levels 1 and 2 (t = 0.9).
    got = interpolate_at_throughput([1, 2, 4, 8], [100, 300, 250, 400], [1, 2, 3, 4], 280.0)
    assert got is not None
    assert got.level == pytest.approx(1.9)
    assert got.value == pytest.approx(1.9)


def test_missing_values_and_duplicate_levels() -> None:
    got = interpolate_at_throughput(LEVELS, TOKENS, [0.2, 0.25, 0.3, None, 0.9], 550.0)
    assert got is not None
    assert (got.level, got.value) == (6.0, None)
    # level 4 twice (380 and 420 tok/s, TTFT 0.28 and 0.32) averages to 400 tok/s, 0.3 s
    got = interpolate_at_throughput(
        [1, 2, 4, 4, 8], [100, 200, 380, 420, 700], [0.2, 0.25, 0.28, 0.32, 0.5], 550.0
    )
    assert got is not None
    assert got.level == pytest.approx(6.0)
    assert got.value == pytest.approx(0.4)
    assert interpolate_at_throughput([], [], [], 1.0) is None
    with pytest.raises(ValueError, match="same length"):
        interpolate_at_throughput([1], [1, 2], [1], 1.0)
