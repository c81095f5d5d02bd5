"""The live output tok/s from the engine's running count of streamed tokens (issue 31).

Contract: `StreamedRate.add(t_ns, tokens)` takes the engine's cumulative count of output tokens
received (`EngineStatus.tokens_streamed`: every request, those still streaming included) as it
stood when a batch reached the session; `rate(now_ns)` is the count's rise over the window
(now_ns - W, now_ns], per second, with the count at the window's start interpolated between the
two samples around it, or the rise since the first sample when the run is younger than W; None
before two samples. Unlike a window of finished requests, which sees a request's tokens only
once it ends (and so reads low by about E2E / (2 W) at a steady state), this counts tokens as
they arrive, the basis of a step's `output_tokens_per_s`. A count that falls (the engine
restarted) starts the history again.
"""

from __future__ import annotations

from collections import deque

_NS_PER_S = 1_000_000_000


class StreamedRate:
    """Tokens per second over the last `window_s`, from cumulative token counts."""

    def __init__(self, window_s: float) -> None:
        if window_s <= 0:
            raise ValueError(f"window_s must be positive, got {window_s}")
        self._window_ns = round(window_s * _NS_PER_S)
        self._samples: deque[tuple[int, int]] = deque()

    def clear(self) -> None:
        """Forget the history (the live view restarts)."""
        self._samples.clear()

    def add(self, t_ns: int, tokens: int) -> None:
        """The cumulative count `tokens` as it stood at `t_ns` (non-decreasing times)."""
        if self._samples and tokens < self._samples[-1][1]:
            self._samples.clear()
        self._samples.append((t_ns, tokens))

    def rate(self, now_ns: int) -> float | None:
        """Tokens per second over (now_ns - W, now_ns] (module contract)."""
        start = now_ns - self._window_ns
        samples = self._samples
        # Keep one sample at or before the window's start, for the interpolation.
        while len(samples) > 2 and samples[1][0] <= start:
            samples.popleft()
        if len(samples) < 2:
            return None
        t_end, c_end = samples[-1]
        t0, first = samples[0]
        c0 = float(first)
        if t0 < start:
            t1, c1 = samples[1]
            c0 = first + (c1 - first) * (start - t0) / (t1 - t0) if t1 > t0 else float(c1)
            t0 = start
        span_ns = max(now_ns, t_end) - t0
        return (c_end - c0) * _NS_PER_S / span_ns if span_ns > 0 else None
