"""The one typed Settings tree: what `run`, `tui` and `demo` are asked for, past the command line.

Contract: `gputui.cli` turns the parsed flags into these frozen objects once per subcommand
(`RunOptions`, `TuiOptions`, `DemoOptions`, built from the flag groups `SharedFlags`,
`LoadPlanFlags` and the packages' own `SourceFlags`, `ShapeFlags`, `TelemetryFlags`); nothing
past the CLI reads an argparse Namespace. A field is None when its flag was not given, so that
`session_settings(flags, scenario)` builds the one immutable `SessionSettings` from flags >
scenario file > `DEFAULTS`, which both front ends read. `run_with_scenario`, `run_source_plan`
and `tui_source_plan` fill what a scenario or a trace implies, returning new options.

Adding a flag: declare it in `gputui.cli` (a shared one in `cli.shared_flags`, with its default in
`DEFAULTS` and its field in `SharedFlags` and `SessionSettings`), and give it a field in the
options of the subcommands that take it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar

from gputui.sla_defaults import DEFAULT_MAX_ERROR_RATE
from gputui.telemetry.setup import TelemetryFlags
from gputui.workloads.runplan import ShapeFlags
from gputui.workloads.sources import SourceFlags, SourcePlan

if TYPE_CHECKING:
    from gputui.engine.arrivals import Arrival
    from gputui.engine.driven import LoadMode
    from gputui.metrics.sla import Sla
    from gputui.workloads.counters import CounterMode
    from gputui.workloads.scenario import Scenario

Endpoint = Literal["completions", "chat", "responses", "messages"]

DEFAULTS: Final[dict[str, Any]] = {
    "endpoint": "completions",
    "api_key_env": "OPENAI_API_KEY",
    "input_tokens": 512,
    "output_tokens": 128,
    "ignore_eos": True,
    "sla_ttft_p95": 1.0,
    "sla_tpot_p95": 0.035,
    "max_error_rate": DEFAULT_MAX_ERROR_RATE,
    "sla_e2e_p95": None,
    "sla_ttfat_p95": None,
    "request_timeout": 600.0,
    "connect_timeout": 10.0,
    "stall_timeout": 60.0,
    "workers": 1,
    "ray": None,
    "label": None,
    "price_per_hour": None,
    "energy_price": None,
    "pue": 1.0,
    "precision": None,
    "snapshot_dir": None,
    "target_precision": None,
    "max_step_seconds": None,
    "reuse_prompts": False,
}
"""The shared flags' values when neither the command line nor a scenario gives them."""


@dataclass(frozen=True, slots=True)
class SessionSettings:
    """The shared settings of one session, whichever front end runs it."""

    endpoint: Endpoint
    api_key_env: str
    input_tokens: int
    output_tokens: int
    ignore_eos: bool
    sla_ttft_p95: float | None
    sla_tpot_p95: float | None
    max_error_rate: float | None
    sla_e2e_p95: float | None
    sla_ttfat_p95: float | None
    request_timeout: float
    connect_timeout: float
    stall_timeout: float
    workers: int
    ray: str | None
    label: str | None
    price_per_hour: float | None
    precision: str | None
    snapshot_dir: Path
    energy_price: float | None = None
    """Electricity price per kWh (`--energy-price`): an energy cost beside the hourly one."""
    pue: float = 1.0
    """Power usage effectiveness (`--pue`): multiplies the energy cost."""
    target_precision: float | None = None
    max_step_seconds: float | None = None
    reuse_prompts: bool = False
    """No per-run salt: the prompts of an earlier run with this seed (`--reuse-prompts`)."""

    @property
    def sla(self) -> Sla:
        """The SLA as the metrics take it."""
        from gputui.metrics.sla import Sla

        return Sla(
            self.sla_ttft_p95,
            self.sla_tpot_p95,
            self.max_error_rate,
            self.sla_e2e_p95,
            self.sla_ttfat_p95,
        )


def from_scenario(scenario: Scenario) -> dict[str, Any]:
    """The shared settings a scenario gives, by flag name."""
    nominal = scenario.flag_values()
    return {
        "endpoint": scenario.endpoint,
        "sla_ttft_p95": scenario.sla.ttft_p95_s,
        "sla_tpot_p95": scenario.sla.tpot_p95_s,
        "max_error_rate": scenario.sla.max_error_rate,
        "sla_e2e_p95": scenario.sla.e2e_p95_s,
        "sla_ttfat_p95": scenario.sla.ttfat_p95_s,
        "ignore_eos": scenario.workload.ignore_eos,
        # a distribution's mean; the prepared workload sends the real lengths
        "input_tokens": nominal["input_tokens"],
        "output_tokens": nominal["output_tokens"],
        "label": scenario.name or None,
    }


