"""`gputui run`: the Session driven by a line printer instead of screens.

It prints one line per finished step and a final table, and writes the snapshot. Ctrl-C, SIGTERM
and SIGHUP (a dropped SSH session) stop the sweep, abort what is in flight, and still write the
snapshot with every finished request, marked incomplete.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

from gputui.control.plans import FixedLevels, KneeSweepPlan, Repeats, RepeatTally, ValidateRate
from gputui.control.repeats import fresh_start
from gputui.control.runner import Plan, PlanRunner
from gputui.control.sweep import BurstFirer, burst_recoveries
from gputui.engine.identity import describe_server
from gputui.engine.preflight import PreflightResult
from gputui.frontends.outputs import RunOutputs
from gputui.frontends.run_args import (
    describe_plan,
    describe_steps,
)
from gputui.frontends.run_parts import SignalStopper, backend_name, open_journal
from gputui.frontends.run_printer import StepPrinter as StepPrinter
from gputui.frontends.run_setup import ReadyRun, RunPlan, plan_run, prepare_run
from gputui.metrics.client_state import run_warning
from gputui.metrics.knee_sweep import gains_line
from gputui.metrics.prefix_cache import step_cache_line
from gputui.metrics.repeats import spread_lines
from gputui.metrics.sla import Sla
from gputui.metrics.validation import ValidationHold
from gputui.session import Session
from gputui.session.events import NOTHING_MEASURED
from gputui.settings import LoadPlanFlags, RunOptions
from gputui.snapshot.assemble import RunInfo, journal_header, journal_lines, save_session
from gputui.snapshot.models import Snapshot
from gputui.snapshot.recovery import recover_leftovers
from gputui.telemetry.sampler import TelemetrySampler, server_trace
from gputui.telemetry.setup import build_sampler, telemetry_config
from gputui.telemetry.spec_decode import spec_decode_line
from gputui.workloads.report import length_lines, workload_lines


@dataclass(slots=True)
class _Outcome:
    """What the sweep decided: the auto sweep's reason and ramp gains, a validation's result."""

    auto_reason: str | None = None
    knee_gains: tuple[tuple[float, float], ...] = ()
    validation: ValidationHold | None = None
    validation_skipped: str | None = None
    """Why an auto sweep's capacity was not validated (it is then provisional)."""
    deadline_ns: int = 0


def run_command(options: RunOptions) -> int:
    """Run a headless sweep; returns the exit code."""
    options, plan = plan_run(options)
    printer = StepPrinter(sys.stdout)
    printer.energy_price, printer.pue = plan.settings.energy_price, plan.settings.pue
    sla = plan.settings.sla
    shared = options.shared
    outputs = RunOutputs(shared.records, shared.serve_metrics, lambda: sla, printer.note)
    try:
        return _run(options, plan, prepare_run(options, plan), printer, outputs)
    finally:
        outputs.close()


def _run(
    options: RunOptions, plan: RunPlan, ready: ReadyRun, printer: StepPrinter, outputs: RunOutputs
) -> int:
    """The sweep itself, its snapshot and its lines (`run_command` owns the outputs)."""
    load = options.plan
    settings, target, model = plan.settings, plan.target, ready.checked.model
    session = Session(
        ready.config,
        settings.sla,
        warmup_s=plan.warmup_s,
        on_step_finished=printer.step,
        workers=settings.workers,
        ray_address=settings.ray,
    )
    _watch(outputs, session, printer)
    stopper = SignalStopper()
    telemetry = telemetry_config(options.telemetry, target.base_url + target.root_prefix)
    sampler = build_sampler(telemetry)
    _print_header(load, plan, ready)
    runner = PlanRunner(session, stopper.fired)
    bursts = BurstFirer(session, load.burst, load.burst_every) if load.burst else None
    info = _run_info(load, plan, ready)
    journal_dir = plan.out.parent if str(plan.out.parent) else Path()
    for line in recover_leftovers(journal_dir):
        printer.note(line)
    repeats = RepeatTally(load.repeats)
    with stopper:
        sampler.start()
        session.start()
        _start_observers(session, sampler, telemetry.metrics_url, plan, ready, printer)
        open_journal(
            session,
            journal_dir,
            journal_header(info, settings.sla),
            printer,
            journal_lines(session, info, sampler),
            outputs.taps,
        )
        if bursts is not None:
            bursts.start()
        outcome = _sweep(load, plan, session, runner, printer, repeats)
        if load.auto and not stopper.fired.is_set():
            _validate_capacity(load, session, runner, printer, settings.sla, outcome)
        elif load.auto:
            outcome.validation_skipped = "the run was stopped before its validation hold"
        if bursts is not None:
            bursts.stop()
        interrupted = stopper.fired.is_set()
        if not interrupted:
            printer.note("last step done, waiting for requests in flight")
        session.stop(cancel=interrupted, drain_timeout_s=settings.request_timeout)
        sampler.stop()
    burst_results = (
        burst_recoveries(
            bursts.fired_ns,
            load.burst or 0,
            session.all_records(),
            session.in_flight_frames(),
            settings.sla.ttft_p95_s,
            session.started_ns,
        )
        if bursts is not None
        else []
    )
    info = replace(
        info,
        complete=not interrupted,
        interrupted_by=stopper.signal_name,
        auto_reason=outcome.auto_reason,
        validation=outcome.validation,
        validation_skipped=outcome.validation_skipped,
        bursts=burst_results,
        knee_gains=tuple(outcome.knee_gains) if load.auto else None,
        repeats=repeats.spread() if load.repeats > 1 else None,
        client_extra={
            "workers": settings.workers,
            "ray": settings.ray,
            **session.client_saturation().to_json(),
        },
        backend=backend_name(ready.checked.backend, sampler.latest().server),
    )
    snapshot = save_session(
        session,
        info,
        sampler,
        plan.out,
        finish=lambda s: plan.source.finish(s, session.all_records(), server_trace(sampler)),
    )
    session.close_journal(saved=True)
    _print_results(load, plan, model, session, snapshot, printer, repeats)
    note = f" (incomplete: {stopper.signal_name})" if interrupted else ""
    sys.stdout.write(f"snapshot written to {plan.out}{note}\n")
    rejected = session.error_log.run_verdict()
    if rejected is not None and not interrupted:
        sys.stderr.write(f"gputui: {rejected}\n")
        return 1
    return 128 + stopper.signal_number if interrupted else 0


