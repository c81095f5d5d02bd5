"""A session killed with SIGKILL mid-step recovers as the snapshot a SIGHUP would have saved.

Both front ends, each as a real process against the A100 simulator: one run of the shape is
killed with kill -9 inside its second step and recovered (`gputui sessions --recover`), another
is hung up (SIGHUP) at the same point and saves. The recovered file has the same sections, its
steps account for every journalled request (the open step included, marked incomplete), the
same GPU, and `compare` reads its peak VRAM and temperature; and it holds every request the
server completed before the kill, less at most the last second of journal writes.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from gputui.sim.gpu_profile import GpuProfileSpec
from gputui.sim.runner import SimProcess, start_background
from tests.e2e.tmux import GPUTUI as GPUTUI_SCRIPT
from tests.e2e.tmux import needs_tmux, tmux_session, wait_for
from tests.integration.test_run_cli import wait_for_line

GPUTUI = [sys.executable, "-m", "gputui"]
GPU_NAME = "NVIDIA A100 80GB PCIe"
LOSS_WINDOW_S = 1.25
"""What a kill may lose: the journal's 1 s fsync interval (`session.journalling`),
the engine's 0.1 s record batches, and the moment between the kill and reading the server."""
LIVE_ONLY = {"recovered_from", "created_at", "gputui_version"}
"""Top-level keys whose presence differs by design between a recovered and a saved file."""

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def a100_sim() -> Iterator[SimProcess]:
    spec = GpuProfileSpec(gpu="a100-80gb-pcie", model="llama-3.1-8b", served_model_name="sim")
    with start_background(spec) as sim:
        yield sim


def _completed(sim: SimProcess) -> int:
    """Requests the server finished (not aborted): vLLM's `request_success_total` counter."""
    text = httpx.get(f"{sim.url}/metrics", timeout=5).text
    found = [
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("vllm:request_success_total{")
        and re.search(r'finished_reason="(length|stop)"', line)
    ]
    assert found, "the simulator's /metrics has no request_success_total"
    return int(sum(found))


def _sections(doc: dict[str, Any]) -> set[str]:
    return {k for k, v in doc.items() if v not in (None, [], {}) and k not in LIVE_ONLY}


def _step_count(step: dict[str, Any]) -> int:
    return int(step["requests_ok"] + step["requests_failed"] + step.get("requests_warmup", 0))


