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
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import Any

import orjson

from gputui.engine.arrivals import Arrival
from gputui.engine.backend import OPENAI_COMPATIBLE, Backend
from gputui.engine.client import ClientConfig, Timeouts
from gputui.engine.event_tokens import stream_counting
from gputui.engine.load import LoadMode, RequestShape
from gputui.engine.preflight import preflight
from gputui.engine.process import EngineConfig
from gputui.engine.target import parse_target
from gputui.errors import UsageError
from gputui.metrics.roofline_use import bandwidth_from_vram_check
from gputui.run_printer import StepPrinter as StepPrinter
from gputui.session import Session
from gputui.settings import SessionSettings, session_settings
from gputui.snapshot.assemble import RunInfo, journal_header, save_session, session_file
from gputui.snapshot.journal import JournalHeader
from gputui.snapshot.recovery import recover_leftovers
from gputui.sweep import (
    BurstFirer,
    InFlightTrace,
    SweepRunner,
    burst_recoveries,
    capacity_rate,
)
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
        extra_body = _extra_body(args.extra_body)
        out = _output_path(args.out, settings)
        vram_bandwidth = bandwidth_from_vram_check(getattr(args, "vram_check", None))
    except UsageError as exc:
        parser.error(str(exc))
    if not (args.concurrency or args.rate or args.auto or args.validate_rate):
        parser.error("one of --concurrency, --rate, --auto or --validate-rate is required")
    if args.step_seconds is None:
        parser.error("--step-seconds is required (or a --scenario that sets load.step_seconds)")
    if settings.ignore_eos:
        extra_body.setdefault("ignore_eos", True)
    mode: LoadMode = "rate" if args.rate or args.validate_rate else "concurrency"
    levels: list[float] = [float(x) for x in (args.concurrency or args.rate or [])]
    arrival: Arrival = args.arrival or ("gamma" if args.burstiness is not None else "poisson")
    warmup_s = (
        args.warmup_seconds
        if args.warmup_seconds is not None
        else min(10.0, 0.2 * args.step_seconds)
    )
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
    plan = _describe_plan(args, mode, levels)
    sys.stdout.write(
        f"gputui run: {target.base_url} model {model} ({settings.endpoint}), {plan}, "
        f"{warmup_s:g} s warm-up + {args.step_seconds:g} s per step\n"
        f"gputui run: backend {checked.backend.name} ({checked.backend.evidence})\n"
        + "".join(f"gputui run: {line}\n" for line in workload_lines(prepared, scenario))
        + "".join(f"gputui run: {line}\n" for line in source.describe())
    )
    sys.stdout.flush()
    runner = SweepRunner(
        session, stopper.fired, step_s=args.step_seconds, warmup_s=warmup_s, trace=trace
    )
    bursts = BurstFirer(session, args.burst, args.burst_every) if args.burst else None
    auto_reason: str | None = None
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
        step_seconds=args.step_seconds,
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
        _open_journal(session, journal_dir, journal_header(info, sla), printer)
        if bursts is not None:
            bursts.start()
        if args.auto:
            auto_reason = runner.auto(
                "concurrency", sla, max_level=args.max_level, max_minutes=args.max_minutes
            )
            printer.note(f"auto sweep: {auto_reason}")
            rate = capacity_rate(session.finished_steps(), sla)
            if rate is not None and not args.no_validate and not stopper.fired.is_set():
                printer.note(
                    f"validating: {rate:g} req/s (90 % of capacity) for {args.seconds:g} s"
                )
                validation = runner.validate(rate, args.seconds)
        elif args.validate_rate:
            validation = runner.validate(args.validate_rate, args.seconds)
        else:
            runner.fixed(mode, levels)
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
    spec_line = spec_decode_line((snapshot.telemetry or {}).get("spec_decode"))
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
    session: Session, folder: Path, header: JournalHeader, printer: StepPrinter
) -> Path | None:
    """The run's crash journal beside its snapshot (a run without one still runs)."""
    try:
        path = session.open_journal(folder, header, on_error=printer.note)
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


def _describe_plan(args: argparse.Namespace, mode: LoadMode, levels: list[float]) -> str:
    if args.auto:
        return f"auto sweep up to concurrency {args.max_level} within {args.max_minutes:g} min"
    if args.validate_rate:
        return f"validation hold at {args.validate_rate:g} req/s for {args.seconds:g} s"
    return f"{mode} {','.join(f'{x:g}' for x in levels)}"


def _extra_body(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise UsageError(f"--extra-body is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise UsageError("--extra-body must be a JSON object")
    return value


def _output_path(text: str | None, settings: SessionSettings) -> Path:
    """--out, else a new file in the sessions folder (so `gputui sessions` lists it)."""
    if text is None:
        try:
            settings.snapshot_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"--snapshot-dir {settings.snapshot_dir}: {exc}") from None
        return session_file(settings.snapshot_dir, settings.label)
    path = Path(text)
    folder = path.parent if str(path.parent) else Path()
    if not folder.is_dir():
        raise UsageError(f"--out: folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise UsageError(f"--out: folder {folder} is not writable")
    return path


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
