"""The live window's intervals (the latency table's ±): a step's, on the same samples."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from gputui.metrics.summary import summarize, summarize_sorted
from gputui.metrics.window import RollingWindow
from tests.support.records import ns, rec


def test_summarize_sorted_with_ci_matches_summarize() -> None:
    rng = np.random.default_rng(7)
    for n in (3, 40, 143, 5000):
        values = rng.lognormal(-1.0, 0.5, n)
        got, want = summarize_sorted(np.sort(values), ci=True), summarize(values, ci=True)
        assert got.mean == pytest.approx(want.mean)  # summed in another order
        assert replace(got, mean=None) == replace(want, mean=None)
    assert summarize_sorted(np.sort(values)).p95_ci is None  # off by default: 4 Hz frames


def test_the_window_gives_its_latencies_intervals_only_when_asked() -> None:
    records = [
        rec(sent_ms=i * 10, end_ms=i * 10 + 400, tokens_ms=[i * 10 + 100 + i % 7, i * 10 + 400])
        for i in range(150)
    ]
    plain, with_ci = RollingWindow(10.0), RollingWindow(10.0, ci=True)
    plain.add(list(records))
    with_ci.add(list(records))
    a, b = plain.stats(ns(3000)), with_ci.stats(ns(3000))
    assert a.ttft_s.p95_ci is None and a.ttft_s.n == b.ttft_s.n == 150
    ttft = np.array([((r.first_token_ns or 0) - r.sent_ns) / 1e9 for r in records])
    want = summarize(ttft, ci=True)
    for q in ("p50_ci", "p95_ci", "p99_ci"):
        got_q, want_q = getattr(b.ttft_s, q), getattr(want, q)
        assert got_q[0] == pytest.approx(want_q[0]) and got_q[1] == pytest.approx(want_q[1])
    lo, hi = b.ttft_s.p95_ci or (None, None)
    assert lo is not None and hi is not None and lo <= b.ttft_s.p95 <= hi  # type: ignore[operator]
    assert b.tpot_s.p95_ci is not None and b.e2e_s.p95_ci is not None
    assert b.itl_s.p95_ci is not None
