"""The "fixed" profile: every request gets exactly the configured TTFT and ITL, at any concurrency.

Contract: the first content token of a request is written at `arrival + ttft`, token k at `arrival +
ttft + k * itl` (absolute deadlines from the request's first byte, so late wake-ups never accumulate
into drift). It emits `max_tokens` tokens, finish_reason "length", unless `eos_after=N` is set and
the request has `ignore_eos` false: then the simulated model ends after max(N, min_tokens) tokens
with finish_reason "stop" (or "length" if max_tokens comes first). `itl_ms=0` writes tokens as fast
as possible, in bursts of `ZERO_ITL_BURST` (still one write per token), yielding to the loop between
bursts so every stream progresses. Timers come from `DeadlineScheduler` (timerfd on Linux: see
`deadlines.py` for the measured precision). There is no queue and no capacity limit: this profile is
the reference that a client's measured TTFT/ITL are checked against, not a model of a GPU.

`stream_style` (see `stream_style.py`) shapes the events; with speculative decoding
(`spec_decode_k` > 0) each deadline is one decode step that emits 1 + accepted draft tokens in one
event, so a request takes fewer steps, and /metrics carries vLLM's `spec_decode_*` counters.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Final

from gputui.sim.deadlines import DeadlineScheduler
from gputui.sim.profile import Profile, SimRequest, TokenSink
from gputui.sim.stream_style import SpecDecoder, StreamStyle

ZERO_ITL_BURST: Final = 16
"""Tokens written per turn of the loop when `itl_ms` is 0."""

_FINISH_REASONS: Final = ("stop", "length", "abort")


class _Stream:
    """One request being served: its next deadline and how many tokens are left."""

    __slots__ = ("_itl_ns", "_left", "_next_ns", "_profile", "reason", "request", "sink", "tick")

    def __init__(
        self,
        profile: FixedProfile,
        request: SimRequest,
        sink: TokenSink,
        n_tokens: int,
        reason: str,
    ) -> None:
        self._profile = profile
        self.request = request
        self.sink = sink
        self._left = n_tokens
        self.reason = reason
        self._itl_ns = profile.itl_ns
        self._next_ns = request.arrival_ns + profile.ttft_ns
        self.tick = self._tick
        """The bound method handed to the scheduler (bound once, not per token)."""

    def schedule(self) -> None:
        self._profile.scheduler.call_at_ns(self._next_ns, self.tick)

    def _tick(self) -> None:
        sink = self.sink
        if sink.closed:
            return
        left = self._left
        one_write = self._profile.coalesce_writes
        spec = self._profile.spec_decoder
        if spec is not None:  # one decode step: 1 + accepted drafts, one event
            batch = spec.step(left)
            if batch == left:
                sink.emit_tokens(batch, finish_reason=self.reason, one_event=True)
                self._profile.finished(self, batch)
                return
            sink.emit_tokens(batch, one_event=True)
        else:
            batch = 1 if self._itl_ns else min(left, ZERO_ITL_BURST)
            if batch == left:
                sink.emit_tokens(batch, finish_reason=self.reason, one_write=one_write)
                self._profile.finished(self, batch)
                return
            sink.emit_tokens(batch, one_write=one_write)
        self._profile.generation_tokens += batch
        self._left = left - batch
        self._next_ns += self._itl_ns
        self._profile.scheduler.call_at_ns(self._next_ns, self.tick)


class FixedProfile:
    """Constant TTFT and ITL for every request; see the module docstring."""

    name = "fixed"

    def __init__(
        self,
        ttft_ms: float = 50.0,
        itl_ms: float = 10.0,
        eos_after: int | None = None,
        *,
        served_model_name: str = "sim-model",
        use_timerfd: bool | None = None,
        coalesce_writes: bool = False,
        stream_style: StreamStyle | None = None,
    ) -> None:
        if ttft_ms < 0 or itl_ms < 0:
            raise ValueError(f"ttft_ms and itl_ms must be >= 0, got {ttft_ms} and {itl_ms}")
        if eos_after is not None and eos_after < 1:
            raise ValueError(f"eos_after must be >= 1, got {eos_after}")
        self.ttft_ns = round(ttft_ms * 1e6)
        self.itl_ns = round(itl_ms * 1e6)
        self.eos_after = eos_after
        self.served_model_name = served_model_name
        self._use_timerfd = use_timerfd
        self.coalesce_writes = coalesce_writes and self.itl_ns == 0
        """At ITL 0, write each burst of events in one write (client-capacity benchmarks)."""
        self.stream_style = stream_style or StreamStyle()
        """Read by the server: how each stream's events look."""
        style = self.stream_style
        self.spec_decoder = (
            SpecDecoder(style.spec_decode_k, style.spec_accept, style.seed)
            if style.spec_decode_k
            else None
        )
        self._scheduler: DeadlineScheduler | None = None
        self._streams: dict[int, _Stream] = {}
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.finished_by_reason = dict.fromkeys(_FINISH_REASONS, 0)

    @property
    def scheduler(self) -> DeadlineScheduler:
        """The loop's deadline scheduler (after `bind`)."""
        if self._scheduler is None:
            raise RuntimeError("FixedProfile.bind(loop) must be called before serving")
        return self._scheduler

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Create the deadline scheduler on the server's loop."""
        self._scheduler = DeadlineScheduler(loop, use_timerfd=self._use_timerfd)

    def output_tokens(self, request: SimRequest) -> tuple[int, str]:
        """How many tokens `request` gets and its finish_reason."""
        if self.eos_after is None or request.ignore_eos:
            return request.max_tokens, "length"
        n_tokens = max(self.eos_after, request.min_tokens)
        if n_tokens >= request.max_tokens:
            return request.max_tokens, "length"
        return n_tokens, "stop"

    def start(self, request: SimRequest, sink: TokenSink) -> None:
        """Schedule the request's first token at arrival + TTFT."""
        n_tokens, reason = self.output_tokens(request)
        stream = _Stream(self, request, sink, n_tokens, reason)
        self._streams[request.request_id] = stream
        self.prompt_tokens += request.prompt_tokens
        stream.schedule()

    def finished(self, stream: _Stream, last_tokens: int) -> None:
        """A stream wrote its last token."""
        self.generation_tokens += last_tokens
        self.finished_by_reason[stream.reason] += 1
        self._streams.pop(stream.request.request_id, None)

    def cancel(self, request_id: int) -> None:
        """Forget the request; its pending timer finds the sink closed and does nothing."""
        if self._streams.pop(request_id, None) is not None:
            self.finished_by_reason["abort"] += 1

    def prometheus_text(self) -> str:
        """vLLM-named counters, so a server-metrics poller can be tested against the sim."""
        label = f'model_name="{self.served_model_name}"'
        lines = [
            "# HELP vllm:num_requests_running Number of requests in model execution batches.",
            "# TYPE vllm:num_requests_running gauge",
            f"vllm:num_requests_running{{{label}}} {float(len(self._streams))}",
            "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.",
            "# TYPE vllm:num_requests_waiting gauge",
            f"vllm:num_requests_waiting{{{label}}} 0.0",
            "# HELP vllm:prompt_tokens_total Number of prefill tokens processed.",
            "# TYPE vllm:prompt_tokens_total counter",
            f"vllm:prompt_tokens_total{{{label}}} {float(self.prompt_tokens)}",
            "# HELP vllm:generation_tokens_total Number of generation tokens processed.",
            "# TYPE vllm:generation_tokens_total counter",
            f"vllm:generation_tokens_total{{{label}}} {float(self.generation_tokens)}",
            "# HELP vllm:request_success_total Count of successfully processed requests.",
            "# TYPE vllm:request_success_total counter",
        ]
        lines.extend(
            f'vllm:request_success_total{{finished_reason="{reason}",{label}}} {float(count)}'
            for reason, count in self.finished_by_reason.items()
        )
        if self.spec_decoder is not None:
            lines.extend(self.spec_decoder.prometheus_lines(label))
        return "\n".join(lines) + "\n"


@dataclass(frozen=True, slots=True)
class FixedProfileSpec:
    """A picklable recipe for a `FixedProfile`, for starting the sim in another process."""

    ttft_ms: float = 50.0
    itl_ms: float = 10.0
    eos_after: int | None = None
    served_model_name: str = "sim-model"
    use_timerfd: bool | None = None
    """None: timerfd where available; False forces the loop's `call_at` (for comparisons)."""
    coalesce_writes: bool = False
    """At ITL 0, one write per burst of 16 events (see FixedProfile)."""
    stream_style: StreamStyle | None = None

    def build(self) -> Profile:
        """The profile, built in the process that will serve it."""
        return FixedProfile(
            self.ttft_ms,
            self.itl_ms,
            self.eos_after,
            served_model_name=self.served_model_name,
            use_timerfd=self.use_timerfd,
            coalesce_writes=self.coalesce_writes,
            stream_style=self.stream_style,
        )
