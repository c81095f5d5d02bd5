"""One step's snapshot form: `Step` and its `Stats`, the length checks, and their conversion.

Contract: part of the snapshot schema in `snapshot.models` (which re-exports every name here), so
the same rules hold: JSON keys never change within a schema version, models are frozen and keep
keys they do not know (`extra="allow"`). `step_from_result` is the one way a finished
`metrics.StepResult` becomes a `Step`; its optional keys live in `model_extra`, read back with
`step_ttfat` and `step_reasoning_share`.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat, NonNegativeInt

from gputui.metrics.step import StepMode, StepResult
from gputui.metrics.summary import Summary
from gputui.telemetry.step_telemetry import StepTelemetry, WindowEnergy


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="allow")


CiInterval = tuple[float | None, float | None]
"""A 95 % confidence interval as JSON [lo, hi]; null marks an open end (see metrics.confidence)."""


class Stats(_Model):
    """Mean and percentiles (seconds) of one metric, with the sample count behind them."""

    mean: float | None = None
    p50: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None
    n: NonNegativeInt = 0
    p50_ci: CiInterval | None = None
    """95 % interval [lo, hi] of P50 (None for an open end); absent in files before issue 16."""
    p95_ci: CiInterval | None = None
    p99_ci: CiInterval | None = None

    @classmethod
    def from_summary(cls, summary: Summary) -> Stats:
        """Snapshot form of a metrics Summary."""
        return cls(
            mean=summary.mean,
            p50=summary.p50,
            p90=summary.p90,
            p95=summary.p95,
            p99=summary.p99,
            n=summary.n,
            p50_ci=summary.p50_ci,
            p95_ci=summary.p95_ci,
            p99_ci=summary.p99_ci,
        )

    def to_summary(self) -> Summary:
        """Metrics form, e.g. to re-judge a saved step against another SLA."""
        return Summary(
            mean=self.mean,
            p50=self.p50,
            p90=self.p90,
            p95=self.p95,
            p99=self.p99,
            n=self.n,
            p50_ci=self.p50_ci,
            p95_ci=self.p95_ci,
            p99_ci=self.p99_ci,
        )


class LengthStats(_Model):
    """Token lengths (not seconds): mean, percentiles and range, with the count behind them."""

    mean: float | None = None
    p50: float | None = None
    p95: float | None = None
    min: int | None = None
    max: int | None = None
    n: NonNegativeInt = 0


class LengthCheck(_Model):
    """Requested against measured lengths; `exact` + `shorter` + `longer` were comparable."""

    requested: LengthStats
    measured: LengthStats
    exact: NonNegativeInt = 0
    shorter: NonNegativeInt = 0
    longer: NonNegativeInt = 0
    unknown: NonNegativeInt = 0
    """No usage report or no requested length: not comparable."""


class StepLengths(_Model):
    """One step's length check (the index is the step's)."""

    step: NonNegativeInt
    input: LengthCheck
    output: LengthCheck


class StepEnergyModel(_Model):
    """`steps[].energy` (issue 29; `metrics.energy`): the measured window's energy per token."""

    joules: float
    joules_per_output_token: float | None = None
    joules_per_token: float | None = None
    """Over input + output tokens (at long prompts it differs from the above many times)."""
    output_tokens_per_joule: float | None = None
    joules_per_good_output_token: float | None = None
    """Over the good output (requests that met the SLA)."""
    mean_power_w: float
    gpus: NonNegativeInt
    """GPUs serving the model, summed."""
    method: str
    """"counter" (NVML / DCGM total-energy counter) or "integrated" (power samples)."""
    sample_hz: float | None = None


class WindowEnergyModel(_Model):
    """The energy of a step's window as telemetry measured it (no token counts)."""

    joules: float
    mean_power_w: float
    gpus: NonNegativeInt
    method: str
    sample_hz: float | None = None


class StepTelemetryModel(_Model):
    """`steps[].telemetry` (issue 29): the one summary of the measured window's telemetry.

    Semantics in `telemetry.step_telemetry`; every figure is null when no sample said it.
    """

    window_s: NonNegativeFloat
    gpus: NonNegativeInt = 0
    gpu_samples: NonNegativeInt = 0
    sample_hz: float | None = None
    power_mean_w: float | None = None
    power_max_w: float | None = None
    energy: WindowEnergyModel | None = None
    temperature_max_c: float | None = None
    sm_clock_mean_mhz: float | None = None
    sm_clock_min_mhz: float | None = None
    mem_clock_mean_mhz: float | None = None
    utilization_mean_pct: float | None = None
    throttled_share: float | None = None
    throttle_reasons: tuple[str, ...] = ()
    vram_peak_bytes: int | None = None
    vram_total_bytes: int | None = None
    host_cpu_mean_pct: float | None = None
    host_cpu_max_pct: float | None = None
    host_mem_peak_bytes: int | None = None

    def to_summary(self) -> StepTelemetry:
        """The metrics form (a replayed or loaded step carries it like a live one)."""
        e = self.energy
        energy = (
            None
            if e is None
            else WindowEnergy(
                joules=e.joules,
                mean_power_w=e.mean_power_w,
                gpus=e.gpus,
                method="counter" if e.method == "counter" else "integrated",
                sample_hz=e.sample_hz,
            )
        )
        fields = self.model_dump(exclude={"energy"})
        known = {k: v for k, v in fields.items() if k in StepTelemetry.__dataclass_fields__}
        known["throttle_reasons"] = tuple(known.get("throttle_reasons") or ())
        return StepTelemetry(**known, energy=energy)