@dataclass(frozen=True, slots=True)
class SharedFlags:
    """The flags `run`, `tui` and `demo` share, as given (None: not given)."""

    endpoint: Endpoint | None = None
    api_key_env: str | None = None
    scenario: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    ignore_eos: bool | None = None
    token_counter: CounterMode = "auto"
    tokenizer: Path | None = None
    reuse_prompts: bool | None = None
    sla_ttft_p95: float | None = None
    sla_tpot_p95: float | None = None
    max_error_rate: float | None = None
    sla_e2e_p95: float | None = None
    sla_ttfat_p95: float | None = None
    request_timeout: float | None = None
    connect_timeout: float | None = None
    stall_timeout: float | None = None
    workers: int | None = None
    ray: str | None = None
    label: str | None = None
    price_per_hour: float | None = None
    energy_price: float | None = None
    pue: float | None = None
    precision: str | None = None
    snapshot_dir: Path | None = None
    target_precision: float | None = None
    max_step_seconds: float | None = None
    records: Path | None = None
    """`--records FILE`: per-request JSON Lines (`snapshot.records_file`)."""
    serve_metrics: tuple[str, int] | None = None
    """`--serve-metrics HOST:PORT`: gputui's own /metrics (`frontends.exporter`)."""


@dataclass(frozen=True, slots=True)
class LoadPlanFlags:
    """`gputui run`'s load plan: levels or the auto sweep or a validation hold, and each step."""

    concurrency: tuple[int, ...] | None = None
    rate: tuple[float, ...] | None = None
    auto: bool = False
    validate_rate: float | None = None
    max_level: int = 256
    max_minutes: float = 30.0
    seconds: float = 60.0
    """Length of the validation hold."""
    no_validate: bool = False
    burst: int | None = None
    burst_every: float = 30.0
    arrival: Arrival | None = None
    burstiness: float | None = None
    max_in_flight: int = 1024
    step_seconds: float | None = None
    warmup_seconds: float | None = None
    repeats: int = 1
    seed: int | None = None

    @property
    def load_given(self) -> bool:
        """A load flag (or the scenario's plan) chose what to sweep."""
        return bool(self.concurrency or self.rate or self.auto or self.validate_rate)


@dataclass(frozen=True, slots=True)
class RunOptions:
    """Everything `gputui run` was asked for (the demo's headless sweep builds one directly)."""

    url: str
    model: str | None = None
    shared: SharedFlags = field(default_factory=SharedFlags)
    plan: LoadPlanFlags = field(default_factory=LoadPlanFlags)
    shape: ShapeFlags = field(default_factory=ShapeFlags)
    source: SourceFlags = field(default_factory=SourceFlags)
    telemetry: TelemetryFlags = field(default_factory=TelemetryFlags)
    extra_body: str | None = None
    no_uvloop: bool = False
    out: str | None = None
    vram_check: str | None = None


@dataclass(frozen=True, slots=True)
class TuiOptions:
    """Everything `gputui tui` (or the demo's TUI) was asked for; None: not given."""

    url: str | None = None
    model: str | None = None
    shared: SharedFlags = field(default_factory=SharedFlags)
    source: SourceFlags = field(default_factory=SourceFlags)
    telemetry: TelemetryFlags = field(default_factory=TelemetryFlags)
    start_mode: LoadMode | None = None
    start_level: float | None = None
    factor: float | None = None
    burst_size: int | None = None
    warmup_seconds: float | None = None
    window_seconds: float | None = None
    no_color: bool = False
    ascii: bool = False


@dataclass(frozen=True, slots=True)
class DemoOptions:
    """`gputui demo`: the simulated card and model, the TUI's options, or a headless sweep."""

    tui: TuiOptions
    gpu: str = "a100-80gb-pcie"
    model: str = "llama-3.1-8b"
    precision: str = "bf16"
    headless: bool = False
    concurrency: tuple[int, ...] | None = None
    step_seconds: float = 8.0
    out: str = "gputui-demo.json"


_SCENARIO_SLA_KEYS: Final = {
    "sla_ttft_p95": "ttft_p95_s",
    "sla_tpot_p95": "tpot_p95_s",
    "max_error_rate": "max_error_rate",
    "sla_e2e_p95": "e2e_p95_s",
    "sla_ttfat_p95": "ttfat_p95_s",
}
"""Settings key -> scenario `[sla]` key: a scenario's SLA is whole (an absent bound is none)."""


def session_settings(flags: SharedFlags, scenario: Scenario | None) -> SessionSettings:
    """Flags, then the scenario's values, then `DEFAULTS`."""
    values = dict(DEFAULTS)
    if scenario is not None:
        values.update({k: v for k, v in from_scenario(scenario).items() if v is not None})
        for key, name in _SCENARIO_SLA_KEYS.items():
            values[key] = getattr(scenario.sla, name)
    for name in DEFAULTS:
        given = getattr(flags, name)
        if given is not None:
            values[name] = given
    if values["snapshot_dir"] is None:
        from gputui.snapshot.sessions import default_sessions_dir

        values["snapshot_dir"] = default_sessions_dir()
    values["snapshot_dir"] = Path(values["snapshot_dir"]).expanduser()
    return SessionSettings(**values)


