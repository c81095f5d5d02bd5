"""`gputui run`: the Session driven by a line printer instead of screens.

It prints one line per finished step and a final table, and writes the snapshot. Ctrl-C, SIGTERM
and SIGHUP (a dropped SSH session) stop the sweep, abort what is in flight, and still write the
snapshot with every finished request, marked incomplete.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import Any

from gputui.control.adaptive import finish_step
from gputui.control.repeats import fresh_start, repeat_spread, spread_lines
from gputui.control.sweep import (
    BurstFirer,
    InFlightTrace,
    SweepRunner,
    burst_recoveries,
    capacity_rate,
)
from gputui.engine.arrivals import Arrival
from gputui.engine.backend import OPENAI_COMPATIBLE, Backend
from gputui.engine.client import ClientConfig, Timeouts
from gputui.engine.event_tokens import stream_counting
from gputui.engine.load import LoadMode, RequestShape
from gputui.engine.preflight import preflight
from gputui.engine.process import EngineConfig
from gputui.engine.target import parse_target
from gputui.errors import UsageError
from gputui.frontends.run_args import (
    describe_plan,
    describe_steps,
    output_path,
    parse_extra_body,
    step_limits,
)
from gputui.frontends.run_printer import StepPrinter as StepPrinter
from gputui.metrics.capacity import qualified_capacity
from gputui.metrics.knee import knee_from_steps
from gputui.metrics.knee_sweep import gains_line
from gputui.metrics.roofline_use import bandwidth_from_vram_check
from gputui.metrics.sla import Sla
from gputui.metrics.step import StepResult
from gputui.session import Session
from gputui.settings import session_settings
from gputui.snapshot.assemble import RunInfo, journal_header, journal_lines, save_session
from gputui.snapshot.journal import JournalHeader
from gputui.snapshot.recovery import recover_leftovers
from gputui.telemetry.samples import ServerSample
from gputui.telemetry.setup import build_sampler, telemetry_config_from_args
from gputui.telemetry.spec_decode import spec_decode_line
from gputui.workloads.prepare import prepare_workload
from gputui.workloads.report import length_lines, workload_lines
from gputui.workloads.runplan import apply_scenario, workload_config
from gputui.workloads.sources import plan_workload_source


def run_command(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Run a headless sweep; returns the exit code."""
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
    mode: LoadMode = "rate" if args.rate or args.validate_rate else "concurrency"
    levels: list[float] = [float(x) for x in (args.concurrency or args.rate or [])]
    arrival: Arrival = args.arrival or ("gamma" if args.burstiness is not None else "poisson")
    warmup_s: float | None = args.warmup_seconds  # None: each step settles (session.settling)
    limits = step_limits(args, settings)
    api_key = os.environ.get(settings.api_key_env) or None
    checked = preflight(target, args.model, api_key=api_key, timeout_s=settings.connect_timeout)
    model = checked.model
    prepared = prepare_workload(
        workload,
        target=target,
        model=model,
        endpoint=settings.endpoint,
        api_key=api_key,
        token_counter=args.token_counter,
        tokenizer=args.tokenizer,
        base_dir=scenario.folder if scenario is not None else Path(),
        scenario_name=scenario.name if scenario is not None else None,
        scenario_file=scenario.path if scenario is not None else None,
        backend=checked.backend.name,
    )
    config = EngineConfig(
        client=ClientConfig(
            target=target,
            model=model,
            endpoint=settings.endpoint,
            api_key=api_key,
            extra_body=extra_body,
            timeouts=Timeouts(
                connect_s=settings.connect_timeout,
                request_s=settings.request_timeout,
                stall_s=settings.stall_timeout,
            ),
            **stream_counting(checked.backend.name, args.tokenizer and str(args.tokenizer)),
        ),
        shape=RequestShape(prepared.nominal_input, prepared.nominal_output),
        workload=source.engine_workload(prepared.spec),
        arrival=arrival,
        burstiness=args.burstiness or 1.0,
        max_in_flight=args.max_in_flight,
        seed=args.seed,
        probe_path=checked.probe_path,
        use_uvloop=not args.no_uvloop,
    )
    sla = settings.sla
    printer = StepPrinter(sys.stdout)
    trace = InFlightTrace()
    session = Session(
        config,
        sla,
        warmup_s=warmup_s,
        on_step_finished=printer.step,
        on_frame=trace.on_frame,
        workers=settings.workers,
        ray_address=settings.ray,
    )
    stopper = _SignalStopper()
    telemetry_config = telemetry_config_from_args(args, target.base_url + target.root_prefix)
    sampler = build_sampler(telemetry_config)
    plan = describe_plan(args, mode, levels)
    sys.stdout.write(
        f"gputui run: {target.base_url} model {model} ({settings.endpoint}), {plan}, "
        f"{describe_steps(warmup_s, limits)}\n"
        f"gputui run: backend {checked.backend.name} ({checked.backend.evidence})\n"
        + "".join(f"gputui run: {line}\n" for line in workload_lines(prepared, scenario))
        + "".join(f"gputui run: {line}\n" for line in source.describe())
    )
    sys.stdout.flush()
    runner = SweepRunner(session, stopper.fired, limits=limits, trace=trace)
    bursts = BurstFirer(session, args.burst, args.burst_every) if args.burst else None
    auto_reason: str | None = None
    knee_gains: tuple[tuple[float, float], ...] = ()
    knee_level: float | None = None
    validation: dict[str, Any] | None = None
    info = RunInfo(
        label=settings.label,
        target=target,
        model=model,
        endpoint=settings.endpoint,
        mode=mode,
        levels=levels,
        arrival=arrival if mode == "rate" else None,
        burstiness=args.burstiness,
        input_tokens=prepared.nominal_input,
        output_tokens=prepared.nominal_output,
        extra_body=extra_body,
        step_seconds=args.step_seconds if args.step_seconds is not None else limits.max_s,
        warmup_seconds=warmup_s,
        seed=args.seed,
        probe_path=checked.probe_path,
        server_header=checked.server_header,
        complete=False,
        backend=checked.backend.name,
        backend_evidence=checked.backend.evidence,
        workload_details=prepared.details,
        price_per_hour=settings.price_per_hour,
        precision=settings.precision,
    )
    journal_dir = out.parent if str(out.parent) else Path()
    for line in recover_leftovers(journal_dir):
        printer.note(line)
    with stopper:
        sampler.start()
        session.start()
        diagnoser = session.start_diagnosis(
            sampler,
            telemetry_config.metrics_url,
            model=model,
            measured_bandwidth_gbps=vram_bandwidth,
        )
        printer.explain = diagnoser.line
        _open_journal(
            session,
            journal_dir,
            journal_header(info, sla),
            printer,
            journal_lines(session, info, sampler),
        )
        if bursts is not None:
            bursts.start()
        repeats = _Repeats(args.repeats)
        for repeat in range(args.repeats):
            if stopper.fired.is_set():
                break
            if repeat:
                outcome = fresh_start(session, stopper.fired, target.base_url)
                printer.note(
                    f"repeat {repeat + 1} of {args.repeats}: fresh connections, "
                    f"prefix cache {outcome}"
                )
            first = len(session.step_specs())
            if args.auto:
                deadline_ns = time.perf_counter_ns() + int(args.max_minutes * 60e9)
                auto_reason, knee_gains, knee_level = runner.knee_auto(
                    sla, max_level=args.max_level, deadline_ns=deadline_ns
                )
                printer.note(f"auto sweep: {auto_reason}")
                printer.note(gains_line(knee_gains))
            else:
                deadline_ns = 0
                knee_gains, knee_level = (), None
                if args.validate_rate:
                    validation = runner.validate(args.validate_rate, args.seconds)
                else:
                    runner.fixed(mode, levels)
            current = session.current_step
            if args.repeats > 1 and current is not None:
                finish_step(session, stopper.fired, current.index)  # its figures, for the spread
            repeats.add(session, first, sla, knee_level)
        if args.auto and not stopper.fired.is_set():
            rate = capacity_rate(session.finished_steps(), sla)
            hold_s = min(args.seconds, (deadline_ns - time.perf_counter_ns()) / 1e9 - 15.0)
            if rate is not None and not args.no_validate:
                if hold_s >= min(args.seconds, 5.0):
                    printer.note(
                        f"validating: {rate:g} req/s (90 % of capacity) for {hold_s:.0f} s"
                    )
                    validation = runner.validate(rate, hold_s)
                else:
                    printer.note("no validation hold: the --max-minutes bound is reached")
        if bursts is not None:
            bursts.stop()
        interrupted = stopper.fired.is_set()
        if not interrupted:
            printer.note("last step done, waiting for requests in flight")
        session.stop(cancel=interrupted, drain_timeout_s=settings.request_timeout)
        sampler.stop()
    server_sample = sampler.latest().server
    burst_results = (
        burst_recoveries(
            bursts.fired_ns,
            args.burst,
            session.all_records(),
            trace,
            sla.ttft_p95_s,
            session.started_ns,
        )
        if bursts is not None
        else []
    )
    info = replace(
        info,
        complete=not interrupted,
        interrupted_by=stopper.signal_name,
        auto_reason=auto_reason,
        validation=validation,
        bursts=burst_results,
        knee_gains=tuple(knee_gains) if args.auto else None,
        auto_knee=(knee_level, (auto_reason or "").split("; ")[0])
        if knee_level is not None
        else None,
        repeats=repeats.spread() if args.repeats > 1 else None,
        client_extra={"workers": settings.workers, "ray": settings.ray, **trace.saturation()},
        backend=_backend_name(checked.backend, server_sample),
    )
    snapshot = save_session(
        session,
        info,
        sampler,
        out,
        finish=lambda s: source.finish(s, session.all_records()),
    )
    session.close_journal(saved=True)
    printer.table(session.finished_steps())
    saturation = trace.saturation()
    if saturation["saturated_share"] > 0.05:
        printer.note(
            f"warning: the client itself was saturated in {saturation['saturated_share']:.0%} of "
            f"the run (busiest engine process up to {saturation['busiest_worker_cpu_percent_max']}"
            "% CPU): its timings include its own queueing; rerun with more --workers"
        )
    printer.summary(snapshot)
    if args.repeats > 1:
        sys.stdout.write("".join(f"{line}\n" for line in spread_lines(repeats.spread())))
    spec = (snapshot.telemetry.model_extra or {}).get("spec_decode") if snapshot.telemetry else None
    spec_line = spec_decode_line(spec if isinstance(spec, dict) else None)
    sys.stdout.write(f"{spec_line}\n" if spec_line else "")
    sys.stdout.write("".join(f"{line}\n" for line in source.lines(snapshot)))
    sys.stdout.write("".join(f"{line}\n" for line in length_lines(snapshot.workload)))
    printer.response_models(model, session.all_records())
    if session.cancelled:
        sys.stdout.write(f"{session.cancelled} requests in flight were aborted and not counted\n")
    note = f" (incomplete: {stopper.signal_name})" if interrupted else ""
    sys.stdout.write(f"snapshot written to {out}{note}\n")
    return 128 + stopper.signal_number if interrupted else 0


