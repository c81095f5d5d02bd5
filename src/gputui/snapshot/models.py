"""The snapshot schema (version 1): what a finished or interrupted run saves, as pydantic v2 models.

Contract: the JSON keys are an interface that other tools read, so names never change within a
schema version. Every model is frozen and accepts keys it does not know (`extra="allow"`), so a file
written by a newer *minor* gputui (same `schema_version`, extra keys such as telemetry) still loads
and re-saves without losing them; an incompatible change bumps `SCHEMA_VERSION`, which
`store.load_snapshot` refuses with a clear message. Times are seconds as floats; `created_at` is
the one wall-clock value of a run (ISO 8601 with a timezone). One step's models and their
conversion from metrics live in `snapshot.step_models`; every name there is re-exported here.
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
    model_validator,
)

from gputui import __version__
from gputui.metrics.capacity import Capacity
from gputui.metrics.knee import Knee
from gputui.metrics.sla import Sla
from gputui.metrics.step import StepMode
from gputui.snapshot.sections import (
    BurstSection,
    HardwareSection,
    PlanSection,
    TelemetrySection,
    ValidationSection,
)
from gputui.snapshot.step_models import (
    CiInterval,
    LengthCheck,
    LengthStats,
    Stats,
    Step,
    StepEnergyModel,
    StepLengths,
    StepTelemetryModel,
    stats_from_summary,
    step_from_result,
    step_reasoning_share,
    step_ttfat,
)

__all__ = [
    "SCHEMA_VERSION",
    "CapacityModel",
    "CiInterval",
    "Client",
    "Endpoint",
    "KneeModel",
    "LengthCheck",
    "LengthStats",
    "Network",
    "SlaBounds",
    "Snapshot",
    "Stats",
    "Step",
    "StepEnergyModel",
    "StepLengths",
    "StepTelemetryModel",
    "Target",
    "Workload",
    "now_iso",
    "stats_from_summary",
    "step_from_result",
    "step_reasoning_share",
    "step_ttfat",
]

SCHEMA_VERSION: Final = 1

Endpoint = Literal["completions", "chat", "responses", "messages"]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="allow")


class Target(_Model):
    """The server under test."""

    url: str
    model: str
    endpoint: Endpoint
    backend: str | None = None
    """e.g. "vllm", "sglang", "gputui-sim"; None when unknown."""
    server_header: str | None = None
    """The HTTP `Server` header the target answered with, if any."""
    engine: str | None = None
    """The serving engine, as its own info endpoint or the backend detection says."""
    version: str | None = None
    """The engine's version, as it reports it (vLLM /version, TGI and SGLang info, llama.cpp
    `build_info`); None when it does not."""
    engine_model: str | None = None
    """The model as the engine names what it loaded (a path or hub id)."""
    context_limit: int | None = None
    """Input plus output tokens one request may hold (what the pre-flight checked against)."""
    context_limit_source: str | None = None
    max_input_tokens: int | None = None
    """A separate bound on the input (TGI `max_input_tokens`, SGLang `max_req_input_len`)."""
    max_sequences: int | None = None
    """Sequences decoded together (vLLM `max_num_seqs`, SGLang `max_running_requests`, slots)."""
    max_batch_tokens: int | None = None
    """Tokens one scheduler step takes (vLLM `max_num_batched_tokens`, SGLang chunked prefill)."""
    kv_blocks: int | None = None
    kv_tokens: int | None = None
    """The KV cache's capacity in tokens, where the engine states it."""
    engine_settings: dict[str, int | str] = Field(default_factory=dict)
    """Every figure read, under the engine's own names."""
    identity_sources: list[str] = Field(default_factory=list)
    """The endpoints that said it, e.g. ["/version", "/server_info"]."""


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


