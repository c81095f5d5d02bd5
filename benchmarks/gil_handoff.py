"""How long does a thread woken by I/O wait for the GIL while another thread runs Python? (issue 31)

The question behind it: S2's rate-16 TTFT (benchmarks/sim_published.py) is ~17 ms over the sim's,
and vLLM's engine core and API server are multi-threaded Python (the engine core's busy main loop
beside its ZMQ input and output threads and its async-output thread; the API server's loop beside
its tokenizer thread). A thread woken by a socket must take the GIL back; CPython makes the holder
drop it only after the waiter has waited `sys.getswitchinterval()` (5 ms by default), unless the
holder releases it first. If the engine's main thread held the GIL for long stretches, each hop of
a request's path would cost up to 5 ms.

Part 1 (CPython on this host, no vLLM): a sender process writes its `perf_counter_ns` to a
socketpair at random 4-12 ms gaps; a receiver thread blocked in `recv` stamps its wake-up; a third
thread runs pure Python and releases the GIL (`time.sleep(0)`, as every torch op's binding and
Triton's kernel launcher do around their C call) every `period` us, or never. Expected: with no
release the waiter waits the whole switch interval; with releases it waits about half a period.

Part 2 (`--nsys PATH`, vLLM 0.19 itself): kvcached PR 331's nsys export of the same server
(ovg-project/kvcached at 4a8176e, benchmarks/bench_layout/nsys_runs/layout_true.sqlite: H100,
Qwen3-0.6B, vLLM 0.19, rate inf). The engine core's async-output thread blocks in
`cudaEventSynchronize` with the GIL released, then runs Python (`.tolist()`, freeing tensors)
before its next CUDA call; the gap from the sync's end to that call bounds its wait for the GIL,
split by whether the main thread was launching a step at that moment (a CUDA call within 0.2 ms
before and after).

    python benchmarks/gil_handoff.py [--n 100] [--nsys layout_true.sqlite]
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import multiprocessing
import os
import random
import socket
import sqlite3
import statistics
import sys
import threading
import time

PERIODS_US = (None, 1000, 200, 30)
"""None: the busy thread never releases the GIL."""


def _send(sock: socket.socket, n: int) -> None:
    rng = random.Random(1)
    time.sleep(0.1)
    for _ in range(n):
        time.sleep(rng.uniform(0.004, 0.012))
        sock.send(time.perf_counter_ns().to_bytes(8, "little"))
    sock.send(bytes(8))


def _busy(stop: threading.Event, period_us: int | None) -> None:
    x = 0
    step_ns = 0 if period_us is None else period_us * 1000
    nxt = time.perf_counter_ns() + step_ns
    while not stop.is_set():
        for i in range(50):
            x += i * i
        if step_ns and time.perf_counter_ns() >= nxt:
            time.sleep(0)  # releases the GIL and takes it back, like a torch op's binding
            nxt += step_ns


def wake_latencies_ms(switch_s: float, period_us: int | None, n: int) -> list[float]:
    """Wake-up latencies of the receiver thread beside a busy thread (see the docstring)."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(switch_s)
    a, b = socket.socketpair()
    sender = multiprocessing.get_context("fork").Process(target=_send, args=(b, n))
    sender.start()
    stop = threading.Event()
    lat: list[float] = []

    def receive() -> None:
        while (sent := int.from_bytes(a.recv(8), "little")) != 0:
            lat.append((time.perf_counter_ns() - sent) / 1e6)

    receiver = threading.Thread(target=receive)
    busy = threading.Thread(target=_busy, args=(stop, period_us))
    receiver.start()
    busy.start()
    receiver.join()
    stop.set()
    busy.join()
    sender.join()
    a.close()
    b.close()
    sys.setswitchinterval(old)
    return sorted(lat)


def _row(label: str, lat: list[float]) -> str:
    n = len(lat)
    return (f"{label:<44} {n:>4} {statistics.mean(lat):>7.3f} {lat[n // 2]:>7.3f} "
            f"{lat[int(0.9 * n)]:>7.3f} {lat[-1]:>7.3f}")  # fmt: skip


def print_cpython(n: int) -> None:
    load = os.getloadavg()[0]
    print("Part 1: CPython, a thread woken by a socket beside a thread busy in Python (ms); "
          f"load average {load:.1f} on {os.cpu_count()} CPUs (means and maxima carry the host's "
          "own scheduling delays; read the medians)")  # fmt: skip
    print(f"{'case':<44} {'n':>4} {'mean':>7} {'median':>7} {'p90':>7} {'max':>7}")
    cases = [(0.001, None), *((0.005, p) for p in PERIODS_US)]
    for switch_s, period in cases:
        releases = "never releases" if period is None else f"releases every {period} us"
        label = f"switch {switch_s * 1e3:g} ms, holder {releases}"
        print(_row(label, wake_latencies_ms(switch_s, period, n)))


def print_nsys(path: str) -> None:
    """Part 2: the async-output thread's GIL wait in vLLM 0.19's engine core (see the docstring)."""
    db = sqlite3.connect(path)
    names = dict(db.execute("SELECT id, value FROM StringIds"))
    calls: dict[int, list[tuple[int, int, str]]] = {}
    for start, end, tid, name in db.execute(
        "SELECT start, end, globalTid, nameId FROM CUPTI_ACTIVITY_KIND_RUNTIME ORDER BY start"
    ):
        calls.setdefault(tid, []).append((start, end, names[name]))
    main = max(calls, key=lambda t: len(calls[t]))
    others = [t for t in calls if t != main]  # the main thread syncs too: not the one woken
    output = max(others, key=lambda t: sum(c[2].startswith("cudaEventSync") for c in calls[t]))
    main_starts = [c[0] for c in calls[main]]
    busy: list[float] = []
    other: list[float] = []
    seq = calls[output]
    for (_, end, name), nxt in itertools.pairwise(seq):
        if not name.startswith("cudaEventSynchronize"):
            continue
        j = bisect.bisect_left(main_starts, end)
        launching = (j > 0 and end - calls[main][j - 1][1] < 200_000) and (
            j < len(main_starts) and main_starts[j] - end < 200_000
        )
        (busy if launching else other).append((nxt[0] - end) / 1e6)
    print(f"\nPart 2: vLLM 0.19 engine core ({path}): async-output thread, end of "
          "cudaEventSynchronize to its next CUDA call (ms)")  # fmt: skip
    print(f"{'case':<44} {'n':>4} {'mean':>7} {'median':>7} {'p90':>7} {'max':>7}")
    print(_row("main thread launching a step", sorted(busy)))
    print(_row("main thread not seen launching", sorted(other)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100, help="wake-ups per case")
    parser.add_argument("--nsys", help="kvcached's layout_true.sqlite (part 2)")
    args = parser.parse_args()
    print_cpython(args.n)
    if args.nsys:
        print_nsys(args.nsys)


if __name__ == "__main__":
    main()
