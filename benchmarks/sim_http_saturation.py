"""Does the HTTP simulator at saturation keep its GPU's pace on a busy host? (issue 31)

Starts the gpu profile (h100-sxm, llama-3.1-8b) over HTTP, sends `--requests` at once (rate inf:
about 357 prompt tokens each, 128 output tokens, ignore_eos), and reads the server's own
per-request record (`GET /sim/latency`): TPOT = decode / 127 per request, meaned (requests of
one wave share a TPOT, so the median jumps between waves). The client cannot send
them all at the same instant, so the same arrivals (each request's end less its E2E) are then
served in virtual time (`sim.open_loop`, the same engine, no host): the HTTP sim should read
that TPOT, whatever the host's load. Prefix caching and the API server's CPU model
(`sim.frontend`) are off in both, so the ratio is the engine's timeline alone. With `--hog` a
bounded CPU hog (a child process, `--seconds` at most, ended by its PID) runs beside it.
`GpuProfile` used to turn any callback lateness over 2 ms into GPU idle time, so the HTTP TPOT
grew with the host's load.

    python benchmarks/sim_http_saturation.py [--requests 150] [--runs 2] [--hog]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import statistics
import time

import httpx

from gputui.sim.frontend import NO_FRONT_END
from gputui.sim.gpu_profile import GpuProfileSpec
from gputui.sim.open_loop import Arrival, run_open_loop
from gputui.sim.runner import start_background

OUTPUT_TOKENS = 128
PROMPT = "word " * 356
SPEC = GpuProfileSpec("h100-sxm", "llama-3.1-8b", prefix_caching=False, front_end=NO_FRONT_END)


def _spin(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


async def _burst(url: str, requests: int) -> float:
    """Every request at once; the wall time until the last one ended."""
    limits = httpx.Limits(max_connections=requests)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=120) as client:

        async def one() -> None:
            body = {
                "model": "m",
                "prompt": PROMPT,
                "max_tokens": OUTPUT_TOKENS,
                "stream": True,
                "ignore_eos": True,
            }
            async with client.stream("POST", "/v1/completions", json=body) as response:
                async for _ in response.aiter_bytes():
                    pass

        started = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(requests)))
        return time.perf_counter() - started


def run_once(requests: int) -> tuple[float, float, float]:
    """(req/s, mean TPOT ms, its virtual-time mean) of one burst against a fresh simulator."""
    with start_background(SPEC) as sim:
        wall = asyncio.run(_burst(sim.url, requests))
        records = httpx.get(sim.url + "/sim/latency", timeout=30).json()["requests"]
        prompt = httpx.post(sim.url + "/tokenize", json={"prompt": PROMPT}, timeout=30).json()
    tpot = statistics.fmean(r["decode_s"] / (OUTPUT_TOKENS - 1) for r in records)
    arrived = sorted(r["end_ns"] / 1e9 - r["e2e_s"] for r in records)
    arrivals = [Arrival(t - arrived[0], prompt["count"], OUTPUT_TOKENS) for t in arrived]
    virtual = run_open_loop(SPEC.build().device, arrivals, SPEC.server_overhead_s, SPEC.front_end)
    return len(records) / wall, tpot * 1e3, statistics.fmean(virtual.tpot_s) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=150)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--hog", action="store_true", help="a bounded CPU hog beside the sim")
    parser.add_argument("--seconds", type=float, default=60.0, help="the hog's limit")
    args = parser.parse_args()
    hog = None
    if args.hog:
        hog = multiprocessing.get_context("spawn").Process(target=_spin, args=(args.seconds,))
        hog.start()
    try:
        print(f"{'run':>3}  {'hog':>3}  {'req/s':>6}  {'TPOT ms':>11}  {'virtual ms':>10}  ratio")
        for run in range(1, args.runs + 1):
            rate, tpot, virtual = run_once(args.requests)
            print(
                f"{run:>3}  {'yes' if hog else 'no':>3}  {rate:6.1f}  {tpot:11.2f}  "
                f"{virtual:10.2f}  {tpot / virtual:5.2f}"
            )
    finally:
        if hog is not None:
            hog.terminate()
            hog.join(5)


if __name__ == "__main__":
    main()
