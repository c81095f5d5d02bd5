"""The GPU profile: the simulated engine core driven on the HTTP server's event loop.

Contract (the `Profile` seam in profile.py): the server calls `start` for each parsed request and
`cancel` when a client goes away; the profile runs one iteration at a time, each as a
deadline at its roofline end time (`DeadlineScheduler`: a timerfd, tens of microseconds late at
most, where `loop.call_at` would be a millisecond off), and on completion writes one token per
decoding sequence (and the first token when a chunked prefill completes) through the request's
`TokenSink`; a request's last token carries its finish reason. Nothing blocks and nothing runs in
threads. `prometheus_text()` exposes vLLM's and dcgm-exporter's names, and `max_model_len` tells
the server which requests to reject.

Like vLLM's API server, the profile spends `server_overhead_s` (`gputui sim --server-overhead-ms`,
DEFAULT_SERVER_OVERHEAD_S) between a request's arrival and its entry in the engine's queue (the API
layer, tokenization, the hand-over to the engine core): vLLM's TTFT histogram counts it, its queue
and prefill histograms do not, so TTFT - queue - prefill is that overhead. Part of it is CPU on the
API server's one loop (`sim.frontend`: prompts wait for the tokenizer's micro-batch, admitting
costs per prompt token, and every engine step's tokens cost CPU to stream, streaming first): idle,
a request still reaches the queue `server_overhead_s` after it arrived (or after its batch window
and admission CPU, if longer); in a burst the admissions queue behind the streams, as in
`sim.open_loop`. A step's tokens leave the engine once the next step is launched
(`sim.device.delivery_lag_s`, vLLM's async scheduling) and are written when their delivery has
run. `cached_tokens` goes out in usage only with `prompt_tokens_details` (vLLM's
`--enable-prompt-tokens-details`; off by default, as in vLLM).

`GpuProfileSpec` is the picklable recipe the server's process runner sends to the server process;
`spec.build()` raises `CatalogError` for unknown names and `ModelDoesNotFit` when the weights leave
no room for a KV cache, both with a message fit for one CLI line.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections import deque
from dataclasses import dataclass
from functools import partial
from typing import Final

from gputui.catalog.specs import check_precision, get_gpu, get_model
from gputui.sim.deadlines import DeadlineScheduler
from gputui.sim.device import SimDevice, delivery_lag_s, make_device
from gputui.sim.frontend import DEFAULT_FRONT_END, NO_FRONT_END, FrontEnd, FrontEndCosts
from gputui.sim.gpu_metrics import render_metrics, simulated_uuid
from gputui.sim.latency import LatencyRecorder
from gputui.sim.profile import CachedTokensSink, SimRequest, TokenSink
from gputui.sim.scheduler import Iteration, StepResult
from gputui.sim.stream_style import StreamStyle

DEFAULT_SERVER_OVERHEAD_S: Final = 0.003
"""The API server's own time before the engine queue (a real vLLM on CPU spent several ms)."""
LATE_TOLERANCE_NS: Final = 50_000_000
"""When an iteration's callback runs less than this late, the next iteration starts at the planned
end time: the simulated GPU keeps its own timeline and the sim host's lateness shows only as
jitter in when tokens are written (a request queued after that planned start waits for a later
pass: `_pending`). Later than that (a stopped process, a long pause), the GPU is deemed to have
idled, so the sim never spews a backlog of iterations. It was 2 ms: at saturation the server's own
per-token work (150 streams' writes) and a busy host made callbacks later than that, each delay
became GPU idle time, and the simulated TPOT grew with the host's load: h100 + 8B, 150 requests at
once, mean TPOT against the same arrivals in virtual time 1.27x on this shared host and 1.65-2.82x
with a CPU hog beside it; with 50 ms 1.00-1.01x and 1.10-1.12x (benchmarks/sim_http_saturation.py:
the stalls left are over 50 ms)."""


