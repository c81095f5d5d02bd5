"""Timing fidelity and capacity of gputui's client against the deterministic simulator.

The fixed-profile simulator records what it really delivered (TTFT from request arrival, every
inter-token write gap) and serves it at /sim/stats. This script runs the production path (Session ->
engine process -> lean HTTP client) at several concurrencies and prints, side by side, gputui's mean
and p99 TTFT and mean ITL against the server's own, with the client's CPU use. A plain httpx
streaming client (the obvious implementation) runs beside it for comparison. The server is pinned
to one core and the client to the other, as on a 2-core node.

    python benchmarks/fidelity.py [--seconds 15] [--repeats 3] [--levels 1,16,64,256] [--no-httpx]
        [--event-counting none|continuous_usage|tokenizer] [--capacity-only]

`--event-counting` turns on per-event token counting in gputui's client (engine.event_tokens):
`continuous_usage` asks for a running usage on every event (the server then sends bigger events),
`tokenizer` counts event texts with the server's /tokenize when the usage total disagrees.
    python benchmarks/fidelity.py --tui-live [--tui-levels 64,256]   # the live TUI vs headless
    python benchmarks/fidelity.py --records [--tui-levels 256]   # the cost of --records

`--records` runs each level three ways, side by side: the bare Session (the rows above), with
the crash journal that `gputui run` always keeps, and with the journal plus `--records FILE` and
`--serve-metrics` scraped once a second (both follow the journal); it prints TTFT against the
server's record, the engine's CPU and the session process's own CPU (journal, records, scrapes).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import orjson

from gputui.engine.client import ClientConfig
from gputui.engine.event_tokens import EventCounterSpec
from gputui.engine.load import RequestShape
from gputui.engine.process import EngineConfig
from gputui.engine.target import parse_target
from gputui.metrics.sla import Sla
from gputui.session import Session

SERVER_CPU = 1
CLIENT_CPU = 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def sim_server(ttft_ms: float, itl_ms: float, *, coalesce: bool = False) -> Iterator[str]:
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "gputui",
        "sim",
        "--profile",
        "fixed",
        "--ttft-ms",
        str(ttft_ms),
        "--itl-ms",
        str(itl_ms),
        "--port",
        str(port),
        "--served-model-name",
        "sim",
    ]
    if coalesce:
        cmd.append("--coalesce-writes")
    proc = subprocess.Popen(cmd, stderr=subprocess.DEVNULL)
    with contextlib.suppress(OSError):
        os.sched_setaffinity(proc.pid, {SERVER_CPU})
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/v1/models", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.1)
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


def server_stats(url: str) -> dict[str, dict[str, float]]:
    return httpx.get(url + "/sim/stats", timeout=10).json()  # type: ignore[no-any-return]


@dataclass
class Result:
    ttft_mean_ms: float
    ttft_p99_ms: float
    itl_mean_ms: float
    server_ttft_mean_ms: float
    server_ttft_p99_ms: float
    server_itl_mean_ms: float
    cpu_percent: float
    tokens: int
    cpu_s: float
    failures: int
    ttft_p50_ms: float = 0.0
    server_ttft_p50_ms: float = 0.0
    session_cpu_s: float = 0.0
    """CPU of the benchmark's own process (the Session, its journal and outputs) during the run."""
    rows: int = 0
    """Rows the --records file got."""


def counting_fields(counting: str) -> dict[str, Any]:
    if counting == "continuous_usage":
        return {"continuous_usage": True}
    if counting == "tokenizer":
        return {"event_counter": EventCounterSpec(kind="server")}
    return {}


def run_gputui(
    url: str,
    concurrency: int,
    seconds: float,
    output_tokens: int,
    workers: int = 1,
    counting: str = "none",
    outputs: str = "none",
) -> Result:
    httpx.post(url + "/sim/reset", timeout=10)
    config = EngineConfig(
        client=ClientConfig(
            target=parse_target(url),
            model="sim",
            extra_body={"ignore_eos": True},
            **counting_fields(counting),
        ),
        shape=RequestShape(input_tokens=64, output_tokens=output_tokens),
        probe_path=None,
    )
    session = Session(config, Sla(None, None, None), warmup_s=0.0, workers=workers)
    session.start()
    with session_outputs(session, outputs) as rows:
        time.sleep(0.5)
        before = session.status
        assert before is not None, "engine did not report"
        session_cpu0 = time.process_time()
        session.set_load("concurrency", concurrency)
        time.sleep(seconds)
        session.stop(cancel=False, drain_timeout_s=60)
        session_cpu_s = time.process_time() - session_cpu0
    status = session.status
    assert status is not None
    cpu_s = status.cpu_s - before.cpu_s
    result = session_result(session, url, cpu_s, 100 * cpu_s / (status.wall_s - before.wall_s))
    result.session_cpu_s = session_cpu_s
    result.rows = rows[0]
    return result


