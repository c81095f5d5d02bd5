"""What telemetry, the client and the server's own timings said inside one step's window.

Contract: pure functions over samples already collected (no I/O), each returning plain numbers
for `metrics.bottleneck.StepEvidence` or JSON-ready dicts for the snapshot:

- `server_window(samples, lo, hi)`: waiting (max, mean, growth), KV usage (max), preemptions
  (counter delta, counted from the last sample before the window), running (mean: the decode
  batch; max, and the share of samples near it: a held ceiling is the scheduler's limit);
- `gpu_window(samples, lo, hi, max_clock_mhz)`: mean utilisation, lowest busy clock ratio, the
  share of samples with a power/thermal reason active under `THROTTLE_CLOCK_RATIO` of the maximum
  clock, and the reasons seen;
- `client_window(frames, records, lo, hi)`: the busiest engine process's CPU and the event loop's
  worst lag from the session's frames, its longest GC pause and the host's steal time, the p95
  dispatch lateness (sent - scheduled - connection setup) of open-loop requests and the
  connections the step opened;
- `server_latency_from_histograms` / `server_latency_from_timings`: `steps[].server_latency`;
- `server_percentiles_line(latency)`: its p50 (p95) for the step's verdict line, each a bound
  where its bucket was too coarse (`telemetry.latency_histograms.bucket_bound`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, TypedDict

import numpy as np

from gputui.engine.records import RequestRecord
from gputui.metrics.bottleneck import THROTTLE_CLOCK_RATIO, THROTTLE_REASON_MASK
from gputui.metrics.json_read import number
from gputui.metrics.saturation import RUNNING_CAP_SLACK
from gputui.metrics.step import StepResult
from gputui.metrics.step_diagnosis import Flat
from gputui.metrics.summary import Summary, summarize
from gputui.telemetry.histogram_recorder import HistogramWindow
from gputui.telemetry.latency_histograms import INTERPOLATION, quantile_text, summarize_histogram
from gputui.telemetry.samples import GpuSample, ServerSample


@dataclass(frozen=True, slots=True)
class ClientFrame:
    """The part of a session frame the client rule reads."""

    t_ns: int
    busiest_cpu_pct: float
    loop_lag_ms: float
    run_wait_pct: float | None = None
    """The engine processes' run-queue wait, % of wall time (engine.schedstat)."""
    gc_pause_ms: float = 0.0
    """The engine's longest garbage collection in the frame's interval."""
    steal: tuple[int, int] | None = None
    """The host's (steal, all) CPU ticks so far (engine.schedstat.steal_ticks)."""


class ServerWindow(TypedDict, total=False):
    """The server's queue and KV facts inside a window (empty without samples)."""

    waiting_max: int | None
    waiting_growth: int | None
    running_mean: float | None
    running_max: int | None
    running_at_max_share: float | None
    waiting_mean: float | None
    kv_usage_max: float | None
    kv_capacity_tokens: int | None
    preemptions: int | None
    kv_blocks_total: int | None
    kv_block_size: int | None
    kv_need_blocks: int | None
    kv_free_blocks_waiting: int | None
    kv_blocked_share: float | None
    running_held_share: float | None
    kv_holds_requests: int | None
    tokens_per_engine_step: float | None


class GpuWindow(TypedDict, total=False):
    """The GPUs' utilisation and throttling inside a window (empty without samples)."""

    gpu_util_mean_pct: float | None
    clock_ratio_min: float | None
    throttled_share: float
    throttle_reasons: tuple[str, ...]


class ClientWindow(TypedDict):
    """The client's own health inside a window."""

    client_cpu_mean_pct: float | None
    client_run_wait_pct: float | None
    client_cpu_max_pct: float | None
    loop_lag_max_ms: float | None
    dispatch_late_p95_ms: float | None
    gc_pause_max_ms: float | None
    steal_pct: float | None
    new_connections: int
    connect_mean_ms: float | None
    """`new_connections`: opened by the step's requests, its warm-up's included."""


class SaturationEvidence(TypedDict):
    """The `StepEvidence` fields `metrics.saturation`'s rules read."""

    itl_p50_s: float | None
    itl_p95_s: float | None
    output_tokens_per_s: float
    previous_output_tokens_per_s: float | None
    sla_failed: bool
    running_max: int | None
    running_at_max_share: float | None
    waiting_mean: float | None
    decode_compute_utilization: float | None
    closed_loop_streams: float | None


