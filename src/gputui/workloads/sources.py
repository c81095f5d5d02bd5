"""`gputui run`'s conversation, trace and dataset-order flags, and what they add to a run.

Contract: `add_workload_source_arguments(parser)` declares the flags once, for `run`, `tui` and
`demo`. `read_source_plan(args)` reads `--sessions/--turns/--think-time` (or the scenario's
`workload.sessions/turns/think_time`) and `--trace` (a malformed trace is a one-line UsageError,
exit 2) before the scenario fills the other flags; `plan_workload_source` (run) and
`tui_source_plan` (the TUI) then fill the load plan a source implies when no load flag was given:
`--sessions N` is a closed loop of N users; with `--rate R` (the TUI: `--start-mode rate`), R new
conversations start a second and N caps how many are under way; a trace is one step as long as
the trace (the TUI: the load it starts with), without warm-up (every request counts).
`SourcePlan.engine_workload(spec)` wraps the prepared workload; `SourcePlan.finish(snapshot,
records, server)` adds the optional snapshot keys (per step `turns`, `prefix_cache_hit_rate` and
`prefix_cache_source`, `conversations`, `dispatch_lateness`; top level `prefix_cache`,
`conversations`, `trace`) for every run, a plain one too, and `lines(snapshot)` prints them.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gputui.argtypes import positive_float, positive_int
from gputui.engine.records import RequestRecord
from gputui.engine.workload import WorkloadSpec
from gputui.errors import UsageError
from gputui.metrics.conversations import conversation_stats, dispatch_lateness, turn_stats
from gputui.metrics.json_read import elements, member, number
from gputui.metrics.prefix_cache import CounterSample, PrefixCacheMeter, counter_delta_rate
from gputui.snapshot.models import Snapshot
from gputui.workloads.distributions import LengthDist, parse_dist
from gputui.workloads.source import DATASET_ORDERS, DatasetOrder, PreparedWorkload
from gputui.workloads.traces import TRACE_FORMATS, Trace, TraceFormat, load_trace, parse_window


def add_workload_source_arguments(parser: argparse.ArgumentParser) -> None:
    """The multi-turn, trace-replay and dataset-order flags of `run`, `tui` and `demo`."""
    group = parser.add_argument_group("conversations, traces and dataset order")
    group.add_argument(
        "--sessions",
        type=positive_int,
        default=None,
        metavar="N",
        help="multi-turn: N simulated users, each holding one conversation (a closed loop of N); "
        "with --rate R, R new conversations a second, at most N under way at once",
    )
    group.add_argument(
        "--turns", type=positive_int, default=None, metavar="K", help="turns per conversation"
    )
    group.add_argument(
        "--think-time",
        default=None,
        metavar="DIST",
        help="pause between an answer and the next turn, in ms, as --input-dist (default 0)",
    )
    group.add_argument(
        "--trace",
        default=None,
        metavar="FILE",
        help="replay a trace on its own clock: Mooncake JSONL, Azure LLM inference CSV or BurstGPT",
    )
    group.add_argument("--trace-format", choices=TRACE_FORMATS, default=None)
    group.add_argument(
        "--time-scale",
        type=positive_float,
        default=None,
        metavar="S",
        help="multiply the trace's clock by S (0.5: twice as fast; default 1)",
    )
    group.add_argument(
        "--trace-window",
        default=None,
        metavar="START:END",
        help="replay only the arrivals from START to END seconds of the trace",
    )
    group.add_argument(
        "--dataset-order",
        choices=DATASET_ORDERS,
        default=None,
        help="sequential or shuffle: each dataset entry once; sample: with replacement (default)",
    )


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


SOURCE_FLAGS: tuple[str, ...] = (
    "sessions",
    "turns",
    "think_time",
    "trace",
    "trace_format",
    "time_scale",
    "trace_window",
    "dataset_order",
)
"""The destinations of `add_workload_source_arguments`' flags."""


