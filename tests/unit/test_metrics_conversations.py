"""Per-turn, per-conversation and dispatch-lateness statistics from synthetic records."""

from __future__ import annotations

import pytest

from gputui.engine.records import RequestRecord, ServerTimings
from gputui.metrics.conversations import (
    conversation_stats,
    dispatch_lateness,
    hit_rate,
    turn_stats,
)

MS = 1_000_000


def rec(
    rid: int,
    *,
    conv: int | None = None,
    turn: int | None = None,
    sent: int = 0,
    ttft: int = 10 * MS,
    end: int = 100 * MS,
    prompt: int = 100,
    cached: int | None = None,
    ok: bool = True,
    queued: int | None = None,
    connect: int | None = None,
    timings: ServerTimings | None = None,
) -> RequestRecord:
    return RequestRecord(
        request_id=rid,
        step_index=0,
        sent_ns=sent,
        end_ns=sent + end,
        ok=ok,
        first_token_ns=sent + ttft,
        input_tokens=prompt,
        cached_input_tokens=cached,
        conversation_id=conv,
        turn=turn,
        queued_ns=queued,
        connect_ns=connect,
        server_timings=timings,
        error=None if ok else "timeout",
    )


def test_turn_rows_and_hit_rates() -> None:
    records = [
        rec(1, conv=0, turn=1, prompt=100, cached=0, ttft=40 * MS),
        rec(2, conv=0, turn=2, prompt=200, cached=96, ttft=20 * MS, sent=200 * MS),
        rec(3, conv=9, turn=1, prompt=100, cached=0, ttft=60 * MS),
        rec(4, conv=9, turn=2, prompt=300, cached=0, ok=False, sent=200 * MS),
    ]
    rows = turn_stats(records)
    assert [(r["turn"], r["requests"], r["ok"]) for r in rows] == [(1, 2, 2), (2, 2, 1)]
    first_ttft = rows[0]["ttft_s"]
    assert first_ttft is not None and first_ttft["p50"] == pytest.approx(0.05)
    assert rows[1]["prefix_cache_hit_rate"] == pytest.approx(96 / 200)  # the failed one is out
    assert hit_rate(records) == pytest.approx(96 / 400)
    stats = conversation_stats(records, 2)
    assert (stats["started"], stats["complete"]) == (2, 1)
    e2e = stats["e2e_s"]
    assert e2e is not None and e2e["p50"] == pytest.approx(
        0.3
    )  # first send to the last byte of turn 2


def test_llama_cache_n_stands_in_for_usage() -> None:
    timed = rec(1, turn=1, prompt=180, timings=ServerTimings(prompt_n=51, cache_n=129))
    assert hit_rate([timed]) == pytest.approx(129 / 180)
    assert hit_rate([rec(2, prompt=10)]) is None  # no cache report: no rate, not 0


def test_dispatch_lateness_excludes_connection_setup() -> None:
    records = [
        rec(1, queued=0, sent=MS // 2),
        rec(2, queued=0, sent=3 * MS, connect=2 * MS),  # 1 ms late once connected
        rec(3, sent=50 * MS),  # not scheduled (a closed loop): not counted
    ]
    late = dispatch_lateness(records)
    assert late is not None
    assert late["count"] == 2
    assert late["max_ms"] == pytest.approx(1.0)
    assert late["p50_ms"] == pytest.approx(0.75)
    assert dispatch_lateness([rec(4)]) is None