def server_window(
    samples: Sequence[ServerSample],
    lo_ns: int,
    hi_ns: int,
    *,
    need_tokens: float | None = None,
    hold_tokens: float | None = None,
) -> ServerWindow:
    """Queue and KV facts of the server inside [lo, hi] (empty dict without samples).

    `need_tokens`: what a waiting request needs admitted (the step's mean prompt); `hold_tokens`:
    what it holds at its end (prompt + output), for the admission facts (`kv_admission`).
    """
    inside = [s for s in samples if lo_ns <= s.t_ns <= hi_ns]
    if not inside:
        return ServerWindow()
    before = [s for s in samples if s.t_ns < lo_ns]
    waiting = [s.requests_waiting for s in inside if s.requests_waiting is not None]
    running = [s.requests_running for s in inside if s.requests_running is not None]
    kv = [s.kv_cache_usage for s in inside if s.kv_cache_usage is not None]
    capacity = [s.kv_capacity_tokens for s in inside if s.kv_capacity_tokens]
    pre = [s.preemptions_total for s in (before[-1:] + inside) if s.preemptions_total is not None]
    return ServerWindow(
        waiting_max=max(waiting) if waiting else None,
        waiting_growth=waiting[-1] - waiting[0] if waiting else None,
        running_mean=float(np.mean(running)) if running else None,
        running_max=max(running) if running else None,
        running_at_max_share=_share_near_max(running),
        waiting_mean=float(np.mean(waiting)) if waiting else None,
        kv_usage_max=max(kv) if kv else None,
        kv_capacity_tokens=capacity[-1] if capacity else None,
        preemptions=pre[-1] - pre[0] if len(pre) >= 2 else (0 if pre else None),
        **kv_admission(inside, need_tokens, hold_tokens),
        tokens_per_engine_step=_tokens_per_step(before[-1:] + inside),
    )


class Admission(TypedDict):
    """Whether waiting requests could have been admitted (`kv_admission`)."""

    kv_blocks_total: int | None
    kv_block_size: int | None
    kv_need_blocks: int | None
    kv_free_blocks_waiting: int | None
    """The median free KV blocks at the samples where requests waited."""
    kv_blocked_share: float | None
    """Share of those samples whose free blocks could not hold one waiting request's prompt."""
    running_held_share: float | None
    """Share of the samples where requests waited with KV room whose running count was its max."""
    kv_holds_requests: int | None
    """Whole requests of the step's length (prompt + output) the cache holds at once."""


def kv_admission(
    inside: Sequence[ServerSample], need_tokens: float | None, hold_tokens: float | None = None
) -> Admission:
    """The KV cache judged by admission, not by a percentage (vLLM allocates whole blocks).

    Free blocks = (1 - usage) x the block count (vLLM's `cache_config_info` `num_gpu_blocks`
    and `block_size`; else capacity tokens, one token a block); a waiting request needs its
    prompt's blocks, ceil(need_tokens / block_size). Each sample with requests waiting says
    whether the next one fit; those that did, whether running sat at its most (a sequence limit).
    The cache holds blocks // ceil(hold_tokens / block_size) whole requests at once: running at
    that many while others wait is the cache's limit however free it looked between admissions.
    """
    last = next((s for s in reversed(inside) if s.kv_blocks_total or s.kv_capacity_tokens), None)
    size = (last.kv_block_size or 1) if last is not None else None
    blocks = None
    if last is not None and size:
        blocks = last.kv_blocks_total or (last.kv_capacity_tokens or 0) // size or None
    need = math.ceil(need_tokens / size) if need_tokens and size else None
    queued = [s for s in inside if s.requests_waiting and s.kv_cache_usage is not None]
    free = [round((1.0 - (s.kv_cache_usage or 0.0)) * blocks) for s in queued] if blocks else []
    blocked = [f < need for f in free] if need is not None and free else []
    roomy = [s for s, b in zip(queued, blocked, strict=True) if not b] if blocked else queued
    top = max((s.requests_running or 0 for s in inside), default=0)
    held = [s.requests_running == top for s in roomy if s.requests_running is not None]
    return Admission(
        kv_blocks_total=blocks,
        kv_block_size=size,
        kv_need_blocks=need,
        kv_free_blocks_waiting=int(np.median(free)) if free else None,
        kv_blocked_share=sum(blocked) / len(blocked) if blocked else None,
        running_held_share=sum(held) / len(held) if held and top > 0 else None,
        kv_holds_requests=(
            blocks // math.ceil(hold_tokens / size) if blocks and size and hold_tokens else None
        ),
    )


