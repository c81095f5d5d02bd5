"""How long the server took to recover from each burst fired on top of the load (`--burst`).

Contract: `burst_recoveries(fired_ns, count, records, frames, ttft_bound_s, origin_ns)` is, per
burst, when P95 TTFT was back under its bound and the requests in flight back to their level
before it (`BurstRecovery`, the snapshot's `bursts[]` via `to_json`). `frames` is the published
frames' (time, requests in flight), as `session.in_flight.InFlightTrace` keeps them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gputui.engine.records import RequestRecord

RECOVERY_WINDOW_S = 2.0
"""Sliding window (by send time) over which a burst's P95 TTFT must be back under its bound."""


@dataclass(frozen=True, slots=True)
class BurstRecovery:
    """One burst and its recovery; times in seconds, None where it did not recover."""

    at_s: float
    count: int
    ttft_bound_s: float | None
    ttft_recovery_s: float | None
    queue_baseline: float | None
    queue_recovery_s: float | None
    recovery_s: float | None
    recovered: bool

    def to_json(self) -> dict[str, object]:
        """The snapshot's `bursts[]` object, keys in their saved order."""
        return {
            "at_s": self.at_s,
            "count": self.count,
            "ttft_bound_s": self.ttft_bound_s,
            "ttft_recovery_s": self.ttft_recovery_s,
            "queue_baseline": self.queue_baseline,
            "queue_recovery_s": self.queue_recovery_s,
            "recovery_s": self.recovery_s,
            "recovered": self.recovered,
        }


def burst_recoveries(
    fired_ns: Sequence[int],
    count: int,
    records: Sequence[RequestRecord],
    frames: tuple[Sequence[int], Sequence[int]],
    ttft_bound_s: float | None,
    origin_ns: int,
) -> list[BurstRecovery]:
    """Per burst: how long until P95 TTFT is back under its bound and the queue is back to normal.

    TTFT recovery: the first moment from which requests sent in the next 2 s have a P95 TTFT under
    the bound (without a bound: under 1.5x the P95 of the 10 s before the burst). Queue recovery:
    the first frame whose in-flight count is back to the pre-burst mean (+1). Recovery is the later.
    """
    ok = [r for r in records if r.ok and r.first_token_ns is not None]
    sent = np.array([r.sent_ns for r in ok], dtype=np.int64)
    ttft = np.array([(r.first_token_ns or 0) - r.sent_ns for r in ok], dtype=np.float64) / 1e9
    order = np.argsort(sent)
    sent, ttft = sent[order], ttft[order]
    t_all = np.array(frames[0], dtype=np.int64)
    v_all = np.array(frames[1], dtype=np.float64)
    out = []
    for fired in fired_ns:
        before = (sent >= fired - 10_000_000_000) & (sent < fired)
        bound = ttft_bound_s
        if bound is None:
            bound = 1.5 * float(np.percentile(ttft[before], 95)) if before.any() else None
        ttft_s = _ttft_recovery_s(sent, ttft, fired, bound)
        pre = (t_all >= fired - 2_000_000_000) & (t_all < fired)
        baseline = float(v_all[pre].mean()) if pre.any() else None
        queue_s = None
        if baseline is not None:
            after = np.nonzero((t_all > fired) & (v_all <= baseline + 1))[0]
            queue_s = (int(t_all[after[0]]) - fired) / 1e9 if after.size else None
        out.append(
            BurstRecovery(
                at_s=round((fired - origin_ns) / 1e9, 3),
                count=count,
                ttft_bound_s=bound,
                ttft_recovery_s=ttft_s,
                queue_baseline=None if baseline is None else round(baseline, 2),
                queue_recovery_s=queue_s,
                recovery_s=None if ttft_s is None or queue_s is None else max(ttft_s, queue_s),
                recovered=ttft_s is not None and queue_s is not None,
            )
        )
    return out


def _ttft_recovery_s(
    sent: np.ndarray, ttft: np.ndarray, fired_ns: int, bound_s: float | None
) -> float | None:
    if bound_s is None:
        return None
    window_ns = int(RECOVERY_WINDOW_S * 1e9)
    first = int(np.searchsorted(sent, fired_ns))
    ends = np.searchsorted(sent, sent + window_ns)
    for i in range(first, sent.size):
        window = ttft[i : int(ends[i])]
        if window.size >= 3 and float(np.percentile(window, 95)) <= bound_s:
            return (int(sent[i]) - fired_ns) / 1e9
    return None
