"""Why a loaded step is slow when the first rules found nothing: the causes past the knee.

Contract: `metrics.bottleneck.bottleneck` calls `refine_queue` when its queue rule holds,
`refine_bandwidth` when its decode-bandwidth rule does, and `explain_saturation` when no rule of
its own held. Both are pure functions of one step's
`StepEvidence` and return a `Finding` (a verdict, its evidence in words, and whether the evidence
is thin) or None. The causes, each with the evidence that names it (domain.md sections 1 and 9):

- `kv-capacity` (refines `queue`): requests wait while the KV cache is full (>= KV_FULL, or no
  room for one more request of the step's mean context) or the engine preempted requests.
- `scheduler-limit` (refines `queue`, or on its own): requests wait while the KV cache has room
  and the engine's running count sits at its ceiling (where free KV blocks are known, at its
  most in >= RUNNING_HELD_SHARE of the samples with requests waiting and room for them; else in
  >= RUNNING_AT_CAP_SHARE of the window's samples within RUNNING_CAP_SLACK of the most it ran,
  with a queue of >= QUEUE_OF_BATCH of that on average; under the streams a closed loop holds:
  vLLM's `max_num_seqs`, which its /metrics does not publish), or, with no plateau and no
  prefill interference, while every engine step's token budget is taken
  (`max_num_batched_tokens`): the queue holds >= QUEUE_SHARE_LOW of TTFT with KV room.
- `prefill-interference` (refines a failing step's `decode-bandwidth`, or on its own; never
  for one request at a time, whose prefill precedes its decode): ITL's
  P95 is >= ITL_SPIKE_RATIO times its median while prompts are being prefilled (prefill >=
  PREFILL_ACTIVE of peak FLOP/s): decode steps that carry a prefill chunk take many times
  longer, so TPOT grows with the arrival rate, not with the batch.
- `decode-compute`: TPOT grew by >= TPOT_GROWTH per doubling of load, the GPU was busy
  (>= GPU_BUSY_PCT) and decode used under `bottleneck.BANDWIDTH_HIGH` of the bandwidth: the
  batch's FLOPs, not its bytes, set the step time.
- `network` / `client`: weaker signs than the first rules need (RTT >= NETWORK_SHARE_LOW of
  TTFT; the client's mean CPU >= CLIENT_CPU_LOW %), taken only when the step fails or
  has saturated.

A failing or saturated step (`sla_failed`, or output tok/s grew < SATURATED_GAIN per doubling)
that none of these names gets the most likely cause with `low_confidence` set: the part of TTFT
or the roofline share that weighs most, else what the client saw (TPOT or ITL spikes for decode,
TTFT for the queue). A step neither failing nor saturated stays "none": more load is served.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from gputui.metrics.json_read import number
from gputui.metrics.step_diagnosis import Flat

if TYPE_CHECKING:
    from gputui.metrics.step_evidence import StepEvidence

RUNNING_AT_CAP_SHARE: Final = 0.8
RUNNING_HELD_SHARE: Final = 0.5
"""Where free KV blocks are known: the share of the samples with requests waiting and room for
them whose running count sat at its most. vLLM's gauges are its last engine step's: a scrape just
after a wave of equal requests finished reads the survivors with the next wave still waiting
(vLLM 0.32, CPU, max_num_seqs 4 at 8 streams: 3 of 5 samples at 4 running and 4 waiting, 2 at 1
running and 3 waiting, the cache 97 % free). Waiting with room and no ceiling shows no such
plateau: running wanders."""
RUNNING_CAP_SLACK: Final = 0.05
QUEUE_SHARE_LOW: Final = 0.3
QUEUE_OF_BATCH: Final = 0.1
ITL_SPIKE_RATIO: Final = 4.0
PREFILL_ACTIVE: Final = 0.05
TPOT_GROWTH: Final = 0.3
GPU_BUSY_PCT: Final = 90.0
NETWORK_SHARE_LOW: Final = 0.25
CLIENT_CPU_LOW: Final = 70.0
KV_BLOCKED_SHARE: Final = 0.5
"""Share of the samples with requests waiting that found no room for a prompt: KV-bound."""
BUDGET_STEP_RATIO: Final = 4.0
"""Tokens per engine step over running requests from which steps carry prefill chunks."""
SATURATED_GAIN: Final = 0.10
"""Output tok/s growth per doubling of load under which a step counts as saturated (the knee's)."""

SATURATION_VERDICTS: Final[dict[str, str]] = {
    "kv-capacity": "the KV cache is full: requests wait for blocks, preemptions recompute them",
    "scheduler-limit": "requests wait while KV has room: the engine's sequence or token limit",
    "prefill-interference": "prefill chunks stall decode steps: ITL spikes far over its median",
    "decode-compute": "decode at a large batch is compute-bound: TPOT grows, bandwidth to spare",
}
"""The verdicts of this module, one line each (merged into `bottleneck.VERDICTS`)."""


@dataclass(frozen=True, slots=True)
class Finding:
    """A cause, the evidence that names it, and whether that evidence is thin."""

    verdict: str
    evidence: tuple[str, ...]
    low_confidence: bool = False


def _part(b: Flat, key: str) -> float:
    """A breakdown's number at `key` (0 where it has none)."""
    return number(b, key) or 0.0


def _pct(x: float) -> str:
    return f"{x:.0%}"


def _ms(value_s: float) -> str:
    return f"{value_s * 1e3:.0f} ms" if value_s >= 0.0095 else f"{value_s * 1e3:.1f} ms"


def _per_doubling(now: float | None, before: float | None, e: StepEvidence) -> float | None:
    """Growth of a figure per doubling of load since the previous step (None: no trend)."""
    if now is None or before is None or before <= 0 or e.previous_level is None:
        return None
    if e.previous_level <= 0 or e.level <= e.previous_level:
        return None
    return float((now / before) ** (1.0 / math.log2(e.level / e.previous_level)) - 1.0)


def throughput_gain(e: StepEvidence) -> float | None:
    """Output tok/s growth per doubling of load since the previous step."""
    return _per_doubling(e.output_tokens_per_s, e.previous_output_tokens_per_s, e)


def is_loaded(e: StepEvidence) -> bool:
    """The step failed its SLA or its throughput stopped growing with the load."""
    gain = throughput_gain(e)
    return bool(e.sla_failed) or (gain is not None and gain < SATURATED_GAIN)


def kv_full(e: StepEvidence, usage_full: float) -> bool:
    """The KV cache could not admit the waiting requests.

    Judged by admission where the block count is known: as many requests ran as the cache holds
    whole (prompt + output) while others waited, or >= KV_BLOCKED_SHARE of the samples with
    requests waiting had fewer free blocks than one prompt needs (vLLM allocates whole blocks, so
    a cache that admits no one may read 85 %); else by usage >= `usage_full` or no room for one
    more request of the step's mean context.
    """
    holds, top = e.kv_holds_requests, e.running_max
    if holds is not None and top and e.waiting_max and top >= holds:
        return True  # as many ran as the cache holds whole, and more waited
    if e.kv_blocked_share is not None:
        return e.kv_blocked_share >= KV_BLOCKED_SHARE
    usage = e.kv_usage_max is not None and e.kv_usage_max >= usage_full
    return usage or (e.kv_room_requests is not None and e.kv_room_requests < 1.0)


def admission_text(e: StepEvidence) -> str | None:
    """'the cache holds 2 requests of the step's length, 2 ran; 4 of 32 KV blocks free ...'."""
    if e.kv_free_blocks_waiting is None or e.kv_need_blocks is None:
        return None
    holds = ""
    if e.kv_holds_requests is not None:
        holds = f"the cache holds {e.kv_holds_requests} requests of the step's length whole, "
        holds += f"{e.running_max} ran; " if e.running_max is not None else ""
    return (
        f"{holds}{e.kv_free_blocks_waiting} of {e.kv_blocks_total} KV blocks free while requests "
        f"waited (median), a prompt needs {e.kv_need_blocks}: no room in "
        f"{_pct(e.kv_blocked_share or 0.0)} of those samples"
    )


def _kv_text(e: StepEvidence) -> str:
    return "KV usage unknown" if e.kv_usage_max is None else f"KV cache {_pct(e.kv_usage_max)}"


def _waiting_text(e: StepEvidence) -> str:
    mean = e.waiting_mean if e.waiting_mean is not None else float(e.waiting_max or 0)
    return f"{mean:.0f} waiting on average (at most {e.waiting_max or 0})"


def _at_cap(e: StepEvidence) -> bool:
    """Running held at its most while requests waited that the KV cache could admit.

    Where the admission facts exist: >= RUNNING_HELD_SHARE of the samples with requests waiting
    and KV room had running at its max. Else: running near its max in most samples, with a queue
    of >= QUEUE_OF_BATCH of it on average. A closed loop at N streams also holds running near N,
    with the few requests that just arrived waiting for the next engine step: that plateau is the
    client's.
    """
    top = e.running_max
    if not top:
        return False
    streams = e.closed_loop_streams
    if streams is not None and top >= streams * (1.0 - RUNNING_CAP_SLACK):
        return False  # every stream the client holds runs: the ceiling is the client's
    if e.running_held_share is not None:
        return e.running_held_share >= RUNNING_HELD_SHARE
    share = e.running_at_max_share
    if share is None or share < RUNNING_AT_CAP_SHARE:
        return False
    waiting = e.waiting_mean if e.waiting_mean is not None else 0.0
    return waiting >= max(1.0, QUEUE_OF_BATCH * top)


def sequence_limited(e: StepEvidence) -> bool:
    """The server's gauges show its sequence limit (running held at its ceiling, `_at_cap`).

    Requests waited (>= 1 on average) with KV room while running sat at its most. Read from the
    server alone, so it holds whatever the client's clock did: a late client cannot fake it.
    """
    waiting = e.waiting_mean if e.waiting_mean is not None else e.waiting_max
    return bool(waiting and waiting >= 1 and e.kv_usage_max is not None and _at_cap(e))


def refine_queue(e: StepEvidence, usage_full: float) -> Finding | None:
    """What makes requests queue: the KV cache, or the scheduler's limits (None: unknown)."""
    if e.waiting_max and (kv_full(e, usage_full) or e.preemptions):
        admission = admission_text(e)
        if admission is not None:
            kv = f"{_kv_text(e)}; {admission}"
        else:
            full = e.kv_usage_max is not None and e.kv_usage_max >= usage_full
            room = ", no room for another request" if (e.kv_room_requests or 1.0) < 1.0 else ""
            kv = (f"KV cache full {_pct(e.kv_usage_max or 0.0)}" if full else _kv_text(e)) + room
        return Finding(
            "kv-capacity",
            (
                f"{kv}, {e.preemptions or 0} preemptions, {_waiting_text(e)}: "
                "requests wait for KV blocks",
            ),
        )
    return _scheduler(e)


def refine_bandwidth(e: StepEvidence) -> Finding | None:
    """A failing decode-bandwidth step whose ITL tail is prefill stalls (None: it is not)."""
    return _interference(e) if e.sla_failed else None


def _scheduler(e: StepEvidence, *, budget: bool = True) -> Finding | None:
    """`scheduler-limit`, saying which limit binds: the sequence limit or the token budget."""
    waiting = e.waiting_mean if e.waiting_mean is not None else e.waiting_max
    if not waiting or waiting < 1 or e.kv_usage_max is None:
        return None
    admission = admission_text(e)
    room = f"{_kv_text(e)}" + (f"; {admission}" if admission else "")
    if sequence_limited(e):
        held = e.running_held_share
        share = held if held is not None else (e.running_at_max_share or 0.0)
        return Finding(
            "scheduler-limit",
            (
                f"sequence limit: running held at {e.running_max} in {_pct(share)} of the samples "
                f"with requests waiting, {_waiting_text(e)}, {room}: the engine admits no more "
                "sequences (vLLM's max_num_seqs)",
            ),
        )
    if not budget:
        return None
    per_step, running = e.tokens_per_engine_step, e.running_mean
    if per_step is not None:
        if not running or per_step < BUDGET_STEP_RATIO * running:
            return None  # decode-only steps: the budget is not what holds the queue
        return Finding(
            "scheduler-limit",
            (
                f"token budget: engine steps carried {per_step:.0f} tokens on average for "
                f"{running:.0f} running, {_waiting_text(e)}, {room}: each step's batch-token "
                "budget is taken by prefill chunks (vLLM's max_num_batched_tokens)",
            ),
        )
    b = e.breakdown
    if b is not None and _part(b, "queue_share") >= QUEUE_SHARE_LOW:
        return Finding(
            "scheduler-limit",
            (
                f"token budget, likely: queue {_pct(_part(b, 'queue_share'))} of TTFT with "
                f"{_waiting_text(e)} and {room}, running not held at a ceiling (the server "
                "publishes no tokens per step to confirm it; vLLM's max_num_batched_tokens)",
            ),
            low_confidence=True,
        )
    return None


def _interference(e: StepEvidence) -> Finding | None:
    if _alone(e):
        return None  # no other request's prompt to prefill beside its decode: a host stall
    p50, p95 = e.itl_p50_s, e.itl_p95_s
    if not p50 or p95 is None or p95 < ITL_SPIKE_RATIO * p50:
        return None
    prefill = e.prefill_compute_utilization
    if prefill is not None and prefill < PREFILL_ACTIVE:
        return None
    load = "" if prefill is None else f" (prefill at {_pct(prefill)} of peak FLOP/s)"
    return Finding(
        "prefill-interference",
        (
            f"ITL P95 {_ms(p95)} is {p95 / p50:.0f}x its median {_ms(p50)}: decode steps wait "
            f"while prompts prefill{load}",
        ),
        low_confidence=prefill is None,
    )


def _alone(e: StepEvidence) -> bool:
    """One request at a time (one stream, or the server ran at most one).

    Its own prefill came before its decode, so no prefill can stall it. A real vLLM on a shared
    CPU host read ITL P95 6x its median at one stream (the host's pauses): not interference.
    """
    if e.closed_loop_streams is not None and e.closed_loop_streams < 2:
        return True
    return e.running_max is not None and e.running_max < 2


def _decode_compute(e: StepEvidence, bandwidth_high: float) -> Finding | None:
    growth = _per_doubling(e.tpot_p50_s, e.previous_tpot_p50_s, e)
    util, bandwidth = e.gpu_util_mean_pct, e.decode_bandwidth_utilization
    if growth is None or growth < TPOT_GROWTH or util is None or util < GPU_BUSY_PCT:
        return None
    if bandwidth is not None and bandwidth >= bandwidth_high:
        return None
    parts = [f"TPOT {growth:+.0%} per doubling", f"GPU busy {util:.0f} %"]
    if bandwidth is not None:
        parts.append(f"decode at {_pct(bandwidth)} of memory bandwidth")
    if e.decode_compute_utilization is not None:
        parts.append(f"decode FLOPs at {_pct(e.decode_compute_utilization)} of peak")
    return Finding(
        "decode-compute",
        (", ".join(parts) + ": the batch's compute, not its bytes, sets the step time",),
    )


def _weak_signs(e: StepEvidence) -> Finding | None:
    b = e.breakdown
    if b is not None and _part(b, "ttft_s") and _part(b, "network_share") >= NETWORK_SHARE_LOW:
        return Finding(
            "network",
            (f"network {_ms(_part(b, 'network_s'))} is {_pct(_part(b, 'network_share'))} of TTFT",),
            low_confidence=True,
        )
    cpu = e.client_cpu_max_pct if e.client_cpu_mean_pct is None else e.client_cpu_mean_pct
    if cpu is not None and cpu >= CLIENT_CPU_LOW:
        return Finding(
            "client", (f"client CPU {cpu:.0f} % while the step failed",), low_confidence=True
        )
    return None


def _most_likely(e: StepEvidence) -> Finding:
    """The cause the numbers lean to when no rule holds (always one: thin evidence)."""
    scores: list[tuple[float, str, str]] = []
    b = e.breakdown
    if b is not None and _part(b, "ttft_s"):
        scores.append(
            (_part(b, "queue_share"), "queue", f"queue {_pct(_part(b, 'queue_share'))} of TTFT")
        )
        prefill = f"prefill {_pct(_part(b, 'prefill_share'))} of TTFT"
        scores.append((_part(b, "prefill_share"), "prefill-compute", prefill))
    if e.decode_bandwidth_utilization is not None:
        share = e.decode_bandwidth_utilization
        scores.append((share, "decode-bandwidth", f"decode at {_pct(share)} of bandwidth"))
    if e.prefill_compute_utilization is not None:
        share = e.prefill_compute_utilization
        text = f"prefill at {_pct(share)} of peak FLOP/s"
        scores.append((share, "prefill-compute", text))
    if e.itl_p50_s and e.itl_p95_s and e.itl_p95_s >= 2 * e.itl_p50_s:
        ratio = e.itl_p95_s / e.itl_p50_s
        text = f"ITL P95 {ratio:.1f}x its median"
        scores.append((min(ratio / ITL_SPIKE_RATIO, 1.0), "prefill-interference", text))
    if scores:
        _score, verdict, text = max(scores)
        return Finding(verdict, (f"most likely: {text} (no rule's evidence is complete)",), True)
    growth = _per_doubling(e.tpot_p50_s, e.previous_tpot_p50_s, e)
    ttft_rise = _per_doubling(e.ttft_mean_s, e.previous_ttft_mean_s, e)
    if growth is not None and (ttft_rise is None or growth >= ttft_rise):
        text = f"TPOT {growth:+.0%} per doubling: the decode steps slow down"
        return Finding("decode-compute", (f"most likely: {text} (no server telemetry)",), True)
    text = "TTFT grows with the load: requests wait before their first token"
    return Finding("queue", (f"most likely: {text} (no server telemetry)",), True)


def explain_saturation(e: StepEvidence, bandwidth_high: float) -> Finding | None:
    """The cause of a step no first rule named (None: it neither failed nor saturated)."""
    rules = (
        _scheduler(e, budget=False),
        _interference(e),
        _scheduler(e),
        _decode_compute(e, bandwidth_high),
    )
    for rule in rules:
        if rule is not None:
            return rule
    if not is_loaded(e):
        return None
    return _weak_signs(e) or _most_likely(e)