def _trace_lengths(shared: SharedFlags, plan: SourcePlan, shape: ShapeFlags) -> SharedFlags:
    """A replay's nominal lengths (they only calibrate the prompt plan) where none was given."""
    from gputui.workloads.sources import trace_lengths

    if plan.trace is None or shared.input_tokens is not None:
        return shared
    if shape.input_dist is not None or shape.dataset is not None:
        return shared
    inp, out = trace_lengths(plan.trace)
    keep_out = shared.output_tokens is not None or shape.output_dist is not None
    return replace(
        shared, input_tokens=inp, output_tokens=shared.output_tokens if keep_out else out
    )


def run_source_plan(options: RunOptions) -> tuple[RunOptions, SourcePlan]:
    """`gputui run`: read the source flags and fill the load plan they imply."""
    from gputui.workloads.sources import read_source_plan, trace_rate

    shared = options.shared
    plan = read_source_plan(options.source, shared.scenario, shared.workers)
    load = options.plan
    if plan.trace is not None:
        if load.warmup_seconds is None:  # every request of a replay counts
            load = replace(load, warmup_seconds=0.0)
        if not load.load_given:
            load = replace(load, rate=(trace_rate(plan.trace),))
        if load.step_seconds is None:
            load = replace(load, step_seconds=plan.trace.duration_s + 1.0)
    elif plan.sessions is not None and not load.load_given:
        load = replace(load, concurrency=(plan.sessions,))
    shared = _trace_lengths(shared, plan, options.shape)
    return replace(options, shared=shared, plan=load), plan


def tui_source_plan(options: TuiOptions) -> tuple[TuiOptions, SourcePlan]:
    """`gputui tui` and `demo`: read the source flags and fill the starting load they imply.

    A trace starts in open loop (the replay keeps its own clock whatever the level); `--sessions
    N` starts N users in closed loop unless `--start-mode rate` asks for conversations at a rate.
    """
    from gputui.workloads.sources import read_source_plan, trace_rate

    plan = read_source_plan(options.source, options.shared.scenario, options.shared.workers)
    shared = _trace_lengths(options.shared, plan, ShapeFlags())
    options = replace(options, shared=shared)
    if plan.trace is not None:
        options = replace(
            options,
            start_mode="rate",
            start_level=options.start_level or trace_rate(plan.trace),
            warmup_seconds=0.0 if options.warmup_seconds is None else options.warmup_seconds,
        )
    elif plan.sessions is not None and options.start_level is None and options.start_mode != "rate":
        options = replace(options, start_mode="concurrency", start_level=float(plan.sessions))
    return options, plan


def run_with_scenario(options: RunOptions) -> tuple[RunOptions, Scenario | None]:
    """Load --scenario (if any) and fill the unset run flags from it, then from the defaults."""
    from gputui.workloads.scenario import load_scenario

    shared, load = options.shared, options.plan
    scenario = load_scenario(shared.scenario) if shared.scenario else None
    if scenario is not None:
        given = scenario.load
        if not load.load_given:
            if given.mode == "concurrency":
                load = replace(load, concurrency=tuple(int(x) for x in given.levels))
            elif given.mode == "rate":
                load = replace(load, rate=tuple(given.levels))
            else:
                load = replace(load, auto=True)
        load = _unset(
            load,
            step_seconds=given.step_seconds,
            warmup_seconds=given.warmup_seconds,
            arrival=given.arrival,
            burstiness=given.burstiness,
            seed=scenario.workload.seed,
        )
        shared = _unset(
            shared,
            sla_ttft_p95=scenario.sla.ttft_p95_s,
            sla_tpot_p95=scenario.sla.tpot_p95_s,
            max_error_rate=scenario.sla.max_error_rate,
            sla_e2e_p95=scenario.sla.e2e_p95_s,
            sla_ttfat_p95=scenario.sla.ttfat_p95_s,
            endpoint=scenario.endpoint,
            ignore_eos=scenario.workload.ignore_eos,
        )
    shared = _unset(shared, endpoint="completions", ignore_eos=True)
    return replace(options, shared=shared, plan=_unset(load, seed=0)), scenario


_Flags = TypeVar("_Flags", SharedFlags, LoadPlanFlags)


def _unset(flags: _Flags, **values: Any) -> _Flags:
    """`flags` with each of `values` where its field is still None."""
    return replace(flags, **{k: v for k, v in values.items() if getattr(flags, k) is None})
