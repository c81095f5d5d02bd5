"""Order-statistic, Wilson and batch-means intervals: coverage on known distributions, hand values.

Coverage: 1,000 seeded replications per (distribution, n), vectorised (one sort of a 1,000 x n
matrix). Where the 95 % interval has two finite ends its coverage must lie in 93-97 %. Where n is
too small for a two-sided interval (P95 and P99 at n = 20, P99 at n = 100) the interval is a
one-sided lower bound [x_(l), +inf): there the test checks that the upper end is open and that the
observed coverage matches the bound's exact binomial coverage (98.4 %, 98.3 %, 98.2 %: the next
rank up would cover under 95 %) within three standard errors; n = 299 and 1,000 then show P99's
two-sided interval in the 93-97 % band.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from gputui.metrics.confidence import (
    batch_count,
    batch_means_ci,
    batch_rates,
    counting_half_width,
    min_n_two_sided,
    quantile_ci,
    quantile_ranks,
    rank_coverage,
    relative_half_width,
    t975,
    wilson_ci,
)

REPS = 1000
#: Standard normal quantiles (for the lognormal's true quantiles).
_Z = {0.5: 0.0, 0.95: 1.6448536269514722, 0.99: 2.3263478740408408}


def _true_quantile(dist: str, q: float) -> float:
    return math.exp(_Z[q]) if dist == "lognormal" else -math.log1p(-q)


def _samples(dist: str, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dist == "lognormal":
        return np.sort(rng.lognormal(0.0, 1.0, size=(REPS, n)), axis=1)
    return np.sort(rng.exponential(1.0, size=(REPS, n)), axis=1)


def _coverage(sorted_rows: np.ndarray, q: float, truth: float) -> tuple[float, bool]:
    n = sorted_rows.shape[1]
    lo_rank, hi_rank = quantile_ranks(n, q)
    lo = sorted_rows[:, lo_rank - 1] if lo_rank >= 1 else np.full(REPS, -np.inf)
    hi = sorted_rows[:, hi_rank - 1] if hi_rank <= n else np.full(REPS, np.inf)
    # The vectorised reading agrees with the public one-row function.
    row = quantile_ci(sorted_rows[0], q)
    assert row is not None
    assert row[0] == (None if lo_rank < 1 else lo[0])
    assert row[1] == (None if hi_rank > n else hi[0])
    return float(np.mean((lo <= truth) & (truth <= hi))), hi_rank <= n and lo_rank >= 1


@pytest.mark.parametrize("dist", ["lognormal", "exponential"])
@pytest.mark.parametrize("n", [20, 100, 299, 1000])
def test_coverage_on_known_distributions(dist: str, n: int) -> None:
    rows = _samples(dist, n, seed=1000 + n + (7 if dist == "lognormal" else 0))
    for q in (0.5, 0.95, 0.99):
        covered, two_sided = _coverage(rows, q, _true_quantile(dist, q))
        lo_rank, hi_rank = quantile_ranks(n, q)
        exact = rank_coverage(n, q, lo_rank, hi_rank)
        assert exact >= 0.95
        if two_sided:
            assert 0.93 <= covered <= 0.97, (dist, n, q, covered, exact)
        else:
            assert (n, q) in {(20, 0.95), (20, 0.99), (100, 0.99)}
            assert hi_rank == n + 1  # an open upper end: a lower bound only
            se = math.sqrt(exact * (1 - exact) / REPS)
            assert abs(covered - exact) <= 3 * se, (dist, n, q, covered, exact)
            # One rank higher would be under 95 %: the bound is as tight as it can honestly be.
            assert rank_coverage(n, q, lo_rank + 1, n + 1) < 0.95


def test_two_sided_sample_sizes() -> None:
    assert min_n_two_sided(0.5) == 6
    assert min_n_two_sided(0.95) == 59
    assert min_n_two_sided(0.99) == 299
    assert quantile_ranks(58, 0.95)[1] == 59  # open
    assert quantile_ranks(59, 0.95)[1] <= 59  # finite
    assert quantile_ranks(298, 0.99)[1] == 299
    assert quantile_ranks(299, 0.99)[1] <= 299


def test_ranks_at_small_n_are_exact_and_shortest() -> None:
    # n = 20, P50: Bin(20, 0.5) puts 95.86 % on 6..14, so [x_(6), x_(15)]; 7..13 has only 88.47 %.
    assert quantile_ranks(20, 0.5) == (6, 15)
    assert rank_coverage(20, 0.5, 6, 15) == pytest.approx(0.958610, abs=1e-6)
    assert rank_coverage(20, 0.5, 7, 14) == pytest.approx(0.884682, abs=1e-6)
    # n = 20, P95: [x_(17), +inf) covers P(B >= 17) = 98.41 %; x_(18) would cover 92.45 %.
    assert quantile_ranks(20, 0.95) == (17, 21)
    assert rank_coverage(20, 0.95, 18, 21) == pytest.approx(0.924516, abs=1e-6)
    # One sample: P95 >= it with probability 95 %; the median has no 95 % bound at all.
    assert quantile_ranks(1, 0.95) == (1, 2)
    assert quantile_ranks(1, 0.5) == (0, 2)
    assert quantile_ci([0.3], 0.5) == (None, None)
    assert quantile_ci([], 0.5) is None


def test_interval_contains_the_point_estimate() -> None:
    rng = np.random.default_rng(3)
    for n in (6, 7, 10, 59, 60, 150, 299, 300, 2000):
        values = np.sort(rng.exponential(size=n))
        for q in (0.5, 0.9, 0.95, 0.99):
            lo, hi = quantile_ci(values, q) or (None, None)
            point = float(np.percentile(values, q * 100))
            assert lo is None or lo <= point
            assert hi is None or point <= hi


def test_large_n_is_cheap_and_matches_the_normal_approximation() -> None:
    n, q = 2_000_000, 0.95
    lo, hi = quantile_ranks(n, q)
    half = 1.959964 * math.sqrt(n * q * (1 - q))
    assert abs((hi - lo) / 2 - half) <= 2
    assert abs((lo + hi) / 2 - n * q) <= 2
    assert 0.95 <= rank_coverage(n, q, lo, hi) < 0.951


def test_wilson_against_hand_values() -> None:
    # 3 failures in 100: p = 0.03, centre = (0.03 + 1.92/100) / 1.0384, half-width 0.03712.
    lo, hi = wilson_ci(3, 100) or (0.0, 0.0)
    assert lo == pytest.approx(0.010255, abs=1e-6)
    assert hi == pytest.approx(0.084519, abs=1e-6)
    # None in 100: [0, z^2 / (n + z^2)] = [0, 3.8415 / 103.8415].
    z2 = 1.959963984540054**2
    assert wilson_ci(0, 100) == (0.0, z2 / (100 + z2))
    lo, hi = wilson_ci(10, 10) or (0.0, 0.0)
    assert lo == pytest.approx(1 - z2 / (10 + z2), abs=1e-12)
    assert hi == 1.0
    # 5 of 10: symmetric about 0.5, 0.2366-0.7634.
    lo, hi = wilson_ci(5, 10) or (0.0, 0.0)
    assert lo == pytest.approx(0.236593, abs=1e-6)
    assert hi == pytest.approx(0.763407, abs=1e-6)
    assert wilson_ci(0, 0) is None
    with pytest.raises(ValueError, match="successes"):
        wilson_ci(3, 2)


def test_batch_means_against_hand_values() -> None:
    # Rates 10, 12, 14: mean 12, s = 2, se = 2 / sqrt(3), t(2) = 4.3027 -> 12 +- 4.9683.
    lo, hi = batch_means_ci([10.0, 12.0, 14.0]) or (0.0, 0.0)
    assert lo == pytest.approx(12 - 4.3027 * 2 / math.sqrt(3), abs=1e-9)
    assert hi == pytest.approx(12 + 4.3027 * 2 / math.sqrt(3), abs=1e-9)
    assert batch_means_ci([5.0]) is None
    assert batch_means_ci([3.0, 3.0, 3.0, 3.0]) == (3.0, 3.0)
    # Lock-step waves: equal slices, yet a Poisson count of 64 in 10 s is +-1.57/s.
    floor = counting_half_width(64, 10.0)
    assert floor == pytest.approx(1.959964 * 8 / 10, abs=1e-6)
    lo, hi = batch_means_ci([6.4] * 4, floor) or (0.0, 0.0)
    assert lo == pytest.approx(6.4 - floor)
    assert hi == pytest.approx(6.4 + floor)
    # Never below zero: a rate cannot be negative.
    assert batch_means_ci([0.0, 10.0])[0] == 0.0  # type: ignore[index]


def test_batch_rates_slices_the_window_and_keeps_the_mean() -> None:
    # Window [0, 4 s) in 4 one-second slices; events at 0.5, 1.5, 1.7, 3.2 s and one outside.
    times = np.array([0.5e9, 1.5e9, 1.7e9, 3.2e9, 4.0e9], dtype=np.int64)
    weights = np.array([1.0, 2.0, 3.0, 4.0, 100.0])
    rates = batch_rates(times, weights, 0, 4_000_000_000, 4)
    assert rates.tolist() == [1.0, 5.0, 0.0, 4.0]
    assert float(rates.mean()) == pytest.approx(10.0 / 4.0)
    counts = batch_rates(times, None, 0, 4_000_000_000, 2)
    assert counts.tolist() == [1.5, 0.5]  # 3 events in [0, 2 s), 1 in [2 s, 4 s): per second
    assert batch_rates(times, None, 5, 5, 4).size == 0


def test_batch_count_uses_one_lifetime_per_batch() -> None:
    assert batch_count(60.0, 2.0) == 20  # 30 lifetimes, capped at 20
    assert batch_count(60.0, 6.0) == 10
    assert batch_count(15.0, 6.8) == 3  # fewer than 3 lifetimes: still 3, and wide
    assert batch_count(15.0, None) == 20


def test_t_quantiles() -> None:
    assert t975(1) == pytest.approx(12.7062)
    assert t975(19) == pytest.approx(2.0930)
    assert t975(40) == pytest.approx(2.0211, abs=2e-4)
    assert t975(1000) == pytest.approx(1.9623, abs=2e-4)


def test_relative_half_width() -> None:
    assert relative_half_width(100.0, (97.0, 103.0)) == pytest.approx(0.03)
    assert relative_half_width(1.0, (0.5, None)) == math.inf
    assert relative_half_width(None, (1.0, 2.0)) is None
    assert relative_half_width(1.0, None) is None
