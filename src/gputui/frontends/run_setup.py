"""`gputui run`'s first two steps: read the flags into a plan, then ready the engine for it.

`plan_run` checks everything that needs no server (a bad flag is a `FlagError`, which the CLI
reports through the subcommand's parser);
`prepare_run` preflights the server, checks the context and calibrates the prompts.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

from gputui.control.rules import StepLimits
from gputui.engine.arrivals import Arrival
from gputui.engine.client import ClientConfig, Timeouts
from gputui.engine.context_limit import check_context
from gputui.engine.event_tokens import stream_counting
from gputui.engine.load import LoadMode, RequestShape
from gputui.engine.preflight import PreflightResult, preflight
from gputui.engine.process import EngineConfig
from gputui.engine.target import Target, parse_target
from gputui.errors import FlagError, UsageError
from gputui.frontends.run_args import (
    output_path,
    parse_extra_body,
    step_limits,
)
from gputui.frontends.run_printer import StepPrinter as StepPrinter
from gputui.metrics.roofline_use import bandwidth_from_vram_check
from gputui.settings import (
    RunOptions,
    SessionSettings,
    run_source_plan,
    run_with_scenario,
    session_settings,
)
from gputui.workloads.config import WorkloadConfig
from gputui.workloads.context_need import longest_prepared, longest_request
from gputui.workloads.prepare import PreparedRun, prepare_workload
from gputui.workloads.runplan import workload_config
from gputui.workloads.scenario import Scenario
from gputui.workloads.sources import SourcePlan


@dataclass(frozen=True, slots=True)
class RunPlan:
    """What the flags and the scenario ask for, checked before anything is sent."""

    target: Target
    source: SourcePlan
    scenario: Scenario | None
    settings: SessionSettings
    workload: WorkloadConfig
    extra_body: dict[str, object]
    out: Path
    vram_bandwidth: float | None
    mode: LoadMode
    levels: list[float]
    arrival: Arrival
    warmup_s: float | None
    """None: each step settles (session.settling)."""
    limits: StepLimits


@dataclass(frozen=True, slots=True)
class ReadyRun:
    """The server as preflight found it, and the workload calibrated against it."""

    checked: PreflightResult
    prepared: PreparedRun
    config: EngineConfig


def plan_run(options: RunOptions) -> tuple[RunOptions, RunPlan]:
    """The flags and the scenario, resolved and checked; a bad one raises FlagError.

    Returns the options as the scenario and the source filled them, and the plan.
    """
    try:
        target = parse_target(options.url)
        options, source = run_source_plan(options)
        options, scenario = run_with_scenario(options)
        shared, load, shape = options.shared, options.plan, options.shape
        settings = session_settings(shared, scenario)
        if scenario is None and shape.dataset is None:  # the TUI's default lengths
            if shape.input_dist is None:
                shared = replace(shared, input_tokens=settings.input_tokens)
            if shape.output_dist is None:
                shared = replace(shared, output_tokens=settings.output_tokens)
            options = replace(options, shared=shared)
        workload = workload_config(
            shape,
            scenario,
            input_tokens=shared.input_tokens,
            output_tokens=shared.output_tokens,
            seed=load.seed or 0,
            ignore_eos=bool(shared.ignore_eos),
        )
        extra_body = parse_extra_body(options.extra_body)
        out = output_path(options.out, settings)
        vram_bandwidth = bandwidth_from_vram_check(options.vram_check)
    except UsageError as exc:
        raise FlagError(str(exc)) from None
    if not load.load_given:
        raise FlagError("one of --concurrency, --rate, --auto or --validate-rate is required")
    if load.step_seconds is None and not (load.auto or settings.max_step_seconds):
        raise FlagError("--step-seconds is required (or a --scenario that sets load.step_seconds)")
    if settings.ignore_eos:
        extra_body.setdefault("ignore_eos", True)
    return options, RunPlan(
        target=target,
        source=source,
        scenario=scenario,
        settings=settings,
        workload=workload,
        extra_body=extra_body,
        out=out,
        vram_bandwidth=vram_bandwidth,
        mode="rate" if load.rate or load.validate_rate else "concurrency",
        levels=[float(x) for x in (load.concurrency or load.rate or [])],
        arrival=load.arrival or ("gamma" if load.burstiness is not None else "poisson"),
        warmup_s=load.warmup_seconds,
        limits=step_limits(load, settings),
    )


def prepare_run(options: RunOptions, plan: RunPlan) -> ReadyRun:
    """Preflight the server, check the context, calibrate the prompts, configure the engine."""
    settings, scenario = plan.settings, plan.scenario
    settings_flags, load = options.shared, options.plan
    api_key = os.environ.get(settings.api_key_env) or None
    checked = preflight(
        plan.target, options.model, api_key=api_key, timeout_s=settings.connect_timeout
    )
    check_context(checked.context, longest_request(plan.workload, plan.source))
    prepared = prepare_workload(
        plan.workload,
        target=plan.target,
        model=checked.model,
        endpoint=settings.endpoint,
        api_key=api_key,
        token_counter=settings_flags.token_counter,
        tokenizer=settings_flags.tokenizer,
        base_dir=scenario.folder if scenario is not None else Path(),
        scenario_name=scenario.name if scenario is not None else None,
        scenario_file=scenario.path if scenario is not None else None,
        backend=checked.backend.name,
        isolate=not settings.reuse_prompts,
    )
    check_context(checked.context, longest_prepared(prepared.spec, plan.source))
    config = EngineConfig(
        client=ClientConfig(
            target=plan.target,
            model=checked.model,
            endpoint=settings.endpoint,
            api_key=api_key,
            extra_body=plan.extra_body,
            timeouts=Timeouts(
                connect_s=settings.connect_timeout,
                request_s=settings.request_timeout,
                stall_s=settings.stall_timeout,
            ),
            **stream_counting(checked.backend.name, _path_text(settings_flags.tokenizer)),
        ),
        shape=RequestShape(prepared.nominal_input, prepared.nominal_output),
        workload=plan.source.engine_workload(prepared.spec),
        arrival=plan.arrival,
        burstiness=load.burstiness or 1.0,
        max_in_flight=load.max_in_flight,
        seed=load.seed or 0,
        probe_path=checked.probe_path,
        use_uvloop=not options.no_uvloop,
    )
    return ReadyRun(checked, prepared, config)


def _path_text(path: Path | None) -> str | None:
    return None if path is None else str(path)
