"""95 % confidence intervals that are cheap enough to put on every step (docs/domain.md §8).

Contract:
- Quantiles: distribution-free order-statistic intervals. For n samples sorted ascending,
  x_(1) <= ... <= x_(n), with x_(0) = -inf and x_(n+1) = +inf, the interval [x_(l), x_(u)] covers
  the true q-quantile with probability P(l <= B <= u - 1), B ~ Binomial(n, q), exactly for a
  continuous distribution. `quantile_ranks` picks the shortest pair of finite ranks whose exact
  coverage is >= 95 % (the ranks sit around n*q +- 1.96*sqrt(n*q*(1-q))), widened if needed so the
  point estimate (numpy's linear percentile) lies inside. When no finite pair reaches 95 % (n too
  small for the quantile: n < 59 for P95, n < 299 for P99, n < 6 for P50), the interval is
  one-sided, with the open end (None) on the quantile's tail side: [x_(l), None) is then a 95 %
  lower bound. With even fewer samples both ends are open. An open end can never pass an SLA.
  Discreteness makes the exact coverage >= 95 %, sometimes well above it for small n (at n = 20
  the P95 lower bound covers 98.4 %: the next rank would cover only 92.4 %).
- Rates: batch means. The window is cut into k equal time slices; the slice rates are treated as
  independent samples of the rate and give a Student-t interval around their mean (which is the
  window's rate). Slices should be at least one request lifetime long (`batch_count`), or waves
  of completions make neighbouring slices correlated. The interval is never narrower than a
  Poisson count's (`counting_half_width`).
- Proportions (error rate, goodput share): the Wilson score interval, which stays inside [0, 1]
  and is sensible at 0 or n successes, unlike the normal (Wald) interval.

The samples behind a step are not perfectly independent (closed-loop waves; ITL gaps of one
request are correlated), so every interval here is a lower bound on the real uncertainty.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Final

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

Interval = tuple[float | None, float | None]
"""[lo, hi]; None marks an open end (-inf below, +inf above)."""
Bounds = tuple[float, float]
"""An interval with two finite ends (rates and proportions always have them)."""

CONFIDENCE: Final = 0.95
Z95: Final = 1.959963984540054
"""The standard normal's 97.5 % point (a two-sided 95 % interval)."""

#: Student-t 97.5 % points for 1..30 degrees of freedom.
_T975: Final = (
    12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281,
    2.2010, 2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860,
    2.0796, 2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423,
)  # fmt: skip

#: Default bounds on the number of batches a rate interval uses.
MIN_BATCHES: Final = 3
MAX_BATCHES: Final = 20


