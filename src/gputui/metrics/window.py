"""Rolling statistics over the last W seconds, for the live view (4 Hz, ~10,000 records in view).

Contract: `RollingWindow.add(records)` takes *finished* records; `stats(now_ns)` describes the
window (now_ns - W, now_ns]:
- latency summaries (TTFT, TPOT, ITL, E2E; definitions of `request_metrics`) over ok records that
  ended in the window; `n_requests`, the error rate and errors by reason over all records that ended
  in it;
- `requests_per_s`: ok records that ended in the window, per second;
- `output_tokens_per_s`: token events that arrived in the window (weighted by usage as in
  `metrics.step`), per second. Only finished records are known, so tokens of requests still in
  flight are counted once those requests finish (if their stamps are still inside the window then).
Rates divide by the window, or by the time since the earliest request seen when that is shorter (the
start of a run). Records are dropped once they end before the window (bounded memory); `now_ns` must
not go backwards.

Speed: each `stats` call turns the records added since the previous call into one chunk of arrays,
merges their samples into sorted arrays (`np.insert`, O(n) copies) and deletes the samples of
expired records the same way, so percentiles are O(1) reads instead of a selection over a million
ITLs. Token arrivals are sorted per chunk with prefix sums, so counting them is two binary searches
a chunk.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from operator import attrgetter

import numpy as np
import numpy.typing as npt

from gputui.engine.records import RequestRecord
from gputui.metrics.request_metrics import (
    e2e_aligned_s,
    event_token_weights,
    itl_counts,
    itl_s,
    record_columns,
    tpot_aligned_s,
    ttfat_aligned_s,
    ttft_aligned_s,
)
from gputui.metrics.sla import error_rate
from gputui.metrics.step import UNKNOWN_REASON
from gputui.metrics.summary import Summary, summarize_sorted

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

_NS_PER_S = 1_000_000_000


@dataclass(frozen=True, slots=True)
class WindowStats:
    """The live view's numbers for the last `window_s` seconds."""

    window_s: float
    span_s: float
    """Seconds the rates are divided by: window_s, or less at the start of a run."""
    ttft_s: Summary
    tpot_s: Summary
    itl_s: Summary
    e2e_s: Summary
    output_tokens_per_s: float
    requests_per_s: float
    error_rate: float | None
    errors: dict[str, int]
    n_requests: int
    requests_ok: int
    requests_failed: int
    ttfat_s: Summary | None = None
    """Time to the first answer token of the requests that had thinking tokens; None: none had."""
    reasoning_share: float | None = None
    """Thinking tokens / output tokens of the ok requests in the window; None without thinking."""


class _SortedSample:
    """A multiset of float samples kept sorted, for O(1) percentiles."""

    __slots__ = ("values",)

    def __init__(self) -> None:
        self.values: FloatArray = np.empty(0, dtype=np.float64)

    @staticmethod
    def _clean(samples: FloatArray) -> FloatArray:
        return np.sort(samples[~np.isnan(samples)])

    def insert(self, samples: FloatArray) -> None:
        new = self._clean(samples)
        if new.size:
            self.values = np.insert(self.values, np.searchsorted(self.values, new), new)

    def remove(self, samples: FloatArray) -> None:
        """Remove samples that were inserted before (the identical float values)."""
        old = self._clean(samples)
        if not old.size:
            return
        # The j-th copy of a repeated value sits j places after its first occurrence.
        repeat = np.arange(old.size) - np.searchsorted(old, old, side="left")
        self.values = np.delete(self.values, np.searchsorted(self.values, old) + repeat)


