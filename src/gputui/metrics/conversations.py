"""Statistics of multi-turn runs and trace replays, as pure functions of finished records.

- `turn_stats`: per turn, TTFT and the prefix-cache hit rate = cached prompt tokens / prompt
  tokens of the ok requests whose usage reported `cached_tokens` (vLLM's
  `prefix_cache_hits / prefix_cache_queries`, from the client's side); llama.cpp's `timings.cache_n`
  stands in when usage has no `cached_tokens`. Given a `metrics.prefix_cache.PrefixCacheMeter`,
  a turn without either reads the server's counters instead, and each row names its
  `prefix_cache_source`.
- `conversation_stats`: E2E of a conversation = last byte of its last turn - send of its first,
  think times included (what the user lived through), over conversations with every turn ok.
- `dispatch_lateness`: a replay's validity check: send stamp - scheduled time - connection setup
  (reported apart), over every request that had a schedule.
Dicts, not models: they go into the snapshot as optional keys and into `gputui run`'s lines.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypedDict

import numpy as np

from gputui.engine.records import RequestRecord, cached_tokens

if TYPE_CHECKING:
    from gputui.metrics.prefix_cache import PrefixCacheMeter


class Distribution(TypedDict):
    """Mean, percentiles and maximum of some values."""

    mean: float
    p50: float
    p95: float
    p99: float
    max: float


class TurnRow(TypedDict):
    """One turn of the conversations (`turns[]`, `conversations.turns_by_turn[]`)."""

    turn: int
    requests: int
    ok: int
    ttft_s: Distribution | None
    input_tokens_mean: float | None
    prefix_cache_hit_rate: float | None
    prefix_cache_source: str | None


class ConversationStats(TypedDict):
    """Conversations started and complete, and the E2E of the complete ones."""

    started: int
    complete: int
    turns: int
    e2e_s: Distribution | None


class DispatchLateness(TypedDict):
    """Send time minus schedule, in ms (`dispatch_lateness`)."""

    count: int
    p50_ms: float
    p99_ms: float
    max_ms: float


def _dist(values: Sequence[float]) -> Distribution | None:
    if not values:
        return None
    arr = np.asarray(values, dtype=np.float64)
    return Distribution(
        mean=float(arr.mean()),
        p50=float(np.percentile(arr, 50)),
        p95=float(np.percentile(arr, 95)),
        p99=float(np.percentile(arr, 99)),
        max=float(arr.max()),
    )


def hit_rate(records: Sequence[RequestRecord]) -> float | None:
    """Cached prompt tokens / prompt tokens over the ok records that report both."""
    hits = queries = 0
    for r in records:
        cached = cached_tokens(r)
        if r.ok and cached is not None and r.input_tokens:
            hits += cached
            queries += r.input_tokens
    return hits / queries if queries else None


def turn_stats(
    records: Sequence[RequestRecord], meter: PrefixCacheMeter | None = None
) -> list[TurnRow]:
    """One row per turn: requests, TTFT, mean prompt and cached tokens, hit rate and its source."""
    by_turn: dict[int, list[RequestRecord]] = defaultdict(list)
    for r in records:
        if r.turn is not None:
            by_turn[r.turn].append(r)
    rows: list[TurnRow] = []
    for turn in sorted(by_turn):
        group = by_turn[turn]
        ok = [r for r in group if r.ok]
        ttft = [(r.first_token_ns - r.sent_ns) / 1e9 for r in ok if r.first_token_ns is not None]
        prompts = [r.input_tokens for r in ok if r.input_tokens is not None]
        share = meter.share(ok) if meter is not None else None
        rate = share.hit_rate if share is not None else hit_rate(ok)
        source = share.source if share is not None else "usage" if rate is not None else None
        rows.append(
            TurnRow(
                turn=turn,
                requests=len(group),
                ok=len(ok),
                ttft_s=_dist(ttft),
                input_tokens_mean=float(np.mean(prompts)) if prompts else None,
                prefix_cache_hit_rate=rate,
                prefix_cache_source=source,
            )
        )
    return rows


def conversation_stats(records: Sequence[RequestRecord], turns: int) -> ConversationStats:
    """How many conversations started and completed, and the E2E of the complete ones."""
    by: dict[int, list[RequestRecord]] = defaultdict(list)
    for r in records:
        if r.conversation_id is not None:
            by[r.conversation_id].append(r)
    e2e: list[float] = []
    for group in by.values():
        ok = [r for r in group if r.ok]
        if len(ok) == turns and {r.turn for r in ok} == set(range(1, turns + 1)):
            e2e.append((max(r.end_ns for r in ok) - min(r.sent_ns for r in ok)) / 1e9)
    return ConversationStats(started=len(by), complete=len(e2e), turns=turns, e2e_s=_dist(e2e))


def dispatch_lateness(records: Sequence[RequestRecord]) -> DispatchLateness | None:
    """Lateness of each scheduled send against its schedule, in ms (None: nothing scheduled)."""
    late = [
        (r.sent_ns - r.queued_ns - (r.connect_ns or 0)) / 1e6
        for r in records
        if r.queued_ns is not None and r.error != "connect"
    ]
    if not late:
        return None
    stats = _dist(late)
    assert stats is not None
    return DispatchLateness(
        count=len(late), p50_ms=stats["p50"], p99_ms=stats["p99"], max_ms=stats["max"]
    )
