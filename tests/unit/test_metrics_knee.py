"""Knee detection on synthetic sweep curves whose knee is known by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gputui.metrics.knee import find_knee, gain_per_doubling, knee_from_steps, kneedle_index
from tests.support.steps import make_step

DOUBLING = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0]


def saturating(cap: float, levels: list[float] = DOUBLING) -> list[float]:
    """y = min(100 x, cap): linear until the server saturates."""
    return [min(100.0 * x, cap) for x in levels]


def michaelis_menten(k: float, levels: list[float] = DOUBLING) -> list[float]:
    """y = 1000 x / (k + x): gain per doubling from x to 2x is exactly k / (k + 2x)."""
    return [1000.0 * x / (k + x) for x in levels]


def noisy(values: list[float], seed: int, amplitude: float = 0.03) -> list[float]:
    rng = np.random.default_rng(seed)
    factors = rng.uniform(1 - amplitude, 1 + amplitude, size=len(values))
    return [float(v * f) for v, f in zip(values, factors, strict=True)]


@pytest.mark.parametrize(
    ("lo", "hi", "y_lo", "y_hi", "expected"),
    [
        (32, 64, 1000, 1040, 0.04),  # one doubling: the plain ratio
        (1, 4, 100, 400, 1.0),  # x4 over two doublings = 100 % per doubling
        (12, 16, 1200, 1600, 1.0),  # linear growth is 100 % per doubling at any spacing
        (16, 32, 1000, 900, -0.1),
        (1, 2, 0, 0, 0.0),
    ],
)
def test_gain_per_doubling(lo: float, hi: float, y_lo: float, y_hi: float, expected: float) -> None:
    assert gain_per_doubling(lo, hi, y_lo, y_hi) == pytest.approx(expected)


def test_gain_from_zero_is_unbounded_and_levels_must_rise() -> None:
    assert gain_per_doubling(1, 2, 0, 5) == math.inf
    with pytest.raises(ValueError, match="level_lo < level_hi"):
        gain_per_doubling(4, 4, 1, 1)


def test_saturating_at_a_sweep_level() -> None:
    # 8 -> 16 grows 100 %; 16 -> 32 grows 0 %, and 0 % from 16 to 64: the knee is 16.
    result = find_knee(DOUBLING, saturating(1600))
    assert result.knee is not None
    assert (result.knee.level, result.knee.index) == (16, 4)
    assert result.knee.method == "gain_per_doubling"
    assert result.knee.mode == "concurrency"
    assert result.reason == (
        "throughput grew 0 % per doubling from 16 to 32 (grew 0 % per doubling from 16 to 64),"
        " below the 10 % threshold: the knee is 16"
    )


def test_saturating_between_sweep_levels_gives_the_first_saturated_level() -> None:
    # Saturation at 20: 16 -> 32 still grows 2000/1600 = 25 %; 32 -> 64 grows 0 %.
    result = find_knee(DOUBLING, saturating(2000))
    assert result.knee is not None
    assert result.knee.level == 32
    assert "the last step: no higher level confirms it" in result.reason


def test_example_reason_from_the_brief() -> None:
    # 16 -> 32: 1000/900 = 11.1 % (above); 32 -> 64: 1040/1000 = 4 % (below, last pair).
    result = find_knee([16, 32, 64], [900, 1000, 1040])
    assert result.knee is not None
    assert result.reason == (
        "throughput grew 4 % per doubling from 32 to 64, below the 10 % threshold"
        " (the last step: no higher level confirms it): the knee is 32"
    )


def test_michaelis_menten_knee_by_hand() -> None:
    # k = 2: gain x -> 2x = 2 / (2 + 2x): 8 -> 16 = 2/18 = 11.1 % (above 10 %),
    # 16 -> 32 = 2/34 = 5.88 % (below); 16 -> 64 = sqrt((64/66) / (16/18)) - 1 = 4.45 %.
    result = find_knee(DOUBLING, michaelis_menten(2.0))
    assert result.knee is not None
    assert result.knee.level == 16
    assert "grew 5.88 % per doubling from 16 to 32" in result.reason
    assert "grew 4.45 % per doubling from 16 to 64" in result.reason


def test_a_different_threshold_moves_the_knee() -> None:
    # With a 12 % threshold the 11.1 % gain from 8 to 16 is already too little (8 -> 32: 8.5 %).
    result = find_knee(DOUBLING, michaelis_menten(2.0), threshold=0.12)
    assert result.knee is not None
    assert result.knee.level == 8


def test_linear_curve_has_no_knee() -> None:
    result = find_knee(DOUBLING, [100.0 * x for x in DOUBLING])
    assert result.knee is None
    assert result.reason == (
        "throughput grew at least 10 % per doubling at every level up to 64,"
        " and Kneedle found no bend: no knee in this sweep"
    )


@pytest.mark.parametrize("seed", range(20))
def test_noise_keeps_the_knee_within_one_level(seed: int) -> None:
    # +-3 % moves a gain by at most ~6 points: 16 -> 32 stays below 10 % (0 + 6.2 %).
    sharp = find_knee(DOUBLING, noisy(saturating(1600), seed)).knee
    assert sharp is not None
    assert sharp.level == 16
    # Smooth curve: clean knee 16 (5.88 %); noise may move it to 8 or 32, never further.
    smooth = find_knee(DOUBLING, noisy(michaelis_menten(2.0), seed)).knee
    assert smooth is not None
    assert smooth.level in {8, 16, 32}


def test_a_single_noisy_dip_in_a_growing_trend_is_not_a_knee() -> None:
    # 4 -> 8 grows 5 % (a dip), but 4 -> 16 grows sqrt(1600/400) - 1 = 100 % per doubling.
    result = find_knee(DOUBLING, [100, 200, 400, 420, 1600, 3200, 6400])
    assert result.knee is None


def test_a_curve_that_peaks_then_falls() -> None:
    # 8 -> 16 grows 25 %, 16 -> 32 falls 30 %: the knee is the peak.
    peaked = find_knee(DOUBLING, [100, 200, 400, 800, 1000, 700, 500])
    assert peaked.knee is not None
    assert peaked.knee.level == 16
    assert "fell 30 % per doubling from 16 to 32" in peaked.reason
    # Slow growth before the peak at 32: 8 -> 16 = 5 %, 8 -> 32 = sqrt(900/800) - 1 = 6.07 %.
    early = find_knee(DOUBLING, [100, 200, 400, 800, 840, 900, 600])
    assert early.knee is not None
    assert early.knee.level == 8


def test_flat_curve_is_saturated_at_the_lowest_level() -> None:
    result = find_knee(DOUBLING[:5], [500.0] * 5)
    assert result.knee is not None
    assert result.knee.level == 1
    assert result.reason.endswith("(already saturated at the lowest level tested)")


@pytest.mark.parametrize(
    ("levels", "throughputs", "distinct"),
    [([1, 2], [100, 200], 2), ([4, 4, 8, 8], [1, 2, 3, 4], 2), ([], [], 0)],
)
def test_fewer_than_three_levels_has_no_knee(
    levels: list[float], throughputs: list[float], distinct: int
) -> None:
    result = find_knee(levels, throughputs)
    assert result.knee is None
    assert result.reason == f"need at least 3 load levels to find a knee, got {distinct}"


def test_duplicate_levels_are_averaged_and_index_points_at_the_first() -> None:
    levels = [1, 2, 2, 4, 8, 8, 16, 32]
    # averages: 1: 100, 2: 200, 4: 400, 8: 800, 16: 830, 32: 840
    # 8 -> 16: 3.75 %; 8 -> 32: sqrt(840/800) - 1 = 2.47 %: the knee is 8.
    result = find_knee(levels, [100, 150, 250, 400, 780, 820, 830, 840])
    assert result.knee is not None
    assert (result.knee.level, result.knee.index) == (8, 4)
    assert "grew 3.75 % per doubling from 8 to 16" in result.reason


def test_uneven_spacing_and_input_order() -> None:
    levels = [32.0, 1.0, 24.0, 2.0, 16.0, 4.0, 12.0, 8.0]
    # 12 -> 16 grows 100 % per doubling (linear); 16 -> 24 grows 0 %: the knee is 16.
    result = find_knee(levels, saturating(1600, levels))
    assert result.knee is not None
    assert (result.knee.level, result.knee.index) == (16, 4)


def test_unusable_points_are_dropped() -> None:
    levels = [0, 1, 2, 4, 8, 16, 32, 64]
    throughputs = [5, 100, 200, math.nan, 800, 1600, 1600, 1600]
    result = find_knee(levels, throughputs)
    assert result.knee is not None
    assert (result.knee.level, result.knee.index) == (16, 5)


def test_no_throughput_at_all() -> None:
    assert find_knee(DOUBLING, [0.0] * 7).reason == "no throughput was measured at any level"


def test_kneedle_finds_a_bend_the_gain_rule_misses() -> None:
    levels = [1, 2, 4, 8, 16, 32, 64, 128, 256]
    # Doubles up to 16, then grows 12, 11, 10.5, 10.2 % per doubling: never below 10 %.
    # Normalised (y - 1) / 23.22 at 16 is 0.646 against x_n = 0.5: the difference curve peaks at
    # 0.146 and falls to 0 at 256, below 0.146 - 1/8 (sensitivity 1, mean x_n spacing 1/8).
    throughputs = [1, 2, 4, 8, 16, 17.92, 19.89, 21.98, 24.22]
    result = find_knee(levels, throughputs)
    assert result.knee is not None
    assert (result.knee.level, result.knee.method, result.knee.index) == (16, "kneedle", 4)
    assert "Kneedle on log2 load" in result.reason
    # A sensitivity above the 0.146 bulge / 0.125 spacing = 1.17 rejects the bend.
    assert kneedle_index(levels, throughputs, 1.2) is None


def test_kneedle_needs_a_rising_curve() -> None:
    assert kneedle_index([1, 2, 4], [5, 5, 5], 1.0) is None
    assert kneedle_index([1, 2], [1, 2], 1.0) is None


def test_knee_from_steps_uses_complete_steps_of_one_mode() -> None:
    curve = zip(DOUBLING, saturating(1600), strict=True)
    steps = [make_step(x, output_tokens_per_s=y) for x, y in curve]
    steps.insert(2, make_step(3, output_tokens_per_s=50.0, incomplete=True))
    steps.insert(0, make_step(2.5, output_tokens_per_s=1.0, mode="rate"))
    result = knee_from_steps(steps, mode="concurrency")
    assert result.knee is not None
    assert result.knee.level == 16
    assert steps[result.knee.index].level == 16
    assert knee_from_steps(steps, mode="rate").knee is None


def test_mismatched_lengths_and_bad_threshold_are_errors() -> None:
    with pytest.raises(ValueError, match="3 levels but 2 throughputs"):
        find_knee([1, 2, 4], [1, 2])
    with pytest.raises(ValueError, match="threshold"):
        find_knee([1, 2, 4], [1, 2, 3], threshold=0)


def test_bisection_levels_do_not_fake_a_knee() -> None:
    # An automatic sweep: the ramp, then bisection points 4 % apart with a 2 % wobble.
    levels = [1, 2, 4, 8, 16, 32, 64, 48, 56, 52, 50, 51]
    tok_s = [86, 165, 307, 545, 843, 1260, 1530, 1494, 1470, 1480, 1465, 1494]
    result = find_knee(levels, tok_s, mode="concurrency")
    assert result.knee is not None
    assert result.knee.level == 48  # 32 -> 48 gains 34 % per doubling, 48 -> 64 only 6 %
    assert "fell" not in result.reason