def _open_journal(
    session: Session,
    folder: Path,
    header: JournalHeader,
    printer: StepPrinter,
    extra_lines: Callable[[], list[dict[str, Any]]],
) -> Path | None:
    """The run's crash journal beside its snapshot (a run without one still runs)."""
    try:
        path = session.open_journal(folder, header, on_error=printer.note, extra_lines=extra_lines)
    except OSError as exc:
        printer.note(f"no journal (crash recovery off): {exc}")
        return None
    printer.note(f"journal {path} (a crash is recovered by gputui sessions --recover)")
    return path


def _backend_name(detected: Backend, server_sample: ServerSample | None) -> str:
    """Preflight's detection, else what telemetry's /metrics scrape recognised."""
    if detected.name == OPENAI_COMPATIBLE and server_sample is not None and server_sample.backend:
        return server_sample.backend
    return detected.name


class _Repeats:
    """Each repeat's steps, capacity and knee, for the spread (`gputui.control.repeats`)."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.runs: list[list[StepResult]] = []
        self.capacities: list[float | None] = []
        self.knees: list[float | None] = []

    def add(self, session: Session, first: int, sla: Sla, knee: float | None) -> None:
        """The repeat whose steps start at index `first` has ended."""
        steps = [
            s for s in session.finished_steps() if s.index >= first and s.mode == "concurrency"
        ]
        capacity = qualified_capacity(steps, sla).capacity if steps else None
        if knee is None and steps:
            found = knee_from_steps(steps, mode="concurrency").knee
            knee = found.level if found is not None else None
        self.runs.append(steps)
        self.capacities.append(capacity.level if capacity is not None else None)
        self.knees.append(knee)

    def spread(self) -> dict[str, Any]:
        """The snapshot's `repeats` key."""
        return repeat_spread(self.runs, self.capacities, self.knees)


class _SignalStopper:
    """SIGINT, SIGTERM and SIGHUP end the sweep (the snapshot is still written)."""

    def __init__(self) -> None:
        self.fired = threading.Event()
        self.signal_name: str | None = None
        self.signal_number = 0
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> _SignalStopper:
        for sig in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)):
            if sig is not None:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        if not self.fired.is_set():
            self.signal_number = signum
            self.signal_name = signal.Signals(signum).name
            sys.stderr.write(
                f"\ngputui run: {self.signal_name}: stopping, saving what was measured\n"
            )
        self.fired.set()
