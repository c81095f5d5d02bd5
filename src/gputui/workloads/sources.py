"""`gputui run`'s conversation, trace and dataset-order flags, and what they add to a run.

Contract: `read_source_plan(flags, scenario, workers)` reads `--sessions/--turns/--think-time`
(or the scenario's `workload.sessions/turns/think_time`) and `--trace` (a malformed trace is a
one-line UsageError, exit 2) before the scenario fills the other flags; the front ends
(`gputui.settings.run_source_plan`, `tui_source_plan`) then fill the load plan a source implies
when no load flag was given: `--sessions N` is a closed loop of N users; with `--rate R` (the TUI:
`--start-mode rate`), R new conversations start a second and N caps how many are under way; a
trace is one step as long as the trace (the TUI: the load it starts with), without warm-up (every
request counts).
`SourcePlan.engine_workload(spec)` wraps the prepared workload; `SourcePlan.finish(snapshot,
records, server)` adds the optional snapshot keys (per step `turns`, `prefix_cache_hit_rate` and
`prefix_cache_source`, `conversations`, `dispatch_lateness`; top level `prefix_cache`,
`conversations`, `trace`) for every run, a plain one too, and `lines(snapshot)` prints them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gputui.engine.records import RequestRecord
from gputui.engine.workload import WorkloadSpec
from gputui.errors import UsageError
from gputui.metrics.conversations import conversation_stats, dispatch_lateness, turn_stats
from gputui.metrics.json_read import elements, member, number
from gputui.metrics.prefix_cache import CounterSample, PrefixCacheMeter, counter_delta_rate
from gputui.snapshot.models import Snapshot
from gputui.workloads.distributions import LengthDist, parse_dist
from gputui.workloads.source import DatasetOrder, PreparedWorkload
from gputui.workloads.traces import Trace, TraceFormat, load_trace, parse_window


@dataclass(frozen=True, slots=True)
class SourcePlan:
    """What the source flags asked for."""

    turns: int = 1
    sessions: int | None = None
    think_ms: LengthDist | None = None
    trace: Trace | None = None
    dataset_order: DatasetOrder = "sample"

    @property
    def conversations(self) -> bool:
        """A multi-turn run."""
        return self.trace is None and (self.turns > 1 or self.sessions is not None)

    def engine_workload(self, spec: PreparedWorkload) -> WorkloadSpec:
        """The engine's workload: conversations or a replay over `spec`, or `spec` itself."""
        from gputui.workloads.conversations import ConversationWorkload
        from gputui.workloads.replay import TraceWorkload

        if self.dataset_order != "sample":
            spec = dataclasses.replace(spec, order=self.dataset_order)
        if self.trace is not None:
            return TraceWorkload(spec, self.trace)
        if self.conversations:
            try:
                return ConversationWorkload(
                    spec, self.turns, self.think_ms, max_active=self.sessions
                )
            except ValueError as exc:
                raise UsageError(f"--sessions/--turns: {exc}") from None
        return spec

    def describe(self) -> list[str]:
        """Lines for the start of `gputui run`."""
        if self.trace is not None:
            return [self.trace.describe()]
        if self.conversations:
            think = self.think_ms.describe() if self.think_ms else "0"
            users = f"{self.sessions} users, " if self.sessions else ""
            return [f"conversations: {users}{self.turns} turns each, think time {think} ms"]
        if self.dataset_order != "sample":
            return [f"dataset order: {self.dataset_order} (each entry once)"]
        return []

    def finish(
        self,
        snapshot: Snapshot,
        records: Sequence[RequestRecord],
        server: Sequence[CounterSample] = (),
    ) -> Snapshot:
        """The snapshot with this source's keys (optional keys of schema 1).

        `server`: the server's samples over the run; their prefix-cache counters give the hit
        rates where usage reports no cached tokens (`metrics.prefix_cache`).
        """
        meter = PrefixCacheMeter(records, server)
        steps = []
        for step in snapshot.steps:
            mine = [r for r in records if r.step_index == step.index]
            share = meter.share(mine)
            update: dict[str, object] = {
                "prefix_cache_hit_rate": share.hit_rate if share else None,
                "prefix_cache_source": share.source if share else None,
            }
            if self.conversations:
                update["turns"] = tuple(turn_stats(mine, meter))
                update["conversations"] = conversation_stats(mine, self.turns)
            if self.trace is not None:
                update["dispatch_lateness"] = dispatch_lateness(mine)
            steps.append(step.model_copy(update=update))
        share = meter.share(records)
        update = {
            "steps": tuple(steps),
            "prefix_cache": {
                **(share.to_dict() if share else {"hit_rate": None, "source": None}),
                "server_counters_hit_rate": counter_delta_rate(server),
            },
        }
        if self.conversations:
            update["conversations"] = {
                "sessions": self.sessions,
                "think_time_ms": self.think_ms.describe() if self.think_ms else None,
                "turns_by_turn": turn_stats(records, meter),
                **conversation_stats(records, self.turns),
            }
        if self.trace is not None:
            update["trace"] = trace_summary(self.trace, records)
        return snapshot.model_copy(update=update)

    def lines(self, snapshot: Snapshot) -> list[str]:
        """What `gputui run` prints at the end about conversations or the replay."""
        out = []
        if snapshot.conversations is not None:
            c = snapshot.conversations
            for row in elements(c.get("turns_by_turn")):
                ttft = member(row, "ttft_s")
                rate = number(row, "prefix_cache_hit_rate")
                prompt = number(row, "input_tokens_mean") or 0
                p50, p95 = number(ttft, "p50"), number(ttft, "p95")
                source = member(row, "prefix_cache_source")
                out.append(
                    f"turn {member(row, 'turn')}: {member(row, 'ok')} ok, prompt {prompt:.0f} "
                    f"tokens, TTFT p50 {_ms(p50)} p95 {_ms(p95)}, prefix-cache hit rate "
                    f"{_pct(rate)}" + (f" ({source})" if source and rate is not None else "")
                )
            e2e = c.get("e2e_s")
            out.append(
                f"conversations: {c['complete']} of {c['started']} complete ({c['turns']} turns), "
                f"E2E p50 {_s(number(e2e, 'p50'))} p95 {_s(number(e2e, 'p95'))}"
            )
        cache = snapshot.prefix_cache
        if cache is not None and cache.get("hit_rate") is not None:
            counters = number(cache, "server_counters_hit_rate")
            out.append(
                f"prefix cache: {_pct(number(cache, 'hit_rate'))} of prompt tokens hit "
                f"({cache['source']})"
                + (f"; the server's counters over the run: {_pct(counters)}" if counters else "")
            )
        if snapshot.trace is not None:
            t = snapshot.trace
            late = t["dispatch_lateness"]
            if late is not None:
                out.append(
                    f"trace: {t['sent']} of {t['requests']} sent; dispatch lateness p50 "
                    f"{member(late, 'p50_ms'):.3f} ms, p99 {member(late, 'p99_ms'):.3f} ms, max "
                    f"{member(late, 'max_ms'):.3f} ms; schedule error {t['schedule_error']:.3%} of "
                    f"{t['duration_s']:.1f} s"
                )
        return out