@contextlib.contextmanager
def session_outputs(session: Session, outputs: str) -> Iterator[list[int]]:
    """The journal ("journal"), and also --records and a scraped --serve-metrics ("records").

    Yields a one-item list that holds, once closed, the rows the records file got.
    """
    import tempfile

    from gputui.frontends.outputs import RunOutputs
    from gputui.snapshot.journal import JournalHeader
    from gputui.snapshot.models import SlaBounds, Target, Workload

    rows = [0]
    if outputs == "none":
        yield rows
        return
    with tempfile.TemporaryDirectory() as folder:
        records = Path(folder) / "records.jsonl" if outputs == "records" else None
        serve = ("127.0.0.1", 0) if outputs == "records" else None
        extras = RunOutputs(records, serve, lambda: session.sla)
        extras.watch(session)
        header = JournalHeader(
            label="fidelity",
            target=Target(
                url=session.config.client.target.api_url, model="sim", endpoint="completions"
            ),
            workload=Workload(input_tokens=64, output_tokens=128, endpoint="completions"),
            sla=SlaBounds(),
            plan={"mode": "concurrency"},
        )
        session.open_journal(Path(folder), header, taps=extras.taps)
        stop = threading.Event()
        scraper = threading.Thread(target=_scrape_every_second, args=(extras.url, stop))
        scraper.start()
        try:
            yield rows
        finally:
            stop.set()
            scraper.join()
            session.close_journal(saved=True)
            extras.close()
            if records is not None:
                rows[0] = sum(1 for _ in records.open("rb"))


def _scrape_every_second(url: str | None, stop: threading.Event) -> None:
    """What a Prometheus scraping gputui would cost it (nothing without a server)."""
    while url is not None and not stop.wait(1.0):
        with urllib.request.urlopen(url, timeout=5) as response:  # no TLS context to build
            response.read()


def records_cost(levels: list[int], seconds: float, repeats: int, output_tokens: int) -> None:
    """TTFT excess over the server's record and CPU: bare, journal, journal + records + metrics."""
    print(f"\n--records cost: TTFT excess over the server's record, median of {repeats}")
    header = (
        f"{'outputs':<8} {'conc':>5} {'TTFT p50':>8} {'excess':>7} {'TTFT p99':>8} {'excess':>7} "
        f"{'ITL diff':>8} {'engine CPU':>10} {'session CPU s':>13} {'rows':>7} {'fail':>5}"
    )
    print(header)
    print("-" * len(header))
    with sim_server(50, 10) as url:
        for level in levels:
            for outputs in ("none", "journal", "records"):
                r = median_result(
                    [
                        run_gputui(url, level, seconds, output_tokens, outputs=outputs)
                        for _ in range(repeats)
                    ]
                )
                print(
                    f"{outputs:<8} {level:>5} {r.ttft_p50_ms:>8.2f} "
                    f"{r.ttft_p50_ms - r.server_ttft_p50_ms:>+7.2f} {r.ttft_p99_ms:>8.2f} "
                    f"{r.ttft_p99_ms - r.server_ttft_p99_ms:>+7.2f} "
                    f"{r.itl_mean_ms - r.server_itl_mean_ms:>+8.3f} {r.cpu_percent:>9.1f}% "
                    f"{r.session_cpu_s:>13.2f} {r.rows:>7} {r.failures:>5.0f}",
                    flush=True,
                )


