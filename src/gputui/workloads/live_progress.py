"""What the TUI shows live of a conversation run or a trace replay, from the finished records.

Contract: `workload_progress(plan, records, now_ns)` is pure and returns a frozen
`WorkloadProgress` (None for a plain run). Conversations: per turn, the ok count, TTFT p50 and the
prefix-cache hit rate over the latest step's records (the load as it is now, as the steps table
reads it; from usage, else from the server's counters), and how many conversations that step
started and completed. A replay: how many of the
trace's requests have finished, how far its clock has run (from the first scheduled send), and the
dispatch lateness p99 and max over the whole replay, the validity check of the client. The same
functions (`metrics.conversations`) write the snapshot's keys, so the panel and the file agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from gputui.engine.records import RequestRecord
from gputui.metrics.conversations import conversation_stats, dispatch_lateness, turn_stats
from gputui.metrics.prefix_cache import CounterSample, step_meter

if TYPE_CHECKING:
    from gputui.workloads.sources import SourcePlan


@dataclass(frozen=True, slots=True)
class TurnRow:
    """One turn of the latest step's conversations."""

    turn: int
    ok: int
    ttft_p50_s: float | None
    hit_rate: float | None


@dataclass(frozen=True, slots=True)
class WorkloadProgress:
    """The live account of a driven workload (see the module docstring)."""

    kind: Literal["conversations", "trace"]
    step_index: int | None = None
    turns: tuple[TurnRow, ...] = ()
    started: int = 0
    complete: int = 0
    hit_rate: float | None = None
    hit_source: str | None = None
    """Where the hit rates were read: "usage", "server timings" or "server counters"."""
    sent: int = 0
    requests: int = 0
    elapsed_s: float = 0.0
    duration_s: float = 0.0
    lateness_p99_ms: float | None = None
    lateness_max_ms: float | None = None


def workload_progress(
    plan: SourcePlan,
    records: Sequence[RequestRecord],
    now_ns: int,
    server: Sequence[CounterSample] = (),
) -> WorkloadProgress | None:
    """The progress of `plan`'s workload over `records` (None: not a driven workload).

    `server`: the server's samples, whose prefix-cache counters stand in for usage's cached
    tokens when the server reports none (`metrics.prefix_cache`).
    """
    if plan.trace is not None:
        scheduled = [r for r in records if r.queued_ns is not None]
        late = dispatch_lateness(scheduled)
        first = min((r.queued_ns for r in scheduled if r.queued_ns is not None), default=None)
        offset0 = plan.trace.entries[0].offset_ns if plan.trace.entries else 0
        elapsed = 0.0 if first is None else (now_ns - first + offset0) / 1e9
        return WorkloadProgress(
            kind="trace",
            sent=len(scheduled),
            requests=len(plan.trace.entries),
            elapsed_s=min(max(elapsed, 0.0), plan.trace.duration_s),
            duration_s=plan.trace.duration_s,
            lateness_p99_ms=late["p99_ms"] if late else None,
            lateness_max_ms=late["max_ms"] if late else None,
        )
    if not plan.conversations:
        return None
    if not records:
        return WorkloadProgress(kind="conversations")
    step = max(r.step_index for r in records)
    mine = [r for r in records if r.step_index == step]
    meter = step_meter(step, records, server)
    rows = tuple(
        TurnRow(
            turn=row["turn"],
            ok=row["ok"],
            ttft_p50_s=row["ttft_s"]["p50"] if row["ttft_s"] else None,
            hit_rate=row["prefix_cache_hit_rate"],
        )
        for row in turn_stats(mine, meter)
    )
    talks = conversation_stats(mine, plan.turns)
    return WorkloadProgress(
        kind="conversations",
        step_index=step,
        turns=rows,
        started=talks["started"],
        complete=talks["complete"],
        hit_rate=share.hit_rate if (share := meter.share(mine)) is not None else None,
        hit_source=share.source if share is not None else None,
    )