def source_argv(args: argparse.Namespace) -> list[str]:
    """The source flags given in `args`, as a command line (the demo's headless run)."""
    argv: list[str] = []
    for name in SOURCE_FLAGS:
        value = getattr(args, name, None)
        if value is not None:
            argv += [f"--{name.replace('_', '-')}", str(value)]
    return argv


def read_source_plan(args: argparse.Namespace) -> SourcePlan:
    """The source flags (and scenario keys) of any front end, checked; fills no load plan."""
    sessions, turns, think = args.sessions, args.turns, None
    if args.think_time is not None and args.think_time.strip() != "0":
        think = parse_dist(args.think_time, "--think-time")
    if args.scenario and (sessions is None or turns is None or think is None):
        from gputui.workloads.scenario import load_scenario

        work = load_scenario(args.scenario).workload
        sessions = sessions if sessions is not None else work.sessions
        turns = turns if turns is not None else work.turns
        think = think if think is not None else work.think_time
    trace = None
    if args.trace is not None:
        if sessions is not None or (turns or 1) > 1:
            raise UsageError("give --trace or --sessions/--turns, not both")
        window = parse_window(args.trace_window) if args.trace_window else None
        fmt: TraceFormat | None = args.trace_format
        trace = load_trace(Path(args.trace), fmt, window=window, time_scale=args.time_scale or 1.0)
        if (getattr(args, "workers", None) or 1) > 1:
            raise UsageError("--trace replays from one engine process: drop --workers")
        no_dist = (
            getattr(args, "input_dist", None) is None and getattr(args, "dataset", None) is None
        )
        if args.input_tokens is None and no_dist:
            # The trace gives each length; these nominal ones only calibrate the prompt plan.
            n = len(trace.entries)
            args.input_tokens = max(round(sum(e.input_tokens for e in trace.entries) / n), 1)
            if args.output_tokens is None and getattr(args, "output_dist", None) is None:
                args.output_tokens = max(round(sum(e.output_tokens for e in trace.entries) / n), 1)
        if args.warmup_seconds is None:  # every request of a replay counts
            args.warmup_seconds = 0.0
    elif args.trace_format or args.time_scale or args.trace_window:
        raise UsageError("--trace-format, --time-scale and --trace-window need --trace")
    return SourcePlan(
        turns=turns or 1,
        sessions=sessions,
        think_ms=think,
        trace=trace,
        dataset_order=args.dataset_order or "sample",
    )


def plan_workload_source(args: argparse.Namespace) -> SourcePlan:
    """`gputui run`: read the source flags and fill the load plan they imply."""
    plan = read_source_plan(args)
    load_given = bool(args.concurrency or args.rate or args.auto or args.validate_rate)
    trace = plan.trace
    if trace is not None:
        if not load_given:
            duration = trace.duration_s
            args.rate = [round(len(trace.entries) / duration, 3) if duration > 0 else 1.0]
        if args.step_seconds is None:
            args.step_seconds = trace.duration_s + 1.0
    elif plan.sessions is not None and not load_given:
        args.concurrency = [plan.sessions]
    return plan


def tui_source_plan(args: argparse.Namespace) -> SourcePlan:
    """`gputui tui` and `demo`: read the source flags and fill the starting load they imply.

    A trace starts in open loop (the replay keeps its own clock whatever the level); `--sessions
    N` starts N users in closed loop unless `--start-mode rate` asks for conversations at a rate.
    """
    plan = read_source_plan(args)
    if plan.trace is not None:
        args.start_mode = "rate"
        if args.start_level is None:
            duration = plan.trace.duration_s
            args.start_level = round(len(plan.trace.entries) / duration, 3) if duration else 1.0
    elif plan.sessions is not None and args.start_level is None and args.start_mode != "rate":
        args.start_mode, args.start_level = "concurrency", float(plan.sessions)
    return plan


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.1f} ms"


def _s(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.2f} s"


def _pct(rate: float | None) -> str:
    return "-" if rate is None else f"{rate:.1%}"