def session_result(session: Session, url: str, cpu_s: float, cpu_percent: float) -> Result:
    """A finished session's records set beside the server's own record of the same run."""
    records = session.all_records()
    ok = [r for r in records if r.ok]
    ttft = np.array([(r.first_token_ns - r.sent_ns) / 1e6 for r in ok if r.first_token_ns])
    gaps = np.concatenate([np.diff(r.token_ns) for r in ok]) / 1e6 if ok else np.zeros(0)
    truth = server_stats(url)
    return Result(
        ttft_mean_ms=float(ttft.mean()),
        ttft_p99_ms=float(np.percentile(ttft, 99)),
        itl_mean_ms=float(gaps.mean()),
        server_ttft_mean_ms=truth["ttft_ms"]["mean"],
        server_ttft_p99_ms=truth["ttft_ms"]["p99"],
        server_itl_mean_ms=truth["itl_ms"]["mean"],
        cpu_percent=cpu_percent,
        tokens=sum(r.output_tokens for r in ok),
        cpu_s=cpu_s,
        failures=len(records) - len(ok),
        ttft_p50_ms=float(np.percentile(ttft, 50)),
        server_ttft_p50_ms=truth["ttft_ms"]["p50"],
    )


def run_tui_live(url: str, concurrency: int, seconds: float, output_tokens: int) -> Result:
    """The real TUI (the app, its controller, telemetry and journal) driven headless at 160x48.

    The controller is built from `gputui tui` flags exactly as the CLI builds it; the app renders
    at its own rate (4 Hz) the whole time the load runs, so any cost of the live screen in the
    UI process shows up against the server's record as it would for an operator.
    """
    import tempfile

    from gputui.cli import build_parser
    from gputui.cli.options import tui_options
    from gputui.ui.app import AppOptions, make_app
    from gputui.ui.command import live_controller

    httpx.post(url + "/sim/reset", timeout=10)
    with tempfile.TemporaryDirectory() as folder:
        args = build_parser().parse_args(
            ["tui", "--url", url, "--model", "sim", "--start-level", str(concurrency),
             "--warmup-seconds", "0", "--input-tokens", "64", "--output-tokens",
             str(output_tokens), "--snapshot-dir", folder, "--gpu-telemetry", "none"]
        )  # fmt: skip
        controller, _ = live_controller(tui_options(args))
        app = make_app(controller, AppOptions(snapshot_dir=Path(folder)))
        controller.start()
        session = controller.session

        async def drive() -> float:
            async with app.run_test(size=(160, 48)) as pilot:
                while session.latest is None or session.latest.in_flight < concurrency:
                    await pilot.pause(0.05)
                cpu0 = time.process_time()
                await pilot.pause(seconds)
                return time.process_time() - cpu0

        ui_cpu_s = asyncio.run(drive())
        controller.stop(save=False)
    return session_result(session, url, ui_cpu_s, 100 * ui_cpu_s / seconds)


def tui_live(levels: list[int], seconds: float, repeats: int, output_tokens: int) -> None:
    """TTFT p50/p99 excess over the server's record: headless Session vs the live TUI."""
    print(f"\nTUI live vs headless: TTFT excess over the server's record, median of {repeats}")
    header = (
        f"{'mode':<9} {'conc':>5} {'TTFT p50':>8} {'server':>7} {'excess':>7} "
        f"{'TTFT p99':>8} {'server':>7} {'excess':>7} {'fail':>5} {'UI CPU':>7}"
    )
    print(header)
    print("-" * len(header))
    with sim_server(50, 10) as url:
        for level in levels:
            for mode in ("headless", "tui-live"):
                runner = run_gputui if mode == "headless" else run_tui_live
                r = median_result(
                    [runner(url, level, seconds, output_tokens) for _ in range(repeats)]
                )
                ui = f"{r.cpu_percent:>6.1f}%" if mode == "tui-live" else f"{'-':>7}"
                print(
                    f"{mode:<9} {level:>5} {r.ttft_p50_ms:>8.2f} {r.server_ttft_p50_ms:>7.2f} "
                    f"{r.ttft_p50_ms - r.server_ttft_p50_ms:>+7.2f} {r.ttft_p99_ms:>8.2f} "
                    f"{r.server_ttft_p99_ms:>7.2f} {r.ttft_p99_ms - r.server_ttft_p99_ms:>+7.2f} "
                    f"{r.failures:>5.0f} {ui}",
                    flush=True,
                )


