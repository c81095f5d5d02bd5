"""Host contention apart from client saturation, measured with the client pinned to one core.

`gputui run` (and the engine it spawns) is pinned to core 0 and the simulator to core 1. A busy
loop that the test starts, pins to core 0, bounds in time and stops by PID makes the client wait
for its CPU while using little of it: the verdict is host-contended, with no advice to add
workers. Alone on its core at 64 streams from a simulator writing at ITL 0, in its own session
ahead of the host's other work (tests.support.priority), the client's own CPU is the limit:
client-bound, with its CPU near a core. The unit tests pin the rule (metrics.client_state) and
the events.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from gputui.engine.schedstat import cpu_pressure, run_wait_s
from gputui.metrics.bottleneck import bottleneck, verdict_line
from gputui.metrics.client_state import (
    CLIENT_BOUND,
    CLIENT_BOUND_CPU_PCT,
    HOST_CONTENDED,
    STALLED,
    client_state,
)
from gputui.metrics.step_evidence import StepEvidence
from gputui.sim.fixed import FixedProfileSpec
from gputui.sim.runner import start_background
from gputui.snapshot.store import load_snapshot
from tests.support.launch import free_port
from tests.support.priority import first_in_line

pytestmark = pytest.mark.alone  # it measures the CPU itself: no neighbour

CLIENT_CORE, SERVER_CORE = 0, 1
HOG_PRECEDENCE = 19
"""The client runs at this nice level beside the hogs (nice 0), as a busy host's processes
take precedence over it: its wait then dwarfs its work whatever else runs on the machine."""
HOG_SECONDS = 10.0
"""The busy loop ends on its own after this long, whatever happens to the test: the starved
client (nice 19 behind two hogs on its core) mostly ends its step only then, so this is the
test's length; twice the step's 3 s (warm-up 1 s, step 2 s) and more covers it whole."""

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


def _pinned_run(
    url: str, out: Path, *extra: str, nice: int = 0, first: bool = False
) -> subprocess.Popen[str]:
    """`gputui run` pinned to CLIENT_CORE (the engine it spawns inherits affinity and nice);
    `first`: in its own session ahead of the host's other work (`first_in_line`)."""

    def pin() -> None:
        os.sched_setaffinity(0, {CLIENT_CORE})
        os.nice(nice)

    warmup = () if "--warmup-seconds" in extra else ("--warmup-seconds", "1")
    return subprocess.Popen(
        [
            sys.executable, "-m", "gputui", "run", "--url", url, "--model", "sim",
            *warmup, "--out", str(out), *extra,
        ],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL,
        preexec_fn=first_in_line(cores={CLIENT_CORE}) if first else pin,
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
            sim.url, tmp_path / "hog.json", "--concurrency", "4", "--step-seconds", "2",
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
    # 16 events per write) has more to parse than its core allows: its CPU is the limit. Each
    # side runs in its own session ahead of the host's other work (`first_in_line`): on a shared
    # host the client otherwise waits for its core (host-contended, truly) and the simulator
    # for its own (the client then idles: none). 256-token answers finish inside the step.
    with _cli_sim(SERVER_CORE, "--ttft-ms", "20", "--itl-ms", "0", "--coalesce-writes") as url:
        run = _pinned_run(
            url, tmp_path / "busy.json", "--concurrency", "64", "--step-seconds", "2",
            "--warmup-seconds", "0.5", "--input-tokens", "16", "--output-tokens", "256",
            "--workers", "1", first=True,
        )  # fmt: skip
        stdout = _finish(run, [])
    verdict = _step(tmp_path / "busy.json").bottleneck
    print(stdout)
    assert verdict["suspect"] is True, verdict
    evidence = " ".join(verdict["evidence"])
    if verdict["client_state"] == HOST_CONTENDED:  # others took the core meanwhile: say so
        pytest.skip(f"the client's core got busy with other processes during the test: {evidence}")
    assert verdict["verdict"] == "client", verdict
    assert verdict["client_state"] == CLIENT_BOUND
    cpu = re.search(r"client-bound: client CPU (\d+) %, run-queue wait (\d+) %", evidence)
    assert cpu is not None, evidence
    assert int(cpu.group(1)) >= CLIENT_BOUND_CPU_PCT > int(cpu.group(2)), evidence  # near a core
    assert "add --workers" in evidence
    assert "SUSPECT: client-bound" in stdout


@contextmanager
def _cli_sim(core: int, *flags: str) -> Iterator[str]:
    """`gputui sim --profile fixed` in its own prioritized session on `core`; yields its URL."""
    port = free_port()
    sim = subprocess.Popen(
        [
            sys.executable, "-m", "gputui", "sim", "--profile", "fixed", "--served-model-name",
            "sim", "--port", str(port), *flags,
        ],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
        preexec_fn=first_in_line(cores={core}),
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30.0
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url + "/v1/models", timeout=1.0).status_code == 200:
                    break
            assert sim.poll() is None and time.monotonic() < deadline, "the sim did not start"
            time.sleep(0.1)
        yield url
    finally:
        sim.kill()
        sim.wait(timeout=10)


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
