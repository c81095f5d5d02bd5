"""Turn a Session into a Snapshot (the file a run leaves behind): `save_session` is the one path.

It reads the session only through `snapshot.source.MeasuredSession`, so this package does not
import `session`.

The TUI's `s`, its quit and `gputui run` all save through `save_session`, so a snapshot has the
same sections whichever front end wrote it (hardware and telemetry from the sampler, price and
precision from the settings).

Besides the steps, the snapshot keeps `totals` over every request the run received (warm-up and
failed ones included, cancelled ones not): the tokens gputui counted, to set beside the server's
own counters (e.g. llama.cpp's `tokens_predicted_total`), how many ok requests had no usage
report (their tokens were counted as content chunks) or stopped short of the tokens they asked
for, which `model` names the server answered with, the thinking tokens of reasoning models
(`reasoning_tokens_total`) and how the tokens of each event were counted (`event_tokens_methods`:
requests per method, see engine.event_tokens). `records` is the per-request table
(`snapshot.records`), from which `gputui records` writes the `--records` rows again.
"""

from __future__ import annotations

import re
import time
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from gputui.engine.context_limit import ContextLimit
from gputui.engine.identity import ServerIdentity
from gputui.engine.load import LoadMode
from gputui.engine.records import RequestRecord
from gputui.engine.target import Endpoint
from gputui.engine.target import Target as EngineTarget
from gputui.metrics.bursts import BurstRecovery
from gputui.metrics.knee_summary import KneeSummary, knee_summary
from gputui.metrics.repeats import RepeatSpread
from gputui.metrics.sla import Sla
from gputui.metrics.sla_terms import TermsChange
from gputui.metrics.validation import ValidationHold, held_capacity
from gputui.snapshot.journal import JournalHeader
from gputui.snapshot.journal_telemetry import JournalTelemetry
from gputui.snapshot.models import (
    CapacityModel,
    Client,
    KneeModel,
    Network,
    SlaBounds,
    Snapshot,
    Stats,
    Step,
    Target,
    Workload,
    step_from_result,
)
from gputui.snapshot.records import session_table
from gputui.snapshot.sections import (
    BURST_ISOLATION,
    STEP_ISOLATION,
    BurstSection,
    HardwareSection,
    PlanSection,
    TelemetrySection,
    ValidationSection,
)
from gputui.snapshot.source import MeasuredSession
from gputui.snapshot.step_models import renumbered
from gputui.snapshot.store import save_snapshot
from gputui.telemetry.sampler import TelemetrySampler
from gputui.telemetry.snapshot_sections import sections_from_sampler
from gputui.workloads.lengths import length_report


@dataclass(frozen=True, slots=True)
class RunInfo:
    """What the run was asked to do, for the snapshot header."""

    label: str | None
    target: EngineTarget
    model: str
    endpoint: Endpoint
    mode: LoadMode
    levels: list[float]
    input_tokens: int
    output_tokens: int
    step_seconds: float
    warmup_seconds: float | None
    """The fixed --warmup-seconds; None: each step settled (its own `warmup_s`)."""
    complete: bool
    arrival: str | None = None
    burstiness: float | None = None
    extra_body: dict[str, object] = field(default_factory=dict)
    seed: int = 0
    probe_path: str | None = None
    server_header: str = ""
    interrupted_by: str | None = None
    backend: str | None = None
    backend_evidence: str | None = None
    """What gave the backend away (see engine.backend)."""
    identity: ServerIdentity | None = None
    """What the server said it is (engine.identity), for the target's engine fields."""
    context: ContextLimit | None = None
    """The context limit the pre-flight checked against."""
    auto_reason: str | None = None
    knee_gains: tuple[tuple[float, float], ...] | None = None
    """The auto sweep's knee evidence: (level, output tok/s gain per doubling to it)."""
    repeats: RepeatSpread | None = None
    """`--repeats`: the spread across runs (`gputui.metrics.repeats.repeat_spread`)."""
    hardware: dict[str, object] | None = None
    telemetry: dict[str, object] | None = None
    client_extra: dict[str, object] = field(default_factory=dict)
    """Load-generator facts beyond the Client model's fields (workers, saturation)."""
    validation: ValidationHold | None = None
    validation_skipped: str | None = None
    """Why an `--auto` run held no validation (`--no-validate`, the time bound): its capacity is
    then provisional (`metrics.validation.held_capacity`)."""
    bursts: list[BurstRecovery] = field(default_factory=list)
    workload_details: dict[str, object] = field(default_factory=dict)
    """Optional `Workload` fields from the prepared workload (scenario, distributions, method)."""
    price_per_hour: float | None = None
    """The node's hourly price (--price-per-hour), for `gputui compare`'s cost."""
    energy_price_per_kwh: float | None = None
    """Electricity per kWh (--energy-price): compare's energy cost beside the hourly one."""
    pue: float = 1.0
    precision: str | None = None
    """The weights' precision (--precision; the simulator's own for `gputui demo`)."""
    settings_changes: tuple[TermsChange, ...] = ()
    """SLA and price changes made mid-session (the TUI's settings dialog), oldest first."""


