"""The operator's faults: SIGINT, SIGTERM or SIGHUP to `gputui run` while the server misbehaves.

The snapshot must hold everything that finished before the signal: every request the server saw
is in it exactly once, as ok, failed (by reason), or cancelled (in flight when the signal came).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from gputui.sim.faults import FaultSpec
from gputui.sim.fixed import FixedProfileSpec
from gputui.sim.runner import start_background
from gputui.snapshot.store import load_snapshot
from tests.faults.harness import run_args, sim_stats, tally

pytestmark = pytest.mark.timeout(120)

FAULTS = FaultSpec(
    {"reset": 0.05, "stall": 0.05, "http503": 0.05, "error_event": 0.05, "slow_start": 0.05},
    seed=2,
    slow_start_ms=300.0,
)


@pytest.mark.parametrize(
    "sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name
)
def test_signal_saves_everything_finished(tmp_path: Path, sig: signal.Signals) -> None:
    out = tmp_path / "signalled.json"
    profile = FixedProfileSpec(ttft_ms=20, itl_ms=2, served_model_name="sim")
    with start_background(profile, faults=FAULTS) as sim:
        proc = subprocess.Popen(
            run_args(sim.url, out, "--concurrency", "4,8", "--step-seconds", "1"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        head = []
        for line in proc.stdout:  # wait for the first step's line: the second step is running
            head.append(line)
            if line.startswith("step 1 "):
                break
        time.sleep(0.4)
        os.kill(proc.pid, sig)
        stdout, stderr = proc.communicate(timeout=60)
        stats = sim_stats(sim.url)
    assert proc.returncode == 128 + sig, stderr[-2000:]
    assert "Traceback" not in stderr, stderr[-2000:]
    assert "snapshot written to" in stdout
    snap = load_snapshot(out)
    assert not snap.complete
    assert snap.interrupted_by == sig.name
    first, second = snap.steps
    assert not first.incomplete and first.requests_ok > 10
    assert second.incomplete and second.requests_ok > 0
    counted = tally(snap)
    # Nothing finished is lost and nothing is counted twice.
    assert counted.ok + counted.failed + counted.cancelled == stats["faults"]["drawn"]
    injected = stats["faults"]["injected"]
    assert counted.reasons["http_503"] == injected["http503"]  # answered at once: never in flight
    assert counted.reasons["stall"] <= injected["stall"]
    assert counted.reasons["stream_broken"] <= injected["reset"]
    assert counted.reasons["error_event"] <= injected["error_event"]
    assert set(counted.reasons) <= {"http_503", "stall", "stream_broken", "error_event"}
