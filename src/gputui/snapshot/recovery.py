"""Recovering what a session that died unsaved left behind: its journal (see `snapshot.journal`).

Contract: `find_leftovers(folder)` lists the journals whose writer is gone (a live writer's are
skipped), `recover` rebuilds a snapshot from one (finished steps as they were, the step the crash
cut short from its journalled requests, knee and capacity recomputed), saves it and deletes the
journal, and `recover_leftovers` does that for a whole folder: the TUI offers it at start, `gputui
run` does it at start, and `gputui sessions --recover` does it on demand.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import orjson
from pydantic import BaseModel, ValidationError

from gputui.diagnosis.step import knee_explanation
from gputui.engine.records import RequestRecord
from gputui.metrics.knee_summary import knee_summary
from gputui.metrics.prefix_cache import PrefixCacheMeter, counter_delta_rate
from gputui.metrics.sla import Sla
from gputui.metrics.step import StepSpec, aggregate_step
from gputui.snapshot.journal import SUFFIX
from gputui.snapshot.journal_telemetry import (
    counters_from_lines,
    hardware_from_lines,
    telemetry_from_lines,
)
from gputui.snapshot.models import (
    CapacityModel,
    Client,
    KneeModel,
    Network,
    SlaBounds,
    Snapshot,
    Step,
    Target,
    Workload,
    step_from_result,
)
from gputui.snapshot.records import RecordRows, finish_order, journal_ns, rows_table
from gputui.snapshot.sections import HardwareSection, PlanSection, TelemetrySection
from gputui.snapshot.step_models import renumbered
from gputui.snapshot.store import save_snapshot

_SectionT = TypeVar("_SectionT", bound=BaseModel)

DIAGNOSIS_NOTE = (
    "finished steps keep the diagnosis made live (server_latency, ttft_breakdown, e2e_breakdown, "
    "roofline, bottleneck); a step cut short has none: the journal keeps no server histograms "
    "or client frames to rebuild it from"
)
"""What a recovered snapshot says of its steps' diagnosis (issue 18)."""


@dataclass(frozen=True, slots=True)
class LeftoverJournal:
    """A journal whose session ended without saving."""

    path: Path
    started_at: str
    label: str | None
    target_url: str
    model: str
    steps: int
    requests: int


@dataclass(frozen=True, slots=True)
class JournalContents:
    """Every readable line of a journal, by kind."""

    header: dict[str, object]
    steps: list[Step]
    loads: list[dict[str, object]]
    requests: list[dict[str, object]]
    measures: list[dict[str, object]] = field(default_factory=list)
    """Measurement windows as they moved (settling) and closed, oldest first."""
    hardware: list[dict[str, object]] = field(default_factory=list)
    telemetry: list[dict[str, object]] = field(default_factory=list)
    sections: list[dict[str, object]] = field(default_factory=list)
    """The network and client sections as they were every few seconds (the last one counts)."""


def read_contents(path: Path) -> JournalContents:
    """The journal's lines (a torn line is skipped); ValueError without a header."""
    header: dict[str, object] | None = None
    steps: list[Step] = []
    by_kind: dict[str, list[dict[str, object]]] = {
        kind: [] for kind in ("load", "request", "measure", "hardware", "telemetry", "sections")
    }
    with path.open("rb") as file:
        for raw in file:
            try:
                line = orjson.loads(raw)
            except orjson.JSONDecodeError:
                continue
            kind = line.get("kind") if isinstance(line, dict) else None
            if kind == "header" and header is None:
                header = line
            elif kind == "step":
                steps.append(Step.model_validate(line["step"]))
            elif isinstance(kind, str) and kind in by_kind:
                by_kind[kind].append(line)
    if header is None:
        raise ValueError(f"{path.name}: no journal header")
    return JournalContents(
        header,
        steps,
        by_kind["load"],
        by_kind["request"],
        measures=by_kind["measure"],
        hardware=by_kind["hardware"],
        telemetry=by_kind["telemetry"],
        sections=by_kind["sections"],
    )


def read_journal(path: Path) -> tuple[dict[str, object], list[Step], int]:
    """The header, the finished steps and the number of requests (a torn line is skipped)."""
    contents = read_contents(path)
    return contents.header, contents.steps, len(contents.requests)


def _ns(ms: object) -> int | None:
    return int(ms * 1e6) if isinstance(ms, int | float) and not isinstance(ms, bool) else None


def _count(value: object) -> int | None:
    return int(value) if isinstance(value, int | float) else None


def _record(line: Mapping[str, object]) -> RequestRecord:
    """A journalled request as a record (times from the session's start; no token stamps).

    Exact ns where the journal has them (`sent_ns`, `first_ns`, `last_ns`), else its ms.
    """
    sent = journal_ns(line, "sent_ns", "sent_ms") or 0
    ttft, e2e = _ns(line.get("ttft_ms")), _ns(line.get("e2e_ms"))
    first = _count(line.get("first_ns"))
    if first is None and "first_ns" not in line and ttft is not None:
        first = sent + ttft
    last = _count(line.get("last_ns"))
    out = _count(line.get("out")) or 0
    error = line.get("err")
    return RequestRecord(
        request_id=_count(line.get("id")) or 0,
        step_index=_count(line.get("step")) or 0,
        sent_ns=sent,
        end_ns=last if last is not None else sent + (e2e or 0),
        ok=bool(line.get("ok")),
        first_token_ns=first,
        output_tokens=out,
        input_tokens=_count(line.get("in")),
        tokens_from_usage=True,
        requested_output_tokens=out,
        cached_input_tokens=_count(line.get("cached")),
        error=None if error is None else str(error),
        burst=bool(line.get("burst")),  # a burst's requests are in no step's figures
    )


