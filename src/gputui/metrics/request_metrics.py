"""Per-request latency metrics (TTFT, TPOT, ITL, E2E, connect) from RequestRecords, vectorized.

Contract (definitions from docs/domain.md, all in float seconds):
- TTFT = first_token_ns - sent_ns, for ok records that received a first token.
- E2E = end_ns - sent_ns, for ok records.
- TPOT = (E2E - TTFT) / (output_tokens - 1), for ok records with a first token and output_tokens >=
  2; undefined (NaN in the aligned arrays) for 1-token outputs.
- TTFAT = first_answer_ns - sent_ns (time to the first answer token, after any thinking), for ok
  records that received one; TTFT stays the first token of any kind.
- ITL = one gap per output token after the first, concatenated over ok records: a request with T
  tokens has T - 1 gaps. When an event carries k tokens (`event_tokens`), its gap g since the
  previous event counts as k gaps of g / k (its tokens are taken to have arrived evenly over that
  gap), and the k - 1 tokens that came with the first token have gaps of 0. The sum of a request's
  gaps is then its decode time and their mean the true per-token mean: (E2E' - TTFT) / (T - 1),
  E2E' being the last token's arrival. With one token per event this is the plain gap list.
- connect = connect_ns, for records that opened a new connection.

Speed: the record objects are walked once into `RecordColumns` (one numpy array per field, all token
stamps concatenated once); everything after that is numpy. ITLs come from one `np.diff` over all
stamps with the gaps that straddle two records masked out, never from a Python loop per record.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gputui.engine.records import RequestRecord

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

_NS_TO_S = 1e-9


@dataclass(frozen=True, slots=True)
class RecordColumns:
    """A batch of records as columns: index i of every per-record array is record i."""

    sent_ns: IntArray
    end_ns: IntArray
    first_token_ns: IntArray
    """0 where the record has no first token (see `has_first_token`)."""
    has_first_token: BoolArray
    ok: BoolArray
    output_tokens: IntArray
    input_tokens: IntArray
    """0 where the server reported none."""
    requested_output_tokens: IntArray
    tokens_from_usage: BoolArray
    connect_ns: IntArray
    """0 where a kept-alive connection was reused (see `has_connect`)."""
    has_connect: BoolArray
    queued_ns: IntArray
    """When an open-loop request was scheduled to arrive; 0 in a closed loop (`has_queued`)."""
    has_queued: BoolArray
    n_events: IntArray
    """Number of token events (stamps) per record."""
    event_counts: IntArray
    """Tokens of each token event, aligned with `stamps_ns` (1 where a record has no counts)."""
    counted: BoolArray
    """The record's events were counted (continuous usage or a tokenizer), not assumed 1 each."""
    first_answer_ns: IntArray
    """0 where the record has no answer token (see `has_first_answer`)."""
    has_first_answer: BoolArray
    reasoning_tokens: IntArray
    stamps_ns: IntArray
    """All records' token stamps, concatenated in record order."""
    offsets: IntArray
    """Record i's stamps are `stamps_ns[offsets[i]:offsets[i + 1]]` (length n + 1)."""
    errors: tuple[str | None, ...]

    def __len__(self) -> int:
        return int(self.sent_ns.size)


@dataclass(frozen=True, slots=True)
class RequestMetrics:
    """Flat samples (seconds) for the summaries, each only where the metric is defined."""

    ttft_s: FloatArray
    tpot_s: FloatArray
    itl_s: FloatArray
    e2e_s: FloatArray
    connect_s: FloatArray
    ttfat_s: FloatArray


def _ints(values: list[int]) -> IntArray:
    return np.array(values, dtype=np.int64) if values else np.empty(0, dtype=np.int64)


