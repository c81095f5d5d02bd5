"""Where the open step's measured window starts: the Session's use of `metrics.steady`.

Contract: the Session makes one `SettleTracker` per step it opens without a fixed warm-up, feeds
it the engine's per-batch send counts and in-flight counts (`on_batch`), and asks it (`decide`)
with the step's finished records, all on the session loop's thread (`session.steady`, so no
lock); `decide` returns the `SteadyStart` once the load has settled (then it is final) and None
until then.

- Closed loop: the first wave is the first ceil(level) requests sent at the step's level (those
  the hand-over sent before it, `sent_before` as last known, do not count). A finished
  record alone cannot prove a wave member is not still in flight, so the tracker uses the send
  counts: at the first batch whose count reached the wave (time t_b, count S_b), every request
  sent by t_b must have finished (finished with sent <= t_b >= S_b). Until then only the
  maximum warm-up can end the settling.
- Open loop: the in-flight samples at each batch, judged over a window of two request lifetimes
  (the larger of the step's median E2E so far and the latest finished step's; at least 2 s).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gputui.engine.records import RequestRecord
from gputui.metrics.confidence import min_n_two_sided
from gputui.metrics.steady import (
    SteadyStart,
    closed_loop_measure_start,
    open_loop_measure_start,
)
from gputui.metrics.step import StepMode

DEFAULT_MAX_WARMUP_S = 30.0
"""The longest a step waits to settle before its window opens anyway (`reason` says so)."""
MIN_SETTLE_S = 5.0
SETTLE_LIFETIMES = 3.0
"""A step settles within this many request lifetimes at its level (estimated: `settle_bound_s`)."""
P95_MIN_N = min_n_two_sided(0.95)
"""Requests behind a two-sided 95 % interval of a P95: no verdict before them."""
_MIN_TREND_WINDOW_S = 2.0
_TREND_LIFETIMES = 2.0
"""Lifetimes in the trend window: in-flight counts wander over about one lifetime."""


def settle_bound_s(
    max_warmup_s: float, lifetime_hint_s: float | None, level: float, previous_level: float | None
) -> float:
    """The longest a step settles: what its level needs, not a fixed `max_warmup_s`.

    The first wave takes about one request lifetime at the new level; the lifetime there is
    estimated as the step before's (`lifetime_hint_s`, its E2E p50) times the level's growth
    (latency grows at most in proportion to the load), and the bound is `SETTLE_LIFETIMES` of
    it, within [`MIN_SETTLE_S`, `max_warmup_s`]. Without an estimate: `max_warmup_s`.
    """
    if not lifetime_hint_s or lifetime_hint_s <= 0:
        return max_warmup_s
    growth = level / previous_level if previous_level and previous_level > 0 else 1.0
    needed_s = SETTLE_LIFETIMES * lifetime_hint_s * max(growth, 1.0)
    return min(max_warmup_s, max(MIN_SETTLE_S, needed_s))


def first_verdict_s(
    mode: StepMode, level: float, lifetime_hint_s: float | None, previous_level: float | None
) -> float | None:
    """About when a step's first verdict can come, from its start: settled, then enough requests.

    One lifetime at the level (estimated as in `settle_bound_s`) to settle, then the requests a
    two-sided P95 interval needs (`P95_MIN_N`): level / lifetime per second in closed loop, the
    rate in open loop. None without an estimate.
    """
    if not lifetime_hint_s or lifetime_hint_s <= 0 or level <= 0:
        return None
    growth = level / previous_level if previous_level and previous_level > 0 else 1.0
    lifetime_s = lifetime_hint_s * max(growth, 1.0)
    per_s = level / lifetime_s if mode == "concurrency" else level
    return lifetime_s + P95_MIN_N / per_s


class SettleTracker:
    """The settling of one step (module contract)."""

    def __init__(
        self,
        *,
        index: int,
        mode: StepMode,
        level: float,
        change_ns: int,
        max_warmup_s: float,
        lifetime_hint_s: float | None,
        sent_before: int = 0,
    ) -> None:
        self.index = index
        self.mode = mode
        self.level = level
        self.change_ns = change_ns
        self.max_warmup_ns = int(max_warmup_s * 1e9)
        self.lifetime_hint_s = lifetime_hint_s
        self.sent_before = sent_before
        """The step's requests sent before its level started (the hand-over's, as last known)."""
        self.result: SteadyStart | None = None
        self._wave_at: tuple[int, int] | None = None
        self._t_ns: list[int] = []
        self._in_flight: list[float] = []

    @property
    def bound_ns(self) -> int:
        """When the window opens at the latest."""
        return self.change_ns + self.max_warmup_ns

    def on_batch(self, now_ns: int, sent: int, in_flight: int) -> None:
        """The engine's send count for this step and its requests in flight, at `now_ns`."""
        if self.result is not None:
            return
        wave = max(int(np.ceil(self.level)), 1)
        if self._wave_at is None and sent - self.sent_before >= wave:
            self._wave_at = (now_ns, sent)
        self._t_ns.append(now_ns)
        self._in_flight.append(float(in_flight))

    def decide(self, now_ns: int, records: Sequence[RequestRecord]) -> SteadyStart | None:
        """The settled start, once known (final after the first non-None answer)."""
        if self.result is not None:
            return self.result
        sent = np.fromiter((r.sent_ns for r in records), dtype=np.int64, count=len(records))
        end = np.fromiter((r.end_ns for r in records), dtype=np.int64, count=len(records))
        if self.mode == "concurrency":
            found = self._closed(now_ns, sent, end)
        else:
            found = self._open(now_ns, sent, end)
        self.result = found
        return found

    def _closed(self, now_ns: int, sent: np.ndarray, end: np.ndarray) -> SteadyStart | None:
        wave_at = self._wave_at
        oldest: int | None = self.change_ns  # "a wave member may be in flight": only the bound
        if wave_at is not None:
            t_b, sent_b = wave_at
            early = sent <= t_b
            if int(early.sum()) >= sent_b:
                sent, end, oldest = sent[early], end[early], None
                if int((sent >= self.change_ns).sum()) < max(int(np.ceil(self.level)), 1):
                    # More of them were the hand-over's than last known: a later batch's count.
                    self._wave_at = None
        return closed_loop_measure_start(
            sent,
            end,
            change_ns=self.change_ns,
            level=self.level,
            now_ns=now_ns,
            max_warmup_ns=self.max_warmup_ns,
            oldest_in_flight_sent_ns=oldest,
        )

    def _open(self, now_ns: int, sent: np.ndarray, end: np.ndarray) -> SteadyStart | None:
        lifetime = self.lifetime_hint_s
        if sent.size >= 5:
            measured = float(np.median(end - sent)) * 1e-9
            # Early finishers are the quick ones: never shrink the window under the hint.
            lifetime = max(measured, lifetime or 0.0)
        window_s = max(_TREND_LIFETIMES * (lifetime or 1.0), _MIN_TREND_WINDOW_S)
        t = list(self._t_ns)
        y = list(self._in_flight)
        return open_loop_measure_start(
            t,
            y,
            change_ns=self.change_ns,
            now_ns=now_ns,
            window_ns=int(window_s * 1e9),
            max_warmup_ns=self.max_warmup_ns,
        )
