"""Trace replay's dispatch lateness, in one process, with the engine's loop and client.

Why: issue 17's acceptance (a 2,000-request Azure trace at --time-scale 1: lateness p99 under
2 ms, every send within 1 % of the schedule) is a property of the client; this runs the replay as
the engine process does (uvloop, `LoadController`, `StreamingClient`) and also records every
garbage collection and how late each send was, so a tail can be traced to its cause.
Usage: python benchmarks/trace_lateness.py --url URL --model M --trace FILE [--no-uvloop]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from gputui.engine.arrivals import ArrivalProcess
from gputui.engine.client import ClientConfig, StreamingClient
from gputui.engine.load import LoadController
from gputui.engine.records import RequestRecord
from gputui.engine.target import parse_target
from gputui.workloads.distributions import FixedDist
from gputui.workloads.prepare import prepare_workload
from gputui.workloads.replay import TraceWorkload
from gputui.workloads.scenario import WorkloadConfig
from gputui.workloads.sources import trace_summary
from gputui.workloads.traces import load_trace


async def replay(url: str, model: str, workload: TraceWorkload) -> list[RequestRecord]:
    """Replay the whole trace; every record back."""
    records: list[RequestRecord] = []
    n = len(workload.trace.entries)
    all_back = asyncio.Event()

    def on_record(record: RequestRecord) -> None:
        records.append(record)
        if len(records) >= n:
            all_back.set()

    client = StreamingClient(
        ClientConfig(target=parse_target(url), model=model, extra_body={"ignore_eos": True})
    )
    load = LoadController(client, workload.build(), ArrivalProcess("poisson"), on_record)
    load.set_load("rate", 1.0, 0)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(all_back.wait(), workload.trace.duration_s + 60)
    await load.stop(cancel=False, drain_timeout_s=30)
    await client.aclose()
    return records


def main() -> None:
    """Run once and print the lateness, the GC pauses and the load average."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--trace", type=Path, required=True)
    parser.add_argument("--time-scale", type=float, default=1.0)
    parser.add_argument("--no-uvloop", action="store_true")
    args = parser.parse_args()
    trace = load_trace(args.trace, None, time_scale=args.time_scale)
    n = len(trace.entries)
    mean_in = round(sum(e.input_tokens for e in trace.entries) / n)
    mean_out = round(sum(e.output_tokens for e in trace.entries) / n)
    prepared = prepare_workload(
        WorkloadConfig(input=FixedDist(tokens=mean_in), output=FixedDist(tokens=mean_out)),
        target=parse_target(args.url),
        model=args.model,
        endpoint="completions",
        backend="gputui-sim",
    )
    workload = TraceWorkload(prepared.spec, trace)
    pauses: list[tuple[int, int, int]] = []
    started: dict[str, int] = {}

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started["t"] = time.perf_counter_ns()
        else:
            pauses.append((info["generation"], started["t"], time.perf_counter_ns()))

    gc.callbacks.append(on_gc)
    load_before = os.getloadavg()
    if args.no_uvloop:
        records = asyncio.run(replay(args.url, args.model, workload))
    else:
        import uvloop

        records = uvloop.run(replay(args.url, args.model, workload))
    gc.callbacks.remove(on_gc)
    late = np.array(
        [
            (r.sent_ns - r.queued_ns - (r.connect_ns or 0)) / 1e6
            for r in records
            if r.queued_ns is not None
        ]
    )
    summary = trace_summary(trace, records)
    print(f"load average before {load_before}, after {os.getloadavg()}")
    print(
        f"{len(late)} sends: lateness p50 {np.percentile(late, 50):.3f} ms, p99 "
        f"{np.percentile(late, 99):.3f} ms, max {late.max():.3f} ms; schedule error "
        f"{summary['schedule_error']:.4%}"
    )
    by_gen = {g: [(b - a) / 1e6 for gg, a, b in pauses if gg == g] for g in (0, 1, 2)}
    for g, ms in by_gen.items():
        if ms:
            print(f"gc gen{g}: {len(ms)} collections, max {max(ms):.2f} ms, sum {sum(ms):.1f} ms")
    worst = sorted(
        (r for r in records if r.queued_ns is not None),
        key=lambda r: r.sent_ns - (r.queued_ns or 0) - (r.connect_ns or 0),
    )[-10:]
    for r in worst:
        assert r.queued_ns is not None
        in_gc = [g for g, a, b in pauses if a <= r.sent_ns and b >= r.queued_ns]
        print(
            f"  late {(r.sent_ns - r.queued_ns - (r.connect_ns or 0)) / 1e6:7.3f} ms"
            f" connect {(r.connect_ns or 0) / 1e6:.3f} ms gc {in_gc}"
        )


if __name__ == "__main__":
    main()
