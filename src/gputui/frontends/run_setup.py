"""`gputui run`'s first two steps: read the flags into a plan, then ready the engine for it.

`plan_run` checks everything that needs no server (a bad flag exits through the parser);
`prepare_run` preflights the server, checks the context and calibrates the prompts.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
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
from gputui.errors import UsageError
from gputui.frontends.run_args import (
    output_path,
    parse_extra_body,
    step_limits,
)
from gputui.frontends.run_printer import StepPrinter as StepPrinter
from gputui.metrics.roofline_use import bandwidth_from_vram_check
from gputui.settings import SessionSettings, session_settings
from gputui.workloads.config import WorkloadConfig
from gputui.workloads.context_need import longest_prepared, longest_request
from gputui.workloads.prepare import PreparedRun, prepare_workload
from gputui.workloads.runplan import apply_scenario, workload_config
from gputui.workloads.scenario import Scenario
from gputui.workloads.sources import SourcePlan, plan_workload_source


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


def plan_run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> RunPlan:
    """The flags and the scenario, resolved and checked; a bad one exits through `parser`."""
    try:
        target = parse_target(args.url)
        source = plan_workload_source(args)
        scenario = apply_scenario(args)
        settings = session_settings(args, scenario)
        if scenario is None and args.dataset is None:  # the TUI's default lengths
            if args.input_dist is None:
                args.input_tokens = settings.input_tokens
            if args.output_dist is None:
                args.output_tokens = settings.output_tokens
        workload = workload_config(args, scenario)
        extra_body = parse_extra_body(args.extra_body)
        out = output_path(args.out, settings)
        vram_bandwidth = bandwidth_from_vram_check(getattr(args, "vram_check", None))
    except UsageError as exc:
        parser.error(str(exc))
    if not (args.concurrency or args.rate or args.auto or args.validate_rate):
        parser.error("one of --concurrency, --rate, --auto or --validate-rate is required")
    if args.step_seconds is None and not (args.auto or settings.max_step_seconds):
        parser.error("--step-seconds is required (or a --scenario that sets load.step_seconds)")
    if settings.ignore_eos:
        extra_body.setdefault("ignore_eos", True)
    return RunPlan(
        target=target,
        source=source,
        scenario=scenario,
        settings=settings,
        workload=workload,
        extra_body=extra_body,
        out=out,
        vram_bandwidth=vram_bandwidth,
        mode="rate" if args.rate or args.validate_rate else "concurrency",
        levels=[float(x) for x in (args.concurrency or args.rate or [])],
        arrival=args.arrival or ("gamma" if args.burstiness is not None else "poisson"),
        warmup_s=args.warmup_seconds,
        limits=step_limits(args, settings),
    )


def prepare_run(args: argparse.Namespace, plan: RunPlan) -> ReadyRun:
    """Preflight the server, check the context, calibrate the prompts, configure the engine."""
    settings, scenario = plan.settings, plan.scenario
    api_key = os.environ.get(settings.api_key_env) or None
    checked = preflight(
        plan.target, args.model, api_key=api_key, timeout_s=settings.connect_timeout
    )
    check_context(checked.context, longest_request(plan.workload, plan.source))
    prepared = prepare_workload(
        plan.workload,
        target=plan.target,
        model=checked.model,
        endpoint=settings.endpoint,
        api_key=api_key,
        token_counter=args.token_counter,
        tokenizer=args.tokenizer,
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
            **stream_counting(checked.backend.name, args.tokenizer and str(args.tokenizer)),
        ),
        shape=RequestShape(prepared.nominal_input, prepared.nominal_output),
        workload=plan.source.engine_workload(prepared.spec),
        arrival=plan.arrival,
        burstiness=args.burstiness or 1.0,
        max_in_flight=args.max_in_flight,
        seed=args.seed,
        probe_path=checked.probe_path,
        use_uvloop=not args.no_uvloop,
    )
    return ReadyRun(checked, prepared, config)
