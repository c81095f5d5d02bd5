"""What the simulator really did, served as `GET /sim/stats`: the ground truth for fidelity tests.

Contract: the server stamps every token write with `time.perf_counter_ns()` and records, per
streamed request, the TTFT it actually delivered (first content-token write minus the request's
arrival stamp) and every gap between consecutive token writes of that request. Recording is an
`array('q')` append or an int increment, nothing more; percentiles are computed only when
`/sim/stats` is asked for. Non-streaming requests count in the request and token totals but add no
TTFT/ITL samples, because their tokens are never written one by one.

`reset()` clears the arrays in place; a stream in flight during a reset keeps recording into the
fresh totals, so after a reset `requests_completed` may briefly exceed `requests_started`.
"""

from __future__ import annotations

from array import array
from typing import Any


class TruthRecorder:
    """Counters and raw int-ns samples of what the server delivered."""

    __slots__ = (
        "itl_ns",
        "requests_cancelled",
        "requests_completed",
        "requests_started",
        "tokens",
        "ttft_ns",
    )

    def __init__(self) -> None:
        self.requests_started = 0
        self.requests_completed = 0
        self.requests_cancelled = 0
        self.tokens = 0
        self.ttft_ns: array[int] = array("q")
        """Arrival stamp to first content-token write, one per streamed request."""
        self.itl_ns: array[int] = array("q")
        """Gaps between consecutive token writes of one request."""

    def reset(self) -> None:
        """Forget everything recorded so far."""
        self.requests_started = 0
        self.requests_completed = 0
        self.requests_cancelled = 0
        self.tokens = 0
        del self.ttft_ns[:]
        del self.itl_ns[:]

    def snapshot(self) -> dict[str, Any]:
        """The `/sim/stats` JSON object (durations in ms)."""
        return {
            "requests_started": self.requests_started,
            "requests_completed": self.requests_completed,
            "requests_cancelled": self.requests_cancelled,
            "tokens": self.tokens,
            "ttft_ms": summarize_ms(self.ttft_ns),
            "itl_ms": summarize_ms(self.itl_ns),
        }


def summarize_ms(samples_ns: array[int]) -> dict[str, float | int | None]:
    """Mean and linear-interpolated p50/p90/p99 in ms of int-ns samples (None when empty)."""
    # numpy is imported here so that a sim process that is never asked for stats starts faster.
    import numpy as np

    n = len(samples_ns)
    if n == 0:
        return {"mean": None, "p50": None, "p90": None, "p99": None, "n": 0}
    values_ms = np.array(samples_ns, dtype=np.float64) / 1e6
    p50, p90, p99 = np.percentile(values_ms, [50, 90, 99], method="linear")
    return {
        "mean": float(values_ms.mean()),
        "p50": float(p50),
        "p90": float(p90),
        "p99": float(p99),
        "n": n,
    }