def build_snapshot(session: MeasuredSession, info: RunInfo) -> Snapshot:
    """The snapshot of everything the session measured."""
    results = session.finished_steps()
    # The one function the live view uses too (`metrics.knee_summary`): one knee, capacity, bound.
    diagnoses = session.diagnosis.diagnoses()
    summary = knee_summary(results, session.sla, diagnoses, mode=info.mode)
    if summary.capacity is not None:  # a failed or skipped --auto hold is not a capacity
        held = held_capacity(summary.capacity, info.validation, info.validation_skipped)
        summary = replace(summary, capacity=held)
    extra_body = _extra_body(info)
    target = _target(info)
    snapshot = Snapshot(
        label=info.label,
        complete=info.complete,
        target=target,
        workload=_workload(info, extra_body, _workload_fields(info, session.all_records())),
        sla=SlaBounds.from_sla(session.sla),
        steps=_with_dropped(
            [step_from_result(result) for result in results],
            session.status.arrivals_dropped_by_step if session.status else {},
        ),
        knee=_knee_model(summary, info),
        knee_reason=summary.knee_reason,
        capacity=CapacityModel.from_capacity(summary.capacity) if summary.capacity else None,
        capacity_reason=summary.capacity_reason,
        network=_network(session, info),
        client=_client(session, info),
        plan=PlanSection.model_validate(
            _plan(info)
            | {
                "step_isolation": STEP_ISOLATION,
                "handover_s": round(sum(r.handover_s for r in results), 3),
                "burst_isolation": BURST_ISOLATION,
                "burst_window_s": round(sum(r.burst_window_s for r in results), 3),
            }
        ),
        validation=ValidationSection.model_validate(info.validation.to_json())
        if info.validation is not None
        else None,
        hardware=None if info.hardware is None else HardwareSection.model_validate(info.hardware),
        telemetry=None
        if info.telemetry is None
        else TelemetrySection.model_validate(info.telemetry),
        bursts=tuple(BurstSection.model_validate(b.to_json()) for b in info.bursts),
        price_per_hour=info.price_per_hour,
        energy_price_per_kwh=info.energy_price_per_kwh,
        pue=info.pue,
        precision=info.precision,
        interrupted_by=info.interrupted_by,
        requests_cancelled=session.cancelled,
    )
    # Extra v1 keys (the models allow unknown keys).
    records = session.all_records()
    extra: dict[str, object] = {
        "totals": request_totals(records),
        "records": session_table(
            records,
            session.step_specs(),
            [result.index for result in results],
            session.started_ns,
            session.sla,
        ),
    }
    if info.repeats is not None:
        extra["repeats"] = info.repeats.to_json()
    if info.settings_changes:
        extra["settings_changes"] = list(info.settings_changes)
    return snapshot.model_copy(update=extra)


def _with_dropped(steps: list[Step], dropped: Mapping[int, int]) -> tuple[Step, ...]:
    """Each open-loop step with `dropped_arrivals` (issue 31).

    They are arrivals scheduled under its index still waiting for a slot (`--max-in-flight`)
    when the level changed, never sent. A hidden carry-on step (after a hold) runs the step
    before it on: its drops are that step's.
    """
    indices = sorted(step.index for step in steps)
    counts: Counter[int] = Counter()
    for index, n in dropped.items():
        owner = bisect_right(indices, index) - 1
        if owner >= 0:
            counts[indices[owner]] += n
    return tuple(
        step.model_copy(update={"dropped_arrivals": counts[step.index]})
        if step.mode == "rate"
        else step
        for step in steps
    )


def _network(session: MeasuredSession, info: RunInfo) -> Network:
    return Network(
        rtt_s=Stats.from_summary(session.rtt_summary()),
        probe_path=info.probe_path,
        probes_failed=session.probes_failed,
    )


def _client(session: MeasuredSession, info: RunInfo) -> Client:
    status = session.status
    return Client(
        cpu_s=status.cpu_s if status else 0.0,
        wall_s=status.wall_s if status else 0.0,
        event_loop="uvloop" if status and status.uvloop else "asyncio",
        uvloop=bool(status and status.uvloop),
        connections_opened=status.connections_opened if status else 0,
        arrivals_dropped=status.arrivals_dropped if status else 0,
        **info.client_extra,
    )


