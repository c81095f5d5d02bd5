"""How many token events per second the fixed simulator writes, and how precisely, on one core.

Starts `gputui sim`'s fixed profile in a background process pinned to one CPU and drives it from a
minimal raw-asyncio HTTP/1.1 client (no httpx, no SSE parsing: it only waits for the terminating
chunk) pinned to another, closed-loop at a fixed concurrency. Worker start times are spread over one
request's duration so the streams' deadlines are spread as in a steady state rather than aligned.
After a warm-up it resets `/sim/stats`, runs for the measuring window and prints what the server
says it delivered (TTFT and ITL of its own writes), token events/s and the server's CPU use.

    python benchmarks/sim_throughput.py [--seconds 10] [--concurrency 256] [--tokens 128]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import random
import time
from typing import Any, cast

from gputui.sim.fixed import FixedProfileSpec
from gputui.sim.runner import new_event_loop, start_background
from gputui.sim.tokenizer import make_prompt

SERVER_CPU = 0
CLIENT_CPU = 1
_END = b"0\r\n\r\n"


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat", "rb") as f:  # noqa: PTH123 - a tiny read of a proc file
        fields = f.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class StreamClient(asyncio.Protocol):
    """One keep-alive connection sending the same streaming request in a closed loop."""

    def __init__(self, request: bytes, stop: asyncio.Event) -> None:
        self.request = request
        self.stop = stop
        self.tail = b""
        self.transport: asyncio.Transport | None = None
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.completed = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def send(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        self.tail = (self.tail + data)[-8:] if len(data) < 8 else data[-8:]
        if self.tail.endswith(_END):
            self.completed += 1
            self.tail = b""
            if self.stop.is_set():
                self.done.set_result(None)
            else:
                self.send()

    def connection_lost(self, exc: Exception | None) -> None:  # noqa: ARG002
        if not self.done.done():
            self.done.set_result(None)


async def http_json(port: int, method: str, path: str) -> Any:
    """A one-shot request on its own connection; returns the JSON body."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        f"{method} {path} HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n"
        "connection: close\r\n\r\n".encode()
    )
    raw = await reader.read()
    writer.close()
    return json.loads(raw.split(b"\r\n\r\n", 1)[1])


async def start_clients(
    port: int, concurrency: int, tokens: int, request_s: float
) -> tuple[list[StreamClient], asyncio.Event]:
    """Open the connections and start the closed loops, spread over one request's duration."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    clients: list[StreamClient] = []
    for i in range(concurrency):
        body = json.dumps(
            {
                "model": "sim",
                "prompt": make_prompt(32, seed=i),
                "max_tokens": tokens,
                "ignore_eos": True,
                "stream": True,
            }
        ).encode()
        request = (
            b"POST /v1/completions HTTP/1.1\r\nhost: 127.0.0.1\r\n"
            b"content-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
        )
        _, client = await loop.create_connection(
            functools.partial(StreamClient, request, stop), "127.0.0.1", port
        )
        clients.append(client)
    rng = random.Random(0)
    for client in clients:
        loop.call_later(rng.uniform(0, request_s), client.send)
    return clients, stop


async def measure(
    pid: int, port: int, concurrency: int, tokens: int, request_s: float, seconds: float
) -> dict[str, Any]:
    """Warm up, reset the server's stats, measure for `seconds`, stop the clients."""
    clients, stop = await start_clients(port, concurrency, tokens, request_s)
    await asyncio.sleep(request_s + 1.5)
    await http_json(port, "POST", "/sim/reset")
    t0, cpu0, ccpu0 = time.perf_counter(), cpu_seconds(pid), time.process_time()
    await asyncio.sleep(seconds)
    stats: dict[str, Any] = await http_json(port, "GET", "/sim/stats")
    elapsed, cpu, ccpu = (
        time.perf_counter() - t0,
        cpu_seconds(pid) - cpu0,
        time.process_time() - ccpu0,
    )
    stop.set()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.gather(*(c.done for c in clients)), 30)
    for client in clients:
        if client.transport is not None:
            client.transport.close()
    stats["events_per_s"] = stats["tokens"] / elapsed
    stats["server_cpu"] = cpu / elapsed
    stats["client_cpu"] = ccpu / elapsed
    return stats


def run_case(
    ttft_ms: float, itl_ms: float, args: argparse.Namespace, **spec: Any
) -> dict[str, Any]:
    request_s = (ttft_ms + itl_ms * (args.tokens - 1)) / 1000
    with start_background(FixedProfileSpec(ttft_ms=ttft_ms, itl_ms=itl_ms, **spec)) as sim:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(sim.pid, {SERVER_CPU})
        loop = new_event_loop()
        try:
            stats: dict[str, Any] = loop.run_until_complete(
                measure(sim.pid, sim.port, args.concurrency, args.tokens, request_s, args.seconds)
            )
        finally:
            loop.close()
    return stats


def fmt(value: float | None) -> str:
    return "    -" if value is None else f"{value:7.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument(
        "--compare-call-at", action="store_true", help="also run with loop.call_at timers"
    )
    args = parser.parse_args()
    with contextlib.suppress(OSError):
        os.sched_setaffinity(0, {CLIENT_CPU})
    cases: list[tuple[str, float, float, dict[str, Any]]] = [("fixed 50/10 timerfd", 50, 10, {})]
    if args.compare_call_at:
        cases.append(("fixed 50/10 call_at", 50, 10, {"use_timerfd": False}))
    cases.append(("fixed 0/0 (max rate)", 0, 0, {}))
    print(
        f"concurrency {args.concurrency}, {args.tokens} tokens/request, {args.seconds:g} s window, "
        f"server on CPU {SERVER_CPU}, client on CPU {CLIENT_CPU}"
    )
    header = (
        f"{'case':22s} {'TTFT mean':>9s} {'TTFT p99':>9s} {'ITL mean':>9s} {'ITL p99':>9s} "
        f"{'events/s':>9s} {'srv CPU':>8s} {'cli CPU':>8s}"
    )
    print(header)
    print("-" * len(header))
    for name, ttft_ms, itl_ms, spec in cases:
        s = run_case(ttft_ms, itl_ms, args, **spec)
        print(
            f"{name:22s} {fmt(s['ttft_ms']['mean']):>9s} {fmt(s['ttft_ms']['p99']):>9s} "
            f"{fmt(s['itl_ms']['mean']):>9s} {fmt(s['itl_ms']['p99']):>9s} "
            f"{s['events_per_s']:9.0f} {s['server_cpu']:8.0%} {s['client_cpu']:8.0%}",
            flush=True,
        )
    print("(TTFT/ITL in ms, as delivered by the server's own writes: GET /sim/stats)")


if __name__ == "__main__":
    main()
