"""Scenario files: a workload, an SLA, an endpoint kind and a default load plan, in TOML.

Contract: `load_scenario(path_or_name)` reads a TOML file (stdlib tomllib) into a frozen, validated
`Scenario`, or raises `WorkloadFileError` naming the file, the field path and what was expected. A
name without a path (`chat`) means `scenarios/chat.toml` under the current directory, else the
scenario of that name installed with gputui (package data, `installed_scenario_dir`). Paths inside
a scenario (datasets) are relative to the scenario's folder, so a scenario folder can move whole.
Durations (`ttft_p95_s`, `step_seconds`, ...) are seconds, or a string with a unit: "35ms".
Command-line flags override a scenario field by field (see `workloads.runplan`); the TUI calls
`Scenario.prepare(...)` for the same workload the headless run would send.
"""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, PositiveFloat, ValidationError, model_validator

from gputui.metrics.sla import Sla
from gputui.sla_defaults import DEFAULT_MAX_ERROR_RATE
from gputui.workloads.config import (
    NonNegativeSeconds,
    Seconds,
    StrictModel,
    WorkloadConfig,
)
from gputui.workloads.distributions import DIST_KINDS
from gputui.workloads.errors import WorkloadFileError, describe_validation_error

if TYPE_CHECKING:
    from gputui.engine.target import Target
    from gputui.engine.workload import WorkloadSpec
    from gputui.workloads.counters import CounterMode
    from gputui.workloads.prepare import PreparedRun

SCENARIO_DIR = Path("scenarios")
"""The current directory's scenarios: a clone's, or the user's own."""


class SlaConfig(StrictModel):
    """P95 bounds and an error-rate bound.

    An absent P95 bound is none; an absent error-rate bound is the default
    (`DEFAULT_MAX_ERROR_RATE`, 5 %: every verdict has one; 1.0 allows any).
    """

    ttft_p95_s: Seconds | None = None
    tpot_p95_s: Seconds | None = None
    max_error_rate: float | None = Field(default=DEFAULT_MAX_ERROR_RATE, ge=0.0, le=1.0)
    e2e_p95_s: Seconds | None = None
    """Bound on the P95 full-request latency (E2E)."""
    ttfat_p95_s: Seconds | None = None
    """Bound on the P95 time to the first answer token (reasoning models)."""

    def to_sla(self) -> Sla:
        """The metrics form."""
        return Sla(
            self.ttft_p95_s,
            self.tpot_p95_s,
            self.max_error_rate,
            self.e2e_p95_s,
            self.ttfat_p95_s,
        )


class LoadPlan(StrictModel):
    """The default load plan; --concurrency/--rate/--auto on the command line replace it."""

    mode: Literal["concurrency", "rate", "auto"] = "concurrency"
    levels: tuple[PositiveFloat, ...] = (1, 2, 4, 8, 16, 32)
    """Concurrency levels (whole numbers) or arrival rates in requests/s."""
    step_seconds: Seconds = 30.0
    warmup_seconds: NonNegativeSeconds | None = None
    arrival: Literal["poisson", "constant", "gamma"] | None = None
    burstiness: PositiveFloat | None = None

    @model_validator(mode="after")
    def _levels(self) -> LoadPlan:
        if self.mode != "auto" and not self.levels:
            raise ValueError("expected at least one level")
        if self.mode == "concurrency" and any(x != int(x) for x in self.levels):
            raise ValueError(f"expected whole concurrency levels, got {list(self.levels)}")
        return self


