"""Drive a `SimDevice` with a closed-loop load in virtual time: physics checks in milliseconds.

Contract: `run_closed_loop` keeps `concurrency` requests in flight (a new one is submitted the
moment one finishes, as a fixed-concurrency client does, domain.md §3) and returns what a client
and the server would have measured. No event loop and no sleeping: time is the sum of iteration
durations, so a 10-minute load runs in well under a second. Output throughput is measured only
while the target concurrency is held (after the first `concurrency` completions and before the
last submission), which excludes the start-up ramp and the drain.
"""

from __future__ import annotations

from dataclasses import dataclass

from gputui.sim.device import SimDevice
from gputui.sim.profile import SimRequest


@dataclass(frozen=True, slots=True)
class LoadResult:
    """What one closed-loop run measured (times in virtual seconds)."""

    concurrency: int
    requests_finished: int
    output_tokens: int
    duration_s: float
    steady_output_tok_s: float
    """Output tokens per second while the target concurrency was held."""
    mean_ttft_s: float
    mean_tpot_s: float
    """Mean over requests of (E2E - TTFT) / (output tokens - 1)."""
    peak_running: int
    """Most requests the scheduler ran at once."""
    preemptions: int
    iterations: int


def run_closed_loop(
    device: SimDevice,
    concurrency: int,
    prompt_tokens: int,
    output_tokens: int,
    num_requests: int,
    ignore_eos: bool = True,
) -> LoadResult:
    """Run `num_requests` requests at fixed concurrency through `device` in virtual time."""
    if num_requests < concurrency:
        raise ValueError("num_requests must be at least the concurrency")
    sched = device.scheduler
    now_s = 0.0
    submitted = finished = tokens = iterations = peak = 0
    sent_at: dict[int, float] = {}
    first_at: dict[int, float] = {}
    out_count: dict[int, int] = {}
    ttft_sum = tpot_sum = 0.0
    tpot_n = 0
    window_start_s = window_end_s = -1.0
    window_tokens_at_start = window_tokens_at_end = 0

    def submit() -> None:
        nonlocal submitted
        sched.add(
            SimRequest(
                request_id=submitted,
                arrival_ns=int(now_s * 1e9),
                prompt_tokens=prompt_tokens,
                max_tokens=output_tokens,
                min_tokens=0,
                ignore_eos=ignore_eos,
                chat=False,
                model=device.model.name,
            )
        )
        sent_at[submitted] = now_s
        submitted += 1

    for _ in range(concurrency):
        submit()
    while finished < num_requests:
        it = device.begin()
        if it is None:
            raise RuntimeError("scheduler idle with requests outstanding")
        iterations += 1
        peak = max(peak, len(sched.running))
        now_s += it.duration_s
        result = device.end(it)
        tokens += len(result.emitted)
        for rid, n in result.emitted.items():
            if rid not in first_at:
                first_at[rid] = now_s
                ttft_sum += now_s - sent_at[rid]
            out_count[rid] = out_count.get(rid, 0) + n
        for rid, _reason in result.finished:
            finished += 1
            n_out = out_count.pop(rid)
            if n_out > 1:
                tpot_sum += (now_s - first_at[rid]) / (n_out - 1)
                tpot_n += 1
            if finished == concurrency and window_start_s < 0.0:
                window_start_s, window_tokens_at_start = now_s, tokens
            if submitted < num_requests:
                submit()
                if submitted == num_requests:
                    window_end_s, window_tokens_at_end = now_s, tokens
    steady = 0.0
    if 0.0 <= window_start_s < window_end_s:
        steady = (window_tokens_at_end - window_tokens_at_start) / (window_end_s - window_start_s)
    return LoadResult(
        concurrency=concurrency,
        requests_finished=finished,
        output_tokens=tokens,
        duration_s=now_s,
        steady_output_tok_s=steady if steady > 0.0 else tokens / now_s,
        mean_ttft_s=ttft_sum / max(1, len(first_at)),
        mean_tpot_s=tpot_sum / max(1, tpot_n),
        peak_running=peak,
        preemptions=sched.num_preemptions_total,
        iterations=iterations,
    )
