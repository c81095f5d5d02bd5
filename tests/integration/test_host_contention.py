"""Host contention apart from client saturation, measured with the client pinned to one core.

`gputui run` (and the engine it spawns) is pinned to core 0 and the simulator to core 1. A busy
loop that the test starts, pins to core 0, bounds in time and stops by PID makes the client wait
for its CPU while using little of it: the verdict is host-contended, with no advice to add
workers. Alone on its core at thousands of streams with ITL 1 ms, the client's own CPU is the
limit: client-bound. The unit tests pin the rule (metrics.client_state) and the events.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gputui.engine.schedstat import cpu_pressure, run_wait_s
from gputui.metrics.bottleneck import bottleneck, verdict_line
from gputui.metrics.client_state import CLIENT_BOUND, HOST_CONTENDED, STALLED, client_state
from gputui.metrics.step_evidence import StepEvidence
from gputui.sim.fixed import FixedProfileSpec
from gputui.sim.runner import SimProcess, start_background
from gputui.snapshot.store import load_snapshot

pytestmark = pytest.mark.alone  # it measures the CPU itself: no neighbour

CLIENT_CORE, SERVER_CORE = 0, 1
HOG_PRECEDENCE = 19
"""The client runs at this nice level beside the hogs (nice 0), as a busy host's processes
take precedence over it: its wait then dwarfs its work whatever else runs on the machine."""
HOG_SECONDS = 25.0
"""The busy loop ends on its own after this long, whatever happens to the test."""

needs_two_cores = pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs Linux CPU affinity and two cores",
)


def test_the_rule_tells_a_waiting_client_from_a_busy_one() -> None:
    assert client_state(0.7, 20.0, lagging=True) == HOST_CONTENDED  # measured: see module doc
    assert client_state(97.0, 3.0, lagging=True) == CLIENT_BOUND
    assert client_state(60.0, 40.0, lagging=True) == CLIENT_BOUND  # ran more than it waited
    assert client_state(3.0, 5.0, lagging=True) == STALLED  # neither busy nor waiting: a pause
    assert client_state(3.0, None, lagging=True) == STALLED  # no schedstat: low CPU is no limit
    assert client_state(80.0, None, lagging=True) == CLIENT_BOUND
    assert client_state(3.0, 80.0, lagging=False) is None


def test_the_verdict_and_its_advice_follow_the_state() -> None:
    contended = bottleneck(
        StepEvidence(
            level=4,
            client_cpu_max_pct=3.0,
            client_cpu_mean_pct=2.0,
            loop_lag_max_ms=1800.0,
            client_run_wait_pct=45.0,
            host_cpu_pressure_pct=92.0,
        )
    )
    assert contended["verdict"] == "host-contended"
    assert contended["client_state"] == HOST_CONTENDED and contended["suspect"] is True
    line = verdict_line(contended)
    assert "run-queue wait 45 % (450 ms/s)" in line
    assert "more --workers will not help" in line and "add --workers" not in line
    assert "host CPU pressure 92 %" in line and line.endswith("[SUSPECT: host-contended]")
    busy = bottleneck(
        StepEvidence(
            level=512, client_cpu_max_pct=99.0, client_cpu_mean_pct=97.0, client_run_wait_pct=2.0
        )
    )
    assert busy["verdict"] == "client" and busy["client_state"] == CLIENT_BOUND
    assert "add --workers" in verdict_line(busy)


def test_this_process_can_read_its_own_wait() -> None:
    wait = run_wait_s()
    if wait is None:
        pytest.skip("no /proc/self/task/*/schedstat here")
    assert wait >= 0.0
    pressure = cpu_pressure()
    assert pressure is None or 0.0 <= pressure <= 100.0


@contextmanager
def _hog(core: int, processes: int = 2) -> Iterator[list[int]]:
    """Busy loops pinned to `core`, each ending by itself after HOG_SECONDS; killed by PID."""
    code = (
        "import os, time\n"
        f"os.sched_setaffinity(0, {{{core}}})\n"
        f"end = time.monotonic() + {HOG_SECONDS}\n"
        "while time.monotonic() < end:\n    pass\n"
    )
    hogs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(processes)]
    try:
        time.sleep(0.3)
        yield [h.pid for h in hogs]
    finally:
        for hog in hogs:
            os.kill(hog.pid, 9) if hog.poll() is None else None
            hog.wait(timeout=10)


def _pinned_run(sim: SimProcess, out: Path, *extra: str, nice: int = 0) -> subprocess.Popen[str]:
    """`gputui run` pinned to CLIENT_CORE (the engine it spawns inherits affinity and nice)."""

    def pin() -> None:
        os.sched_setaffinity(0, {CLIENT_CORE})
        os.nice(nice)

    return subprocess.Popen(
        [
            sys.executable, "-m", "gputui", "run", "--url", sim.url, "--model", "sim",
            "--warmup-seconds", "1", "--out", str(out), *extra,
        ],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL,
        preexec_fn=pin,
    )  # fmt: skip


def _until(run: subprocess.Popen[str], prefix: str) -> list[str]:
    """Read the run's lines up to and including the first that starts with `prefix`."""
    assert run.stdout is not None
    lines = []
    for line in run.stdout:
        lines.append(line)
        if line.startswith(prefix):
            break
    return lines


