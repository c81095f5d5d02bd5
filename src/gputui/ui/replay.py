"""Deterministic `LiveView` sequences for snapshot tests and screenshots, built from a saved sweep.

`views_from_snapshot(snapshot)` replays a real run's finished steps one by one (view k shows the
first k steps, the next step live), then a last view back at the knee. Steps that carry a
diagnosis (`bottleneck`, `ttft_breakdown`, ...) replay it, and a changed verdict is an event as
live. The live window of each view is the next step's own figures, and the GPU and server
telemetry is a fixed, plausible trace (a card warming up and reaching its power cap as the load
grows): no clock and no randomness, so the same snapshot always gives the same screens. The
views come out of the live screen's own builder (`frontends.view.build_view`) and event rules, so
what the SVG tests and screenshots check is what the live controller shows for the same frames.
"""

from __future__ import annotations

import math
from pathlib import Path

from gputui.frontends.view import (
    EventWatcher,
    LiveEvent,
    LiveView,
    ViewInputs,
    build_view,
    load_event,
    step_events,
)
from gputui.metrics.confidence import Bounds, Interval
from gputui.metrics.knee import knee_from_steps
from gputui.metrics.precision import DEFAULT_TARGET_PRECISION, step_precision
from gputui.metrics.step import StepResult
from gputui.metrics.step_diagnosis import DIAGNOSIS_KEYS, StepDiagnosis
from gputui.metrics.verdict import Verdict
from gputui.metrics.window import WindowStats
from gputui.session import StatsFrame
from gputui.session.events import verdict_event
from gputui.snapshot.models import Snapshot, Step
from gputui.snapshot.step_models import step_reasoning_share, step_ttfat
from gputui.telemetry.sampler import SourceState, TelemetryFrame, Traces
from gputui.telemetry.samples import GpuSample, ServerSample

GPU_NAME = "NVIDIA A100 80GB PCIe"
_GIB = 2**30
_TRACE_POINTS = 240
_T0_NS = 1_000_000_000


def step_result(step: Step) -> StepResult:
    """A snapshot step back in its metrics form."""
    return StepResult(
        index=step.index,
        mode=step.mode,
        level=step.level,
        duration_s=step.duration_s,
        warmup_s=step.warmup_s,
        requests_ok=step.requests_ok,
        requests_failed=step.requests_failed,
        errors=dict(step.errors),
        requests_per_s=step.requests_per_s,
        input_tokens_per_s=step.input_tokens_per_s,
        output_tokens_per_s=step.output_tokens_per_s,
        ttft_s=step.ttft_s.to_summary(),
        tpot_s=step.tpot_s.to_summary(),
        itl_s=step.itl_s.to_summary(),
        e2e_s=step.e2e_s.to_summary(),
        connect_s=step.connect_s.to_summary(),
        goodput_requests_per_s=step.goodput_requests_per_s,
        goodput_output_tokens_per_s=step.goodput_output_tokens_per_s,
        sla_ok=step.sla_ok,
        incomplete=step.incomplete,
        output_tokens_from_usage=step.output_tokens_from_usage,
        short_outputs=step.short_outputs,
        output_tokens_per_s_ci=_bounds(step.output_tokens_per_s_ci),
        goodput_output_tokens_per_s_ci=_bounds(step.goodput_output_tokens_per_s_ci),
        requests_per_s_ci=_bounds(step.requests_per_s_ci),
        error_rate_ci=_bounds(step.error_rate_ci),
        goodput_share=step.goodput_share,
        goodput_share_ci=_bounds(step.goodput_share_ci),
        sla_verdict=_verdict(step.sla_verdict),
        telemetry=step.telemetry.to_summary() if step.telemetry is not None else None,
        ttfat_s=ttfat.to_summary() if (ttfat := step_ttfat(step)) is not None else None,
        ttfat_no_answer=int((step.model_extra or {}).get("ttfat_no_answer") or 0),
        reasoning_share=step_reasoning_share(step),
    )


