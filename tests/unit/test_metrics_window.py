"""The live view's rolling window: what is in it, what it drops, and that its sums stay exact."""

from __future__ import annotations

import numpy as np
import pytest

from gputui.engine.records import RequestRecord
from gputui.metrics.request_metrics import request_metrics
from gputui.metrics.summary import summarize
from gputui.metrics.window import RollingWindow
from tests.support.records import ns, rec


def test_drops_records_that_ended_before_the_window() -> None:
    w = RollingWindow(10.0)
    w.add(
        [
            rec(sent_ms=0, end_ms=1000, tokens_ms=[500, 1000]),  # TTFT 0.5
            rec(sent_ms=4000, end_ms=5000, tokens_ms=[4200, 5000]),  # TTFT 0.2
            rec(sent_ms=11_000, end_ms=12_000, tokens_ms=[11_100, 12_000]),  # TTFT 0.1
        ]
    )
    s = w.stats(ns(12_000))  # window (2 s, 12 s]
    assert s.n_requests == 2
    assert len(w) == 2
    assert s.ttft_s.n == 2
    assert s.ttft_s.mean == pytest.approx(0.15)
    assert s.requests_per_s == pytest.approx(0.2)

    s = w.stats(ns(20_000))  # (10 s, 20 s]: only the last
    assert (s.n_requests, len(w)) == (1, 1)
    assert s.ttft_s.mean == pytest.approx(0.1)
    assert s.itl_s.mean == pytest.approx(0.9)

    s = w.stats(ns(30_000))
    assert (s.n_requests, len(w)) == (0, 0)
    assert s.ttft_s.n == 0
    assert s.ttft_s.p95 is None
    assert s.error_rate is None
    assert s.output_tokens_per_s == 0.0


def test_tokens_count_where_they_arrived_weighted_by_usage() -> None:
    w = RollingWindow(10.0)
    w.add(
        [
            # 4 events carry 8 tokens; the first arrived before the window (2 s, 12 s]
            rec(sent_ms=0, end_ms=6000, tokens_ms=[1000, 3000, 4000, 6000], output_tokens=8),
            rec(sent_ms=0, end_ms=9000, tokens_ms=[8000, 9000], usage=False),
            rec(sent_ms=0, end_ms=11_000, output_tokens=5),  # usage, no event: arrives at its end
        ]
    )
    s = w.stats(ns(12_000))
    assert s.output_tokens_per_s == pytest.approx((3 * 2 + 2 + 5) / 10)


def test_errors_by_reason_come_and_go_with_the_window() -> None:
    w = RollingWindow(5.0)
    w.add(
        [
            rec(sent_ms=0, end_ms=1000, ok=False, error="timeout"),
            rec(sent_ms=0, end_ms=4000, ok=False, error="http_503"),
            rec(sent_ms=0, end_ms=4000, ok=False, error="http_503"),
            rec(sent_ms=0, end_ms=4500, ok=False, error=None),
            rec(sent_ms=0, end_ms=4000, tokens_ms=[100, 200]),
        ]
    )
    s = w.stats(ns(5000))
    assert s.errors == {"http_503": 2, "timeout": 1, "unknown": 1}
    assert (s.requests_ok, s.requests_failed) == (1, 4)
    assert s.error_rate == pytest.approx(0.8)
    s = w.stats(ns(9200))  # (4.2 s, 9.2 s]
    assert s.errors == {"unknown": 1}
    assert (s.requests_ok, s.requests_failed, s.error_rate) == (0, 1, 1.0)


def test_rates_use_the_elapsed_time_at_the_start_of_a_run() -> None:
    w = RollingWindow(10.0)
    w.add([rec(sent_ms=0, end_ms=1500, tokens_ms=[1000, 1500])])
    s = w.stats(ns(2000))
    assert s.span_s == pytest.approx(2.0)
    assert s.requests_per_s == pytest.approx(0.5)
    assert s.output_tokens_per_s == pytest.approx(1.0)
    assert w.stats(ns(11_000)).span_s == pytest.approx(10.0)


def test_clear_forgets_everything() -> None:
    w = RollingWindow(10.0)
    w.add([rec(sent_ms=0, end_ms=1500, tokens_ms=[1000, 1500])])
    w.stats(ns(2000))
    w.clear()
    assert w.stats(ns(3000)).n_requests == 0
    assert len(w) == 0


def test_rejects_a_non_positive_window() -> None:
    with pytest.raises(ValueError, match="window_s"):
        RollingWindow(0)


def random_records(rng: np.random.Generator, n: int, t_ms: float) -> list[RequestRecord]:
    records = []
    for _ in range(n):
        sent = t_ms - rng.integers(100, 3000)
        # whole milliseconds, so many samples repeat: removal must take out the right copies
        gaps = rng.integers(0, 4, rng.integers(0, 6))
        first = sent + rng.integers(10, 40)
        tokens = (first + np.concatenate(([0], np.cumsum(gaps)))).tolist()
        ok = rng.random() > 0.2
        records.append(
            rec(
                sent_ms=float(sent),
                end_ms=float(tokens[-1] + 1),
                tokens_ms=tokens,
                ok=ok,
                error=None if ok else str(rng.choice(["timeout", "stall"])),
            )
        )
    return records


def test_incremental_window_equals_a_recount_from_scratch() -> None:
    rng = np.random.default_rng(7)
    w = RollingWindow(2.0)
    added: list[RequestRecord] = []
    t_ms = 1000.0
    for _ in range(40):
        t_ms += 250
        batch = random_records(rng, int(rng.integers(0, 30)), t_ms)
        w.add(batch)
        added += batch
        s = w.stats(ns(t_ms))
        inside = [r for r in added if r.end_ns > ns(t_ms - 2000)]
        expected = request_metrics(inside)
        for got, values in (
            (s.ttft_s, expected.ttft_s),
            (s.tpot_s, expected.tpot_s),
            (s.itl_s, expected.itl_s),
            (s.e2e_s, expected.e2e_s),
        ):
            want = summarize(values)
            assert got.n == want.n
            assert (got.p50, got.p90, got.p95, got.p99) == (want.p50, want.p90, want.p95, want.p99)
            assert got.mean == pytest.approx(want.mean)
        assert s.n_requests == len(inside)
        assert s.requests_failed == sum(not r.ok for r in inside)
