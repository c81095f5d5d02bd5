"""The snapshot schema (version 1): what a finished or interrupted run saves, as pydantic v2 models.

Contract: the JSON keys are an interface that other tools read, so names never change within a
schema version. Every model is frozen and accepts keys it does not know (`extra="allow"`), so a file
written by a newer *minor* gputui (same `schema_version`, extra keys such as telemetry) still loads
and re-saves without losing them; an incompatible change bumps `SCHEMA_VERSION`, which
`store.load_snapshot` refuses with a clear message. Times are seconds as floats; `created_at` is
the one wall-clock value of a run (ISO 8601 with a timezone).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Final, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from gputui import __version__
from gputui.metrics.capacity import Capacity
from gputui.metrics.knee import Knee
from gputui.metrics.sla import Sla
from gputui.metrics.step import StepMode, StepResult
from gputui.metrics.summary import Summary
from gputui.snapshot.sections import (
    BurstSection,
    HardwareSection,
    PlanSection,
    TelemetrySection,
    ValidationSection,
)

SCHEMA_VERSION: Final = 1

Endpoint = Literal["completions", "chat", "responses"]


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


class Target(_Model):
    """The server under test."""

    url: str
    model: str
    endpoint: Endpoint
    backend: str | None = None
    """e.g. "vllm", "sglang", "gputui-sim"; None when unknown."""
    server_header: str | None = None
    """The HTTP `Server` header the target answered with, if any."""


class Workload(_Model):
    """What each request asked for."""

    input_tokens: NonNegativeInt
    output_tokens: NonNegativeInt
    endpoint: Endpoint
    arrival: str | None = None
    """Arrival process of rate steps ("poisson", "gamma", "constant"); None for closed loop only."""
    burstiness: float | None = None
    extra_body: dict[str, object] = Field(default_factory=dict)
    ignore_eos: bool = False
    input_tokens_method: str | None = None
    """How prompts were sized to `input_tokens` (the measured count is in the usage reports)."""
    input_tokens_check: dict[str, object] | None = None
    """Calibration prompts re-counted before the run: {"matched", "total", "worst_tokens"}."""
    scenario: str | None = None
    scenario_file: str | None = None
    seed: int | None = None
    input_distribution: dict[str, object] | None = None
    """`kind` and parameters of the input-length distribution (None: a dataset's prompts)."""
    output_distribution: dict[str, object] | None = None
    dataset: dict[str, object] | None = None
    """Local dataset whose prompts were sent: path, format, entries used."""
    unique_prefix: bool | None = None
    """Every prompt began with words unique to it (no prefix-cache hits)."""
    shared_prefix_tokens: NonNegativeInt | None = None
    """Tokens of the system prompt that every request shared (prefix caching on purpose)."""
    min_tokens: bool | None = None
    """min_tokens = max_tokens was sent with each request."""
    prompt_salt: str | None = None
    """The run's salt, the words after the first of every prompt (None: prompts not salted)."""
    prompt_isolation: str | None = None
    """"per-run salt", or why the prompts were not salted (--reuse-prompts, shared prefixes)."""
    input_lengths: LengthCheck | None = None
    """Requested vs usage-reported input lengths of the ok requests (all steps)."""
    output_lengths: LengthCheck | None = None
    lengths_by_step: tuple[StepLengths, ...] = ()


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


class SlaBounds(_Model):
    """The SLA the steps were judged against; None = unbounded."""

    ttft_p95_s: float | None = None
    tpot_p95_s: float | None = None
    max_error_rate: float | None = None

    @classmethod
    def from_sla(cls, sla: Sla) -> SlaBounds:
        """Snapshot form of a metrics Sla."""
        return cls(
            ttft_p95_s=sla.ttft_p95_s,
            tpot_p95_s=sla.tpot_p95_s,
            max_error_rate=sla.max_error_rate,
        )

    def to_sla(self) -> Sla:
        """Metrics form of these bounds."""
        return Sla(
            ttft_p95_s=self.ttft_p95_s,
            tpot_p95_s=self.tpot_p95_s,
            max_error_rate=self.max_error_rate,
        )


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


class Network(_Model):
    """Client-to-server round trips measured beside the load (not part of any request)."""

    rtt_s: Stats
    probe_path: str | None = None
    probes_failed: NonNegativeInt = 0


class Client(_Model):
    """The load generator's own cost, to show it was not the bottleneck."""

    cpu_s: NonNegativeFloat
    wall_s: NonNegativeFloat
    event_loop: str
    """e.g. "uvloop" or "asyncio"."""
    uvloop: bool
    connections_opened: NonNegativeInt | None = None


class KneeModel(_Model):
    """Where throughput stopped growing usefully; semantics in `gputui.metrics.knee`."""

    level: float
    mode: StepMode
    method: str
    """Either "gain_per_doubling" or "kneedle"; a plain str, so a newer minor's method loads."""
    reason: str
    explanation: str | None = None
    """What bound the first step past the knee, with its evidence (diagnosis)."""

    @classmethod
    def from_knee(cls, knee: Knee) -> KneeModel:
        """Snapshot form of a metrics Knee (its step index is not kept: steps can be re-ordered)."""
        return cls(level=knee.level, mode=knee.mode, method=knee.method, reason=knee.reason)


class CapacityModel(_Model):
    """The SLA-qualified capacity and the numbers measured there; see `gputui.metrics.capacity`."""

    level: float
    mode: StepMode
    output_tokens_per_s: NonNegativeFloat
    requests_per_s: NonNegativeFloat
    ttft_p95_s: float | None = None
    tpot_p95_s: float | None = None
    error_rate: float | None = None
    output_tokens_per_s_ci: CiInterval | None = None
    """95 % interval of the qualified throughput (issue 16; absent in older files)."""
    requests_per_s_ci: CiInterval | None = None
    ttft_p95_ci: CiInterval | None = None
    tpot_p95_ci: CiInterval | None = None
    error_rate_ci: CiInterval | None = None
    below_level: float | None = None
    """The next lower tested level and its SLA verdict; the capacity lies in [level, above)."""
    below_verdict: str | None = None
    above_level: float | None = None
    above_verdict: str | None = None
    provisional: bool = False
    """No step was decisive: the level and its cost rest on point estimates (issue 23)."""
    provisional_reason: str | None = None
    """What a verdict still needs, e.g. "P95 on 14 requests; 59 decide it"."""
    caveats: tuple[str, ...] = ()
    """What the capacity is worth: a lower level failed, a SUSPECT or throttled step."""

    @classmethod
    def from_capacity(cls, capacity: Capacity) -> CapacityModel:
        """Snapshot form of a metrics Capacity."""
        return cls(
            level=capacity.level,
            mode=capacity.mode,
            output_tokens_per_s=capacity.output_tokens_per_s,
            requests_per_s=capacity.requests_per_s,
            ttft_p95_s=capacity.ttft_p95_s,
            tpot_p95_s=capacity.tpot_p95_s,
            error_rate=capacity.error_rate,
            output_tokens_per_s_ci=capacity.output_tokens_per_s_ci,
            requests_per_s_ci=capacity.requests_per_s_ci,
            ttft_p95_ci=capacity.ttft_p95_ci,
            tpot_p95_ci=capacity.tpot_p95_ci,
            error_rate_ci=capacity.error_rate_ci,
            below_level=capacity.below_level,
            below_verdict=capacity.below_verdict,
            above_level=capacity.above_level,
            above_verdict=capacity.above_verdict,
            provisional=capacity.provisional,
            provisional_reason=capacity.provisional_reason,
            caveats=capacity.caveats,
        )


def now_iso() -> str:
    """The wall-clock time for `created_at` (the one wall-clock value a snapshot holds)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class Snapshot(_Model):
    """A run: its target, workload and SLA, and the finished steps."""

    schema_version: Literal[1] = SCHEMA_VERSION
    gputui_version: str = __version__
    created_at: str = Field(default_factory=now_iso)
    label: str | None = None
    complete: bool
    """False when the run was interrupted (its last step is then `incomplete`)."""
    target: Target
    workload: Workload
    sla: SlaBounds
    steps: tuple[Step, ...] = ()
    network: Network | None = None
    client: Client | None = None
    plan: PlanSection | None = None
    """What the run was asked to do (mode, levels, step and warm-up seconds, seed)."""
    interrupted_by: str | None = None
    """The signal or reason that ended an incomplete run."""
    requests_cancelled: NonNegativeInt = 0
    """In-flight requests aborted at the end of an interrupted run (in no step's counts)."""
    hardware: HardwareSection | None = None
    """GPU identity (NVML, nvidia-smi or the server's DCGM lines), driver, host; see telemetry."""
    telemetry: TelemetrySection | None = None
    """Downsampled GPU, server and host traces, times in seconds from the run's start."""
    knee: KneeModel | None = None
    knee_reason: str | None = None
    """How the knee was found, or why there is none (see `metrics.knee`)."""
    capacity: CapacityModel | None = None
    capacity_reason: str | None = None
    """Why `capacity` is that level, or why there is none (see `metrics.capacity`)."""
    validation: ValidationSection | None = None
    """The rate hold near the knee that confirms the capacity (written by the engine)."""
    bursts: tuple[BurstSection, ...] = ()
    """Burst-and-recovery checks, one object per burst (written by the engine)."""
    prefix_cache: dict[str, object] | None = None
    """The run's prefix-cache hit rate (`hit_rate`, `source`, tokens) and the server's counters'
    own rate over the run (`server_counters_hit_rate`)."""
    conversations: dict[str, object] | None = None
    """Multi-turn runs, over the whole run: turns, think time, started, complete, `e2e_s`."""
    trace: dict[str, object] | None = None
    """Trace replay: file, format, window, time scale, `dispatch_lateness`, schedule error."""
    price_per_hour: float | None = None
    """The node's hourly price (`--price-per-hour`); an unusable value reads as None."""
    precision: str | None = None
    """The served weights' precision (`--precision`, the simulator's own in the demo)."""

    @field_validator("price_per_hour", mode="before")
    @classmethod
    def _usable_price(cls, value: object) -> float | None:
        """A price is a finite number >= 0; anything else (a string, a bool) is unknown."""
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        return float(value) if 0 <= value < float("inf") else None

    @field_validator("hardware", "telemetry", mode="before")
    @classmethod
    def _usable_section(cls, value: object, info: ValidationInfo) -> object:
        """A section another tool wrote malformed loads as unknown (None) instead of failing."""
        model = HardwareSection if info.field_name == "hardware" else TelemetrySection
        if value is None or isinstance(value, model):
            return value
        try:
            return model.model_validate(value)
        except ValidationError:
            return None

    @field_validator("precision", mode="before")
    @classmethod
    def _usable_precision(cls, value: object) -> str | None:
        return value.strip() or None if isinstance(value, str) else None

    @field_validator("created_at")
    @classmethod
    def _aware_iso8601(cls, value: str) -> str:
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(f"not an ISO 8601 time: {value!r}") from None
        if parsed.tzinfo is None:
            raise ValueError(f"ISO 8601 time without a timezone: {value!r}")
        return value


def stats_from_summary(summary: Summary) -> Stats:
    """Snapshot form of a metrics Summary."""
    return Stats.from_summary(summary)


def step_from_result(result: StepResult) -> Step:
    """Snapshot form of a finished step.

    Optional keys (absent when they do not apply, so older readers see nothing new):
    `event_tokens_method`, and for streams with thinking `ttfat_s` and `reasoning_share`; on
    steps run to a precision target, `imprecise` and `precision` (metric: relative half-width).
    """
    step = _step_core(result)
    extra: dict[str, object] = {}
    if result.event_tokens_method is not None:
        extra["event_tokens_method"] = result.event_tokens_method
    if result.ttfat_s is not None:
        extra["ttfat_s"] = Stats.from_summary(result.ttfat_s).model_dump()
        extra["reasoning_share"] = result.reasoning_share
    if result.imprecise is not None:
        extra["imprecise"] = result.imprecise
        extra["precision"] = dict(result.precision or {})
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
        requests_per_s_ci=result.requests_per_s_ci,
        rate_ci_batches=result.rate_ci_batches,
        error_rate_ci=result.error_rate_ci,
        goodput_share=result.goodput_share,
        goodput_share_ci=result.goodput_share_ci,
        sla_verdict=result.sla_verdict,
        requests_warmup=result.requests_warmup,
        error_messages=result.error_messages,
        ended_early=result.ended_early,
    )