@dataclass(slots=True)
class _Chunk:
    """Records added between two `stats` calls, by end_ns; [cursor:] are still in the window."""

    end_ns: IntArray
    ok: BoolArray
    errors: tuple[str | None, ...]
    ttft_s: FloatArray
    tpot_s: FloatArray
    e2e_s: FloatArray
    itl_s: FloatArray
    itl_offsets: IntArray
    stamps_ns: IntArray
    """Token arrivals, sorted."""
    tokens_before: FloatArray
    """tokens_before[i] = weighted tokens of stamps_ns[:i]."""
    ttfat_s: FloatArray
    """NaN for requests without thinking tokens."""
    reasoning_tokens: IntArray
    """Of ok records (0 for failed ones), like `output_tokens`."""
    output_tokens: IntArray
    cursor: int = 0


def _chunk(records: list[RequestRecord]) -> _Chunk:
    records.sort(key=attrgetter("end_ns"))
    cols = record_columns(records)
    everything = np.ones(len(cols), dtype=np.bool_)
    itl_offsets = np.zeros(len(cols) + 1, dtype=np.int64)
    np.cumsum(itl_counts(cols), out=itl_offsets[1:])
    # Usage tokens of a record without token events arrive at its end, as in `tokens_arrived`.
    eventless = cols.n_events == 0
    stamps = np.concatenate((cols.stamps_ns, cols.end_ns[eventless]))
    weights = np.concatenate(
        (
            event_token_weights(cols),
            cols.output_tokens[eventless].astype(np.float64),
        )
    )
    order = np.argsort(stamps, kind="stable")
    tokens_before = np.zeros(stamps.size + 1, dtype=np.float64)
    np.cumsum(weights[order], out=tokens_before[1:])
    return _Chunk(
        end_ns=cols.end_ns,
        ok=cols.ok,
        errors=cols.errors,
        ttft_s=ttft_aligned_s(cols),
        tpot_s=tpot_aligned_s(cols),
        e2e_s=e2e_aligned_s(cols),
        itl_s=itl_s(cols, everything),
        itl_offsets=itl_offsets,
        stamps_ns=stamps[order],
        tokens_before=tokens_before,
        ttfat_s=np.where(cols.reasoning_tokens > 0, ttfat_aligned_s(cols), np.nan),
        reasoning_tokens=np.where(cols.ok, cols.reasoning_tokens, 0),
        output_tokens=np.where(cols.ok, cols.output_tokens, 0),
    )


