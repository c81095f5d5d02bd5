"""The figures one step's diagnosis reads, gathered into the rules' `StepEvidence`.

Pure functions of windows already cut from the traces (`diagnosis.window`): the GPU's window with
its catalog card, the TTFT and end-to-end breakdowns, and the evidence the bottleneck rules read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from gputui.catalog.specs import GpuSpec
from gputui.diagnosis.window import (
    ClientWindow,
    GpuWindow,
    ServerWindow,
    gpu_window,
    saturation_evidence,
)
from gputui.engine.records import RequestRecord
from gputui.engine.schedstat import cpu_pressure
from gputui.metrics.error_log import step_error_evidence
from gputui.metrics.json_read import number
from gputui.metrics.roofline_use import catalog_gpu
from gputui.metrics.step import StepResult
from gputui.metrics.step_diagnosis import Flat
from gputui.metrics.step_evidence import StepEvidence
from gputui.metrics.ttft_breakdown import e2e_breakdown, noise, ttft_breakdown
from gputui.telemetry.samples import GpuSample
from gputui.telemetry.step_telemetry import StepTelemetry


def gpu_in_window(gpus: Sequence[GpuSample], lo: int, hi: int) -> tuple[GpuWindow, GpuSpec | None]:
    """The GPU's window (clocks against the catalog's boost clock, else the fastest seen)."""
    gpu_spec = None
    if gpus:
        gpu_spec = catalog_gpu(gpus[0].name, gpus[0].memory_total_bytes)
    max_clock = float(gpu_spec.boost_clock_mhz) if gpu_spec is not None else None
    if max_clock is None and gpus:
        max_clock = float(max((g.sm_clock_mhz or 0) for g in gpus)) or None
    return gpu_window(gpus, lo, hi, max_clock), gpu_spec


def with_step_telemetry(gpu: GpuWindow, telemetry: StepTelemetry | None) -> GpuWindow:
    """The throttled share and reasons from the step's own telemetry summary, when it has one.

    Issue 29: the step's summary is the one home of these figures; the window above only fills
    in what the summary does not carry (utilisation against the catalog clock).
    """
    if telemetry is None or telemetry.throttled_share is None:
        return gpu
    out = GpuWindow(**gpu)
    out["throttled_share"] = telemetry.throttled_share
    out["throttle_reasons"] = telemetry.throttle_reasons
    return out


def latency_breakdowns(
    result: StepResult,
    latency: Mapping[str, object] | None,
    measured_ok: Sequence[RequestRecord],
    rtt_mean: float | None,
    rtt_spread: float | None = None,
    origin_ns: int | None = None,
) -> tuple[Flat | None, Flat | None]:
    """The step's TTFT and end-to-end breakdowns (`steps[].ttft_breakdown`, `e2e_breakdown`).

    `rtt_spread`: the probe's standard deviation over the step, for the parts' `noise_s`.
    `origin_ns`: the run's start, which the server's histogram windows are stamped from: the
    TTFT split is then of the step's requests whose end the server's finish window holds
    (`held_by_finish_window`), the requests its queue, prefill and E2E - decode are of.
    """
    queue = _latency_mean(latency, "queue_s")
    prefill = _latency_mean(latency, "prefill_s")
    if latency is not None and latency.get("source") == "timings":
        queue = 0.0
    connects = [r.connect_ns for r in measured_ok if r.connect_ns is not None]
    ttfts = [(f - r.sent_ns) / 1e9 for r in measured_ok if (f := r.first_token_ns) is not None]
    connect_mean = sum(connects) / 1e9 / len(measured_ok) if measured_ok else None
    ttft_mean = result.ttft_s.mean
    held = held_by_finish_window(measured_ok, latency, origin_ns)
    if held is not None:
        ttfts = held
        ttft_mean = float(np.mean(held))
    breakdown = ttft_breakdown(
        ttft_mean,
        rtt_mean,
        queue,
        prefill,
        connect_mean,
        server_ttft_mean_s=same_requests_server_ttft(latency),
        noise_s=noise(rtt_spread, float(np.std(ttfts)) if len(ttfts) > 1 else None, len(ttfts)),
    )
    e2e = e2e_breakdown(
        result.e2e_s.mean,
        rtt_mean,
        queue,
        prefill,
        _latency_mean(latency, "decode_s"),
        server_e2e_mean_s=_latency_mean(latency, "e2e_s"),
    )
    return breakdown, e2e


def step_evidence(
    result: StepResult,
    previous: StepResult | None,
    records: Sequence[RequestRecord],
    *,
    breakdown: Flat | None,
    roofline: Flat | None,
    server: ServerWindow,
    gpu: GpuWindow,
    client: ClientWindow,
) -> StepEvidence:
    """Everything the bottleneck rules read about the step, from its windows and its records."""
    return StepEvidence(
        level=result.level,
        ttft_mean_s=result.ttft_s.mean,
        tpot_p50_s=result.tpot_s.p50,
        breakdown=breakdown,
        decode_bandwidth_utilization=number(roofline, "decode_bandwidth_utilization"),
        prefill_compute_utilization=number(roofline, "prefill_compute_utilization"),
        waiting_max=server.get("waiting_max"),
        waiting_growth=server.get("waiting_growth"),
        kv_usage_max=server.get("kv_usage_max"),
        kv_room_requests=_kv_room(server, roofline),
        kv_blocked_share=server.get("kv_blocked_share"),
        kv_free_blocks_waiting=server.get("kv_free_blocks_waiting"),
        kv_need_blocks=server.get("kv_need_blocks"),
        kv_blocks_total=server.get("kv_blocks_total"),
        running_held_share=server.get("running_held_share"),
        kv_holds_requests=server.get("kv_holds_requests"),
        tokens_per_engine_step=server.get("tokens_per_engine_step"),
        running_mean=server.get("running_mean"),
        preemptions=server.get("preemptions"),
        gpu_util_mean_pct=gpu.get("gpu_util_mean_pct"),
        clock_ratio_min=gpu.get("clock_ratio_min"),
        throttled_share=gpu.get("throttled_share"),
        throttle_reasons=gpu.get("throttle_reasons", ()),
        client_cpu_max_pct=client["client_cpu_max_pct"],
        loop_lag_max_ms=client["loop_lag_max_ms"],
        # Where the in-flight cap bound, sends were late because no slot was free: the cap's
        # lateness, said in its own line (bottleneck), not a sign of a late client.
        dispatch_late_p95_ms=None if result.slot_waits else client["dispatch_late_p95_ms"],
        slot_waits=result.slot_waits,
        ttft_schedule_p95_s=result.ttft_schedule_s.p95 if result.ttft_schedule_s else None,
        client_cpu_mean_pct=client["client_cpu_mean_pct"],
        client_run_wait_pct=client["client_run_wait_pct"],
        gc_pause_max_ms=client["gc_pause_max_ms"],
        steal_pct=client["steal_pct"],
        new_connections=client["new_connections"],
        connect_mean_ms=client["connect_mean_ms"],
        host_cpu_pressure_pct=cpu_pressure(),
        previous_level=previous.level if previous else None,
        previous_ttft_mean_s=previous.ttft_s.mean if previous else None,
        previous_tpot_p50_s=previous.tpot_s.p50 if previous else None,
        **saturation_evidence(result, previous, server, roofline),
        **step_error_evidence(records, result.error_messages, result.ended_early),
    )


def _kv_room(server: ServerWindow, roofline: Flat | None) -> float | None:
    """Free KV at the window's fullest, in requests of the step's mean context."""
    usage, capacity = server.get("kv_usage_max"), server.get("kv_capacity_tokens")
    context = number(roofline, "mean_context_tokens")
    if usage is None or not capacity or not context:
        return None
    return float((1.0 - usage) * capacity / context)


HELD_SHARE = 0.5
"""The finish window must hold this share of the step's requests for the split to be of them."""