def _bounds(interval: Interval | None) -> Bounds | None:
    """A saved rate or share interval (both ends are always finite for those)."""
    if interval is None or interval[0] is None or interval[1] is None:
        return None
    return interval[0], interval[1]


def _verdict(value: str | None) -> Verdict | None:
    return value if value in ("pass", "fail", "inconclusive") else None  # type: ignore[return-value]


def step_diagnosis(step: Step) -> StepDiagnosis | None:
    """The diagnosis a snapshot step carries (issue 18), as the live Session keeps it."""
    return StepDiagnosis.from_fields({k: getattr(step, k) for k in DIAGNOSIS_KEYS})


def _window(step: StepResult, window_s: float) -> WindowStats:
    n = step.requests_ok + step.requests_failed
    return WindowStats(
        window_s=window_s,
        span_s=window_s,
        ttft_s=step.ttft_s,
        tpot_s=step.tpot_s,
        itl_s=step.itl_s,
        e2e_s=step.e2e_s,
        output_tokens_per_s=step.output_tokens_per_s,
        requests_per_s=step.requests_per_s,
        error_rate=step.error_rate,
        errors=dict(step.errors),
        n_requests=n,
        requests_ok=step.requests_ok,
        requests_failed=step.requests_failed,
    )


def _gpu(i: int, load: float) -> GpuSample:
    """The card at trace point i under a load 0..1: heats up, draws power, hits its power cap."""
    warm = 1 - math.exp(-i / 80)
    power = 60 + 235 * load * (0.9 + 0.1 * warm) + 4 * math.sin(i / 3)
    capped = power > 285
    return GpuSample(
        index=0,
        uuid="GPU-5e1d0000-sim0",
        name=GPU_NAME,
        t_ns=_T0_NS + i * 250_000_000,
        temperature_c=round(38 + 34 * load * warm + math.sin(i / 7), 1),
        sm_clock_mhz=1410 - (60 + int(15 * math.sin(i / 4)) if capped else 0),
        sm_clock_max_mhz=1410,
        power_w=round(min(power, 300.0), 1),
        power_limit_w=300.0,
        utilization_gpu_pct=round(min(99.0, 20 + 80 * load), 0),
        memory_used_bytes=int((16.1 + 55.5) * _GIB),
        memory_total_bytes=80 * _GIB,
        throttle_reasons=("sw_power_cap",) if capped else (),
        pstate=0,
        source="dcgm",
    )


def _traces(load: float) -> tuple[GpuSample, ...]:
    ramp = [min(1.0, load * (0.4 + 0.6 * i / _TRACE_POINTS)) for i in range(_TRACE_POINTS)]
    return tuple(_gpu(i, ramp[i]) for i in range(_TRACE_POINTS))


def _telemetry(load: float, seq: int, running: int) -> tuple[TelemetryFrame, Traces]:
    gpus = _traces(load)
    server = ServerSample(
        t_ns=gpus[-1].t_ns,
        backend="vllm",
        requests_running=running,
        requests_waiting=max(0, running - 48),
        kv_cache_usage=round(min(0.97, 0.05 + 0.9 * load), 2),
        preemptions_total=max(0, running - 56) * 3,
        kv_blocks_total=21_000,
        kv_block_size=16,
    )
    states = (
        SourceState("gpu", "dcgm (via /metrics)", "ok"),
        SourceState("server", "vllm", "ok"),
        SourceState("host", "host", "ok"),
    )
    frame = TelemetryFrame(seq, (gpus[-1],), server, None, states)
    return frame, Traces(gpu=gpus, server=(server,), host=())


def replay_frame(seq: int, k: int, live: StepResult) -> StatsFrame:
    """The live frame of view `seq`: step `k` running with `live`'s figures in its window."""
    return StatsFrame(
        seq=seq,
        mode=live.mode,
        level=live.level,
        step_index=k,
        step_elapsed_s=12.0,
        in_warmup=False,
        in_flight=int(live.level),
        paused=False,
        window=_window(live, 15.0),
        client_cpu_percent=11.0 + 0.2 * live.level,
        loop_lag_max_ms=0.4,
        rtt_last_s=0.0002,
        steps_finished=k,
        measured_n=live.ttft_s.n,
        precision=step_precision(live, DEFAULT_TARGET_PRECISION).worst
        if live.ttft_s.p95_ci
        else None,
    )


