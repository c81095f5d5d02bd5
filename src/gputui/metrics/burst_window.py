"""A burst's window: the part of a step measured under the burst's extra load, left out of it.

`gputui run --burst` fires on top of a plan's steps without closing them (a fixed-length step
cut at every burst would leave only short pieces when bursts come oftener than steps end). So
the step keeps running, and what the burst disturbs is taken out of its figures instead:

- A burst's window runs from its first request's send until its last request is back, plus one
  lifetime of the step (the P50 E2E of its own requests): the queue the burst built is gone by
  then. Overlapping windows merge.
- A step's request *under the burst* was in flight at any moment of a window (sent before its
  end, ended after its start): it is counted (`requests_under_burst`), in none of the latencies,
  the verdict or the goodput share.
- The rates (tok/s, req/s, input tok/s and their intervals) leave the windows' time out: the
  timeline is squeezed (`squeeze`), each window cut out and what follows moved back by its
  length, so a rate is over the step's window minus the bursts' (`burst_window_s`).

The TUI's `b` re-settles the step after the burst (`session.loads`); its window then lies mostly
before the step's measurement starts, and the same rule covers what is left of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from gputui.engine.records import RequestRecord
from gputui.metrics.request_metrics import RecordColumns

_Windows = list[tuple[int, int]]


@dataclass(frozen=True, slots=True)
class BurstWindows:
    """A step's burst windows inside its measured window, and what they take out of it."""

    windows: _Windows
    """Merged [start, end) windows, clipped to the step's window; empty without a burst."""
    under: npt.NDArray[np.bool_]
    """Per record of the step: in flight during a window."""
    cut_ns: int
    """The windows' total length inside the step's window."""


def merge_windows(bursts: Sequence[tuple[int, int]], lifetime_ns: int) -> _Windows:
    """Each burst request's (sent, end) span, its end one lifetime later, merged and in order."""
    merged: _Windows = []
    for start, end in sorted((sent, end + max(lifetime_ns, 0)) for sent, end in bursts):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def step_windows(requests: Iterable[tuple[int, int, bool, bool]]) -> _Windows:
    """The windows of a step's requests given as (sent, end, burst, ok): as `burst_windows`."""
    bursts: list[tuple[int, int]] = []
    lives: list[int] = []
    for sent, end, burst, ok in requests:
        if burst:
            bursts.append((sent, end))
        elif ok:
            lives.append(end - sent)
    return merge_windows(bursts, int(np.median(lives)) if lives else 0) if bursts else []


def under_windows(sent_ns: int, end_ns: int, windows: _Windows) -> bool:
    """Whether a request sent at `sent_ns` and back at `end_ns` was in flight in a window."""
    return any(sent_ns < hi and end_ns > lo for lo, hi in windows)


def burst_windows(
    bursts: Sequence[RequestRecord], cols: RecordColumns, lo_ns: int, hi_ns: int
) -> BurstWindows:
    """The windows of a step's burst records over its own columns (module docstring).

    `lo_ns`, `hi_ns`: the step's measured window (`hi_ns` < 0: the step is still open).
    """
    under = np.zeros(len(cols), dtype=np.bool_)
    if not bursts:
        return BurstWindows([], under, 0)
    lives = (cols.end_ns - cols.sent_ns)[cols.ok]
    life = int(np.median(lives)) if lives.size else 0
    merged = merge_windows([(r.sent_ns, r.end_ns) for r in bursts], life)
    for start, end in merged:
        under |= (cols.sent_ns < end) & (cols.end_ns > start)
    top = hi_ns if hi_ns >= 0 else None
    clipped = [
        (max(start, lo_ns), end if top is None else min(end, top))
        for start, end in merged
        if end > lo_ns and (top is None or start < top)
    ]
    return BurstWindows(clipped, under, sum(end - start for start, end in clipped))


def squeeze(cols: RecordColumns, windows: _Windows, lo_ns: int) -> RecordColumns:
    """The columns on a timeline with the windows cut out: what the rates are computed on.

    A time inside a window moves before `lo_ns` (out of every rate); a time after a window moves
    back by its length. Only the times the rates read are moved (stamps, ends, first tokens).
    """
    if not windows:
        return cols
    return replace(
        cols,
        stamps_ns=_squeezed(cols.stamps_ns, windows, lo_ns),
        end_ns=_squeezed(cols.end_ns, windows, lo_ns),
        first_token_ns=_squeezed(cols.first_token_ns, windows, lo_ns),
    )


def _squeezed(times: npt.NDArray[np.int64], windows: _Windows, lo_ns: int) -> npt.NDArray[np.int64]:
    out = times.copy()
    for start, end in windows:
        out[(times >= start) & (times < end)] = lo_ns - 1
        out[times >= end] -= end - start
    return out