@dataclass(frozen=True, slots=True)
class GpuProfileSpec:
    """Everything needed to build a `GpuProfile` in another process (plain, picklable values)."""

    gpu: str
    model: str
    precision: str = "bf16"
    kv_dtype: str = "bf16"
    gpu_memory_utilization: float = 0.9
    max_num_seqs: int | None = None
    """None: vLLM's default for the GPU (256, or 1024 on >= 70 GiB non-A100 cards)."""
    max_batched_tokens: int | None = None
    """None: vLLM's default for the GPU (2048, or 8192 on >= 70 GiB non-A100 cards)."""
    seed: int = 0
    prefix_caching: bool = True
    """vLLM V1's automatic prefix caching (`gputui sim --no-prefix-caching` turns it off)."""
    served_model_name: str = ""
    """Name reported in /v1/models and the `model_name` label; empty means the catalog name."""
    stream_style: StreamStyle | None = None
    """Reasoning, tool calls, tokens per event (speculative decoding: the fixed profile only)."""
    server_overhead_s: float = DEFAULT_SERVER_OVERHEAD_S
    """Arrival to the engine's queue: in vLLM's TTFT histogram, not in its queue or prefill."""
    prompt_tokens_details: bool = False
    """vLLM's `--enable-prompt-tokens-details`: usage carries `cached_tokens` (final chunk)."""
    front_end: FrontEndCosts = DEFAULT_FRONT_END
    """The API server's CPU per prompt token admitted and per token streamed (`sim.frontend`)."""

    def __post_init__(self) -> None:
        if self.stream_style is not None and self.stream_style.spec_decode_k:
            raise ValueError("speculative decoding (--spec-decode-k) needs the fixed profile")
        if not self.served_model_name:
            object.__setattr__(self, "served_model_name", self.model)

    def build_device(self) -> SimDevice:
        """Validate the names and sizes and build the simulated engine core."""
        precision, kv_dtype = check_precision(self.precision, self.kv_dtype)
        return make_device(
            get_gpu(self.gpu),
            get_model(self.model),
            precision,
            kv_dtype,
            self.gpu_memory_utilization,
            self.max_num_seqs,
            self.max_batched_tokens,
            self.seed,
            prefix_caching=self.prefix_caching,
        )

    def build(self) -> GpuProfile:
        """Build the profile (raises `CatalogError` or `ModelDoesNotFit`)."""
        profile = GpuProfile(
            self.build_device(),
            self.served_model_name,
            simulated_uuid(self.gpu, self.seed),
            server_overhead_s=self.server_overhead_s,
            prompt_tokens_details=self.prompt_tokens_details,
            front_end=self.front_end,
        )
        if self.stream_style is not None:
            profile.stream_style = self.stream_style
        return profile


_Job = tuple[SimRequest | StepResult, int]
"""An API-server work item: a request to admit or a step to deliver, and when it was ready."""