def held_by_finish_window(
    measured_ok: Sequence[RequestRecord],
    latency: Mapping[str, object] | None,
    origin_ns: int | None,
) -> list[float] | None:
    """The TTFTs (s) of the step's requests that ended inside the server's finish window.

    Its queue, prefill and E2E - decode means are of those requests. In a step whose queue grows
    (128 streams with no warm-up: the first wave queued up to 1.4 s), the window, moved past the
    warm-up's late ends, held the later, longer-queued two thirds: against the whole step's mean
    TTFT the client part read -27.8 ms (the old split put -91.7 ms in server other). None when
    the window is unknown or holds under HELD_SHARE of the step's requests.
    """
    windows = latency.get("window_s") if latency is not None else None
    finish = windows.get("finish") if isinstance(windows, Mapping) else None
    if origin_ns is None or not isinstance(finish, Sequence) or len(finish) != 2:
        return None
    lo, hi = (origin_ns + round(float(t) * 1e9) for t in finish)
    timed = [(f - r.sent_ns, r.end_ns) for r in measured_ok if (f := r.first_token_ns) is not None]
    held = [ttft_ns / 1e9 for ttft_ns, end_ns in timed if lo < end_ns <= hi]
    return held if timed and len(held) >= HELD_SHARE * len(timed) else None


