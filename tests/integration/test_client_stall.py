"""A stalled client is not a saturated one: a far server, new connections at every step, pauses.

The simulator plays an A100 40 ms away; the client steps 1 -> 8 -> 32 streams, opening new
connections at each step. While it runs, the test pauses the client's engine process now and then
(SIGSTOP for 80 ms, then SIGCONT, by PID, bounded): its loop is then late while it neither runs
nor waits for a CPU, as with a GC pause or a blocking call. Before issue 31 such a step read
`client` ("add --workers") at 1-3 % CPU; now no step may read `client` under 50 % CPU, and a
lagging one says `stalled`, with the connections its step opened apart from dispatch lateness.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from gputui.metrics.step_diagnosis import bottleneck_verdict
from gputui.sim.gpu_profile import GpuProfileSpec
from gputui.sim.netdelay import NetworkDelay
from gputui.sim.runner import start_background
from gputui.snapshot.store import load_snapshot

# Not `alone`: what it asserts holds beside a busy neighbour (3 of 3 runs beside two busy loops
# on this 2-core host): a neighbour raises the client's run-queue wait, never its CPU, so no
# step reads `client`, and a paused loop then reads host-contended, which the test accepts.

A100 = GpuProfileSpec(gpu="a100-80gb-pcie", model="llama-3.1-8b")
PAUSE_S, EVERY_S, PAUSES_AT_MOST = 0.08, 0.5, 60


def _engine_pid(parent: int, deadline_s: float = 30.0) -> int | None:
    """The engine process `gputui run` spawned (multiprocessing's spawn_main child)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        kids: list[str] = []
        for task in Path(f"/proc/{parent}/task").glob("*"):  # spawned from any of its threads
            try:
                kids += (task / "children").read_text().split()
            except OSError:
                continue
        for kid in kids:
            try:
                cmdline = Path(f"/proc/{kid}/cmdline").read_bytes()
            except OSError:
                continue
            if b"spawn_main" in cmdline:
                return int(kid)
        time.sleep(0.1)
    return None


def _pause_now_and_then(pid: int, stop: threading.Event) -> None:
    for _ in range(PAUSES_AT_MOST):
        if stop.wait(EVERY_S):
            return
        try:
            os.kill(pid, signal.SIGSTOP)
            time.sleep(PAUSE_S)
        except ProcessLookupError:
            return
        finally:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                return


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
def test_a_paused_far_client_stepping_up_is_never_client_bound(tmp_path: Path) -> None:
    out = tmp_path / "far.json"
    with start_background(A100, network=NetworkDelay(40.0, 0.0)) as sim:
        run = subprocess.Popen(
            [
                sys.executable, "-m", "gputui", "run", "--url", sim.url, "--model", "llama-3.1-8b",
                "--concurrency", "1,8,32", "--step-seconds", "2", "--warmup-seconds", "1",
                "--input-tokens", "64", "--output-tokens", "48", "--out", str(out),
            ],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        stop = threading.Event()
        engine = _engine_pid(run.pid)
        pauser = None
        if engine is not None:
            pauser = threading.Thread(target=_pause_now_and_then, args=(engine, stop))
            pauser.start()
        try:
            stdout, _ = run.communicate(timeout=120)
        finally:
            stop.set()
            if pauser is not None:
                pauser.join(timeout=5)
            if run.poll() is None:
                run.kill()
                run.wait(timeout=10)
    assert engine is not None, "no engine process found"
    assert run.returncode == 0, stdout
    steps = load_snapshot(out).steps
    assert [s.level for s in steps] == [1, 8, 32]
    states = []
    for step in steps:
        verdict = bottleneck_verdict(step.bottleneck)
        assert verdict is not None
        evidence = " ".join(verdict["evidence"])
        state = verdict.get("client_state")
        states.append(state)
        cpu = next((e for e in verdict["evidence"] if "client CPU" in e), "")
        print(f"\n{step.level:g}: {verdict['verdict']} ({state}) {cpu}")
        assert verdict["verdict"] != "client", verdict  # its CPU stays far under 50 %
        if state == "stalled":
            assert "stalled: loop up to" in evidence and "more --workers will not help" in evidence
            assert verdict["suspect"] is False and verdict["verdict"] != "host-contended"
        if step.level > 1 and state is not None:  # new connections: said apart from lateness
            assert "new connection" in evidence, evidence
    # The pauses were seen: as stalls, or as host contention where the host was busy meanwhile.
    assert set(states) & {"stalled", "host-contended"}, states
    assert "client-bound" not in states
    assert "add --workers" not in stdout and "the client is saturated" not in stdout