def _watch(outputs: RunOutputs, session: Session, printer: StepPrinter) -> None:
    """Export the session's live state; say where the records go and the metrics are served."""
    outputs.watch(session)
    if outputs.records is not None:
        printer.note(f"per-request records to {outputs.records.path} (as each step finishes)")
    if outputs.url is not None:
        printer.note(f"gputui's own metrics at {outputs.url}")


def _print_header(load: LoadPlanFlags, plan: RunPlan, ready: ReadyRun) -> None:
    """The run's first lines: target, model, plan, backend, workload."""
    checked, settings = ready.checked, plan.settings
    described = describe_plan(load, plan.mode, plan.levels)
    sys.stdout.write(
        f"gputui run: {plan.target.base_url} model {checked.model} ({settings.endpoint}), "
        f"{described}, {describe_steps(plan.warmup_s, plan.limits)}\n"
        f"gputui run: backend {checked.backend.name} ({checked.backend.evidence})\n"
        + "".join(f"gputui run: {line}\n" for line in _server_line(checked))
        + "".join(f"gputui run: {line}\n" for line in workload_lines(ready.prepared, plan.scenario))
        + "".join(f"gputui run: {line}\n" for line in plan.source.describe())
    )
    sys.stdout.flush()


def _server_line(checked: PreflightResult) -> list[str]:
    """What the server said of itself, as a header line (none when it said nothing)."""
    line = describe_server(checked.identity, checked.context)
    return [line] if line is not None else []


def _run_info(load: LoadPlanFlags, plan: RunPlan, ready: ReadyRun) -> RunInfo:
    """The snapshot's run description, as it stands before the first step."""
    checked, prepared, settings = ready.checked, ready.prepared, plan.settings
    return RunInfo(
        label=settings.label,
        target=plan.target,
        model=checked.model,
        endpoint=settings.endpoint,
        mode=plan.mode,
        levels=plan.levels,
        arrival=plan.arrival if plan.mode == "rate" else None,
        burstiness=load.burstiness,
        input_tokens=prepared.nominal_input,
        output_tokens=prepared.nominal_output,
        extra_body=plan.extra_body,
        step_seconds=load.step_seconds if load.step_seconds is not None else plan.limits.max_s,
        warmup_seconds=plan.warmup_s,
        seed=load.seed or 0,  # run_with_scenario's default
        probe_path=checked.probe_path,
        server_header=checked.server_header,
        complete=False,
        backend=checked.backend.name,
        backend_evidence=checked.backend.evidence,
        identity=checked.identity,
        context=checked.context,
        workload_details=prepared.details,
        price_per_hour=settings.price_per_hour,
        energy_price_per_kwh=settings.energy_price,
        pue=settings.pue,
        precision=settings.precision,
    )


def _start_observers(
    session: Session,
    sampler: TelemetrySampler,
    metrics_url: str | None,
    plan: RunPlan,
    ready: ReadyRun,
    printer: StepPrinter,
) -> None:
    """Start the diagnosis and give the printer its explanation, warnings and cache lines."""
    diagnoser = session.diagnosis.start(
        sampler,
        metrics_url,
        model=ready.checked.model,
        measured_bandwidth_gbps=plan.vram_bandwidth,
    )
    printer.explain = diagnoser.line
    printer.diagnosis_warnings = diagnoser.warnings
    printer.cache_line = lambda r: step_cache_line(
        r.index, session.all_records(), server_trace(sampler)
    )
    diagnoser.expect_cold = ready.prepared.details.get("prompt_salt") is not None