def record_columns(records: Sequence[RequestRecord]) -> RecordColumns:
    """Walk the record objects once, so every metric after this is array arithmetic."""
    first = [r.first_token_ns for r in records]
    connect = [r.connect_ns for r in records]
    stamps = [r.token_ns for r in records]
    n_events = _ints([s.size for s in stamps])
    offsets = np.zeros(n_events.size + 1, dtype=np.int64)
    np.cumsum(n_events, out=offsets[1:])
    nonempty = [s for s in stamps if s.size]
    all_stamps = (
        np.concatenate(nonempty).astype(np.int64, copy=False)
        if nonempty
        else np.empty(0, dtype=np.int64)
    )
    counts = [r.event_tokens for r in records]
    if any(c is not None for c in counts):
        parts = [
            np.ones(s.size, dtype=np.int64) if c is None else c
            for s, c in zip(stamps, counts, strict=True)
        ]
        event_counts = (
            np.concatenate(parts).astype(np.int64, copy=False)
            if parts
            else np.empty(0, dtype=np.int64)
        )
    else:
        event_counts = np.ones(all_stamps.size, dtype=np.int64)
    answer = [r.first_answer_ns for r in records]
    return RecordColumns(
        sent_ns=_ints([r.sent_ns for r in records]),
        end_ns=_ints([r.end_ns for r in records]),
        first_token_ns=_ints([0 if f is None else f for f in first]),
        has_first_token=np.array([f is not None for f in first], dtype=np.bool_),
        ok=np.array([r.ok for r in records], dtype=np.bool_),
        output_tokens=_ints([r.output_tokens for r in records]),
        input_tokens=_ints([r.input_tokens or 0 for r in records]),
        requested_output_tokens=_ints([r.requested_output_tokens for r in records]),
        tokens_from_usage=np.array([r.tokens_from_usage for r in records], dtype=np.bool_),
        connect_ns=_ints([0 if c is None else c for c in connect]),
        has_connect=np.array([c is not None for c in connect], dtype=np.bool_),
        queued_ns=_ints([r.queued_ns or 0 for r in records]),
        has_queued=np.array([r.queued_ns is not None for r in records], dtype=np.bool_),
        n_events=n_events,
        event_counts=event_counts,
        counted=np.array([r.event_tokens_method != "events" for r in records], dtype=np.bool_),
        first_answer_ns=_ints([0 if a is None else a for a in answer]),
        has_first_answer=np.array([a is not None for a in answer], dtype=np.bool_),
        reasoning_tokens=_ints([r.reasoning_tokens for r in records]),
        stamps_ns=all_stamps,
        offsets=offsets,
        errors=tuple(r.error for r in records),
    )


def ttft_aligned_s(cols: RecordColumns) -> FloatArray:
    """TTFT per record (NaN where undefined: failed, or no first token)."""
    defined = cols.ok & cols.has_first_token
    return np.where(defined, (cols.first_token_ns - cols.sent_ns) * _NS_TO_S, np.nan)


SLOT_WAIT_NS = 5_000_000
"""A send this much after its schedule (connection setup aside) waited for a slot."""


def slot_waited(cols: RecordColumns) -> BoolArray:
    """Open-loop records sent over SLOT_WAIT_NS after their schedule: `--max-in-flight` bound."""
    late = cols.sent_ns - cols.queued_ns - cols.connect_ns
    return cols.has_queued & (late > SLOT_WAIT_NS)


def ttft_judged_s(cols: RecordColumns) -> FloatArray:
    """TTFT per record as the SLA judges it: from the schedule where it waited for a slot.

    A user whose request waited for a `--max-in-flight` slot waited from its arrival, not from
    its send (`sla.judged_ttft` is the step's side of this); elsewhere from the send.
    """
    defined = cols.ok & cols.has_first_token
    start = np.where(slot_waited(cols), cols.queued_ns, cols.sent_ns)
    return np.where(defined, (cols.first_token_ns - start) * _NS_TO_S, np.nan)


def ttfat_aligned_s(cols: RecordColumns) -> FloatArray:
    """TTFAT per record (NaN where undefined: failed, or no answer token)."""
    defined = cols.ok & cols.has_first_answer
    return np.where(defined, (cols.first_answer_ns - cols.sent_ns) * _NS_TO_S, np.nan)


def tpot_aligned_s(cols: RecordColumns) -> FloatArray:
    """TPOT per record (NaN where undefined: failed, no first token, or fewer than 2 tokens)."""
    defined = cols.ok & cols.has_first_token & (cols.output_tokens >= 2)
    decode_ns = cols.end_ns - cols.first_token_ns
    gaps = np.maximum(cols.output_tokens - 1, 1)
    return np.where(defined, decode_ns * _NS_TO_S / gaps, np.nan)


def e2e_aligned_s(cols: RecordColumns) -> FloatArray:
    """E2E per record (NaN for failed records)."""
    return np.where(cols.ok, (cols.end_ns - cols.sent_ns) * _NS_TO_S, np.nan)


