"""`gputui run` keeps a crash journal: a `kill -9` mid-sweep loses no flushed request."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from gputui.sim.runner import SimProcess
from gputui.snapshot.recovery import find_leftovers, read_contents
from gputui.snapshot.store import load_snapshot
from tests.integration.test_run_cli import GPUTUI, run_args, wait_for_line


def test_kill_9_mid_sweep_recovers_every_journalled_request(
    fixed_sim: SimProcess, tmp_path: Path
) -> None:
    out = tmp_path / "killed.json"
    proc = subprocess.Popen(
        run_args(
            fixed_sim.url,
            out,
            "--concurrency",
            "2,4",
            "--step-seconds",
            "3",
            "--warmup-seconds",
            "0",
            "--price-per-hour",
            "5",
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for_line(proc, "step 1 ", timeout_s=40)  # step 1 is finished: step 2 runs
        time.sleep(1.6)  # at least one journal flush (once a second) inside step 2
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert not out.exists()
    (leftover,) = find_leftovers(tmp_path)
    journal = read_contents(leftover.path)
    by_step = [sum(1 for r in journal.requests if r["step"] == i) for i in (0, 1)]
    assert by_step[0] > 20 and by_step[1] > 0  # the step the kill cut short has requests
    assert len(journal.steps) == 1

    result = subprocess.run(
        [*GPUTUI, "sessions", "--recover", "--dir", str(tmp_path), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "recovered snapshot written to" in result.stderr
    assert not list(tmp_path.glob("*.journal"))
    (recovered,) = tmp_path.glob("*-recovered.json")
    assert recovered.name in result.stdout  # `gputui sessions` lists it
    snap = load_snapshot(recovered)
    extra = snap.model_extra or {}
    assert extra["totals"]["requests"] == len(journal.requests)
    assert snap.price_per_hour == 5
    first, second = snap.steps
    assert not first.incomplete and second.incomplete
    assert (second.index, second.level) == (1, 4)
    # every journalled request of the cut step sent once its level ran is in it (warm-up 0: all
    # are measured); those sent during the hand-over are step 0's load, run on unmeasured, and
    # in no step (issue 28's isolation)
    level_start = int(str([x for x in journal.loads if x["index"] == 1][-1]["measure_ns"]))
    measured = sum(
        1 for r in journal.requests if r["step"] == 1 and int(str(r["sent_ns"])) >= level_start
    )
    assert 0 < measured <= by_step[1]
    assert second.requests_ok + second.requests_failed == measured
    assert second.ttft_s.p50 is not None and 0.015 < second.ttft_s.p50 < 0.2


def test_run_defaults_out_model_and_lengths_to_the_tuis(
    fixed_sim: SimProcess, tmp_path: Path
) -> None:
    result = subprocess.run(
        [*GPUTUI, "run", "--url", fixed_sim.url, "--concurrency", "2", "--step-seconds", "1",
         "--output-tokens", "8", "--snapshot-dir", str(tmp_path), "--label", "no out"],
        capture_output=True,
        text=True,
        timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    (saved,) = tmp_path.glob("*-no-out.json")  # named like the TUI's files
    snap = load_snapshot(saved)
    assert snap.target.model == "sim"  # the only model the simulator serves
    assert snap.workload.input_tokens == 512  # the TUI's default
    assert (snap.sla.ttft_p95_s, snap.sla.tpot_p95_s) == (1.0, 0.035)
    assert not list(tmp_path.glob("*.journal"))  # deleted after the clean save
    listed = subprocess.run(
        [*GPUTUI, "sessions", "--dir", str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert "no out" in listed.stdout


def test_the_next_run_recovers_what_a_killed_session_left(
    fixed_sim: SimProcess, tmp_path: Path
) -> None:
    from tests.ui.test_journal import _killed_journal

    journal = _killed_journal(tmp_path)  # a TUI or run session killed after one flush
    result = subprocess.run(
        run_args(fixed_sim.url, tmp_path / "next.json", "--concurrency", "1",
                 "--step-seconds", "0.5", "--warmup-seconds", "0"),
        capture_output=True,
        text=True,
        timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    (recovered,) = tmp_path.glob("*-recovered.json")
    assert f"recovered snapshot written to {recovered}" in result.stdout
    assert not journal.exists()
    assert [s.level for s in load_snapshot(recovered).steps] == [1, 2, 4]
    assert load_snapshot(tmp_path / "next.json").complete
