"""What a run watches beside its plan: requests in flight over time, the queue, bursts on top.

Contract: `InFlightTrace` records the published frames; `queue_verdict` and `burst_recoveries`
judge from it (the validation hold, `--burst`); `BurstFirer` fires bursts in its own thread.
Nothing here measures: the engine does, and `gputui.metrics` computes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gputui.engine.records import RequestRecord
from gputui.session import Session, StatsFrame

RECOVERY_WINDOW_S = 2.0
"""Sliding window (by send time) over which a burst's P95 TTFT must be back under its bound."""


@dataclass
class InFlightTrace:
    """Requests in flight over time, from the published frames (4 Hz)."""

    t_ns: list[int] = field(default_factory=list)
    in_flight: list[int] = field(default_factory=list)
    saturated: list[bool] = field(default_factory=list)
    busiest_cpu_percent: list[float] = field(default_factory=list)
    contended: list[bool] = field(default_factory=list)

    def on_frame(self, frame: StatsFrame) -> None:
        """Session frame callback."""
        self.t_ns.append(time.perf_counter_ns())
        self.in_flight.append(frame.in_flight)
        self.saturated.append(frame.client_saturated)
        self.busiest_cpu_percent.append(frame.busiest_worker_cpu_percent)
        self.contended.append(frame.host_contended)

    def saturation(self) -> dict[str, Any]:
        """How often the client itself was the bottleneck (for the snapshot and a warning)."""
        frames = len(self.saturated)
        share = sum(self.saturated) / frames if frames else 0.0
        cpu = self.busiest_cpu_percent
        return {
            "saturated_share": round(share, 3),
            "host_contended_share": round(sum(self.contended) / frames, 3) if frames else 0.0,
            "busiest_worker_cpu_percent_max": round(max(cpu), 1) if cpu else None,
            "busiest_worker_cpu_percent_mean": round(sum(cpu) / len(cpu), 1) if cpu else None,
        }

    def between(self, lo_ns: int, hi_ns: int) -> tuple[np.ndarray, np.ndarray]:
        """(t_s relative to lo, in_flight) for frames inside [lo, hi)."""
        t = np.array(self.t_ns, dtype=np.int64)
        v = np.array(self.in_flight, dtype=np.float64)
        mask = (t >= lo_ns) & (t < hi_ns)
        return (t[mask] - lo_ns) / 1e9, v[mask]


def queue_verdict(t_s: np.ndarray, in_flight: np.ndarray) -> dict[str, Any]:
    """Is the client-side queue bounded? A growing queue rises steadily across the hold.

    The trend is a least-squares slope over the whole hold; it counts as growth when the rise it
    implies over the hold exceeds half the mean in flight plus two requests (Poisson noise alone
    moves the count by about its square root).
    """
    if in_flight.size < 4:
        return {
            "queue_bounded": True,
            "in_flight_mean": None,
            "in_flight_max": None,
            "in_flight_growth": None,
            "queue_reason": "too few samples to judge",
        }
    slope = float(np.polyfit(t_s, in_flight, 1)[0])
    span = float(t_s[-1] - t_s[0]) or 1.0
    growth = slope * span
    mean = float(in_flight.mean())
    bounded = growth <= 0.5 * mean + 2
    return {
        "queue_bounded": bounded,
        "in_flight_mean": round(mean, 2),
        "in_flight_max": int(in_flight.max()),
        "in_flight_growth": round(growth, 2),
        "queue_reason": (
            f"requests in flight {'stayed level' if bounded else 'kept growing'} "
            f"(trend {growth:+.1f} over {span:.0f} s, mean {mean:.1f})"
        ),
    }


class BurstFirer:
    """Fires K requests every S seconds on top of the load, in its own thread."""

    def __init__(self, session: Session, count: int, every_s: float) -> None:
        self._session = session
        self._count = count
        self._every_s = every_s
        self._stop = threading.Event()
        self.fired_ns: list[int] = []
        self._thread = threading.Thread(target=self._run, name="gputui-bursts", daemon=True)

    def start(self) -> None:
        """Begin firing (the first burst after one period)."""
        self._thread.start()

    def stop(self) -> None:
        """Stop firing."""
        self._stop.set()
        self._thread.join(timeout=2.0)

    def _run(self) -> None:
        while not self._stop.wait(self._every_s):
            self.fired_ns.append(time.perf_counter_ns())
            self._session.burst(self._count)


def burst_recoveries(
    fired_ns: Sequence[int],
    count: int,
    records: Sequence[RequestRecord],
    trace: InFlightTrace,
    ttft_bound_s: float | None,
    origin_ns: int,
) -> list[dict[str, Any]]:
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
    t_all = np.array(trace.t_ns, dtype=np.int64)
    v_all = np.array(trace.in_flight, dtype=np.float64)
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
        recovered = ttft_s is not None and queue_s is not None
        out.append(
            {
                "at_s": round((fired - origin_ns) / 1e9, 3),
                "count": count,
                "ttft_bound_s": bound,
                "ttft_recovery_s": ttft_s,
                "queue_baseline": None if baseline is None else round(baseline, 2),
                "queue_recovery_s": queue_s,
                "recovery_s": max(ttft_s, queue_s) if recovered else None,  # type: ignore[type-var]
                "recovered": recovered,
            }
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