# --- the obvious client, for comparison: httpx, line by line, JSON per event -------------------
async def _httpx_load(
    url: str, concurrency: int, seconds: float, output_tokens: int
) -> list[tuple[int, int | None, list[int]]]:
    out: list[tuple[int, int | None, list[int]]] = []
    stop_at = time.perf_counter() + seconds
    limits = httpx.Limits(
        max_connections=concurrency + 8, max_keepalive_connections=concurrency + 8
    )
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:

        async def worker() -> None:
            while time.perf_counter() < stop_at:
                body = {
                    "model": "sim",
                    "prompt": "x " * 64,
                    "max_tokens": output_tokens,
                    "stream": True,
                    "ignore_eos": True,
                    "stream_options": {"include_usage": True},
                }
                sent = time.perf_counter_ns()
                stamps: list[int] = []
                async with client.stream("POST", "/v1/completions", json=body) as response:
                    async for line in response.aiter_lines():
                        if line.startswith("data: ") and line != "data: [DONE]":
                            chunk = orjson.loads(line[6:])
                            if chunk.get("choices") and chunk["choices"][0].get("text"):
                                stamps.append(time.perf_counter_ns())
                out.append((sent, stamps[0] if stamps else None, stamps))

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return out


def _httpx_child(
    url: str,
    concurrency: int,
    seconds: float,
    output_tokens: int,
    conn: multiprocessing.connection.Connection,
) -> None:
    with contextlib.suppress(ImportError):
        import uvloop

        uvloop.install()
    cpu0 = time.process_time()
    wall0 = time.perf_counter()
    data = asyncio.run(_httpx_load(url, concurrency, seconds, output_tokens))
    conn.send((data, time.process_time() - cpu0, time.perf_counter() - wall0))


def run_httpx(url: str, concurrency: int, seconds: float, output_tokens: int) -> Result:
    httpx.post(url + "/sim/reset", timeout=10)
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_httpx_child, args=(url, concurrency, seconds, output_tokens, child))
    proc.start()
    data, cpu_s, wall_s = parent.recv()
    proc.join()
    ttft = np.array([(f - s) / 1e6 for s, f, _ in data if f])
    gaps = np.concatenate([np.diff(np.array(st)) for _, _, st in data]) / 1e6
    truth = server_stats(url)
    return Result(
        ttft_mean_ms=float(ttft.mean()),
        ttft_p99_ms=float(np.percentile(ttft, 99)),
        itl_mean_ms=float(gaps.mean()),
        server_ttft_mean_ms=truth["ttft_ms"]["mean"],
        server_ttft_p99_ms=truth["ttft_ms"]["p99"],
        server_itl_mean_ms=truth["itl_ms"]["mean"],
        cpu_percent=100 * cpu_s / wall_s,
        tokens=sum(len(st) for _, _, st in data),
        cpu_s=cpu_s,
        failures=0,
    )


