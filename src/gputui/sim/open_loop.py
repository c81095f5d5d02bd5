"""Drive a `SimDevice` with an open-loop (Poisson) load in virtual time, as `vllm bench serve`.

Contract: `run_open_loop(device, arrivals)` submits each `Arrival` at its own time, whatever the
server is doing (open loop: `--request-rate R` draws exponential gaps of mean 1/R; rate inf sends
them all at t = 0), and returns every request's TTFT, E2E and token gaps as the benchmark client
would measure them. Time is virtual: the sum of iteration durations and idle gaps, so a 150-request
run at saturation costs milliseconds and gives the same answer every time. As on the HTTP sim
(`GpuProfile`), a request reaches the engine's queue `server_overhead_s` after it arrives (the API
server's own work), and that time counts in its TTFT.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from gputui.sim.device import SimDevice
from gputui.sim.gpu_profile import DEFAULT_SERVER_OVERHEAD_S
from gputui.sim.profile import SimRequest


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


def run_open_loop(
    device: SimDevice,
    arrivals: Sequence[Arrival],
    server_overhead_s: float = DEFAULT_SERVER_OVERHEAD_S,
) -> OpenLoopResult:
    """Serve `arrivals` (sorted by time) through `device` in virtual time; see the module doc."""
    sched = device.scheduler
    pending = sorted(enumerate(arrivals), key=lambda ia: ia[1].at_s)
    now_s = 0.0
    nxt = iterations = peak = 0
    first_at: dict[int, float] = {}
    last_at: dict[int, float] = {}
    count: dict[int, int] = {}
    ttft: list[float] = []
    e2e: list[float] = []
    itl: list[float] = []
    tpot: list[float] = []
    tokens = 0
    while nxt < len(pending) or sched.has_work:
        while nxt < len(pending) and pending[nxt][1].at_s + server_overhead_s <= now_s:
            rid, a = pending[nxt]
            sched.add(
                SimRequest(rid, int(a.at_s * 1e9), a.prompt_tokens, a.output_tokens, 0, True,
                           False, device.model.name)
            )  # fmt: skip
            nxt += 1
        it = device.begin()
        if it is None:
            queued_s = pending[nxt][1].at_s + server_overhead_s
            device.idle(queued_s - now_s)
            now_s = queued_s
            continue
        iterations += 1
        peak = max(peak, len(sched.running))
        now_s += it.duration_s
        result = device.end(it)
        for rid, n in result.emitted.items():
            tokens += n
            if rid in first_at:
                itl.append(now_s - last_at[rid])
            else:
                first_at[rid] = now_s
                ttft.append(now_s - arrivals[rid].at_s)
            last_at[rid] = now_s
            count[rid] = count.get(rid, 0) + n
        for rid, _reason in result.finished:
            e2e.append(now_s - arrivals[rid].at_s)
            if count[rid] > 1:
                tpot.append((now_s - first_at[rid]) / (count[rid] - 1))
    return OpenLoopResult(ttft, e2e, itl, tpot, tokens, now_s, peak, sched.num_preemptions_total)
