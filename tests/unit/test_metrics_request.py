"""Per-request metrics from synthetic stamps: TTFT, TPOT, ITL, E2E, connect."""

from __future__ import annotations

import numpy as np
import pytest

from gputui.engine.records import RequestRecord
from gputui.metrics.request_metrics import record_columns, request_metrics, tokens_arrived
from gputui.metrics.summary import summarize
from tests.support.records import ns, rec


def three_records() -> list[RequestRecord]:
    return [
        # TTFT 0.1, E2E 0.21, TPOT (0.21 - 0.1) / 3, ITL 0.02 0.03 0.05
        rec(sent_ms=0, end_ms=210, tokens_ms=[100, 120, 150, 200]),
        # TTFT 0.2, E2E 0.25, TPOT 0.05 / 1, ITL 0.01
        rec(sent_ms=50, end_ms=300, tokens_ms=[250, 260]),
        # one token: TTFT 0.3, E2E 0.3, no TPOT, no ITL
        rec(sent_ms=100, end_ms=400, tokens_ms=[400]),
    ]


def test_three_records_by_hand() -> None:
    m = request_metrics(three_records())
    assert m.ttft_s.tolist() == pytest.approx([0.1, 0.2, 0.3])
    assert m.e2e_s.tolist() == pytest.approx([0.21, 0.25, 0.3])
    assert m.tpot_s.tolist() == pytest.approx([0.11 / 3, 0.05])
    assert m.itl_s.tolist() == pytest.approx([0.02, 0.03, 0.05, 0.01])

    ttft = summarize(m.ttft_s)
    # [0.1, 0.2, 0.3]: P90 at virtual index 1.8 -> 0.2 + 0.8 * 0.1
    assert (ttft.mean, ttft.p50, ttft.p90, ttft.n) == pytest.approx((0.2, 0.2, 0.28, 3))
    itl = summarize(m.itl_s)
    # sorted [0.01, 0.02, 0.03, 0.05]: P50 at 1.5 -> 0.025, P95 at 2.85 -> 0.03 + 0.85 * 0.02
    assert (itl.mean, itl.p50, itl.p95, itl.n) == pytest.approx((0.0275, 0.025, 0.047, 4))
    assert itl.p99 == pytest.approx(np.percentile(m.itl_s, 99))
    tpot = summarize(m.tpot_s)
    assert tpot.n == 2  # the 1-token output has no TPOT
    assert tpot.mean == pytest.approx((0.11 / 3 + 0.05) / 2)
    e2e = summarize(m.e2e_s)
    assert (e2e.mean, e2e.p50) == pytest.approx((0.76 / 3, 0.25))


def test_tpot_uses_usage_token_count() -> None:
    # 3 chunks carried 7 tokens: TPOT = (E2E - TTFT) / (7 - 1), not / 2.
    m = request_metrics([rec(sent_ms=0, end_ms=700, tokens_ms=[100, 400, 700], output_tokens=7)])
    assert m.tpot_s.tolist() == pytest.approx([0.1])


def test_failed_records_have_no_latency_but_keep_connect() -> None:
    records = [
        rec(sent_ms=0, end_ms=500, tokens_ms=[100, 200], ok=False, error="stall", connect_ms=3),
        rec(sent_ms=0, end_ms=300, tokens_ms=[100, 300], connect_ms=2),
        rec(sent_ms=0, end_ms=300, tokens_ms=[100, 300]),
    ]
    m = request_metrics(records)
    assert m.ttft_s.size == 2
    assert m.e2e_s.size == 2
    assert m.itl_s.tolist() == pytest.approx([0.2, 0.2])
    assert sorted(m.connect_s.tolist()) == pytest.approx([0.002, 0.003])


def test_itl_never_spans_two_records() -> None:
    # Empty records first, between and last: no gap may join stamps of different records.
    records = [
        rec(sent_ms=0, end_ms=10, ok=False, error="connect"),
        rec(sent_ms=0, end_ms=1000, tokens_ms=[900, 950]),
        rec(sent_ms=0, end_ms=10, ok=False, error="http_503"),
        rec(sent_ms=0, end_ms=10, tokens_ms=[5]),
        rec(sent_ms=0, end_ms=30, tokens_ms=[10, 20, 30]),
        rec(sent_ms=0, end_ms=10, ok=False, error="timeout"),
    ]
    assert request_metrics(records).itl_s.tolist() == pytest.approx([0.05, 0.01, 0.01])


def test_empty_input() -> None:
    m = request_metrics([])
    assert all(a.size == 0 for a in (m.ttft_s, m.tpot_s, m.itl_s, m.e2e_s, m.connect_s))


def test_tokens_arrived_weights_events_by_usage() -> None:
    records = [
        rec(sent_ms=0, end_ms=400, tokens_ms=[100, 200, 300, 400], output_tokens=8),  # 2 per event
        rec(sent_ms=0, end_ms=400, tokens_ms=[150, 350], usage=False),
        rec(sent_ms=0, end_ms=250, output_tokens=5),  # usage but no token event: counted at end
    ]
    cols = record_columns(records)
    everything = np.ones(len(cols), dtype=np.bool_)
    # [200, 400) holds events 200 and 300 of the first (2 x 2), 350 of the second, and 5 at 250.
    assert tokens_arrived(cols, everything, ns(200), ns(400)) == pytest.approx(4 + 1 + 5)
    assert tokens_arrived(cols, everything, ns(0), ns(1000)) == pytest.approx(8 + 2 + 5)
