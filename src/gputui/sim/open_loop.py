"""Drive a `SimDevice` with an open-loop (Poisson) load in virtual time, as `vllm bench serve`.

Contract: `run_open_loop(device, arrivals)` submits each `Arrival` at its own time, whatever the
server is doing (open loop: `--request-rate R` draws exponential gaps of mean 1/R; rate inf sends
them all at t = 0), and returns every request's TTFT, E2E and token gaps as the benchmark client
would measure them. Time is virtual: a 500-request run at saturation costs well under a second of
CPU and gives the same answer every time.

As on the HTTP sim (`GpuProfile`), two servers share the clock: the engine core (one iteration at a
time) and the API server's one CPU (`sim.frontend`: tokenizer micro-batches, admissions and token
deliveries, deliveries first). A request reaches the engine's queue once its batch's admission has
run, and never sooner than `server_overhead_s` after it arrived (the API layer's hand-offs); an
engine step's tokens leave the engine once the next step is launched (`sim.device.delivery_lag_s`,
vLLM's async scheduling) and reach the client when their delivery has run. `max_in_flight` caps the
requests the client has out at once (vLLM bench's `--max-concurrency`); the rest wait client-side
and their TTFT counts from the send.
"""

from __future__ import annotations

import heapq
import random
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from gputui.sim.device import SimDevice, delivery_lag_s
from gputui.sim.frontend import FrontEnd, FrontEndCosts
from gputui.sim.gpu_profile import DEFAULT_SERVER_OVERHEAD_S
from gputui.sim.profile import SimRequest
from gputui.sim.scheduler import Iteration, StepResult


@dataclass(frozen=True, slots=True)
class Arrival:
    """One request of an open-loop schedule."""

    at_s: float
    prompt_tokens: int
    output_tokens: int


@dataclass(frozen=True, slots=True)
class OpenLoopResult:
    """What the client measured, per request and per token gap (virtual seconds)."""

    ttft_s: list[float]
    e2e_s: list[float]
    itl_s: list[float]
    """Every gap between two tokens of a request, pooled over requests (vLLM bench's ITL)."""
    tpot_s: list[float]
    """Per request: (E2E - TTFT) / (output tokens - 1), for requests with two or more tokens."""
    output_tokens: int
    duration_s: float
    peak_running: int
    preemptions: int


def poisson_arrivals(
    rate: float, lengths: Sequence[tuple[int, int]], seed: int = 0
) -> list[Arrival]:
    """Arrivals at `rate` requests/s (exponential gaps; inf: all at 0), one per (prompt, output)."""
    rng = random.Random(seed)
    t = 0.0
    out: list[Arrival] = []
    for prompt, output in lengths:
        out.append(Arrival(t, prompt, output))
        if rate != float("inf"):
            t += rng.expovariate(rate)
    return out


@dataclass(slots=True)
class _Client:
    """What the benchmark client saw, as tokens were delivered."""

    arrivals: Sequence[Arrival]
    sent_at: dict[int, float] = field(default_factory=dict)
    first_at: dict[int, float] = field(default_factory=dict)
    last_at: dict[int, float] = field(default_factory=dict)
    count: dict[int, int] = field(default_factory=dict)
    ttft: list[float] = field(default_factory=list)
    e2e: list[float] = field(default_factory=list)
    itl: list[float] = field(default_factory=list)
    tpot: list[float] = field(default_factory=list)

    def receive(self, result: StepResult, now_s: float) -> int:
        """Record one step's tokens delivered at `now_s`; returns how many requests finished."""
        for rid, n in result.emitted.items():
            if rid in self.first_at:
                self.itl.append(now_s - self.last_at[rid])
            else:
                self.first_at[rid] = now_s
                self.ttft.append(now_s - self.sent_at[rid])
            self.last_at[rid] = now_s
            self.count[rid] = self.count.get(rid, 0) + n
        for rid, _reason in result.finished:
            self.e2e.append(now_s - self.sent_at[rid])
            if self.count[rid] > 1:
                self.tpot.append((now_s - self.first_at[rid]) / (self.count[rid] - 1))
        return len(result.finished)