class Scenario(StrictModel):
    """One benchmark scenario file."""

    name: str
    description: str = ""
    endpoint: Literal["completions", "chat", "responses", "messages"] = "completions"
    workload: WorkloadConfig
    sla: SlaConfig = SlaConfig()
    load: LoadPlan = LoadPlan()
    path: str = ""
    """Where it was read from (set by `load_scenario`, not by the file)."""

    @property
    def folder(self) -> Path:
        """The scenario's folder: relative dataset paths start here."""
        return Path(self.path).parent if self.path else Path()

    def prepare(
        self,
        target: Target,
        model: str,
        *,
        api_key: str | None = None,
        endpoint: Literal["completions", "chat", "responses", "messages"] | None = None,
        seed: int | None = None,
        token_counter: CounterMode = "auto",
        tokenizer: Path | None = None,
        backend: str | None = None,
        isolate: bool = True,
    ) -> PreparedRun:
        """Calibrate prompts against the target and return the run's workload (blocking I/O).

        `backend` is `PreflightResult.backend.name` (it decides `min_tokens = "auto"`);
        `isolate=False` sends no per-run salt (`--reuse-prompts`).
        """
        from gputui.workloads.prepare import prepare_workload  # httpx only when calibrating

        workload = (
            self.workload if seed is None else self.workload.model_copy(update={"seed": seed})
        )
        return prepare_workload(
            workload,
            target=target,
            model=model,
            endpoint=endpoint or self.endpoint,
            api_key=api_key,
            token_counter=token_counter,
            tokenizer=tokenizer,
            base_dir=self.folder,
            scenario_name=self.name,
            scenario_file=self.path or None,
            backend=backend,
            isolate=isolate,
        )

    def workload_spec(
        self, target: Target, model: str, *, api_key: str | None = None
    ) -> WorkloadSpec:
        """Just the picklable spec for `EngineConfig.workload` (see `prepare` for the rest)."""
        return self.prepare(target, model, api_key=api_key).spec

    def flag_values(self) -> dict[str, Any]:
        """The scenario as flag values (`input_tokens`, `sla_ttft_p95`, ...) for a flag-driven UI.

        Lengths are nominal (a distribution's mean); the prepared spec carries the real workload.
        """
        work, load, sla = self.workload, self.load, self.sla
        values: dict[str, Any] = {
            "endpoint": self.endpoint,
            "ignore_eos": work.ignore_eos,
            "sla_ttft_p95": sla.ttft_p95_s,
            "sla_tpot_p95": sla.tpot_p95_s,
            "max_error_rate": sla.max_error_rate,
            "sla_e2e_p95": sla.e2e_p95_s,
            "sla_ttfat_p95": sla.ttfat_p95_s,
            "start_mode": "rate" if load.mode == "rate" else "concurrency",
            "start_level": float(load.levels[0]) if load.levels else 1.0,
        }
        if load.warmup_seconds is not None:
            values["warmup_seconds"] = load.warmup_seconds
        for name, dist in (("input_tokens", work.input), ("output_tokens", work.output)):
            if dist is not None and dist.nominal() >= 1:  # an unread empirical one is 0
                values[name] = round(dist.nominal())
        return values


def installed_scenario_dir() -> Path | None:
    """The scenarios shipped with gputui: package data, or a source checkout's `scenarios/`."""
    packaged = Path(str(resources.files("gputui") / "scenarios"))
    checkout = Path(__file__).resolve().parents[3] / "scenarios"  # an editable install
    return next((place for place in (packaged, checkout) if place.is_dir()), None)


def default_scenario_dir() -> Path:
    """`./scenarios` when there is one, else the installed scenarios."""
    if SCENARIO_DIR.is_dir():
        return SCENARIO_DIR
    return installed_scenario_dir() or SCENARIO_DIR


def resolve_scenario_path(text: str) -> Path:
    """A scenario file path, or a bare name: `scenarios/NAME.toml`, else an installed one."""
    path = Path(text)
    if path.is_file():
        return path
    if path.suffix or len(path.parts) != 1:
        raise WorkloadFileError(text, "", "no such scenario file")
    installed = installed_scenario_dir()
    for folder in (SCENARIO_DIR, installed):
        if folder is not None and (folder / f"{text}.toml").is_file():
            return folder / f"{text}.toml"
    names = sorted(p.stem for p in installed.glob("*.toml")) if installed else []
    known = f"; installed: {', '.join(names)}" if names else ""
    raise WorkloadFileError(
        text, "", f"no such scenario file nor {SCENARIO_DIR}/{text}.toml{known}"
    )


def load_scenario(path_or_name: str | Path) -> Scenario:
    """Read and validate one scenario (raises WorkloadFileError, one line)."""
    path = resolve_scenario_path(str(path_or_name))
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise WorkloadFileError(path, "", f"not valid TOML: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise WorkloadFileError(path, "", f"cannot read: {exc}") from None
    raw.setdefault("name", path.stem)
    if "path" in raw:
        raise WorkloadFileError(path, "path", "unknown field")
    try:
        return Scenario.model_validate({**raw, "path": str(path)})
    except ValidationError as exc:
        raise describe_validation_error(path, exc, drop=DIST_KINDS) from None


def find_scenarios(places: list[Path] | None = None) -> list[Path]:
    """Scenario files in these folders or files (default: `default_scenario_dir`), by name."""
    found: list[Path] = []
    for place in places or [default_scenario_dir()]:
        if place.is_dir():
            found.extend(sorted(place.glob("*.toml")))
        elif place.is_file():
            found.append(place)
        else:
            raise WorkloadFileError(place, "", "no such scenario file or folder")
    return found