def itl_s(cols: RecordColumns, select: BoolArray) -> FloatArray:
    """All token gaps of the selected ok records, grouped by record in record order."""
    n_stamps = int(cols.stamps_ns.size)
    if n_stamps < 2 and not (cols.event_counts > 1).any():
        return np.empty(0, dtype=np.float64)
    keep = select & cols.ok
    gaps_ns = np.diff(cols.stamps_ns)
    # Gap i joins stamps i and i+1; it straddles two records when stamp i+1 opens a record.
    valid = np.repeat(keep, cols.n_events)[1:]
    starts = cols.offsets[1:-1] - 1
    valid[starts[(starts >= 0) & (starts < n_stamps - 1)]] = False
    counts = cols.event_counts
    if not (counts > 1).any():
        return gaps_ns[valid] * _NS_TO_S
    # Several tokens per event: event j (not a record's first) gives counts[j] gaps of
    # gap / counts[j]; a record's first event gives counts - 1 gaps of 0 (module docstring).
    per_token = np.zeros(n_stamps, dtype=np.float64)
    per_token[1:] = gaps_ns * _NS_TO_S / np.maximum(counts[1:], 1)
    repeats = np.zeros(n_stamps, dtype=np.int64)
    repeats[1:] = np.where(valid, counts[1:], 0)
    firsts = cols.offsets[:-1][cols.n_events > 0]
    first_kept = keep[cols.n_events > 0]
    per_token[firsts] = 0.0
    repeats[firsts] = np.where(first_kept, counts[firsts] - 1, 0)
    return np.repeat(per_token, repeats)


def itl_counts(cols: RecordColumns) -> IntArray:
    """Number of ITL samples each record contributes to `itl_s` (0 for failed records)."""
    tokens = np.zeros(len(cols), dtype=np.int64)
    has = cols.n_events > 0
    if has.any():
        tokens[has] = np.add.reduceat(cols.event_counts, cols.offsets[:-1][has])
    return np.where(cols.ok & has, np.maximum(tokens - 1, 0), 0)


def metrics_from_columns(cols: RecordColumns, select: BoolArray | None = None) -> RequestMetrics:
    """Flat samples for the selected records (all records when `select` is None)."""
    if select is None:
        select = np.ones(len(cols), dtype=np.bool_)
    ttft = ttft_aligned_s(cols)[select]
    ttfat = ttfat_aligned_s(cols)[select]
    tpot = tpot_aligned_s(cols)[select]
    e2e = e2e_aligned_s(cols)[select]
    connect = (cols.connect_ns[select & cols.has_connect] * _NS_TO_S).astype(np.float64)
    return RequestMetrics(
        ttft_s=ttft[~np.isnan(ttft)],
        tpot_s=tpot[~np.isnan(tpot)],
        itl_s=itl_s(cols, select),
        e2e_s=e2e[~np.isnan(e2e)],
        connect_s=connect,
        ttfat_s=ttfat[~np.isnan(ttfat)],
    )


def request_metrics(records: Sequence[RequestRecord]) -> RequestMetrics:
    """Flat TTFT/TPOT/ITL/E2E/connect samples of a batch of records, ready for `summarize`."""
    return metrics_from_columns(record_columns(records))


def event_weights(cols: RecordColumns) -> FloatArray:
    """Tokens each record's token events stand for on average: usage count / events, else 1."""
    weighted = cols.tokens_from_usage & (cols.n_events > 0)
    return np.where(weighted, cols.output_tokens / np.maximum(cols.n_events, 1), 1.0)


def event_token_weights(cols: RecordColumns) -> FloatArray:
    """Tokens each token event stands for, aligned with `stamps_ns`.

    Its own count when the record's events were counted, else the record's `event_weights`.
    """
    spread = np.repeat(event_weights(cols), cols.n_events)
    if not cols.counted.any():
        return spread
    counted = np.repeat(cols.counted, cols.n_events)
    return np.where(counted, cols.event_counts.astype(np.float64), spread)


def tokens_arrived(cols: RecordColumns, select: BoolArray, lo_ns: int, hi_ns: int) -> float:
    """Output tokens of the selected records whose events arrived in [lo_ns, hi_ns).

    Each event counts `event_weights`; a record with usage tokens but no token event (the server
    streamed nothing countable) contributes its tokens at `end_ns`.
    """
    stamps = cols.stamps_ns
    inside = (stamps >= lo_ns) & (stamps < hi_ns)
    cumulative = np.zeros(stamps.size + 1, dtype=np.int64)
    np.cumsum(inside, out=cumulative[1:])
    if cols.counted.any():
        chosen = np.repeat(select, cols.n_events) & inside
        total = float(event_token_weights(cols)[chosen].sum())
    else:
        per_record = cumulative[cols.offsets[1:]] - cumulative[cols.offsets[:-1]]
        total = float(np.dot(per_record[select], event_weights(cols)[select]))
    eventless = select & (cols.n_events == 0) & (cols.end_ns >= lo_ns) & (cols.end_ns < hi_ns)
    return total + float(cols.output_tokens[eventless].sum())