JOURNAL_SECTIONS_INTERVAL_NS: Final = 5_000_000_000
"""How often the journal records the network and client sections (the last one is recovered)."""


def journal_lines(
    session: MeasuredSession, info: RunInfo, sampler: TelemetrySampler | None
) -> Callable[[], list[dict[str, object]]]:
    """What a session's journal records besides its requests and steps (`Session.open_journal`).

    The sampler's hardware and telemetry (`snapshot.journal_telemetry`), and every 5 s the
    network and client sections, so a recovered snapshot has the sections a saved one has.
    """
    telemetry = None if sampler is None else JournalTelemetry(sampler, session.started_ns)
    last_ns = [0]

    def lines() -> list[dict[str, object]]:
        out = [] if telemetry is None else telemetry.lines()
        now = time.perf_counter_ns()
        if now - last_ns[0] >= JOURNAL_SECTIONS_INTERVAL_NS:
            last_ns[0] = now
            out.append(
                {
                    "kind": "sections",
                    "network": _network(session, info).model_dump(mode="json"),
                    "client": _client(session, info).model_dump(mode="json"),
                }
            )
        return out

    return lines


def _knee_model(summary: KneeSummary, info: RunInfo) -> KneeModel | None:
    """The knee and its bound, from `metrics.knee_summary` like every other view (issue 28).

    After an auto sweep its planner's ramp evidence is kept beside it (`gains_per_doubling`, the
    output tok/s gain per doubling at each ramp level): the planner chose the levels, the one
    knee function names the knee.
    """
    if summary.knee is None:
        return None
    model = KneeModel.from_knee(summary.knee)
    bound = summary.bound
    if bound is not None:
        model = model.model_copy(update={"bound_by": bound.verdict, "bound_at": bound.level})
    if info.knee_gains is None:
        return model
    gains = [{"level": level, "gain": gain} for level, gain in info.knee_gains]
    return model.model_copy(update={"gains_per_doubling": gains})


def session_snapshot(
    session: MeasuredSession, info: RunInfo, sampler: TelemetrySampler | None = None
) -> Snapshot:
    """The snapshot with every section: `hardware` and `telemetry` come from the sampler."""
    if sampler is not None and info.hardware is None:
        hardware, telemetry = sections_from_sampler(sampler, origin_ns=session.started_ns)
        info = replace(info, hardware=hardware, telemetry=telemetry)
    return build_snapshot(session, info)


def assemble_session(
    session: MeasuredSession,
    info: RunInfo,
    sampler: TelemetrySampler | None,
    *,
    finish: Callable[[Snapshot], Snapshot] | None = None,
) -> Snapshot:
    """The snapshot `save_session` writes, not written (the TUI's report export reads it)."""
    snapshot = session_snapshot(session, info, sampler)
    if finish is not None:
        snapshot = finish(snapshot)
    diagnoser = session.diagnosis.diagnoser
    if diagnoser is not None:  # the steps' diagnoses and the knee's explanation
        snapshot = diagnoser.attach(snapshot)
    return renumbered_snapshot(snapshot)


def renumbered_snapshot(snapshot: Snapshot) -> Snapshot:
    """Steps indexed 0, 1, 2 ... as the screens number them (`step_models.renumbered`).

    Done last, once the diagnoses (keyed by the session's step index) are attached; the
    validation hold's `step_index` follows its step.
    """
    old = sorted(s.index for s in snapshot.steps)
    steps = renumbered(snapshot.steps)
    update: dict[str, object] = {"steps": steps}
    validation = snapshot.validation
    if validation is not None and validation.step_index in old:
        new_index = old.index(validation.step_index)
        update["validation"] = validation.model_copy(update={"step_index": new_index})
    return snapshot.model_copy(update=update)


def save_session(
    session: MeasuredSession,
    info: RunInfo,
    sampler: TelemetrySampler | None,
    path: Path,
    *,
    finish: Callable[[Snapshot], Snapshot] | None = None,
) -> Snapshot:
    """The one way a session becomes a file: the TUI's save and quit and `gputui run` use it.

    `finish` adds what a front end measured beside the Session (a workload source's
    conversation or trace sections); the Session's own diagnosis (`Session.diagnosis.start`) is
    attached after it, so both front ends' files carry it.
    """
    snapshot = assemble_session(session, info, sampler, finish=finish)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_snapshot(snapshot, path)
    return snapshot