def median_result(results: list[Result]) -> Result:
    fields = Result.__dataclass_fields__
    return Result(**{k: statistics.median(getattr(r, k) for r in results) for k in fields})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--levels", default="1,16,64,256")
    parser.add_argument("--output-tokens", type=int, default=128)
    parser.add_argument("--no-httpx", action="store_true")
    parser.add_argument("--capacity-seconds", type=float, default=10.0)
    parser.add_argument("--scaling", action="store_true", help="also 1 vs 2 workers (ITL 0)")
    parser.add_argument("--workers", type=int, default=1, help="engine processes for gputui rows")
    parser.add_argument("--no-capacity", action="store_true")
    parser.add_argument(
        "--event-counting",
        choices=("none", "continuous_usage", "tokenizer"),
        default="none",
        help="per-event token counting in gputui's client",
    )
    parser.add_argument("--capacity-only", action="store_true", help="skip the fidelity rows")
    parser.add_argument(
        "--tui-live",
        action="store_true",
        help="only the TUI-live vs headless TTFT table (at --tui-levels)",
    )
    parser.add_argument("--tui-levels", default="64,256")
    parser.add_argument(
        "--records",
        action="store_true",
        help="only the cost of --records and --serve-metrics (at --tui-levels)",
    )
    args = parser.parse_args()
    with contextlib.suppress(OSError):
        os.sched_setaffinity(0, {CLIENT_CPU})
    levels = [int(x) for x in args.levels.split(",")]
    if args.records:
        tui_levels = [int(x) for x in args.tui_levels.split(",")]
        records_cost(tui_levels, args.seconds, args.repeats, args.output_tokens)
        return
    if args.tui_live:
        tui_live(
            [int(x) for x in args.tui_levels.split(",")],
            args.seconds,
            args.repeats,
            args.output_tokens,
        )
        return
    clients = ["gputui"] + ([] if args.no_httpx else ["httpx"])
    if args.capacity_only:
        levels = []
    print(
        f"fixed sim: TTFT 50 ms, ITL 10 ms, {args.output_tokens} output tokens; "
        f"{args.seconds:g} s per run, median of {args.repeats}; server on CPU {SERVER_CPU}, "
        f"client on CPU {CLIENT_CPU}"
    )
    header = (
        f"{'client':<7} {'conc':>5} {'TTFT mean':>9} {'server':>7} {'excess':>7} "
        f"{'TTFT p99':>8} {'server':>7} {'excess':>7} {'ITL mean':>8} {'server':>7} "
        f"{'diff':>6} {'fail':>5} {'client CPU':>10}"
    )
    print(header)
    print("-" * len(header))
    with sim_server(50, 10) as url:
        for level in levels:
            for client in clients:
                if client == "gputui":
                    results = [
                        run_gputui(
                            url,
                            level,
                            args.seconds,
                            args.output_tokens,
                            args.workers,
                            args.event_counting,
                        )
                        for _ in range(args.repeats)
                    ]
                else:
                    results = [
                        run_httpx(url, level, args.seconds, args.output_tokens)
                        for _ in range(args.repeats)
                    ]
                r = median_result(results)
                print(
                    f"{client:<7} {level:>5} {r.ttft_mean_ms:>9.2f} {r.server_ttft_mean_ms:>7.2f} "
                    f"{r.ttft_mean_ms - r.server_ttft_mean_ms:>+7.2f} {r.ttft_p99_ms:>8.2f} "
                    f"{r.server_ttft_p99_ms:>7.2f} {r.ttft_p99_ms - r.server_ttft_p99_ms:>+7.2f} "
                    f"{r.itl_mean_ms:>8.3f} {r.server_itl_mean_ms:>7.3f} "
                    f"{r.itl_mean_ms - r.server_itl_mean_ms:>+6.3f} {r.failures:>5.0f} "
                    f"{r.cpu_percent:>9.1f}%",
                    flush=True,
                )
    if not args.no_capacity:
        print(
            f"\ncapacity: ITL 0, 1024 output tokens, concurrency 64, "
            f"event counting {args.event_counting}"
        )
        print(f"{'client':<7} {'tokens':>9} {'client CPU s':>12} {'tokens per CPU-second':>22}")
        with sim_server(0, 0) as url:
            for client in clients:
                r = (
                    run_gputui(url, 64, args.capacity_seconds, 1024, counting=args.event_counting)
                    if client == "gputui"
                    else run_httpx(url, 64, args.capacity_seconds, 1024)
                )
                print(
                    f"{client:<7} {r.tokens:>9} {r.cpu_s:>12.2f} {r.tokens / r.cpu_s:>22,.0f}",
                    flush=True,
                )
    if args.scaling:
        scaling(args.capacity_seconds)


def scaling(seconds: float) -> None:
    """Ingest with 1 and 2 engine workers against the ITL-0 server, unpinned.

    The server writes 16 events per socket write here (--coalesce-writes): per token it then costs
    far less than the client that parses every event, so on 2 cores the client is what limits.
    """
    with contextlib.suppress(OSError):
        os.sched_setaffinity(0, set(range(os.cpu_count() or 1)))
    print("\nscaling: ITL 0, 1024 output tokens, concurrency 64, 16 events per server write")
    print(
        f"{'workers':>7} {'tokens/s (wall)':>15} {'client CPU s':>12} {'tokens per CPU-s':>16} "
        f"{'server CPU':>10}"
    )
    with sim_server(0, 0, coalesce=True) as url:
        pid = server_pid(url)
        for workers in (1, 2):
            cpu0 = proc_cpu_s(pid)
            t0 = time.perf_counter()
            r = run_gputui(url, 64, seconds, 1024, workers=workers)
            server_share = (proc_cpu_s(pid) - cpu0) / (time.perf_counter() - t0)
            print(
                f"{workers:>7} {r.tokens / seconds:>15,.0f} {r.cpu_s:>12.2f} "
                f"{r.tokens / r.cpu_s:>16,.0f} {100 * server_share:>9.0f}%",
                flush=True,
            )


def server_pid(url: str) -> int:
    port = url.rsplit(":", 1)[1]
    out = subprocess.run(["pgrep", "-f", "--", f"--port {port}"], capture_output=True, text=True)
    return int(out.stdout.split()[0])


def proc_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


if __name__ == "__main__":
    main()
