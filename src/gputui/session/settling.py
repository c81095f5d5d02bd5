"""Where the open step's measured window starts: the Session's use of `metrics.steady`.

Contract: the Session makes one `SettleTracker` per step it opens without a fixed warm-up, feeds
it the engine's per-batch send counts and in-flight counts (`on_batch`), and asks it (`decide`)
with the step's finished records, all on the session loop's thread (`session.steady`, so no
lock); `decide` returns the `SteadyStart` once the load has settled (then it is final) and None
until then.

- Closed loop: the first wave is the first ceil(level) requests sent for the step. A finished
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
from gputui.metrics.steady import (
    SteadyStart,
    closed_loop_measure_start,
    open_loop_measure_start,
)
from gputui.metrics.step import StepMode

DEFAULT_MAX_WARMUP_S = 30.0
"""The longest a step waits to settle before its window opens anyway (`reason` says so)."""
_MIN_TREND_WINDOW_S = 2.0
_TREND_LIFETIMES = 2.0
"""Lifetimes in the trend window: in-flight counts wander over about one lifetime."""


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
    ) -> None:
        self.index = index
        self.mode = mode
        self.level = level
        self.change_ns = change_ns
        self.max_warmup_ns = int(max_warmup_s * 1e9)
        self.lifetime_hint_s = lifetime_hint_s
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
        if self._wave_at is None and sent >= max(int(np.ceil(self.level)), 1):
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