def _cut_short(contents: JournalContents, sla: Sla) -> list[Step]:
    """The steps the crash cut short, rebuilt from their journalled requests (incomplete).

    Each keeps the measurement window it had (its last `measure` line: where it settled, and
    its end once closed); a step still open ends at its last journalled request, as a save at
    that moment would have closed it, so one that had not settled yet was all warm-up. Every
    journalled request of the step is in it: measured, or counted in `requests_warmup`.
    """
    closed = {s.index for s in contents.steps}
    records: dict[int, list[RequestRecord]] = {}
    for line in contents.requests:
        record = _record(line)
        records.setdefault(record.step_index, []).append(record)
    windows = {m.get("index"): m for m in contents.measures}
    rebuilt = []
    # A step opened during a hand-over is journalled again when its level starts: the last wins.
    latest = {load.get("index"): load for load in contents.loads}
    for load in latest.values():
        index = load.get("index")
        if not isinstance(index, int) or index in closed or load.get("hidden"):
            continue
        window: Mapping[str, object] = windows.get(index, {})
        mine = records.get(index, [])
        start = _ns(load.get("start_ms"))
        measure = journal_ns(window, "measure_ns", "measure_ms")
        if measure is None:
            measure = journal_ns(load, "measure_ns", "measure_ms")
        if start is None or measure is None:
            continue
        end = journal_ns(window, "end_ns", "end_ms")
        level = load.get("level")
        if end is None:
            end = max((r.end_ns for r in mine), default=start)
        spec = StepSpec(
            index=index,
            mode="rate" if load.get("mode") == "rate" else "concurrency",
            level=float(level) if isinstance(level, int | float) else 0.0,
            start_ns=start,
            measure_start_ns=min(measure, end),
            end_ns=end,
        )
        rebuilt.append(step_from_result(aggregate_step(spec, mine, sla, incomplete=True)))
    return rebuilt


def _records_table(contents: JournalContents, sla: Sla) -> dict[str, object]:
    """The per-request table a save would have written (`snapshot.records`).

    The steps as recovered (finished and cut short) measured their requests; the rest is warm-up.
    """
    decider = RecordRows(sla)
    steps = [{"kind": "step", "step": {"index": step.index}} for step in contents.steps]
    rows = decider.feed([*contents.loads, *contents.measures, *steps, *contents.requests])
    rows += decider.close(cut_short=True)
    rows.sort(key=finish_order)
    return rows_table(rows)


def _totals(requests: list[dict[str, object]]) -> dict[str, int]:
    ok = [r for r in requests if r.get("ok")]
    return {
        "requests": len(requests),
        "requests_ok": len(ok),
        "requests_failed": len(requests) - len(ok),
        "output_tokens_total": sum(_count(r.get("out")) or 0 for r in requests),
        "input_tokens_total": sum(_count(r.get("in")) or 0 for r in requests),
    }


def _with_prefix_cache(snapshot: Snapshot, contents: JournalContents) -> Snapshot:
    """The run's prefix-cache hit rate, and each cut-short step's, as a save would give them.

    From the journalled usage `cached_tokens`, else the server's journalled counters (the same
    `metrics.prefix_cache` meter the live save uses); finished steps keep what they were saved with.
    """
    records = [_record(line) for line in contents.requests]
    counters = counters_from_lines(contents.telemetry)
    meter = PrefixCacheMeter(records, counters)
    steps = []
    for step in snapshot.steps:
        if step.incomplete and step.prefix_cache_hit_rate is None:
            share = meter.share(r for r in records if r.step_index == step.index)
            if share is not None:
                update = {
                    "prefix_cache_hit_rate": share.hit_rate,
                    "prefix_cache_source": share.source,
                }
                step = step.model_copy(update=update)
        steps.append(step)
    share = meter.share(records)
    section = {
        **(share.to_dict() if share else {"hit_rate": None, "source": None}),
        "server_counters_hit_rate": counter_delta_rate(counters),
    }
    return snapshot.model_copy(update={"steps": tuple(steps), "prefix_cache": section})


def _alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def find_leftovers(folder: Path) -> list[LeftoverJournal]:
    """Journals in `folder` whose writer is gone (oldest first); unreadable ones are skipped."""
    found = []
    for path in sorted(folder.glob(f"*{SUFFIX}")) if folder.is_dir() else []:
        try:
            header, steps, requests = read_journal(path)
        except (OSError, ValueError):
            continue
        if _alive(header.get("pid")):
            continue
        target = header.get("target")
        if not isinstance(target, dict):
            target = {}
        label = header.get("label")
        found.append(
            LeftoverJournal(
                path=path,
                started_at=str(header.get("started_at", "")),
                label=None if label is None else str(label),
                target_url=str(target.get("url", "")),
                model=str(target.get("model", "")),
                steps=len(steps),
                requests=requests,
            )
        )
    return found


