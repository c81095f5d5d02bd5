"""Summaries: numpy's linear percentiles, NaN handling, the empty case."""

from __future__ import annotations

import numpy as np
import pytest

from gputui.metrics.summary import EMPTY_SUMMARY, Summary, summarize, summarize_sorted


def test_hand_computed_percentiles() -> None:
    # Sorted [1, 2, 3, 4]: P50 at index 1.5 -> 2.5; P90 at 2.7 -> 3.7; P95 at 2.85; P99 at 2.97.
    s = summarize(np.array([4.0, 1.0, 3.0, 2.0]))
    assert (s.mean, s.p50, s.n) == (2.5, 2.5, 4)
    assert [s.p90, s.p95, s.p99] == pytest.approx([3.7, 3.85, 3.97])


@pytest.mark.parametrize("n", [1, 2, 3, 7, 100, 1001])
def test_matches_numpy_exactly(n: int) -> None:
    values = np.random.default_rng(n).lognormal(-3.0, 1.0, n)
    s = summarize(values)
    expected = np.percentile(values, [50, 90, 95, 99], method="linear")
    assert [s.p50, s.p90, s.p95, s.p99] == expected.tolist()
    assert s.mean == pytest.approx(values.mean())
    assert s.n == n
    from_sorted = summarize_sorted(np.sort(values))
    assert [from_sorted.p50, from_sorted.p90, from_sorted.p95, from_sorted.p99] == expected.tolist()
    assert from_sorted.mean == pytest.approx(s.mean)


def test_nan_is_excluded_and_counted_out() -> None:
    s = summarize(np.array([np.nan, 0.1, np.nan, 0.3]))
    assert s.n == 2
    assert s.mean == pytest.approx(0.2)
    assert s.p50 == pytest.approx(0.2)


def test_single_value() -> None:
    assert summarize(np.array([0.25])) == Summary(0.25, 0.25, 0.25, 0.25, 0.25, 1)


def test_empty_and_all_nan_give_all_none() -> None:
    assert summarize(np.array([])) == EMPTY_SUMMARY
    assert summarize(np.array([np.nan])) == EMPTY_SUMMARY
    assert summarize_sorted(np.empty(0)) == EMPTY_SUMMARY
    assert Summary(None, None, None, None, None, 0) == EMPTY_SUMMARY


def test_input_is_not_modified() -> None:
    values = np.array([3.0, 1.0, 2.0])
    summarize(values)
    assert values.tolist() == [3.0, 1.0, 2.0]