def replay_telemetry(live: StepResult, top: float, seq: int) -> tuple[TelemetryFrame, Traces]:
    """The fixed GPU and server trace of view `seq` (the load grows with the level)."""
    load = math.log2(live.level + 1) / math.log2(top + 1)
    return _telemetry(load, seq, int(live.level))


def views_from_snapshot(
    snapshot: Snapshot, *, target_url: str = "http://127.0.0.1:8000"
) -> list[LiveView]:
    """The replay: view k has the first k steps finished and step k+1 live; then the knee."""
    sla = snapshot.sla.to_sla()
    kept = [s for s in snapshot.steps if not s.incomplete]
    steps = [step_result(s) for s in kept]
    diagnoses = {s.index: d for s in kept if (d := step_diagnosis(s)) is not None}
    verdicts: list[str | None] = [None]
    top = max(s.level for s in steps)
    per_step_s = steps[0].duration_s + steps[0].warmup_s
    views: list[LiveView] = []
    plan = [(k, steps[k]) for k in range(len(steps))]
    knee_all = knee_from_steps(steps, mode=steps[0].mode).knee
    knee_step = steps[knee_all.index] if knee_all is not None else steps[-1]
    plan.append((len(steps), knee_step))
    history: list[float] = []
    watcher = EventWatcher()
    events = [LiveEvent(0.4, "info", f"connected to {target_url}")]
    for seq, (k, live) in enumerate(plan, start=1):
        done = tuple(steps[:k])
        t_s = k * per_step_s + 12.0
        if k > 0:  # the step before this one just finished
            events += [
                LiveEvent(round(k * per_step_s + 0.5, 1), *e) for e in step_events(steps[k - 1])
            ]
            diagnosis = diagnoses.get(steps[k - 1].index)
            verdict = diagnosis.bottleneck if diagnosis is not None else None
            if verdict:
                change = verdict_event(steps[k - 1], verdict, verdicts[-1])
                if change is not None:
                    events.append(LiveEvent(round(k * per_step_s + 0.5, 1), *change))
                verdicts.append(verdict["verdict"])
        events.append(LiveEvent(round(k * per_step_s + 1.0, 1), *load_event(live.mode, live.level)))
        telemetry, traces = replay_telemetry(live, top, seq)
        history = [
            *history,
            *(live.output_tokens_per_s * (0.9 + 0.02 * (j % 6)) for j in range(24)),
        ]
        frame = replay_frame(seq, k, live)
        seen, _ = watcher.observe(frame, telemetry, "ok")
        events += [LiveEvent(round(k * per_step_s + 1.5, 1), *e) for e in seen]
        views.append(
            build_view(
                ViewInputs(
                    seq=seq,
                    target_url=target_url,
                    model=snapshot.target.model,
                    target_state="ok",
                    backend=snapshot.target.backend or "gputui-sim",
                    server_version=snapshot.target.version,
                    mode=live.mode,
                    level=live.level,
                    factor=2.0,
                    paused=False,
                    session_s=t_s,
                    sla=sla,
                    frame=frame,
                    steps=done,
                    diagnoses={s.index: diagnoses[s.index] for s in done if s.index in diagnoses},
                    events=tuple(events),
                    telemetry=telemetry,
                    traces=traces,
                    gpu_description="a100-80gb-pcie (simulated)",
                    throughput_history=tuple(history[-240:]),
                    error_rate_history=tuple(0.0 for _ in history[-240:]),
                    ui_cpu_percent=3.0,
                    label=snapshot.label,
                    price_per_hour=snapshot.price_per_hour,
                )
            )
        )
    return views


def load_views(path: Path) -> list[LiveView]:
    """`views_from_snapshot` of a snapshot file."""
    from gputui.snapshot.store import load_snapshot

    return views_from_snapshot(load_snapshot(path))