class Step(_Model):
    """One load level's results; semantics in `gputui.metrics.step`."""

    index: NonNegativeInt
    mode: StepMode
    level: float
    duration_s: NonNegativeFloat
    warmup_s: NonNegativeFloat
    requests_ok: NonNegativeInt
    requests_failed: NonNegativeInt
    errors: dict[str, NonNegativeInt] = Field(default_factory=dict)
    requests_per_s: NonNegativeFloat
    input_tokens_per_s: NonNegativeFloat
    output_tokens_per_s: NonNegativeFloat
    ttft_s: Stats
    tpot_s: Stats
    itl_s: Stats
    e2e_s: Stats
    connect_s: Stats
    goodput_requests_per_s: NonNegativeFloat
    goodput_output_tokens_per_s: NonNegativeFloat
    sla_ok: bool
    incomplete: bool = False
    output_tokens_from_usage: bool
    short_outputs: NonNegativeInt = 0
    output_tokens_per_s_ci: CiInterval | None = None
    """95 % batch-means interval of `output_tokens_per_s` (issue 16; absent in older files)."""
    goodput_output_tokens_per_s_ci: CiInterval | None = None
    """95 % batch-means interval of `goodput_output_tokens_per_s` (issue 31)."""
    requests_per_s_ci: CiInterval | None = None
    rate_ci_batches: NonNegativeInt | None = None
    error_rate_ci: CiInterval | None = None
    """95 % Wilson interval of failed / (ok + failed)."""
    goodput_share: float | None = None
    goodput_share_ci: CiInterval | None = None
    sla_verdict: str | None = None
    """"pass", "fail" or "inconclusive" (`metrics.verdict`); a plain str so newer values load."""
    turns: tuple[dict[str, object], ...] | None = None
    """Multi-turn runs, per turn: requests, `ttft_s`, mean prompt, hit rate."""
    prefix_cache_hit_rate: float | None = None
    """Cached / all prompt tokens of the step's ok requests (`metrics.prefix_cache`)."""
    prefix_cache_source: str | None = None
    """Where the hit rate was read: "usage", "server timings" or "server counters"."""
    prefix_cache_warning: str | None = None
    """Set when a step meant to be cold was served from the prefix cache (its hit rate > 5 %)."""
    conversations: dict[str, object] | None = None
    """Multi-turn runs: conversations started and complete in the step, and their `e2e_s`."""
    requests_warmup: NonNegativeInt = 0
    """Requests sent before the step's measurement started: in no statistic, but counted, so
    the steps account for every request (`totals.requests`); 0 in files from before it."""
    requests_burst: NonNegativeInt | None = None
    """Requests a burst sent during the step: in none of its figures (the burst's own section)."""
    requests_under_burst: NonNegativeInt | None = None
    """The step's requests in flight under a burst's load (`plan.burst_isolation`): counted, in
    none of its figures (None when no burst touched the step, and in files from before it)."""
    burst_window_s: NonNegativeFloat | None = None
    """Seconds of the step's window under a burst's load, left out of its rates."""
    handover_s: NonNegativeFloat | None = None
    """After the step closed, how long its load ran on unmeasured until its last measured
    request ended; the next level started only then (None in files from before it)."""
    dispatch_lateness: dict[str, object] | None = None
    """Trace replay: send time minus schedule (`p50_ms`, `p99_ms`, `max_ms`, `count`)."""
    server_latency: dict[str, object] | None = None
    """The server's own latency over the step (histogram deltas or llama.cpp timings)."""
    ttft_breakdown: dict[str, object] | None = None
    """Mean TTFT = network + queue + prefill + client, in seconds and shares of TTFT."""
    e2e_breakdown: dict[str, object] | None = None
    roofline: dict[str, object] | None = None
    """Decode bandwidth and prefill compute use against the card's peak (metrics.roofline_use)."""
    bottleneck: dict[str, object] | None = None
    """{verdict, evidence, suspect, throttled}: what bound the step (metrics.bottleneck)."""
    error_messages: dict[str, list[str]] | None = None
    """Per failure reason, the server's first distinct messages (metrics.error_log)."""
    ended_early: str | None = None
    """Why the step ended early (flooded with rejections: metrics.error_log)."""
    telemetry: StepTelemetryModel | None = None
    """What telemetry saw in the measured window (issue 29; absent in older files)."""
    energy: StepEnergyModel | None = None
    """The window's energy per token (issue 29); null without a GPU power or energy reading."""