def t975(df: int) -> float:
    """Student-t 97.5 % point (the table to 30 df, a Cornish-Fisher expansion beyond)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    if df <= len(_T975):
        return _T975[df - 1]
    z = Z95
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


def _binomial_cdf_window(n: int, q: float) -> tuple[int, FloatArray]:
    """(k0, cdf) with cdf[i] = P(B <= k0 + i) over the window where B ~ Bin(n, q) has its mass.

    Outside the window (12 sd plus 5 ranks each side) the mass is below 1e-30: the CDF is 0 below
    it and 1 above it. The pmf comes from a log-space recurrence, so it costs O(sd), not O(n).
    """
    sd = math.sqrt(n * q * (1 - q))
    k0 = max(0, math.floor(n * q - 12 * sd) - 5)
    k1 = min(n, math.ceil(n * q + 12 * sd) + 5)
    log0 = (
        math.lgamma(n + 1)
        - math.lgamma(k0 + 1)
        - math.lgamma(n - k0 + 1)
        + k0 * math.log(q)
        + (n - k0) * math.log1p(-q)
    )
    k = np.arange(k0, k1, dtype=np.float64)
    steps = np.log((n - k) / (k + 1)) + math.log(q / (1 - q))
    log_pmf = np.concatenate(([log0], log0 + np.cumsum(steps)))
    return k0, np.minimum(np.cumsum(np.exp(log_pmf)), 1.0)


def _cdf_at(k0: int, cdf: FloatArray, k: npt.NDArray[np.int64] | int) -> FloatArray:
    """P(B <= k) for any k (0 left of the window, 1 right of it)."""
    idx = np.asarray(k, dtype=np.int64) - k0
    inside = np.clip(idx, 0, cdf.size - 1)
    return np.where(idx < 0, 0.0, np.where(idx >= cdf.size, 1.0, cdf[inside]))


def rank_coverage(n: int, q: float, lo_rank: int, hi_rank: int) -> float:
    """Exact coverage of [x_(lo_rank), x_(hi_rank)] (ranks 0 and n + 1 are the open ends)."""
    k0, cdf = _binomial_cdf_window(n, q)
    return float(_cdf_at(k0, cdf, hi_rank - 1) - _cdf_at(k0, cdf, lo_rank - 1))


@lru_cache(maxsize=4096)
def quantile_ranks(n: int, q: float) -> tuple[int, int]:
    """1-based ranks (l, u) of the 95 % interval for the q-quantile of n samples.

    Rank 0 stands for an open lower end and n + 1 for an open upper end (see the module contract).
    """
    if n < 1:
        raise ValueError(f"need at least one sample, got n={n}")
    if not 0 < q < 1:
        raise ValueError(f"q must lie strictly between 0 and 1, got {q}")
    k0, cdf = _binomial_cdf_window(n, q)
    point_lo = math.floor((n - 1) * q) + 1
    point_hi = min(point_lo + (1 if (n - 1) * q > point_lo - 1 else 0), n)
    if _cdf_at(k0, cdf, n - 1) - _cdf_at(k0, cdf, 0) >= CONFIDENCE:
        lo, hi = _shortest(n, q, k0, cdf)
        return min(lo, point_lo), max(hi, point_hi)
    if q >= 0.5:
        # [x_(l), +inf) covers P(B >= l); take the largest l that still covers 95 %.
        ls = np.arange(1, n + 1, dtype=np.int64)
        ok = 1.0 - _cdf_at(k0, cdf, ls - 1) >= CONFIDENCE
        return (int(ls[ok][-1]) if ok.any() else 0), n + 1
    # (-inf, x_(u)] covers P(B <= u - 1); take the smallest u that covers 95 %.
    us = np.arange(1, n + 1, dtype=np.int64)
    ok = _cdf_at(k0, cdf, us - 1) >= CONFIDENCE
    return 0, (int(us[ok][0]) if ok.any() else n + 1)


def _shortest(n: int, q: float, k0: int, cdf: FloatArray) -> tuple[int, int]:
    """The finite (l, u), 1 <= l < u <= n, of fewest ranks with coverage >= 95 %.

    The best coverage over l is monotone in the width u - l, so the width is bisected (starting
    near the normal approximation's 2 z sd); among the pairs of that width the best-covering one
    wins (the one nearer the middle on a tie).
    """
    guess = 2.0 * Z95 * math.sqrt(n * q * (1 - q))
    lo_w, hi_w = max(1, math.floor(guess) - 4), min(n - 1, math.ceil(guess) + 6)
    if _best_at_width(n, q, k0, cdf, lo_w)[1] >= CONFIDENCE:
        lo_w = 1
    if _best_at_width(n, q, k0, cdf, hi_w)[1] < CONFIDENCE:
        hi_w = n - 1
    while lo_w < hi_w:
        mid = (lo_w + hi_w) // 2
        if _best_at_width(n, q, k0, cdf, mid)[1] >= CONFIDENCE:
            hi_w = mid
        else:
            lo_w = mid + 1
    l_best, _ = _best_at_width(n, q, k0, cdf, lo_w)
    return l_best, l_best + lo_w


def _best_at_width(n: int, q: float, k0: int, cdf: FloatArray, width: int) -> tuple[int, float]:
    """The lower rank l whose [l, l + width] covers best, and that coverage.

    The best l lies within a few ranks of n*q - width/2 (the pmf is unimodal), so only the ranks
    near it are tried.
    """
    centre_l = round(n * q - width / 2)
    reach = 10 + width // 4
    first = max(1, k0 - width, centre_l - reach)
    last = min(n - width, k0 + cdf.size + 1, centre_l + reach)
    if last < first:
        first, last = 1, n - width
    ls = np.arange(first, last + 1, dtype=np.int64)
    cover = _cdf_at(k0, cdf, ls + width - 1) - _cdf_at(k0, cdf, ls - 1)
    centre = np.abs(ls + width / 2 - (n + 1) / 2)
    order = np.lexsort((centre, -cover))
    return int(ls[order[0]]), float(cover[order[0]])


def quantile_ci(sorted_values: npt.ArrayLike, q: float) -> Interval | None:
    """95 % interval for the q-quantile of samples already sorted ascending; None when empty."""
    arr = np.asarray(sorted_values, dtype=np.float64)
    n = int(arr.size)
    if n == 0:
        return None
    return interval_from_ranks(arr, n, quantile_ranks(n, q))


def interval_from_ranks(ordered: FloatArray, n: int, ranks: tuple[int, int]) -> Interval:
    """Read [x_(l), x_(u)] from an array whose order statistics at l and u are in place."""
    lo_rank, hi_rank = ranks
    lo = float(ordered[lo_rank - 1]) if lo_rank >= 1 else None
    hi = float(ordered[hi_rank - 1]) if hi_rank <= n else None
    return lo, hi


def min_n_two_sided(q: float) -> int:
    """Fewest samples for which the q-quantile's 95 % interval has two finite ends."""
    # The widest finite interval [x_(1), x_(n)] covers 1 - q^n - (1 - q)^n.
    n = 2
    while 1.0 - q**n - (1.0 - q) ** n < CONFIDENCE:
        n += 1
    return n


def wilson_ci(successes: int, trials: int) -> Bounds | None:
    """Wilson score 95 % interval for a proportion; None when there were no trials."""
    if trials <= 0:
        return None
    if not 0 <= successes <= trials:
        raise ValueError(f"need 0 <= successes <= trials, got {successes}/{trials}")
    z2 = Z95 * Z95
    p = successes / trials
    denom = 1.0 + z2 / trials
    centre = (p + z2 / (2 * trials)) / denom
    half = Z95 / denom * math.sqrt(p * (1 - p) / trials + z2 / (4 * trials * trials))
    lo = 0.0 if successes == 0 else max(0.0, centre - half)
    hi = 1.0 if successes == trials else min(1.0, centre + half)
    return lo, hi


def batch_count(
    duration_s: float,
    lifetime_s: float | None,
    *,
    min_batches: int = MIN_BATCHES,
    max_batches: int = MAX_BATCHES,
) -> int:
    """Batches of at least one request lifetime each, clamped to [min_batches, max_batches].

    Fewer than `min_batches` lifetimes in the window still gives `min_batches` slices: the
    interval is then wide and, the slices being correlated, still optimistic.
    """
    if lifetime_s is None or not lifetime_s > 0 or not duration_s > 0:
        return max_batches
    return int(min(max(math.floor(duration_s / lifetime_s), min_batches), max_batches))


def batch_means_ci(batch_rates: npt.ArrayLike, min_half_width: float = 0.0) -> Bounds | None:
    """Student-t 95 % interval for the mean of per-batch rates; None with fewer than 2 batches.

    `min_half_width` floors the half-width (see `counting_half_width`).
    """
    rates = np.asarray(batch_rates, dtype=np.float64)
    k = int(rates.size)
    if k < 2:
        return None
    mean = float(rates.mean())
    half = max(t975(k - 1) * float(rates.std(ddof=1)) / math.sqrt(k), min_half_width)
    return max(0.0, mean - half), mean + half


def counting_half_width(count: float, duration_s: float) -> float:
    """Half-width of a Poisson count's 95 % interval, as a rate: z sqrt(count) / duration.

    The floor of a rate interval: when requests run in lock-step waves, every slice can hold the
    same count (batch variance 0) while one wave on the window's edge still moves the total.
    """
    if not duration_s > 0 or count <= 0:
        return 0.0
    return Z95 * math.sqrt(count) / duration_s


def batch_rates(
    times_ns: IntArray,
    weights: FloatArray | None,
    lo_ns: int,
    hi_ns: int,
    batches: int,
) -> FloatArray:
    """Per-slice rates (weight per second) of events in [lo_ns, hi_ns) cut into equal slices.

    Their mean is exactly the window's rate: sum of weights / window length.
    """
    span = hi_ns - lo_ns
    if span <= 0 or batches < 1:
        return np.empty(0, dtype=np.float64)
    t = np.asarray(times_ns, dtype=np.int64)
    inside = (t >= lo_ns) & (t < hi_ns)
    slot = ((t[inside] - lo_ns) * batches) // span
    w = None if weights is None else np.asarray(weights, dtype=np.float64)[inside]
    totals = np.bincount(slot, weights=w, minlength=batches).astype(np.float64)
    return totals / (span * 1e-9 / batches)


def relative_half_width(value: float | None, interval: Interval | None) -> float | None:
    """(hi - lo) / 2 / |value|: the "±x %" of a figure; inf for an open end, None when unknown."""
    if value is None or interval is None:
        return None
    lo, hi = interval
    if lo is None or hi is None or value == 0:
        return math.inf
    return (hi - lo) / 2.0 / abs(value)


def difference_ci(
    a: float | None, a_ci: Interval | None, b: float | None, b_ci: Interval | None
) -> Bounds | None:
    """Approximate 95 % interval of b - a from the two estimates' own 95 % intervals.

    Each side combines the matching half-widths in quadrature (independent estimates, each
    roughly normal): the lower end uses b's lower and a's upper half-width, and vice versa, so
    the asymmetric order-statistic intervals keep their shape. None when either interval is
    unknown or open.
    """
    if a is None or b is None or a_ci is None or b_ci is None:
        return None
    (a_lo, a_hi), (b_lo, b_hi) = a_ci, b_ci
    if a_lo is None or a_hi is None or b_lo is None or b_hi is None:
        return None
    d = b - a
    below = math.hypot(b - b_lo, a_hi - a)
    above = math.hypot(b_hi - b, a - a_lo)
    return d - below, d + above


def significant(
    a: float | None, a_ci: Interval | None, b: float | None, b_ci: Interval | None
) -> bool | None:
    """Whether b differs from a beyond the uncertainty (0 outside `difference_ci`); None unknown."""
    diff = difference_ci(a, a_ci, b, b_ci)
    if diff is None:
        return None
    return not diff[0] <= 0.0 <= diff[1]