def same_requests_server_ttft(latency: Mapping[str, object] | None) -> float | None:
    """The server's mean TTFT over the requests its queue and prefill means are of.

    vLLM observes TTFT at a request's first token and queue, prefill, decode and E2E at its end,
    so the step's two histogram windows (cut at /metrics scrapes 0.5 s apart) hold different
    requests: at a level change one took in the first wave's long TTFTs and the other did not,
    and TTFT - queue - prefill read 6.1 or 10.3 ms for the simulator's 8. E2E - decode, observed
    with queue and prefill, is the same requests' TTFT (on vLLM the API server's lag at the last
    token stands in for its lag at the first). Without both, the TTFT histogram's mean.
    """
    e2e, decode = _latency_mean(latency, "e2e_s"), _latency_mean(latency, "decode_s")
    if e2e is not None and decode is not None and _latency_mean(latency, "queue_s") is not None:
        return e2e - decode
    return _latency_mean(latency, "ttft_s")


def _latency_mean(latency: Mapping[str, object] | None, key: str) -> float | None:
    summary = None if latency is None else latency.get(key)
    return number(summary, "mean") if isinstance(summary, Mapping) else None


COUNT_LOW, COUNT_HIGH = 0.5, 1.5
"""The server's TTFT histogram must count this share of the step's requests for its means to be
of the same load (the realvllm checks hold vLLM to the same band)."""


def histogram_count_line(
    latency: Mapping[str, object] | None, client_n: int, step_s: float
) -> str | None:
    """A line where the server's TTFT count and the step's disagree, else None.

    'the server's TTFT histogram counted 22 of the step's 114 requests (its window 2.7 of
    14.3 s): its parts are of another set of requests'. The window is cut at /metrics scrapes:
    a run of them lost (a starved client, a server slow to answer its /metrics) leaves it short
    of the step, and the breakdown's server parts then come from a few of the step's requests,
    or from another load's.
    """
    if latency is None or latency.get("source") != "histograms" or client_n <= 0:
        return None
    ttft = latency.get("ttft_s")
    n = ttft.get("n") if isinstance(ttft, dict) else None
    if not isinstance(n, (int, float)) or COUNT_LOW * client_n <= n <= COUNT_HIGH * client_n:
        return None
    windows = latency.get("window_s")
    cut = windows.get("first_token") if isinstance(windows, dict) else None
    span = ""
    if isinstance(cut, list) and len(cut) == 2:
        span = f" (its window {cut[1] - cut[0]:.1f} of {step_s:.1f} s)"
    return (
        f"the server's TTFT histogram counted {n:.0f} of the step's {client_n} requests{span}: "
        "its parts are of another set of requests"
    )