def session_file(folder: Path, label: str | None) -> Path:
    """A new snapshot's path in the sessions folder: `<UTC stamp>-<label>.json`."""
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", label or "session").strip("-")[:40] or "session"
    path = folder / f"{stamp}-{slug}.json"
    copy = 2
    while path.exists():  # two saves within a second never overwrite each other
        path = folder / f"{stamp}-{slug}-{copy}.json"
        copy += 1
    return path


def _extra_body(info: RunInfo) -> dict[str, object]:
    return {k: v for k, v in info.extra_body.items() if k.lower() != "authorization"}


def _target(info: RunInfo) -> Target:
    target = Target(
        url=info.target.api_url,
        model=info.model,
        endpoint=info.endpoint,
        backend=info.backend,
        server_header=info.server_header or None,
    )
    if info.backend_evidence:
        target = target.model_copy(update={"backend_evidence": info.backend_evidence})
    return target.model_copy(update=identity_fields(info.identity, info.context, info.backend))


def identity_fields(
    identity: ServerIdentity | None, context: ContextLimit | None, backend: str | None
) -> dict[str, object]:
    """The target's engine fields: what the server said of itself, and the limit checked."""
    fields: dict[str, object] = {"engine": backend}
    if context is not None:
        fields["context_limit"] = context.tokens
        fields["context_limit_source"] = context.source
    if identity is None:
        return fields
    return {
        **fields,
        "engine": identity.engine,
        "version": identity.version,
        "engine_model": identity.model,
        "max_input_tokens": identity.max_input_tokens,
        "max_sequences": identity.max_sequences,
        "max_batch_tokens": identity.max_batch_tokens,
        "kv_blocks": identity.kv_blocks,
        "kv_tokens": identity.kv_tokens,
        "engine_settings": dict(identity.settings),
        "identity_sources": list(identity.sources),
    }


def _plan(info: RunInfo) -> dict[str, object]:
    return {
        "mode": info.mode,
        "levels": info.levels,
        "step_seconds": info.step_seconds,
        "warmup_seconds": info.warmup_seconds,
        "seed": info.seed,
        "auto_reason": info.auto_reason,
    }


def journal_header(info: RunInfo, sla: Sla) -> JournalHeader:
    """The journal's header: the snapshot sections known before the first request."""
    extra_body = _extra_body(info)
    return JournalHeader(
        label=info.label,
        target=_target(info),
        workload=_workload(info, extra_body, info.workload_details),
        sla=SlaBounds.from_sla(sla),
        plan=_plan(info),
        price_per_hour=info.price_per_hour,
        precision=info.precision,
        energy_price_per_kwh=info.energy_price_per_kwh,
        pue=info.pue,
    )


def _workload(info: RunInfo, extra_body: dict[str, object], fields: dict[str, object]) -> Workload:
    """The workload section: the request shape, and the prepared workload's `fields`."""
    return Workload.model_validate(
        {
            "input_tokens": info.input_tokens,
            "output_tokens": info.output_tokens,
            "endpoint": info.endpoint,
            "arrival": info.arrival,
            "burstiness": info.burstiness,
            "extra_body": extra_body,
            "ignore_eos": bool(extra_body.get("ignore_eos", False)),
            **fields,
        }
    )


def _workload_fields(info: RunInfo, records: Sequence[RequestRecord]) -> dict[str, object]:
    """The prepared workload's fields, and requested vs measured lengths of the ok requests."""
    report = length_report(records)
    return {
        "input_tokens_method": "approximate (common words; measured from usage)",
        **info.workload_details,
        "input_lengths": report["input"],
        "output_lengths": report["output"],
        "lengths_by_step": tuple(report["by_step"]),
    }


def request_totals(records: Sequence[RequestRecord]) -> dict[str, object]:
    """Sums over every received request (the snapshot's `totals`; see the module docstring)."""
    cached = [r.cached_input_tokens for r in records if r.cached_input_tokens is not None]
    models = Counter(r.response_model for r in records if r.response_model is not None)
    ok = [r for r in records if r.ok]
    return {
        "requests": len(records),
        "requests_ok": len(ok),
        "requests_failed": len(records) - len(ok),
        "output_tokens_total": sum(r.output_tokens for r in records),
        "input_tokens_total": sum(r.input_tokens or 0 for r in records),
        "cached_input_tokens_total": sum(cached) if cached else None,
        "ok_requests_without_usage": sum(1 for r in ok if not r.tokens_from_usage),
        "short_outputs": sum(1 for r in ok if r.output_tokens < r.requested_output_tokens),
        "response_models": dict(models.most_common()),
        "reasoning_tokens_total": sum(r.reasoning_tokens for r in records),
        "event_tokens_methods": dict(Counter(r.event_tokens_method for r in ok).most_common()),
    }