class GpuProfile:
    """Serves requests with the timing of a simulated GPU (see the module docstring)."""

    name: str = "gpu"

    def __init__(
        self,
        device: SimDevice,
        served_model_name: str,
        uuid: str,
        *,
        use_timerfd: bool | None = None,
        server_overhead_s: float = 0.0,
        prompt_tokens_details: bool = False,
        front_end: FrontEndCosts = NO_FRONT_END,
    ) -> None:
        self.device = device
        self._front_end: FrontEnd[_Job] = FrontEnd(front_end)
        """Items are (request to admit or step to deliver, when it arrived or became ready)."""
        self._front_end_free_ns = 0
        """When the API server's CPU finishes its last job (its timeline, not the loop's)."""
        self._overhead_ns = round(server_overhead_s * 1e9)
        self._prompt_tokens_details = prompt_tokens_details
        self.served_model_name = served_model_name
        self.uuid = uuid
        self.stream_style = StreamStyle()
        """Read by the server: how each stream's events look."""
        self._use_timerfd = use_timerfd
        """None: a timerfd where available; False forces the loop's timers."""
        self._deadlines: DeadlineScheduler | None = None
        self._sinks: dict[int, TokenSink] = {}
        self._pending: deque[tuple[int, SimRequest]] = deque()
        """(queued_ns, request) that reached the queue while a pass ran: each joins the first pass
        planned to start after it was queued, even when that pass's callback runs late."""
        self._busy = False
        self._closed = False
        self._idle_since_ns = time.perf_counter_ns()
        """When the device last ran out of work (meaningful while not busy)."""
        self.latency = LatencyRecorder()
        """vLLM's latency histograms, from what this profile scheduled and wrote."""

    @property
    def max_model_len(self) -> int:
        """Longest prompt + max_tokens served (the model's limit or the whole KV pool)."""
        return self.device.max_model_len

    def summary(self) -> str:
        """One line for the server's start-up log: what was simulated and how the memory splits."""
        d = self.device
        p = d.plan
        s = d.scheduler
        return (
            f"{d.gpu.name} / {d.model.name} {d.precision} (KV {d.kv_dtype}): weights "
            f"{p.weight_bytes / 1e9:.1f} GB, reserve {p.reserve_bytes / 1e9:.1f} GB, KV pool "
            f"{p.kv_pool_bytes / 1e9:.1f} GB = {p.num_blocks} blocks ({p.capacity_tokens} tokens); "
            f"max_num_seqs {s.max_num_seqs}, max_batched_tokens {s.max_batched_tokens}, "
            f"max_model_len {self.max_model_len}"
        )

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Create the deadline scheduler on the server's loop; the card is idle from now."""
        self._deadlines = DeadlineScheduler(loop, use_timerfd=self._use_timerfd)
        self._idle_since_ns = time.perf_counter_ns()

    def start(self, request: SimRequest, sink: TokenSink) -> None:
        """Queue a request; one longer than `max_model_len` is cut to fit (finish "length")."""
        if self._deadlines is None:
            raise RuntimeError("GpuProfile.bind(loop) must be called before use")
        limit = self.max_model_len
        if request.prompt_tokens >= limit or request.max_tokens < 1:
            sink.finish("length")  # the server rejects these first; never let them stall the queue
            return
        if request.prompt_tokens < 1:
            request = dataclasses.replace(request, prompt_tokens=1)  # BOS: vLLM never sees 0
        if request.prompt_tokens + request.max_tokens > limit:
            request = dataclasses.replace(request, max_tokens=limit - request.prompt_tokens)
        self._sinks[request.request_id] = sink
        self.latency.arrived(request.request_id, request.arrival_ns)
        fe = self._front_end
        close_s = fe.tokenize((request, request.arrival_ns), request.prompt_tokens,
                              request.arrival_ns / 1e9)  # fmt: skip
        if close_s is None:
            self._run_front_end(request.arrival_ns)
            return
        close_ns = round(close_s * 1e9)
        if close_ns > time.perf_counter_ns():
            self._deadlines.call_at_ns(close_ns, partial(self._close_batch, fe.batch_id, close_ns))
        else:
            self._close_batch(fe.batch_id, close_ns)

    def _close_batch(self, batch_id: int, at_ns: int) -> None:
        """The tokenizer's batch window ended: its admission waits for the API server's CPU."""
        self._front_end.close_batch(batch_id)
        self._run_front_end(at_ns)

    def _run_front_end(self, at_ns: int) -> None:
        """Start the API server's next job at `at_ns` if its CPU is free; free jobs run at once."""
        while not self._closed and (job := self._front_end.pop()) is not None:
            batch, step, cost_s = job
            ready_ns = max(ready for _, ready in batch) if step is None else step[1]
            at_ns = max(at_ns, ready_ns, self._front_end_free_ns)  # timers may run out of order
            if cost_s > 0.0 and self._deadlines is not None:
                end_ns = self._front_end_free_ns = at_ns + round(cost_s * 1e9)
                self._deadlines.call_at_ns(end_ns, partial(self._front_end_done, job, end_ns))
                return
            self._front_end.done()
            self._finish_job(batch, step, at_ns)

    def _front_end_done(
        self, job: tuple[tuple[_Job, ...], _Job | None, float], end_ns: int
    ) -> None:
        self._front_end.done()
        if self._closed:
            return
        self._finish_job(job[0], job[1], end_ns)
        self._run_front_end(end_ns)

    def _finish_job(self, batch: tuple[_Job, ...], step: _Job | None, at_ns: int) -> None:
        if step is not None:
            assert isinstance(step[0], StepResult)
            self._deliver(step[0])
        for request, arrival_ns in batch:  # never in the queue before the overhead has passed
            assert isinstance(request, SimRequest)
            queued_ns = max(at_ns, arrival_ns + self._overhead_ns)
            if queued_ns > time.perf_counter_ns() and self._deadlines is not None:
                self._deadlines.call_at_ns(queued_ns, partial(self._enqueue, request, queued_ns))
            else:
                self._enqueue(request, queued_ns)

    def _enqueue(self, request: SimRequest, queued_ns: int) -> None:
        """The request reaches the engine's queue (after the API server's overhead)."""
        sink = self._sinks.get(request.request_id)
        if sink is None or sink.closed or self._closed:
            self._sinks.pop(request.request_id, None)
            self.latency.cancelled(request.request_id)
            return
        self.latency.queued(request.request_id, queued_ns)
        if self._busy:
            self._pending.append((queued_ns, request))
            return
        self.device.scheduler.add(request)
        now_ns = time.perf_counter_ns()
        self._catch_up_idle(now_ns)
        self._launch(now_ns)

    def cancel(self, request_id: int) -> None:
        """Release a request's KV blocks and stop writing to it."""
        self._sinks.pop(request_id, None)
        self._pending = deque(p for p in self._pending if p[1].request_id != request_id)
        self.device.scheduler.cancel(request_id)
        self.latency.cancelled(request_id)

    def close(self) -> None:
        """Stop scheduling (server shutdown); in-flight requests are abandoned."""
        self._closed = True
        if self._deadlines is not None:
            self._deadlines.close()

    def reset_prefix_cache(self) -> bool:
        """Drop the prefix cache (`POST /reset_prefix_cache`); False while blocks are in use."""
        return self.device.scheduler.pool.reset_cache()

    def prometheus_text(self) -> str:
        """The vLLM and DCGM metrics of the simulated server and card, brought up to date."""
        if not self._busy:
            self._catch_up_idle(time.perf_counter_ns())
        return render_metrics(
            self.device, self.served_model_name, self.uuid
        ) + self.latency.prometheus_text(self.served_model_name)

    def latency_records(self) -> list[dict[str, float]]:
        """Each finished request's own queue/prefill/decode/TTFT/E2E (for `GET /sim/latency`)."""
        return self.latency.records()

    def _catch_up_idle(self, now_ns: int) -> None:
        self.device.idle((now_ns - self._idle_since_ns) / 1e9)
        self._idle_since_ns = now_ns

    def _launch(self, start_ns: int) -> Iteration | None:
        """Start the next pass at `start_ns`; returns it (None when idle, or started later)."""
        if self._pending:  # held requests queued by the pass's start join it, in queue order
            ready = sorted((p for p in self._pending if p[0] <= start_ns), key=lambda p: p[0])
            self._pending = deque(p for p in self._pending if p[0] > start_ns)
            for _, request in ready:
                self.device.scheduler.add(request)
        it = self.device.begin()
        if it is None and self._pending:  # idle until the next held request reached the queue
            queued_ns = min(q for q, _ in self._pending)
            self.device.idle((queued_ns - start_ns) / 1e9)
            self._launch(queued_ns)
            return None
        if it is None or self._deadlines is None:
            self._busy = False
            self._idle_since_ns = start_ns
            return None
        self._busy = True
        scheduled = self.latency.scheduled
        for seq, _, _ in it.scheduled:
            scheduled(seq.request_id, start_ns)
        end_ns = start_ns + round(it.duration_s * 1e9)
        self._deadlines.call_at_ns(end_ns, partial(self._on_iteration_done, it, end_ns))
        return it

    def _on_iteration_done(self, it: Iteration, end_ns: int) -> None:
        if self._closed:
            return
        result = self.device.end(it)
        now_ns = time.perf_counter_ns()
        late_ns = now_ns - end_ns
        start_ns = now_ns if late_ns > LATE_TOLERANCE_NS else end_ns
        if late_ns > LATE_TOLERANCE_NS:
            self.device.idle(late_ns / 1e9)
        emit_ns = start_ns + round(delivery_lag_s(self._launch(start_ns)) * 1e9)
        if emit_ns > start_ns and self._deadlines is not None:
            self._deadlines.call_at_ns(emit_ns, partial(self._emit, result, emit_ns))
        else:
            self._emit(result, start_ns)

    def _emit(self, result: StepResult, at_ns: int) -> None:
        """A step's tokens leave the engine: the API server streams them (sim.frontend)."""
        if self._closed:
            return
        self._front_end.deliver((result, at_ns), sum(result.emitted.values()))
        self._run_front_end(at_ns)

    def _deliver(self, result: StepResult) -> None:
        """Write one engine step's tokens to their streams (the API server's delivery has run)."""
        sinks = self._sinks
        for rid, cached in result.cached.items() if self._prompt_tokens_details else ():
            target: object = sinks.get(rid)
            if isinstance(target, CachedTokensSink):
                target.cached_tokens = cached
        finished = dict(result.finished)
        latency = self.latency
        written_ns = time.perf_counter_ns()
        for rid, count in result.emitted.items():
            sink = sinks.get(rid)
            if sink is None:
                continue
            reason = finished.get(rid)
            if sink.closed:
                if reason is None:
                    self.cancel(rid)  # the client left and the server did not tell us yet
                else:
                    del sinks[rid]
                    latency.cancelled(rid)
            elif reason is None:
                sink.emit_tokens(count)
                latency.token(rid, written_ns)
            else:
                sink.emit_tokens(count, reason)
                del sinks[rid]
                latency.token(rid, written_ns)
                latency.finished(rid, written_ns)
