"""The server dies mid-run (`gputui sim --die-after`): the run goes on to its end, counts what
failed and why, and writes the snapshot with every step measured."""

from __future__ import annotations

import re
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from gputui.sim.fixed import FixedProfileSpec
from gputui.sim.runner import DIE_EXIT_CODE, start_background
from gputui.snapshot.store import load_snapshot
from tests.faults.harness import GPUTUI, gputui_run, run_args, tally

pytestmark = pytest.mark.timeout(120)

DIE_AFTER_S = 1.5
STEP_S = 1.0
SIM_FLAGS = ("--ttft-ms", "20", "--itl-ms", "2", "--served-model-name", "sim")
STEP_S = 1.0


def start_cli_sim(*extra: str) -> tuple[subprocess.Popen[str], str]:
    """`gputui sim` as a user starts it; returns the process and its URL."""
    proc = subprocess.Popen(
        [*GPUTUI, "sim", "--port", "0", *SIM_FLAGS, *extra],  # a later --port wins
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        found = re.search(r"serving .* on (http://\S+)", line)
        if found:
            return proc, found.group(1)
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise AssertionError("gputui sim did not start")


def test_server_dies_mid_run(tmp_path: Path) -> None:
    sim, url = start_cli_sim("--die-after", str(DIE_AFTER_S))
    out = tmp_path / "death.json"
    try:
        started = time.monotonic()
        result = gputui_run(url, out, "--concurrency", "4,4,4", "--step-seconds", str(STEP_S))
        elapsed = time.monotonic() - started
        sim_rc = sim.wait(timeout=10)
        assert sim.stderr is not None
        sim_err = sim.stderr.read()
    finally:
        sim.kill()
        sim.wait()
    assert sim_rc == DIE_EXIT_CODE
    died = re.search(r"exiting now \(simulated crash\), after (\d+) completion requests", sim_err)
    assert died, sim_err
    received = int(died.group(1))

    assert result.returncode == 0, result.stderr[-2000:]
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    assert f"snapshot written to {out}" in result.stdout
    assert elapsed < 30  # no hang waiting for a server that is gone
    snap = load_snapshot(out)
    counted = tally(snap)
    before, during, after = snap.steps
    # The step before the crash is intact.
    assert before.requests_failed == 0 and before.requests_ok > 20
    # The crash lands in the second step: streams cut mid-response, then connections refused.
    assert during.requests_ok > 0 and during.requests_failed > 0
    assert set(during.errors) <= {"stream_broken", "connect"}
    # Afterwards nothing connects; the closed loop backs off rather than spinning on failures.
    assert after.requests_ok == 0
    assert set(after.errors) == {"connect"}
    assert after.requests_failed <= 4 * (STEP_S / 0.05 + 2)
    # Every request is ok, cut by the crash, or never connected. The server counted every ok one;
    # a failed one may or may not have reached it (a connection the kernel accepted for the dying
    # process breaks with the request unread).
    assert counted.cancelled == 0
    assert counted.ok <= received <= counted.ok + counted.failed


def test_cli_sim_serves_the_faults_it_announces() -> None:
    sim, url = start_cli_sim("--faults", "http429=1", "--faults-seed", "4")
    try:
        assert sim.stderr is not None
        announced = sim.stderr.readline()
        assert "faults http429=1 (seed 4" in announced
        body = {"model": "sim", "prompt": "hi", "max_tokens": 2, "stream": True}
        response = httpx.post(f"{url}/v1/completions", json=body, timeout=10)
        assert response.status_code == 429
        assert response.headers["retry-after"] == "1"
        faults = httpx.get(f"{url}/sim/stats", timeout=10).json()["faults"]
        assert faults["drawn"] == faults["injected"]["http429"] == 1
    finally:
        sim.terminate()
        assert sim.wait(timeout=10) == 0


def test_run_resumes_when_the_server_returns(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a free port, for the server and for its successor
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sim, url = start_cli_sim("--port", str(port), "--die-after", str(DIE_AFTER_S))
    out = tmp_path / "comeback.json"
    run = subprocess.Popen(
        run_args(url, out, "--concurrency", "4,4,4,4", "--step-seconds", "1.2"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert sim.wait(timeout=30) == DIE_EXIT_CODE
        profile = FixedProfileSpec(ttft_ms=20, itl_ms=2, served_model_name="sim")
        with start_background(profile, port=port):
            stdout, stderr = run.communicate(timeout=60)
    finally:
        run.kill()
        sim.kill()
        sim.wait()
    assert run.returncode == 0, stderr[-2000:]
    assert "Traceback" not in stderr
    assert f"snapshot written to {out}" in stdout
    snap = load_snapshot(out)
    first, crash, back, steady = snap.steps
    assert first.requests_failed == 0
    assert crash.requests_failed > 0
    assert back.requests_ok > 0  # the closed loop's back-off retries within a second
    assert steady.requests_failed == 0 and steady.requests_ok > 20