class RollingWindow:
    """Statistics of the records that ended in the last `window_s` seconds (see the module)."""

    def __init__(self, window_s: float, *, ci: bool = False) -> None:
        if window_s <= 0:
            raise ValueError(f"window_s must be positive, got {window_s}")
        self.window_s = float(window_s)
        self.ci = ci
        """Give the latency summaries their P50/P95/P99 intervals (the table's ±; ~1 ms each)."""
        self._window_ns = round(window_s * _NS_PER_S)
        self.clear()

    def clear(self) -> None:
        """Forget every record (e.g. when the live view restarts)."""
        self._pending: list[RequestRecord] = []
        self._chunks: list[_Chunk] = []
        self._origin_ns: int | None = None
        self._ttft = _SortedSample()
        self._tpot = _SortedSample()
        self._e2e = _SortedSample()
        self._itl = _SortedSample()
        self._ttfat = _SortedSample()
        self._reasoning_tokens = 0
        self._output_tokens = 0
        self._ok = 0
        self._failed = 0
        self._errors: Counter[str] = Counter()

    def __len__(self) -> int:
        """Records held (in the window at the last `stats` call, plus those added since)."""
        return len(self._pending) + sum(c.end_ns.size - c.cursor for c in self._chunks)

    def add(self, records: Iterable[RequestRecord]) -> None:
        """Take finished records; they are folded in at the next `stats` call."""
        self._pending.extend(records)

    def _take_pending(self, start_ns: int) -> None:
        pending, self._pending = self._pending, []
        if not pending:
            return
        earliest = min(r.sent_ns for r in pending)
        self._origin_ns = earliest if self._origin_ns is None else min(self._origin_ns, earliest)
        fresh = [r for r in pending if r.end_ns > start_ns]
        if not fresh:
            return
        chunk = _chunk(fresh)
        self._account(chunk, 0, chunk.end_ns.size, sign=1)
        self._chunks.append(chunk)

    def _account(self, chunk: _Chunk, lo: int, hi: int, *, sign: int) -> None:
        """Add (sign=1) or remove (sign=-1) records [lo:hi) of a chunk from the running state."""
        if sign > 0:
            for sample, values in self._samples(chunk, lo, hi):
                sample.insert(values)
        else:
            for sample, values in self._samples(chunk, lo, hi):
                sample.remove(values)
        ok = int(chunk.ok[lo:hi].sum())
        self._ok += sign * ok
        self._reasoning_tokens += sign * int(chunk.reasoning_tokens[lo:hi].sum())
        self._output_tokens += sign * int(chunk.output_tokens[lo:hi].sum())
        self._failed += sign * (hi - lo - ok)
        for i in np.flatnonzero(~chunk.ok[lo:hi]).tolist():
            reason = chunk.errors[lo + i] or UNKNOWN_REASON
            self._errors[reason] += sign
            if not self._errors[reason]:
                del self._errors[reason]

    def _samples(
        self, chunk: _Chunk, lo: int, hi: int
    ) -> tuple[tuple[_SortedSample, FloatArray], ...]:
        itl = chunk.itl_s[chunk.itl_offsets[lo] : chunk.itl_offsets[hi]]
        return (
            (self._ttft, chunk.ttft_s[lo:hi]),
            (self._tpot, chunk.tpot_s[lo:hi]),
            (self._e2e, chunk.e2e_s[lo:hi]),
            (self._itl, itl),
            (self._ttfat, chunk.ttfat_s[lo:hi]),
        )

    def _expire(self, start_ns: int) -> None:
        kept = []
        for chunk in self._chunks:
            gone = int(np.searchsorted(chunk.end_ns, start_ns, side="right"))
            if gone > chunk.cursor:
                self._account(chunk, chunk.cursor, gone, sign=-1)
                chunk.cursor = gone
            if chunk.cursor < chunk.end_ns.size:
                kept.append(chunk)
        self._chunks = kept

    def _tokens(self, start_ns: int, now_ns: int) -> float:
        total = 0.0
        for chunk in self._chunks:
            lo = int(np.searchsorted(chunk.stamps_ns, start_ns, side="right"))
            hi = int(np.searchsorted(chunk.stamps_ns, now_ns, side="right"))
            total += float(chunk.tokens_before[hi] - chunk.tokens_before[lo])
        return total

    def stats(self, now_ns: int) -> WindowStats:
        """The window ending at now_ns (a perf_counter_ns stamp, non-decreasing across calls)."""
        start_ns = now_ns - self._window_ns
        self._take_pending(start_ns)
        self._expire(start_ns)
        span_ns = self._window_ns
        if self._origin_ns is not None:
            span_ns = min(span_ns, now_ns - self._origin_ns)
        per_s = _NS_PER_S / span_ns if span_ns > 0 else 0.0
        return WindowStats(
            window_s=self.window_s,
            span_s=max(span_ns, 0) / _NS_PER_S,
            ttft_s=summarize_sorted(self._ttft.values, ci=self.ci),
            tpot_s=summarize_sorted(self._tpot.values, ci=self.ci),
            itl_s=summarize_sorted(self._itl.values, ci=self.ci),
            e2e_s=summarize_sorted(self._e2e.values, ci=self.ci),
            output_tokens_per_s=self._tokens(start_ns, now_ns) * per_s,
            requests_per_s=self._ok * per_s,
            error_rate=error_rate(self._ok, self._failed),
            errors=dict(sorted(self._errors.items())),
            n_requests=self._ok + self._failed,
            requests_ok=self._ok,
            requests_failed=self._failed,
            ttfat_s=summarize_sorted(self._ttfat.values) if self._ttfat.values.size else None,
            reasoning_share=self._reasoning_tokens / self._output_tokens
            if self._reasoning_tokens and self._output_tokens
            else None,
        )