def _tokens_per_step(samples: Sequence[ServerSample]) -> float | None:
    """Mean tokens per engine step between the first and last sample (None: not exposed)."""
    counted = [s for s in samples if s.engine_steps_total is not None and s.step_tokens_total]
    if len(counted) < 2:
        return None
    steps = (counted[-1].engine_steps_total or 0) - (counted[0].engine_steps_total or 0)
    tokens = (counted[-1].step_tokens_total or 0) - (counted[0].step_tokens_total or 0)
    return tokens / steps if steps > 0 else None


def _share_near_max(values: Sequence[int]) -> float | None:
    """Share of the samples within RUNNING_CAP_SLACK of the largest (a held ceiling reads ~1)."""
    top = max(values, default=0)
    if top <= 0:
        return None
    floor = top * (1.0 - RUNNING_CAP_SLACK)
    return sum(1 for v in values if v >= floor) / len(values)


def gpu_window(
    samples: Sequence[GpuSample], lo_ns: int, hi_ns: int, max_clock_mhz: float | None
) -> GpuWindow:
    """Utilisation and throttling of the GPUs inside [lo, hi] (empty dict without samples)."""
    inside = [s for s in samples if lo_ns <= s.t_ns <= hi_ns]
    if not inside:
        return GpuWindow()
    util = [s.utilization_gpu_pct for s in inside if s.utilization_gpu_pct is not None]
    throttled = 0
    ratios: list[float] = []
    reasons: set[str] = set()
    for s in inside:
        top = s.sm_clock_max_mhz or max_clock_mhz
        ratio = s.sm_clock_mhz / top if s.sm_clock_mhz and top else None
        busy = (s.utilization_gpu_pct or 0.0) > 5.0
        if ratio is not None and busy:
            ratios.append(ratio)
        mask = s.throttle_mask or 0
        if mask & THROTTLE_REASON_MASK and (ratio is None or ratio < THROTTLE_CLOCK_RATIO):
            throttled += 1
            reasons.update(r for r in (s.throttle_reasons or ()) if r != "gpu_idle")
    return GpuWindow(
        gpu_util_mean_pct=float(np.mean(util)) if util else None,
        clock_ratio_min=min(ratios) if ratios else None,
        throttled_share=throttled / len(inside),
        throttle_reasons=tuple(sorted(reasons)),
    )


def client_window(
    frames: Sequence[ClientFrame], records: Sequence[RequestRecord], lo_ns: int, hi_ns: int
) -> ClientWindow:
    """The client's own health inside [lo, hi].

    Dispatch lateness is sent - scheduled less the connection's setup (`sent_ns` is stamped once
    connected): a new connection, or a far server's handshake, is not the client being late; the
    connections opened are counted apart.
    """
    inside = [f for f in frames if lo_ns <= f.t_ns <= hi_ns]
    sent = [r for r in records if lo_ns <= r.sent_ns < hi_ns and r.error != "connect"]
    late = [
        (r.sent_ns - r.queued_ns - (r.connect_ns or 0)) / 1e6
        for r in sent
        if r.queued_ns is not None
    ]
    setups = [r.connect_ns / 1e6 for r in records if r.connect_ns is not None]
    waits = [f.run_wait_pct for f in inside if f.run_wait_pct is not None]
    return ClientWindow(
        client_cpu_mean_pct=float(np.mean([f.busiest_cpu_pct for f in inside])) if inside else None,
        client_run_wait_pct=float(np.mean(waits)) if waits else None,
        client_cpu_max_pct=max(f.busiest_cpu_pct for f in inside) if inside else None,
        loop_lag_max_ms=max(f.loop_lag_ms for f in inside) if inside else None,
        dispatch_late_p95_ms=float(np.percentile(late, 95)) if late else None,
        gc_pause_max_ms=max(f.gc_pause_ms for f in inside) if inside else None,
        steal_pct=_steal_pct([f.steal for f in inside if f.steal is not None]),
        new_connections=len(setups),
        connect_mean_ms=float(np.mean(setups)) if setups else None,
    )


def _steal_pct(ticks: Sequence[tuple[int, int]]) -> float | None:
    """The host's steal time between the first and last reading, % of all CPU time."""
    if len(ticks) < 2 or ticks[-1][1] <= ticks[0][1]:
        return None
    return 100.0 * (ticks[-1][0] - ticks[0][0]) / (ticks[-1][1] - ticks[0][1])