class SlaBounds(_Model):
    """The SLA the steps were judged against; None = unbounded."""

    ttft_p95_s: float | None = None
    tpot_p95_s: float | None = None
    max_error_rate: float | None = None
    e2e_p95_s: float | None = None
    ttfat_p95_s: float | None = None

    @classmethod
    def from_sla(cls, sla: Sla) -> SlaBounds:
        """Snapshot form of a metrics Sla."""
        return cls(
            ttft_p95_s=sla.ttft_p95_s,
            tpot_p95_s=sla.tpot_p95_s,
            max_error_rate=sla.max_error_rate,
            e2e_p95_s=sla.e2e_p95_s,
            ttfat_p95_s=sla.ttfat_p95_s,
        )

    def to_sla(self) -> Sla:
        """Metrics form of these bounds."""
        return Sla(
            ttft_p95_s=self.ttft_p95_s,
            tpot_p95_s=self.tpot_p95_s,
            max_error_rate=self.max_error_rate,
            e2e_p95_s=self.e2e_p95_s,
            ttfat_p95_s=self.ttfat_p95_s,
        )


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
    arrivals_dropped: NonNegativeInt | None = None
    """Open-loop arrivals a level change dropped while they waited for a slot under
    `--max-in-flight` (issue 31); None in files from before it."""


class KneeModel(_Model):
    """Where throughput stopped growing usefully; semantics in `gputui.metrics.knee`."""

    level: float
    mode: StepMode
    method: str
    """Either "gain_per_doubling" or "kneedle"; a plain str, so a newer minor's method loads."""
    reason: str
    explanation: str | None = None
    """What bound the first step past the knee, with its evidence (diagnosis)."""
    bound_by: str | None = None
    """The diagnosis verdict of the first step past the knee with data (`metrics.knee_summary`)."""
    bound_at: float | None = None
    """That step's level."""

    @classmethod
    def from_knee(cls, knee: Knee) -> KneeModel:
        """Snapshot form of a metrics Knee (its step index is not kept: steps can be re-ordered)."""
        return cls(level=knee.level, mode=knee.mode, method=knee.method, reason=knee.reason)


class CapacityModel(_Model):
    """The SLA-qualified capacity and the numbers measured there; see `gputui.metrics.capacity`."""

    level: float
    mode: StepMode
    output_tokens_per_s: NonNegativeFloat
    """The qualified output: good requests' tokens per second (issue 31; older files, whose key
    held every output token, are read through `Snapshot._good_output_capacity`)."""
    requests_per_s: NonNegativeFloat
    ttft_p95_s: float | None = None
    tpot_p95_s: float | None = None
    error_rate: float | None = None
    output_tokens_per_s_ci: CiInterval | None = None
    """95 % interval of the qualified throughput (issue 16; absent in older files)."""
    all_output_tokens_per_s: NonNegativeFloat | None = None
    """Every output token at that level, failed, over-SLA and short requests' included."""
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
            all_output_tokens_per_s=capacity.all_output_tokens_per_s,
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


def _step_goodput(steps: object, mode: object, level: object) -> float | None:
    """The good output tok/s of the last complete step at (mode, level) in a raw steps list."""
    if not isinstance(steps, (list, tuple)):
        return None
    for step in reversed(steps):
        if not isinstance(step, dict) or step.get("incomplete"):
            continue
        if step.get("mode") == mode and step.get("level") == level:
            good = step.get("goodput_output_tokens_per_s")
            return float(good) if isinstance(good, (int, float)) else None
    return None


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
    energy_price_per_kwh: float | None = None
    """Electricity per kWh (`--energy-price`, issue 29): compare's energy cost."""
    pue: float | None = None
    """The facility's power usage effectiveness (`--pue`) that multiplies the energy cost."""

    @model_validator(mode="before")
    @classmethod
    def _good_output_capacity(cls, data: object) -> object:
        """A file from before issue 31 kept every output token as the capacity's throughput.

        Its capacity then reads its step's goodput as the qualified output (the cost's basis) and
        keeps the old figure as `all_output_tokens_per_s`; the old interval was of all output,
        so it is dropped. That goodput counted the tokens of requests sent in the window, not of
        tokens arrived in it, so it could exceed the output: it is capped at the output.
        """
        if not isinstance(data, dict):
            return data
        cap = data.get("capacity")
        if not isinstance(cap, dict) or "all_output_tokens_per_s" in cap:
            return data
        good = _step_goodput(data.get("steps"), cap.get("mode"), cap.get("level"))
        if good is None:
            return data
        every = cap.get("output_tokens_per_s")
        if isinstance(every, (int, float)):
            good = min(good, float(every))
        fixed = {
            **cap,
            "all_output_tokens_per_s": every,
            "output_tokens_per_s": good,
            "output_tokens_per_s_ci": None,
        }
        return {**data, "capacity": fixed}

    @field_validator("price_per_hour", "energy_price_per_kwh", mode="before")
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