def _compare_row(path: Path) -> dict[str, Any]:
    done = subprocess.run(
        [*GPUTUI, "compare", "--format", "json", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    rows: list[dict[str, Any]] = orjson.loads(done.stdout)["rows"]
    assert len(rows) == 1
    return rows[0]


def _recover(folder: Path) -> dict[str, Any]:
    done = subprocess.run(
        [*GPUTUI, "sessions", "--recover", "--dir", str(folder)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    (recovered,) = folder.glob("*-recovered.json")
    return dict(orjson.loads(recovered.read_bytes()))


def _assert_like_a_saved_file(
    recovered: dict[str, Any], saved: dict[str, Any], completed: int, folder: Path
) -> int:
    """The shared assertions; returns how many server-completed requests the kill lost."""
    assert _sections(recovered) == _sections(saved)
    totals = recovered["totals"]["requests"]
    steps = recovered["steps"]
    assert sum(_step_count(s) for s in steps) == totals
    assert steps[-1]["incomplete"] and steps[-1]["index"] == 1
    assert _step_count(steps[-1]) > 0  # the open step keeps its requests
    assert [s["level"] for s in steps] == [s["level"] for s in saved["steps"]]
    assert (
        recovered["hardware"]["gpus"][0]["name"] == GPU_NAME == saved["hardware"]["gpus"][0]["name"]
    )
    row = _compare_row(next(folder.glob("*-recovered.json")))
    assert row["gpu_name"] == GPU_NAME
    assert row["peak_vram_used_bytes"] and row["peak_vram_used_bytes"] > 70e9
    assert row["max_temperature_c"] and row["max_temperature_c"] > 20
    assert completed > 0
    lost: int = completed - totals
    rate = totals / max(sum(s["duration_s"] + s["warmup_s"] for s in steps), 1e-9)
    # (negative only by requests done before the baseline read, as the journal appeared)
    assert -(rate * 0.5 + 2) <= lost <= rate * LOSS_WINDOW_S + 2, (completed, totals, rate)
    print(f"completed {completed} journalled {totals} lost {lost} (rate {rate:.1f}/s)")
    return lost


def _run(sim: SimProcess, folder: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*GPUTUI, "run", "--url", sim.url, "--model", "sim", "--concurrency", "4,8",
         "--step-seconds", "4", "--input-tokens", "64", "--output-tokens", "16",
         "--price-per-hour", "5", "--snapshot-dir", str(folder)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip


def _baseline(sim: SimProcess, folder: Path) -> int:
    """The server's count once the journal exists (calibration done, no load sent yet)."""
    wait_for(lambda: list(folder.glob("*.journal")), bool, timeout_s=60)
    return _completed(sim)


def _interrupt_run(sim: SimProcess, folder: Path, sig: signal.Signals) -> int:
    """A run signalled 2 s into its second step; the server's completed count up to then."""
    proc = _run(sim, folder)
    try:
        before = _baseline(sim, folder)
        wait_for_line(proc, "step 1 ", timeout_s=90)  # the first step is done
        time.sleep(2.0)
        os.kill(proc.pid, sig)
        completed = _completed(sim) - before
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)
    return completed


def test_gputui_run_killed_mid_step_recovers_what_a_sighup_saves(
    a100_sim: SimProcess, tmp_path: Path
) -> None:
    saved_dir, killed_dir = tmp_path / "saved", tmp_path / "killed"
    _interrupt_run(a100_sim, saved_dir, signal.SIGHUP)
    (saved_file,) = saved_dir.glob("*.json")
    saved = dict(orjson.loads(saved_file.read_bytes()))
    assert saved["interrupted_by"] == "SIGHUP"

    completed = _interrupt_run(a100_sim, killed_dir, signal.SIGKILL)
    assert not list(killed_dir.glob("*.json"))
    recovered = _recover(killed_dir)
    _assert_like_a_saved_file(recovered, saved, completed, killed_dir)


def _tui_session(sim: SimProcess, folder: Path, end: Callable[[int], None]) -> tuple[int, int]:
    """The TUI stepped once (4 -> 8 streams) and ended by `end(pid)` 2 s into that step."""
    command = [
        str(GPUTUI_SCRIPT), "tui", "--url", sim.url, "--model", "sim", "--snapshot-dir",
        str(folder), "--start-level", "4", "--input-tokens", "64", "--output-tokens", "16",
        "--price-per-hour", "5",
    ]  # fmt: skip
    with tmux_session() as tmux:
        tmux.start(command, size=(160, 48))
        before = _baseline(sim, folder)
        tmux.wait(lambda s: "step 1" in s and "in flight" in s, timeout_s=60)
        time.sleep(3.0)
        tmux.keys("+")
        tmux.wait(lambda s: "● 8 concurrent" in s)
        time.sleep(2.0)
        pid = tmux.app_pid()
        end(pid)
        completed = _completed(sim) - before
        wait_for(Path(f"/proc/{pid}").exists, lambda alive: not alive, timeout_s=60)
    return completed, pid


@needs_tmux
@pytest.mark.e2e
def test_the_tui_killed_mid_step_recovers_what_a_sighup_saves(
    a100_sim: SimProcess, tmp_path: Path
) -> None:
    saved_dir, killed_dir = tmp_path / "saved", tmp_path / "killed"
    _tui_session(a100_sim, saved_dir, lambda pid: os.kill(pid, signal.SIGHUP))
    saved_file = wait_for(lambda: list(saved_dir.glob("*.json")), bool)[0]
    saved = dict(orjson.loads(saved_file.read_bytes()))
    assert saved["interrupted_by"] == "SIGHUP"

    completed, _ = _tui_session(a100_sim, killed_dir, lambda pid: os.kill(pid, signal.SIGKILL))
    assert not list(killed_dir.glob("*.json"))
    recovered = _recover(killed_dir)
    _assert_like_a_saved_file(recovered, saved, completed, killed_dir)