def run_open_loop(
    device: SimDevice,
    arrivals: Sequence[Arrival],
    server_overhead_s: float = DEFAULT_SERVER_OVERHEAD_S,
    front_end: FrontEndCosts | None = None,
    max_in_flight: int | None = None,
) -> OpenLoopResult:
    """Serve `arrivals` through `device` and the API server in virtual time; see the module doc."""
    fe: FrontEnd[int | StepResult] = FrontEnd(FrontEndCosts() if front_end is None else front_end)
    sched = device.scheduler
    client = _Client(arrivals)
    order = sorted(range(len(arrivals)), key=lambda i: arrivals[i].at_s)
    held: deque[int] = deque()  # over max_in_flight: waiting client-side, in arrival order
    timers: list[tuple[float, int]] = []  # (when a tokenizer batch's window ends, its id)
    floor: list[tuple[float, int]] = []  # admitted, waiting out arrival + server_overhead_s
    emits: list[tuple[float, int, StepResult]] = []  # step results waiting for the next launch
    now_s = 0.0
    nxt = done = peak = in_flight = n_emits = 0
    it: Iteration | None = None
    ended: StepResult | None = None
    it_end = fe_end = float("inf")
    fe_job: tuple[tuple[int | StepResult, ...], int | StepResult | None] | None = None

    def enqueue(rid: int) -> None:
        a = arrivals[rid]
        sched.add(
            SimRequest(rid, int(a.at_s * 1e9), a.prompt_tokens, a.output_tokens, 0, True, False,
                       device.model.name)
        )  # fmt: skip

    while done < len(arrivals):
        t = min(
            arrivals[order[nxt]].at_s if nxt < len(order) else float("inf"),
            timers[0][0] if timers else float("inf"),
            floor[0][0] if floor else float("inf"),
            emits[0][0] if emits else float("inf"),
            it_end,
            fe_end,
        )
        if it is None:
            device.idle(t - now_s)
        now_s = t
        while nxt < len(order) and arrivals[order[nxt]].at_s <= now_s:
            held.append(order[nxt])
            nxt += 1
        while held and (max_in_flight is None or in_flight < max_in_flight):
            rid = held.popleft()
            in_flight += 1
            client.sent_at[rid] = now_s
            if (close_s := fe.tokenize(rid, arrivals[rid].prompt_tokens, now_s)) is not None:
                heapq.heappush(timers, (close_s, fe.batch_id))
        while timers and timers[0][0] <= now_s:
            fe.close_batch(heapq.heappop(timers)[1])
        if it is not None and it_end <= now_s:
            ended = device.end(it)
            it, it_end = None, float("inf")
        if fe_job is not None and fe_end <= now_s:
            batch, step = fe_job
            if isinstance(step, StepResult):
                finished = client.receive(step, now_s)
                done += finished
                in_flight -= finished
            for admitted in batch:  # never in the engine's queue before the overhead has passed
                assert isinstance(admitted, int)
                heapq.heappush(floor, (client.sent_at[admitted] + server_overhead_s, admitted))
            fe.done()
            fe_job, fe_end = None, float("inf")
        while floor and floor[0][0] <= now_s:
            enqueue(heapq.heappop(floor)[1])
        if it is None and (it := device.begin()) is not None:
            it_end = now_s + it.duration_s
            peak = max(peak, len(sched.running))
        if ended is not None:
            heapq.heappush(emits, (now_s + delivery_lag_s(it), n_emits, ended))
            n_emits += 1
            ended = None
        while emits and emits[0][0] <= now_s:
            out = heapq.heappop(emits)[2]
            fe.deliver(out, sum(out.emitted.values()))
        if fe_job is None and (job := fe.pop()) is not None:
            fe_job, fe_end = (job[0], job[1]), now_s + job[2]
    return OpenLoopResult(
        client.ttft, client.e2e, client.itl, client.tpot, sum(client.count.values()), now_s,
        peak, sched.num_preemptions_total,
    )  # fmt: skip