_FIRST_TOKEN = ("ttft", "itl")
"""Histograms a server observes at the first token or per token (the rest: at the end)."""


def server_latency_from_histograms(
    first_token: HistogramWindow | None, finish: HistogramWindow | None, origin_ns: int
) -> dict[str, object] | None:
    """`steps[].server_latency` from the histograms' change over the step's two windows."""
    out: dict[str, object] = {"source": "histograms", "interpolation": INTERPOLATION}
    windows: dict[str, list[float]] = {}
    for label, window, wanted in (
        ("first_token", first_token, True),
        ("finish", finish, False),
    ):
        if window is None:
            continue
        out["backend"] = window.backend
        windows[label] = [
            round((window.start_ns - origin_ns) / 1e9, 3),
            round((window.end_ns - origin_ns) / 1e9, 3),
        ]
        for name, histogram in window.histograms.items():
            if (name in _FIRST_TOKEN) == wanted and histogram.count > 0:
                out[f"{name}_s"] = summarize_histogram(histogram)
    if not any(k.endswith("_s") for k in out):
        return None
    out["window_s"] = windows
    return out


def _stats(summary: Summary) -> dict[str, float | None]:
    return {
        "mean": summary.mean,
        "p50": summary.p50,
        "p90": summary.p90,
        "p95": summary.p95,
        "p99": summary.p99,
        "n": summary.n,
    }


def server_latency_from_timings(records: Sequence[RequestRecord]) -> dict[str, object] | None:
    """`steps[].server_latency` from llama.cpp's per-request `timings` (exact per request)."""
    timed = [r.server_timings for r in records if r.ok and r.server_timings is not None]
    prompt = [t.prompt_ms / 1e3 for t in timed if t.prompt_ms is not None]
    if not prompt:
        return None
    predicted = [t.predicted_ms / 1e3 for t in timed if t.predicted_ms is not None]
    per_token = [
        t.predicted_ms / 1e3 / (t.predicted_n - 1)
        for t in timed
        if t.predicted_ms is not None and t.predicted_n and t.predicted_n > 1
    ]
    cached = [t.cache_n for t in timed if t.cache_n is not None]
    return {
        "source": "timings",
        "backend": "llamacpp",
        "prefill_s": _stats(summarize(prompt)),
        "decode_s": _stats(summarize(predicted)) if predicted else None,
        "tpot_s": _stats(summarize(per_token)) if per_token else None,
        "cache_n_mean": float(np.mean(cached)) if cached else None,
        "note": "llama.cpp reports prompt_ms (prefill) and predicted_ms (decode) per request; "
        "no queue time: it is taken as 0",
    }


_SHOWN: Final = (("ttft_s", "TTFT"), ("queue_s", "queue"), ("prefill_s", "prefill"))


def server_percentiles_line(latency: Mapping[str, object] | None) -> str | None:
    """'server p50 (p95): TTFT 34.2 ms (61 ms), queue < 0.3 s (< 0.3 s), prefill ...' or None."""
    if latency is None:
        return None
    bits = []
    for key, name in _SHOWN:
        summary = latency.get(key)
        if isinstance(summary, dict):
            bits.append(f"{name} {quantile_text(summary, 'p50')} ({quantile_text(summary, 'p95')})")
    return f"server p50 (p95): {', '.join(bits)}" if bits else None


def saturation_evidence(
    result: StepResult,
    previous: StepResult | None,
    server: ServerWindow,
    roofline: Flat | None,
) -> SaturationEvidence:
    """The `StepEvidence` fields `metrics.saturation`'s rules read, from the step and its window."""
    return SaturationEvidence(
        itl_p50_s=result.itl_s.p50,
        itl_p95_s=result.itl_s.p95,
        output_tokens_per_s=result.output_tokens_per_s,
        previous_output_tokens_per_s=previous.output_tokens_per_s if previous else None,
        sla_failed=not result.sla_ok or result.sla_verdict == "fail",
        running_max=server.get("running_max"),
        running_at_max_share=server.get("running_at_max_share"),
        waiting_mean=server.get("waiting_mean"),
        decode_compute_utilization=number(roofline, "decode_compute_utilization"),
        closed_loop_streams=result.level if result.mode == "concurrency" else None,
    )