def stats_from_summary(summary: Summary) -> Stats:
    """Snapshot form of a metrics Summary."""
    return Stats.from_summary(summary)


def step_from_result(result: StepResult) -> Step:
    """Snapshot form of a finished step.

    Optional keys (absent when they do not apply, so older readers see nothing new):
    `event_tokens_method`, and for streams with thinking `ttfat_s` and `reasoning_share`; on
    steps run to a precision target, `imprecise` and `precision` (metric: relative half-width); on
    a held step, `verdict_basis` (its `sla_verdict` is the hold's latest look's).
    """
    step = _step_core(result)
    extra: dict[str, object] = {}
    if result.event_tokens_method is not None:
        extra["event_tokens_method"] = result.event_tokens_method
    if result.ttfat_s is not None:
        extra["ttfat_s"] = Stats.from_summary(result.ttfat_s).model_dump(mode="json")
        extra["reasoning_share"] = result.reasoning_share
        extra["ttfat_no_answer"] = result.ttfat_no_answer
    if result.ttft_schedule_s is not None:  # open loop (issue 31)
        extra["ttft_schedule_s"] = Stats.from_summary(result.ttft_schedule_s).model_dump(
            mode="json"
        )
        extra["slot_waits"] = result.slot_waits
    if result.imprecise is not None:
        extra["imprecise"] = result.imprecise
        extra["precision"] = dict(result.precision or {})
    if result.verdict_basis is not None:
        extra["verdict_basis"] = result.verdict_basis
    return step.model_copy(update=extra) if extra else step


def step_ttfat(step: Step) -> Stats | None:
    """The step's TTFAT statistics (streams with thinking only), from a run or a loaded file."""
    value = (step.model_extra or {}).get("ttfat_s")
    if isinstance(value, Stats):
        return value
    return Stats.model_validate(value) if isinstance(value, dict) else None


def step_reasoning_share(step: Step) -> float | None:
    """Thinking tokens / output tokens of the step's measured requests (None: no thinking)."""
    value = (step.model_extra or {}).get("reasoning_share")
    return float(value) if isinstance(value, (int, float)) else None


def _step_core(result: StepResult) -> Step:
    return Step(
        index=result.index,
        mode=result.mode,
        level=result.level,
        duration_s=result.duration_s,
        warmup_s=result.warmup_s,
        requests_ok=result.requests_ok,
        requests_failed=result.requests_failed,
        errors=dict(result.errors),
        requests_per_s=result.requests_per_s,
        input_tokens_per_s=result.input_tokens_per_s,
        output_tokens_per_s=result.output_tokens_per_s,
        ttft_s=Stats.from_summary(result.ttft_s),
        tpot_s=Stats.from_summary(result.tpot_s),
        itl_s=Stats.from_summary(result.itl_s),
        e2e_s=Stats.from_summary(result.e2e_s),
        connect_s=Stats.from_summary(result.connect_s),
        goodput_requests_per_s=result.goodput_requests_per_s,
        goodput_output_tokens_per_s=result.goodput_output_tokens_per_s,
        sla_ok=result.sla_ok,
        incomplete=result.incomplete,
        output_tokens_from_usage=result.output_tokens_from_usage,
        short_outputs=result.short_outputs,
        output_tokens_per_s_ci=result.output_tokens_per_s_ci,
        goodput_output_tokens_per_s_ci=result.goodput_output_tokens_per_s_ci,
        requests_per_s_ci=result.requests_per_s_ci,
        rate_ci_batches=result.rate_ci_batches,
        error_rate_ci=result.error_rate_ci,
        goodput_share=result.goodput_share,
        goodput_share_ci=result.goodput_share_ci,
        sla_verdict=result.sla_verdict,
        requests_warmup=result.requests_warmup,
        error_messages=result.error_messages,
        ended_early=result.ended_early,
        handover_s=result.handover_s,
        requests_burst=result.requests_burst or None,
        requests_under_burst=result.requests_under_burst or None,
        burst_window_s=round(result.burst_window_s, 3) or None,
        telemetry=(
            StepTelemetryModel.model_validate(result.telemetry.to_dict())
            if result.telemetry is not None
            else None
        ),
        energy=StepEnergyModel.model_validate(result.energy) if result.energy else None,
    )


def renumbered(steps: Sequence[Step]) -> tuple[Step, ...]:
    """The steps in order, indexed 0, 1, 2 ... (every saved and recovered snapshot).

    A session's hidden carry-on steps (after a hold, between a plan's steps) took indices in
    between; a file numbers only the steps it holds, as the Steps table and the event log do.
    """
    ordered = sorted(steps, key=lambda s: s.index)
    return tuple(
        s if s.index == k else s.model_copy(update={"index": k}) for k, s in enumerate(ordered)
    )
