"""The truth recorder: cheap appends, numpy-exact summaries, in-place reset."""

from __future__ import annotations

from array import array

import numpy as np

from gputui.sim.truth import TruthRecorder, summarize_ms


def test_summary_matches_numpy_linear_percentiles() -> None:
    samples = array("q", [10_000_000, 12_500_000, 9_000_000, 50_000_000, 11_000_000])
    values = np.array(samples, dtype=np.float64) / 1e6
    summary = summarize_ms(samples)
    assert summary["n"] == 5
    assert summary["mean"] == float(values.mean())
    for key, q in (("p50", 50), ("p90", 90), ("p99", 99)):
        assert summary[key] == float(np.percentile(values, q, method="linear"))


def test_empty_summary_has_no_numbers() -> None:
    assert summarize_ms(array("q")) == {"mean": None, "p50": None, "p90": None, "p99": None, "n": 0}


def test_reset_clears_in_place() -> None:
    truth = TruthRecorder()
    ttft, itl = truth.ttft_ns, truth.itl_ns
    truth.requests_started = truth.requests_completed = truth.requests_cancelled = 3
    truth.tokens = 10
    ttft.append(50_000_000)
    itl.extend([10_000_000, 10_000_000])
    snap = truth.snapshot()
    assert snap["ttft_ms"]["mean"] == 50.0
    assert snap["itl_ms"]["n"] == 2
    truth.reset()
    assert truth.ttft_ns is ttft
    assert truth.itl_ns is itl
    assert truth.snapshot() == {
        "requests_started": 0,
        "requests_completed": 0,
        "requests_cancelled": 0,
        "tokens": 0,
        "ttft_ms": summarize_ms(array("q")),
        "itl_ms": summarize_ms(array("q")),
    }