def recover(path: Path, folder: Path) -> Path | None:
    """Rebuild and save the snapshot of a leftover journal, then delete it.

    The snapshot the session would have saved at the moment of the crash: the finished steps
    as they were, with their diagnosis and the knee's explanation (`DIAGNOSIS_NOTE`); a step the
    crash cut short rebuilt from its journalled requests in the window it had (marked
    incomplete; no ITL, the journal keeps no token stamps; no diagnosis); `totals` counts every
    journalled request, and the steps account for each (`requests_warmup` included); hardware,
    telemetry, network and client sections as last journalled. Returns the snapshot's path, or
    None when the session measured nothing (the journal is deleted all the same).
    """
    contents = read_contents(path)
    header = contents.header
    sla = SlaBounds.model_validate(header["sla"])
    steps = sorted([*contents.steps, *_cut_short(contents, sla.to_sla())], key=lambda s: s.index)
    if not steps:
        path.unlink()
        return None
    # The one function a saved snapshot and the live view use (`metrics.knee_summary`).
    summary = knee_summary(steps, sla.to_sla(), mode=steps[-1].mode)
    label = header.get("label")
    price, precision = header.get("price_per_hour"), header.get("precision")
    kwh, pue = header.get("energy_price_per_kwh"), header.get("pue")  # --energy-price, --pue
    last: dict[str, object] = contents.sections[-1] if contents.sections else {}
    knee_model = KneeModel.from_knee(summary.knee) if summary.knee else None
    if knee_model is not None:  # the diagnosed steps explain it, as in a saved snapshot
        mine = [s.model_dump() for s in steps if s.mode == knee_model.mode]
        text = knee_explanation(knee_model.level, mine)
        bound = summary.bound
        update: dict[str, object] = {"explanation": text}
        if bound is not None:
            update |= {"bound_by": bound.verdict, "bound_at": bound.level}
        knee_model = knee_model.model_copy(update=update)
    snapshot = Snapshot(
        label=label if isinstance(label, str) else None,
        complete=False,
        target=Target.model_validate(header["target"]),
        workload=Workload.model_validate(header["workload"]),
        sla=sla,
        steps=renumbered(steps),  # as numbered on screen: hidden carry-on steps take none
        plan=PlanSection.model_validate(header["plan"])
        if isinstance(header.get("plan"), dict)
        else None,
        price_per_hour=price if isinstance(price, int | float) else None,
        energy_price_per_kwh=kwh if isinstance(kwh, int | float) else None,
        pue=pue if isinstance(pue, int | float) else 1.0,  # older journals: the default
        precision=precision if isinstance(precision, str) else None,
        hardware=_section(HardwareSection, hardware_from_lines(contents.hardware)),
        telemetry=_section(
            TelemetrySection, telemetry_from_lines(contents.hardware, contents.telemetry)
        ),
        network=_section(Network, last.get("network")),
        client=_section(Client, last.get("client")),
        interrupted_by="lost (recovered from the journal)",
        knee=knee_model,
        knee_reason=summary.knee_reason,
        capacity=CapacityModel.from_capacity(summary.capacity) if summary.capacity else None,
        capacity_reason=summary.capacity_reason,
    )
    # Snapshots allow extra keys: say where this one came from.
    recovered = {
        "journal": path.name,
        "requests": len(contents.requests),
        "steps": len(contents.steps),
        "steps_cut_short": len(steps) - len(contents.steps),
        "diagnosis": DIAGNOSIS_NOTE,
    }
    snapshot = Snapshot.model_validate(
        {
            **snapshot.model_dump(mode="json"),
            "recovered_from": recovered,
            "totals": _totals(contents.requests),
            "records": _records_table(contents, sla.to_sla()),
        }
    )
    snapshot = _with_prefix_cache(snapshot, contents)
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / f"{path.name.removesuffix(SUFFIX)}-recovered.json"
    save_snapshot(snapshot, out)
    path.unlink()
    return out


def _section(model: type[_SectionT], value: object) -> _SectionT | None:
    """A journalled section as its model; None when absent or unreadable (as a loaded file)."""
    if value is None:
        return None
    try:
        return model.model_validate(value)
    except ValidationError:
        return None


def discard(path: Path) -> None:
    """Delete a leftover journal."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def recover_leftovers(folder: Path) -> list[str]:
    """Recover every leftover journal in `folder`; one line per journal, for the user."""
    lines = []
    for leftover in find_leftovers(folder):
        try:
            out = recover(leftover.path, folder)
        except (OSError, ValueError) as exc:
            lines.append(f"could not recover {leftover.path.name}: {exc}")
            continue
        lines.append(
            f"recovered snapshot written to {out}"
            if out is not None
            else f"discarded {leftover.path.name}: it measured nothing"
        )
    return lines
