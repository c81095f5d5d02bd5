"""What the simulator really did, served as `GET /sim/stats`: the ground truth for fidelity tests.

Contract: the server stamps every token write with `time.perf_counter_ns()` and records, per
streamed request, the TTFT it actually delivered (first content-token write minus the request's
arrival stamp) and every gap between consecutive token writes of that request. Recording is an
`array('q')` append or an int increment, nothing more; percentiles are computed only when
`/sim/stats` is asked for. Non-streaming requests count in the request and token totals but add no
TTFT/ITL samples, because their tokens are never written one by one.

Per streamed request that completed, `requests` keeps one `RequestTruth` (the latest
`MAX_REQUEST_TRUTHS`): its arrival, the writes of its first token, first reasoning token and first
answer token (content or tool call), its last token write and its token and event counts, all in
the server's `perf_counter_ns()` (CLOCK_MONOTONIC: the same clock as a client on this machine).
`GET /sim/requests` serves them; a multi-token event adds one gap for its first token and a 0 ns gap
for each of the others (they were written together), so the ITL mean is the true per-token mean.

`reset()` clears the arrays in place; a stream in flight during a reset keeps recording into the
fresh totals, so after a reset `requests_completed` may briefly exceed `requests_started`.
"""

from __future__ import annotations

from array import array
from collections import deque
from dataclasses import asdict, dataclass
from typing import Final, TypedDict

from gputui.jsontypes import JsonOutObject

MAX_REQUEST_TRUTHS: Final = 100_000


Summary = dict[str, float | int | None]
"""`summarize_ms`: mean, p50, p90, p99 (ms) and n."""


class TruthStats(TypedDict):
    """The `/sim/stats` JSON object's counters and durations."""

    requests_started: int
    requests_completed: int
    requests_cancelled: int
    tokens: int
    ttft_ms: Summary
    itl_ms: Summary


@dataclass(frozen=True, slots=True)
class RequestTruth:
    """What the server did for one streamed request (int ns, its own clock)."""

    request_id: int
    arrival_ns: int
    first_token_ns: int | None
    first_reasoning_ns: int | None
    first_answer_ns: int | None
    last_token_ns: int | None
    tokens: int
    reasoning_tokens: int
    events: int
    """Token events (SSE events that carried at least one token)."""


class TruthRecorder:
    """Counters and raw int-ns samples of what the server delivered."""

    __slots__ = (
        "itl_ns",
        "requests",
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
        self.requests: deque[RequestTruth] = deque(maxlen=MAX_REQUEST_TRUTHS)

    def reset(self) -> None:
        """Forget everything recorded so far."""
        self.requests_started = 0
        self.requests_completed = 0
        self.requests_cancelled = 0
        self.tokens = 0
        del self.ttft_ns[:]
        del self.itl_ns[:]
        self.requests.clear()

    def requests_json(self) -> list[JsonOutObject]:
        """The `/sim/requests` JSON list, oldest first."""
        return [asdict(r) for r in self.requests]

    def snapshot(self) -> TruthStats:
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
