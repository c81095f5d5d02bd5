"""What the bottleneck and saturation rules read about one step.

Its own module so that `metrics.bottleneck` and `metrics.saturation` both read it without
importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass

from gputui.metrics.step_diagnosis import Flat


@dataclass(frozen=True, slots=True)
class StepEvidence:
    """Everything the rules read about one step; None where it was not measured."""

    level: float
    ttft_mean_s: float | None = None
    tpot_p50_s: float | None = None
    breakdown: Flat | None = None
    """`steps[].ttft_breakdown`."""
    decode_bandwidth_utilization: float | None = None
    prefill_compute_utilization: float | None = None
    waiting_max: int | None = None
    waiting_growth: int | None = None
    """Waiting requests at the window's end minus at its start."""
    kv_usage_max: float | None = None
    kv_room_requests: float | None = None
    """Free KV at its fullest, in requests of the step's mean context: < 1 means full for them."""
    kv_blocked_share: float | None = None
    """Share of the samples with requests waiting whose free KV blocks could not hold one more
    prompt (diagnosis.window.kv_admission); None where the block count is not exposed."""
    kv_free_blocks_waiting: int | None = None
    kv_need_blocks: int | None = None
    kv_blocks_total: int | None = None
    kv_holds_requests: int | None = None
    """Whole requests of the step's length the KV cache holds at once."""
    running_held_share: float | None = None
    """Share of the samples with requests waiting and KV room whose running count was its max."""
    tokens_per_engine_step: float | None = None
    """Mean tokens each engine step carried (vLLM's iteration_tokens_total), None: not exposed."""
    running_mean: float | None = None
    preemptions: int | None = None
    """Preemptions inside the window (counter delta)."""
    gpu_util_mean_pct: float | None = None
    clock_ratio_min: float | None = None
    """Lowest SM clock / max clock seen in the window's busy samples."""
    throttled_share: float | None = None
    """Share of the window's GPU samples under the clock ratio with a throttle reason active."""
    throttle_reasons: tuple[str, ...] = ()
    client_cpu_max_pct: float | None = None
    loop_lag_max_ms: float | None = None
    dispatch_late_p95_ms: float | None = None
    slot_waits: int = 0
    """Measured open-loop requests that waited for a `--max-in-flight` slot: their lateness is
    the cap's, not the client's (its TTFT from the schedule is `ttft_schedule_p95_s`)."""
    ttft_schedule_p95_s: float | None = None
    previous_level: float | None = None
    previous_ttft_mean_s: float | None = None
    previous_tpot_p50_s: float | None = None
    itl_p50_s: float | None = None
    itl_p95_s: float | None = None
    output_tokens_per_s: float | None = None
    previous_output_tokens_per_s: float | None = None
    sla_failed: bool | None = None
    """The step broke its SLA (None: not judged)."""
    running_max: int | None = None
    running_at_max_share: float | None = None
    """Share of the window's samples running within a few percent of `running_max`."""
    waiting_mean: float | None = None
    decode_compute_utilization: float | None = None
    closed_loop_streams: float | None = None
    """The concurrency a closed-loop step holds (None: an open-loop rate)."""
    step_requests: int = 0
    """Every finished request of the step, warm-up included (the `errors` rule)."""
    step_errors: dict[str, int] | None = None
    """Failures of those by reason."""
    step_rejections: int = 0
    """Those rejected for what was sent (`metrics.error_log.is_rejection`)."""
    error_messages: dict[str, list[str]] | None = None
    ended_early: str | None = None
    client_cpu_mean_pct: float | None = None
    client_run_wait_pct: float | None = None
    """Mean run-queue wait of the engine processes, % of wall time (engine.schedstat)."""
    host_cpu_pressure_pct: float | None = None
    """PSI "some avg10" of the host's CPUs at the step's end."""
    gc_pause_max_ms: float | None = None
    """The client's longest garbage collection in the window (a stall it explains)."""
    steal_pct: float | None = None
    """The host's steal time in the window, % of its CPU time (/proc/stat)."""
    new_connections: int | None = None
    """Connections the step's requests opened (setup is not dispatch lateness)."""
    connect_mean_ms: float | None = None
    """Their mean setup time."""
