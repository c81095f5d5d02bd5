"""When a step has settled: where its measured window should start (docs/domain.md §3, §8).

Pure decision functions for the Session, which calls them while a step runs and re-calls them as
records and frames arrive; each returns None while the answer is not known yet.

- Closed loop (`closed_loop_measure_start`): after a change of concurrency to N, the first N
  requests sent at the new level start together and finish in a wave. The load has settled when
  that first wave has completed: the measured window starts at the last end among those N
  requests. Requests still in flight must be declared (`oldest_in_flight_sent_ns`), because a
  slow member of the wave is not among the finished records yet.
- Open loop (`open_loop_measure_start`): after a change of rate the number of requests in flight
  climbs (or drains) towards its new level over about one request lifetime. It has settled when a
  sliding window of in-flight samples stops trending: the window's least-squares slope is not
  significant (within two standard errors of zero, from the window's own residuals) or is
  negligible (the change it implies over the window is under 5 % of the mean plus its square
  root, the Poisson noise of a count, plus one request).
  The measured window starts where the first such window starts, provided every window starting
  within the next half window is level too (one lucky window on a growing queue is not enough).
  A server that cannot keep up never settles: the queue keeps growing. The caller picks the
  window: about two request lifetimes tells a growing queue from Poisson noise.
- Both are bounded: once `max_warmup_ns` has passed since the change without settling, the window
  starts at change + max_warmup_ns, and `reason` says the maximum ended the warm-up.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]

SteadyReason = Literal["first wave completed", "in flight stopped trending", "maximum warm-up"]


@dataclass(frozen=True, slots=True)
class SteadyStart:
    """Where the measured window starts, how long the warm-up was, and what ended it."""

    measure_start_ns: int
    warmup_s: float
    reason: SteadyReason


def _bounded(
    change_ns: int, at_ns: int | None, now_ns: int, max_warmup_ns: int, why: SteadyReason
) -> SteadyStart | None:
    limit = change_ns + max_warmup_ns
    if at_ns is not None and at_ns <= limit:
        return SteadyStart(at_ns, (at_ns - change_ns) * 1e-9, why)
    if at_ns is not None or now_ns >= limit:
        return SteadyStart(limit, max_warmup_ns * 1e-9, "maximum warm-up")
    return None


def closed_loop_measure_start(
    sent_ns: Sequence[int] | IntArray,
    end_ns: Sequence[int] | IntArray,
    *,
    change_ns: int,
    level: float,
    now_ns: int,
    max_warmup_ns: int,
    oldest_in_flight_sent_ns: int | None,
) -> SteadyStart | None:
    """Start of the measured window once the first wave at the new level has completed.

    `sent_ns`/`end_ns` are the finished requests (any order; those sent before `change_ns` are
    ignored); `oldest_in_flight_sent_ns` is the earliest send among requests still in flight, or
    None when none is. The wave is the first ceil(level) requests sent at or after the change.
    """
    sent = np.asarray(sent_ns, dtype=np.int64)
    end = np.asarray(end_ns, dtype=np.int64)
    wave = max(math.ceil(level), 1)
    after = sent >= change_ns
    if oldest_in_flight_sent_ns is not None:
        # Only finished requests sent before every unfinished one are surely the earliest.
        after &= sent < oldest_in_flight_sent_ns
    order = np.argsort(sent[after], kind="stable")
    at_ns = int(end[after][order[:wave]].max()) if order.size >= wave else None
    return _bounded(change_ns, at_ns, now_ns, max_warmup_ns, "first wave completed")


def open_loop_measure_start(
    t_ns: Sequence[int] | IntArray,
    in_flight: Sequence[float] | npt.NDArray[np.float64],
    *,
    change_ns: int,
    now_ns: int,
    window_ns: int,
    max_warmup_ns: int,
    min_samples: int = 8,
) -> SteadyStart | None:
    """Start of the measured window once requests in flight stop trending (module contract).

    `t_ns`/`in_flight` are samples of the in-flight count (e.g. the 4 Hz frames), ascending in
    time; only samples at or after `change_ns` count. A window is judged once it has elapsed.
    """
    t_all = np.asarray(t_ns, dtype=np.int64)
    keep = t_all >= change_ns
    t = (t_all[keep] - change_ns) * 1e-9
    y = np.asarray(in_flight, dtype=np.float64)[keep]
    at_ns = None
    if t.size >= min_samples:
        width = window_ns * 1e-9
        ends = np.searchsorted(t, t + width, side="left")
        elapsed = t + width <= t[-1]
        count = ends - np.arange(t.size)
        prefix = [np.concatenate(([0.0], np.cumsum(v))) for v in (t, y, t * t, t * y, y * y)]
        st, sy, stt, sty, syy = (p[ends] - p[: t.size] for p in prefix)
        n = np.maximum(count, 1).astype(np.float64)
        sxx = stt - st * st / n
        sxy = sty - st * sy / n
        syy_c = syy - sy * sy / n
        with np.errstate(divide="ignore", invalid="ignore"):
            slope = np.where(sxx > 0, sxy / sxx, np.inf)
            resid = np.maximum(syy_c - slope * sxy, 0.0) / np.maximum(n - 2, 1)
            se = np.sqrt(resid / sxx)
        mean = sy / n
        unproven = np.abs(slope) <= 2.0 * se
        # Poisson noise alone moves a count by about its square root over a lifetime or so.
        negligible = np.abs(slope) * width <= 0.05 * np.abs(mean) + np.sqrt(np.abs(mean)) + 1.0
        level = elapsed & (count >= min_samples) & (unproven | negligible)
        # Confirmed: every window starting within half a window after this one is level too, so
        # one lucky noisy window on a growing queue does not end the warm-up.
        bad = np.concatenate(([0], np.cumsum(~level)))
        confirm = np.searchsorted(t, t + width / 2, side="right")
        first = np.flatnonzero(level & (bad[confirm] == bad[: t.size]) & (confirm < t.size))
        if first.size:
            at_ns = change_ns + round(float(t[first[0]]) * 1e9)
    return _bounded(change_ns, at_ns, now_ns, max_warmup_ns, "in flight stopped trending")