def trace_summary(trace: Trace, records: Sequence[RequestRecord]) -> dict[str, object]:
    """The replay's account: what was sent, how late, and how far from the trace's schedule."""
    scheduled = sorted(
        (r.queued_ns, r.sent_ns - (r.connect_ns or 0))
        for r in records
        if r.queued_ns is not None and r.error != "connect"
    )
    error = 0.0
    if len(scheduled) > 1:
        q0, s0 = scheduled[0]
        span = scheduled[-1][0] - q0
        worst = max(abs((s - s0) - (q - q0)) for q, s in scheduled)
        error = worst / span if span > 0 else 0.0
    return {
        "path": trace.path,
        "format": trace.format,
        "window_s": list(trace.window) if trace.window else None,
        "time_scale": trace.time_scale,
        "requests": len(trace.entries),
        "duration_s": trace.duration_s,
        "sent": len(scheduled),
        "dispatch_lateness": dispatch_lateness(records),
        "schedule_error": error,
    }


@dataclass(frozen=True, slots=True)
class SourceFlags:
    """The conversation, trace and dataset-order flags as given (None: not given)."""

    sessions: int | None = None
    turns: int | None = None
    think_time: str | None = None
    trace: str | None = None
    trace_format: TraceFormat | None = None
    time_scale: float | None = None
    trace_window: str | None = None
    dataset_order: DatasetOrder | None = None


def read_source_plan(
    flags: SourceFlags, scenario: str | None = None, workers: int | None = None
) -> SourcePlan:
    """The source flags (and `scenario`'s keys) of any front end, checked; fills no load plan.

    The front end fills what a trace implies (`trace_lengths`, no warm-up) from the plan.
    """
    sessions, turns, think = flags.sessions, flags.turns, None
    if flags.think_time is not None and flags.think_time.strip() != "0":
        think = parse_dist(flags.think_time, "--think-time")
    if scenario and (sessions is None or turns is None or think is None):
        from gputui.workloads.scenario import load_scenario

        work = load_scenario(scenario).workload
        sessions = sessions if sessions is not None else work.sessions
        turns = turns if turns is not None else work.turns
        think = think if think is not None else work.think_time
    trace = None
    if flags.trace is not None:
        if sessions is not None or (turns or 1) > 1:
            raise UsageError("give --trace or --sessions/--turns, not both")
        window = parse_window(flags.trace_window) if flags.trace_window else None
        trace = load_trace(
            Path(flags.trace), flags.trace_format, window=window, time_scale=flags.time_scale or 1.0
        )
        if (workers or 1) > 1:
            raise UsageError("--trace replays from one engine process: drop --workers")
    elif flags.trace_format or flags.time_scale or flags.trace_window:
        raise UsageError("--trace-format, --time-scale and --trace-window need --trace")
    return SourcePlan(
        turns=turns or 1,
        sessions=sessions,
        think_ms=think,
        trace=trace,
        dataset_order=flags.dataset_order or "sample",
    )


def trace_lengths(trace: Trace) -> tuple[int, int]:
    """The trace's mean input and output lengths: nominal ones that calibrate the prompt plan."""
    n = len(trace.entries)
    return (
        max(round(sum(e.input_tokens for e in trace.entries) / n), 1),
        max(round(sum(e.output_tokens for e in trace.entries) / n), 1),
    )


def trace_rate(trace: Trace) -> float:
    """The trace's mean arrival rate (req/s): the load a replay starts with."""
    duration = trace.duration_s
    return round(len(trace.entries) / duration, 3) if duration > 0 else 1.0


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.1f} ms"


def _s(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.2f} s"


def _pct(rate: float | None) -> str:
    return "-" if rate is None else f"{rate:.1%}"
