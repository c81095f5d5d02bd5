"""Distribution summaries (mean and P50/P90/P95/P99) of latency samples in seconds.

Contract: percentiles use numpy's "linear" method (the default of `np.percentile`, and what vLLM's
`bench serve` and GuideLLM report), so our numbers can be checked against numpy. NaN marks an
undefined sample (e.g. TPOT of a 1-token output) and is excluded; `n` counts the samples a summary
rests on. The percentiles are read from a partial sort (`np.partition`) instead of `np.percentile`,
which is about a third faster on the millions of ITL samples a long step produces and gives the same
numbers. With `ci=True` the same partial sort also places the order statistics of the 95 %
intervals of P50, P95 and P99 (`metrics.confidence`), as `p50_ci`, `p95_ci`, `p99_ci`: [lo, hi]
with None for an open end; they stay None (not computed) otherwise, so the 4 Hz live frames do not
pay for them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final

import numpy as np
import numpy.typing as npt

from gputui.metrics.confidence import Interval, interval_from_ranks, quantile_ranks

FloatArray = npt.NDArray[np.float64]

#: The quantiles every summary reports, as fractions (numpy divides percent by 100 the same way).
_QUANTILES: Final = np.array([50.0, 90.0, 95.0, 99.0]) / 100.0
#: The quantiles that get a confidence interval with `ci=True`.
CI_QUANTILES: Final = (0.5, 0.95, 0.99)


@dataclass(frozen=True, slots=True)
class Summary:
    """Mean and percentiles of one metric, in seconds; all None when no sample exists."""

    mean: float | None
    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None
    n: int
    """Number of samples behind the figures."""
    p50_ci: Interval | None = None
    """95 % interval of P50 ([lo, hi], None for an open end); None when not computed."""
    p95_ci: Interval | None = None
    p99_ci: Interval | None = None


EMPTY_SUMMARY: Final = Summary(mean=None, p50=None, p90=None, p95=None, p99=None, n=0)


def _indices(n: int) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp], FloatArray]:
    """Lower and upper order-statistic indices and weights, as in numpy's linear method."""
    virtual = (n - 1) * _QUANTILES
    lower = np.floor(virtual)
    upper = np.minimum(lower + 1, n - 1)
    return lower.astype(np.intp), upper.astype(np.intp), virtual - lower


def _from_ordered(ordered: FloatArray, n: int, mean: float) -> Summary:
    """Build a Summary from an array whose needed order statistics sit at their sorted positions."""
    lower, upper, gamma = _indices(n)
    a = ordered[lower]
    b = ordered[upper]
    diff = b - a
    # Same two-sided lerp as numpy's `_lerp`, so results match `np.percentile` bit for bit.
    values = np.where(gamma >= 0.5, b - diff * (1.0 - gamma), a + diff * gamma)
    p50, p90, p95, p99 = (float(v) for v in values)
    return Summary(mean=mean, p50=p50, p90=p90, p95=p95, p99=p99, n=n)


def summarize(values: npt.ArrayLike, *, ci: bool = False) -> Summary:
    """Summarize samples in seconds; NaNs are excluded and an empty input gives EMPTY_SUMMARY.

    `ci=True` adds the 95 % intervals of P50, P95 and P99 (for step aggregates, off the engine).
    """
    arr = np.asarray(values, dtype=np.float64).ravel()
    nan = np.isnan(arr)
    if nan.any():
        arr = arr[~nan]
    n = int(arr.size)
    if n == 0:
        return EMPTY_SUMMARY
    lower, upper, _ = _indices(n)
    parts = [lower, upper]
    ranks = [quantile_ranks(n, q) for q in CI_QUANTILES] if ci else []
    # Ranks are 1-based; 0 and n + 1 are open ends and need no order statistic.
    parts += [np.array([r - 1 for r in pair if 1 <= r <= n], dtype=np.intp) for pair in ranks]
    kth = np.unique(np.concatenate(parts))
    ordered = np.partition(arr, kth)
    summary = _from_ordered(ordered, n, float(arr.mean()))
    if not ci:
        return summary
    p50_ci, p95_ci, p99_ci = (interval_from_ranks(ordered, n, pair) for pair in ranks)
    return replace(summary, p50_ci=p50_ci, p95_ci=p95_ci, p99_ci=p99_ci)


def summarize_sorted(sorted_values: FloatArray, *, ci: bool = False) -> Summary:
    """Summarize samples already sorted ascending and NaN-free (O(1) percentiles, O(n) mean).

    `ci=True` adds the intervals of P50, P95 and P99: O(1) reads too, once the ranks are known.
    """
    n = int(sorted_values.size)
    if n == 0:
        return EMPTY_SUMMARY
    summary = _from_ordered(sorted_values, n, float(sorted_values.mean()))
    if not ci:
        return summary
    p50_ci, p95_ci, p99_ci = (
        interval_from_ranks(sorted_values, n, quantile_ranks(n, q)) for q in CI_QUANTILES
    )
    return replace(summary, p50_ci=p50_ci, p95_ci=p95_ci, p99_ci=p99_ci)
