"""vLLM's per-request latency histograms, observed from what the simulator scheduled and wrote.

Contract: `LatencyRecorder` is told when a request arrived at the API server (`arrived`), when it
entered the engine's queue (`queued`; arrival when never told), when the scheduler first put it
in a batch (`scheduled`), when each of its tokens was written (`token`) and when it ended
(`finished`). It then observes, as vLLM V1 does (`vllm/v1/metrics/loggers.py`):

- `vllm:time_to_first_token_seconds` = first token - arrival, at the first token;
- `vllm:inter_token_latency_seconds` = each gap between two tokens of a request, as it happens;
- at the request's end: `vllm:e2e_request_latency_seconds` = end - arrival,
  `vllm:request_queue_time_seconds` = first scheduled - queued,
  `vllm:request_prefill_time_seconds` = first token - first scheduled,
  `vllm:request_decode_time_seconds` = last token - first token,
  `vllm:request_inference_time_seconds` = end - first scheduled.

So TTFT = the server's overhead (queued - arrival) + queue + prefill, per request, as on a real
vLLM, whose TTFT histogram's mean exceeds queue + prefill by its API and tokenization time. Bucket
boundaries and labels (`engine`, `model_name`) are vLLM 0.32's. Besides the
histograms it keeps the last `MAX_RECORDS` finished requests' own values (`records()`, served as
`GET /sim/latency`), the ground truth that quantiles from buckets are checked against. A cancelled
request is forgotten (vLLM observes no latency for an aborted request). Cost per token: one dict
lookup and one `bisect`.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque
from typing import Final

TTFT_BUCKETS_S: Final = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
    2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
"""vLLM V1 `time_to_first_token_seconds` buckets."""
ITL_BUCKETS_S: Final = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0,
    2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
)  # fmt: skip
"""vLLM V1 `inter_token_latency_seconds` buckets."""
REQUEST_BUCKETS_S: Final = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
    120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip
"""vLLM V1 request-latency buckets (e2e, queue, prefill, decode, inference)."""
MAX_RECORDS: Final = 100_000

_PHASE: Final = "Histogram of time spent in {} phase for request."
HISTOGRAMS: Final[tuple[tuple[str, str, tuple[float, ...]], ...]] = (
    ("time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFT_BUCKETS_S),
    ("inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", ITL_BUCKETS_S),
    (
        "e2e_request_latency_seconds",
        "Histogram of e2e request latency in seconds.",
        REQUEST_BUCKETS_S,
    ),
    ("request_queue_time_seconds", _PHASE.format("WAITING"), REQUEST_BUCKETS_S),
    ("request_prefill_time_seconds", _PHASE.format("PREFILL"), REQUEST_BUCKETS_S),
    ("request_decode_time_seconds", _PHASE.format("DECODE"), REQUEST_BUCKETS_S),
    ("request_inference_time_seconds", _PHASE.format("RUNNING"), REQUEST_BUCKETS_S),
)
"""(vLLM name without the `vllm:` prefix, help text, bucket bounds)."""


class _Histogram:
    __slots__ = ("bounds", "count", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0
        self.count = 0

    def observe(self, value_s: float) -> None:
        # Prometheus buckets are `le`: a value equal to a bound belongs to that bound's bucket.
        self.counts[bisect_left(self.bounds, value_s)] += 1
        self.sum += value_s
        self.count += 1

    def lines(self, name: str, help_text: str, labels: str) -> list[str]:
        out = [f"# HELP {name} {help_text}", f"# TYPE {name} histogram"]
        cumulative = 0
        for bound, n in zip((*self.bounds, float("inf")), self.counts, strict=True):
            cumulative += n
            le = "+Inf" if bound == float("inf") else repr(float(bound))
            out.append(f'{name}_bucket{{le="{le}",{labels}}} {float(cumulative)!r}')
        out.append(f"{name}_sum{{{labels}}} {self.sum!r}")
        out.append(f"{name}_count{{{labels}}} {float(self.count)!r}")
        return out


class _Live:
    __slots__ = ("arrival_ns", "first_ns", "last_ns", "queued_ns", "scheduled_ns")

    def __init__(self, arrival_ns: int) -> None:
        self.arrival_ns = arrival_ns
        self.queued_ns = arrival_ns
        self.scheduled_ns = -1
        self.first_ns = -1
        self.last_ns = -1


class LatencyRecorder:
    """Per-request phases -> vLLM histograms and a bounded record (see the module docstring)."""

    def __init__(self, max_records: int = MAX_RECORDS) -> None:
        self._live: dict[int, _Live] = {}
        self._hist = {name: _Histogram(bounds) for name, _, bounds in HISTOGRAMS}
        self._ttft = self._hist["time_to_first_token_seconds"]
        self._itl = self._hist["inter_token_latency_seconds"]
        self._records: deque[dict[str, float]] = deque(maxlen=max_records)

    def arrived(self, request_id: int, arrival_ns: int) -> None:
        """The request reached the engine (its first byte was parsed)."""
        self._live[request_id] = _Live(arrival_ns)

    def queued(self, request_id: int, t_ns: int) -> None:
        """The request entered the engine's queue (after the API server's own work)."""
        live = self._live.get(request_id)
        if live is not None:
            live.queued_ns = t_ns

    def scheduled(self, request_id: int, t_ns: int) -> None:
        """The request is in this iteration's batch (only the first call counts)."""
        live = self._live.get(request_id)
        if live is not None and live.scheduled_ns < 0:
            live.scheduled_ns = t_ns

    def token(self, request_id: int, t_ns: int) -> None:
        """One output token of the request was written at `t_ns`."""
        live = self._live.get(request_id)
        if live is None:
            return
        if live.first_ns < 0:
            live.first_ns = t_ns
            self._ttft.observe((t_ns - live.arrival_ns) / 1e9)
        else:
            self._itl.observe((t_ns - live.last_ns) / 1e9)
        live.last_ns = t_ns

    def finished(self, request_id: int, t_ns: int) -> None:
        """The request's response ended at `t_ns`: observe its whole-request histograms."""
        live = self._live.pop(request_id, None)
        if live is None or live.first_ns < 0:
            return
        scheduled = live.scheduled_ns if live.scheduled_ns >= 0 else live.queued_ns
        values = {
            "e2e_request_latency_seconds": (t_ns - live.arrival_ns) / 1e9,
            "request_queue_time_seconds": (scheduled - live.queued_ns) / 1e9,
            "request_prefill_time_seconds": (live.first_ns - scheduled) / 1e9,
            "request_decode_time_seconds": (live.last_ns - live.first_ns) / 1e9,
            "request_inference_time_seconds": (t_ns - scheduled) / 1e9,
        }
        for name, value in values.items():
            self._hist[name].observe(value)
        self._records.append(
            {
                "request_id": request_id,
                "end_ns": t_ns,
                "ttft_s": (live.first_ns - live.arrival_ns) / 1e9,
                "overhead_s": (live.queued_ns - live.arrival_ns) / 1e9,
                "queue_s": values["request_queue_time_seconds"],
                "prefill_s": values["request_prefill_time_seconds"],
                "decode_s": values["request_decode_time_seconds"],
                "e2e_s": values["e2e_request_latency_seconds"],
            }
        )

    def cancelled(self, request_id: int) -> None:
        """The client went away: the request observes nothing more."""
        self._live.pop(request_id, None)

    def prometheus_text(self, served_model_name: str) -> str:
        """Every histogram in Prometheus text, labelled like vLLM's."""
        labels = f'engine="0",model_name="{served_model_name}"'
        out: list[str] = []
        for name, help_text, _ in HISTOGRAMS:
            out += self._hist[name].lines(f"vllm:{name}", help_text, labels)
        return "\n".join(out) + "\n"

    def records(self) -> list[dict[str, float]]:
        """The finished requests' own phase durations (seconds), oldest first."""
        return list(self._records)