def _finish(run: subprocess.Popen[str], lines: list[str]) -> str:
    assert run.stdout is not None
    rest = run.stdout.read()  # through the same buffer as `_until` (communicate() bypasses it)
    run.wait(timeout=60)
    text = "".join(lines) + rest
    assert run.returncode == 0, text
    return text


def _step(out: Path) -> Any:
    (step,) = load_snapshot(out).steps
    assert step.bottleneck is not None
    return step


@needs_two_cores
def test_a_hog_on_the_clients_core_is_host_contention(tmp_path: Path) -> None:
    spec = FixedProfileSpec(ttft_ms=20, itl_ms=5, served_model_name="sim")
    with start_background(spec) as sim:
        os.sched_setaffinity(sim.pid, {SERVER_CORE})
        run = _pinned_run(
            sim, tmp_path / "hog.json", "--concurrency", "4", "--step-seconds", "4",
            "--input-tokens", "32", "--output-tokens", "32", nice=HOG_PRECEDENCE,
        )  # fmt: skip
        lines = _until(run, "gputui run: journal")  # imports done, the session is open
        with _hog(CLIENT_CORE):
            lines += _until(run, "step 1 ")  # the step's line (its verdict follows)
        stdout = _finish(run, lines)
    step = _step(tmp_path / "hog.json")
    verdict = step.bottleneck
    assert verdict["verdict"] == "host-contended", verdict
    assert verdict["client_state"] == HOST_CONTENDED
    evidence = " ".join(verdict["evidence"])
    assert "more --workers will not help" in evidence
    assert "add --workers" not in stdout and "rerun with more --workers" not in stdout
    assert "SUSPECT: host-contended" in stdout, stdout


@needs_two_cores
def test_the_client_alone_at_its_limit_is_client_bound(tmp_path: Path) -> None:
    # One worker reading 64 streams from a simulator that writes tokens as fast as it can (ITL 0,
    # 16 events per write) has more to parse than its core allows: its CPU is the limit.
    spec = FixedProfileSpec(ttft_ms=20, itl_ms=0, coalesce_writes=True, served_model_name="sim")
    busy = _core_taken_by_others(CLIENT_CORE)
    if busy is not None:
        pytest.skip(busy)
    with start_background(spec) as sim:
        os.sched_setaffinity(sim.pid, {SERVER_CORE})
        run = _pinned_run(
            sim, tmp_path / "busy.json", "--concurrency", "64", "--step-seconds", "3",
            "--input-tokens", "16", "--output-tokens", "4096", "--workers", "1",
        )  # fmt: skip
        stdout = _finish(run, [])
    verdict = _step(tmp_path / "busy.json").bottleneck
    assert verdict["suspect"] is True, verdict
    evidence = " ".join(verdict["evidence"])
    if verdict["client_state"] == HOST_CONTENDED:  # others took the core meanwhile: say so
        pytest.skip(f"the client's core got busy with other processes during the test: {evidence}")
    assert verdict["verdict"] == "client", verdict
    assert verdict["client_state"] == CLIENT_BOUND
    assert "add --workers" in evidence
    assert "SUSPECT: client-bound" in stdout


def _core_taken_by_others(core: int) -> str | None:
    """Why `core` is not ours to measure a lone client on (a 0.3 s busy probe there waited over
    twice as long as it ran), or None."""
    code = (
        "import os, time\n"
        f"os.sched_setaffinity(0, {{{core}}})\n"
        "from gputui.engine.schedstat import run_wait_s\n"
        "w0, c0, t0 = run_wait_s(), time.process_time(), time.perf_counter()\n"
        "while time.perf_counter() - t0 < 0.3:\n    pass\n"
        "print(run_wait_s() - w0, time.process_time() - c0)\n"
    )
    probe = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    wait_s, cpu_s = (float(x) for x in probe.stdout.split())
    if wait_s <= 2 * cpu_s:  # others hold at most two thirds of it: the client can still lead
        return None
    return (
        f"core {core} is taken by other processes (a busy probe ran {cpu_s * 1e3:.0f} ms and "
        f"waited {wait_s * 1e3:.0f} ms): no client is alone at its own limit here"
    )


def test_the_event_log_gives_the_advice_that_follows_the_state() -> None:
    from gputui.metrics.window import RollingWindow
    from gputui.session import StatsFrame
    from gputui.session.events import EventWatcher

    frame = StatsFrame(
        seq=1, mode="concurrency", level=4, step_index=0, step_elapsed_s=5.0, in_warmup=False,
        in_flight=4, paused=False, window=RollingWindow(10).stats(time.perf_counter_ns()),
        client_cpu_percent=2.0, loop_lag_max_ms=1800.0, rtt_last_s=None, steps_finished=0,
        busiest_worker_cpu_percent=2.0, client_run_wait_percent=45.0, host_contended=True,
    )  # fmt: skip
    watcher = EventWatcher()
    events, _ = watcher.observe(frame, None, "ok")
    (text,) = [t for _, t in events if "contended" in t]
    assert text.startswith("the host is contended: the client waited 45 % of the time for a CPU")
    assert "more --workers will not help" in text and "restart with more --workers" not in text
    again, _ = watcher.observe(replace(frame, seq=2), None, "ok")
    assert not again  # once per episode