def _sweep(
    load: LoadPlanFlags,
    plan: RunPlan,
    session: Session,
    runner: PlanRunner,
    printer: StepPrinter,
    repeats: RepeatTally,
) -> _Outcome:
    """Each repeat's plan (auto, validation hold or fixed levels), until done or stopped."""
    outcome = _Outcome()

    def make(_repeat: int) -> Plan:
        if load.auto:
            deadline_ns = time.perf_counter_ns() + int(load.max_minutes * 60e9)
            return KneeSweepPlan.for_run(
                plan.settings.sla,
                max_level=load.max_level,
                limits=plan.limits,
                deadline_ns=deadline_ns,
            )
        if load.validate_rate:
            return ValidateRate(load.validate_rate, load.seconds, session.in_flight_between)
        return FixedLevels(plan.mode, plan.levels, plan.limits)

    def fresh(repeat: int) -> None:
        reset = fresh_start(session, runner.stop, plan.target.base_url)
        printer.note(
            f"repeat {repeat + 1} of {load.repeats}: fresh connections, prefix cache {reset}"
        )

    def ended(done: Plan) -> None:
        outcome.deadline_ns = 0
        outcome.knee_gains = ()
        if isinstance(done, KneeSweepPlan):
            outcome.deadline_ns = done.deadline_ns or 0
            outcome.auto_reason = done.reason
            outcome.knee_gains = done.gains
            printer.note(f"auto sweep: {outcome.auto_reason}")
            printer.note(gains_line(outcome.knee_gains))
        elif isinstance(done, ValidateRate):
            outcome.validation = done.validation

    sla = plan.settings.sla
    runner.run(Repeats(load.repeats, make, sla=sla, tally=repeats, fresh=fresh, on_end=ended))
    return outcome


def _validate_capacity(
    load: LoadPlanFlags,
    session: Session,
    runner: PlanRunner,
    printer: StepPrinter,
    sla: Sla,
    outcome: _Outcome,
) -> None:
    """After the auto sweep: hold 90 % of the capacity rate, if time and `--no-validate` allow."""
    hold_s = min(load.seconds, (outcome.deadline_ns - time.perf_counter_ns()) / 1e9 - 15.0)
    in_flight = session.in_flight_between
    validate = ValidateRate.at_capacity(session.finished_steps(), sla, hold_s, in_flight)
    if validate is None:
        return
    if load.no_validate:
        outcome.validation_skipped = "--no-validate skipped the open-loop hold"
    elif hold_s >= min(load.seconds, 5.0):
        printer.note(f"validating: {validate.rate:g} req/s (90 % of capacity) for {hold_s:.0f} s")
        runner.run(validate)
        outcome.validation = validate.validation
        if outcome.validation is None:
            outcome.validation_skipped = "the open-loop hold did not finish"
    else:
        outcome.validation_skipped = "the --max-minutes bound left no time for the open-loop hold"
        printer.note("no validation hold: the --max-minutes bound is reached")


def _print_results(
    load: LoadPlanFlags,
    plan: RunPlan,
    model: str,
    session: Session,
    snapshot: Snapshot,
    printer: StepPrinter,
    repeats: RepeatTally,
) -> None:
    """The final table, the summary and each part's closing lines."""
    printer.table(session.finished_steps())
    for event in session.events.items():  # levels that are no step (session.ledger): say so
        if event.text.endswith(NOTHING_MEASURED):
            printer.note(f"level {event.text}: no step (longer --max-step-seconds lets it measure)")
    bottlenecks = [step.bottleneck for step in snapshot.steps]
    warning = run_warning(session.client_saturation(), bottlenecks)
    if warning is not None:  # the advice follows the steps' verdicts (metrics.client_state)
        printer.note(warning)
    printer.summary(snapshot)
    if load.repeats > 1:
        sys.stdout.write("".join(f"{line}\n" for line in spread_lines(repeats.spread())))
    spec = (snapshot.telemetry.model_extra or {}).get("spec_decode") if snapshot.telemetry else None
    spec_line = spec_decode_line(spec if isinstance(spec, dict) else None)
    sys.stdout.write(f"{spec_line}\n" if spec_line else "")
    sys.stdout.write("".join(f"{line}\n" for line in plan.source.lines(snapshot)))
    sys.stdout.write("".join(f"{line}\n" for line in length_lines(snapshot.workload)))
    printer.response_models(model, session.all_records())
    if session.cancelled:
        sys.stdout.write(f"{session.cancelled} requests in flight were aborted and not counted\n")
