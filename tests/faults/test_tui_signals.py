"""The operator's faults against the TUI: SIGINT, SIGTERM or SIGHUP to `gputui tui` (in tmux)
while the server misbehaves, and kill -9, after which the journal gives the session back.

A signal saves a snapshot of everything that finished, marked `interrupted_by`, and the process
(and its load engine) exits with 128 + the signal's number; kill -9 leaves the journal, from which
the next `gputui tui` recovers every request that was flushed before the kill.
"""

from __future__ import annotations

import os
import signal
from collections import Counter
from pathlib import Path

import orjson
import pytest

from gputui.sim.faults import EXPECTED_REASON, FaultSpec
from gputui.sim.fixed import FixedProfileSpec
from gputui.sim.runner import start_background
from gputui.snapshot.store import load_snapshot
from tests.e2e.tmux import (
    alive,
    children,
    lingering,
    needs_tmux,
    tmux_session,
    tui_command,
    wait_for,
)
from tests.faults.harness import sim_stats, tally

pytestmark = [pytest.mark.timeout(60), pytest.mark.e2e, needs_tmux]

FAULTS = FaultSpec(
    {"reset": 0.05, "http503": 0.05, "error_event": 0.05, "garbage": 0.05, "slow_start": 0.05},
    seed=3,
    slow_start_ms=200.0,
)
"""Every fault that ends on its own (no stall: the TUI keeps the client's default stall timeout)."""
PROFILE = FixedProfileSpec(ttft_ms=20, itl_ms=2, served_model_name="sim")
REASONS = {EXPECTED_REASON[name] for name in FAULTS.probabilities} - {None}


def _files(folder: Path, pattern: str) -> list[Path]:
    return sorted(folder.glob(pattern))


def _status(path: Path) -> str:
    return path.read_text().strip() if path.exists() else ""


@pytest.mark.parametrize(
    "sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name
)
def test_a_signal_saves_every_finished_request(tmp_path: Path, sig: signal.Signals) -> None:
    folder = tmp_path / "snapshots"
    status = tmp_path / "status"
    with start_background(PROFILE, faults=FAULTS) as sim, tmux_session() as tui:
        tui.start(tui_command(sim.url, folder, "--start-level", "4"), status_file=status)
        tui.wait(lambda s: "step 1" in s and "in flight" in s)
        pid = tui.app_pid()
        engine = wait_for(lambda: children(pid), bool, 10)
        wait_for(lambda: sim_stats(sim.url)["faults"]["drawn"], lambda n: n >= 40, 10)
        tui.keys("+")
        tui.wait(lambda s: "● 8 concurrent" in s)
        wait_for(lambda: sim_stats(sim.url)["faults"]["drawn"], lambda n: n >= 80, 10)
        os.kill(pid, sig)
        code = wait_for(lambda: _status(status), bool, 30)
        stats = sim_stats(sim.url)
    assert int(code) == 128 + sig
    (path,) = _files(folder, "*.json")
    assert not _files(folder, "*.journal")  # saved cleanly: the journal is gone
    snap = load_snapshot(path)
    assert snap.interrupted_by == sig.name and not snap.complete
    first, second = snap.steps
    assert (first.level, second.level) == (4, 8)
    assert not first.incomplete and second.incomplete
    counted = tally(snap)  # each step self-consistent: errors by reason sum to its failures
    # Every request the server drew is in the snapshot once: ok, failed by reason, or cancelled
    # (in flight at the signal). A request cancelled before its bytes left may not have reached
    # the server, so only the finished ones must all be there.
    drawn = stats["faults"]["drawn"]
    assert (
        counted.ok + counted.failed <= drawn <= counted.ok + counted.failed + counted.cancelled
    ), (
        counted,
        stats,
    )
    assert first.requests_ok + first.requests_failed > 0
    injected = stats["faults"]["injected"]
    assert set(counted.reasons) <= REASONS
    assert counted.reasons["http_503"] == injected["http503"]  # answered at once: never cancelled
    for fault in ("reset", "error_event", "garbage"):
        reason = EXPECTED_REASON[fault]
        assert reason is not None
        assert injected[fault] - counted.cancelled <= counted.reasons[reason] <= injected[fault]
    # The TUI and its load engine are gone, not lingering on a dead terminal.
    wait_for(lambda: [p for p in (pid, *engine) if alive(p)], lambda left: not left, 10)
    wait_for(lambda: lingering(folder), lambda pids: not pids, 10)  # the shell may still be exiting


def test_kill_9_leaves_a_journal_the_next_start_recovers(tmp_path: Path) -> None:
    folder = tmp_path / "snapshots"
    with start_background(PROFILE, faults=FAULTS) as sim:
        with tmux_session() as tui:
            tui.start(tui_command(sim.url, folder, "--start-level", "4", "--label", "killed"))
            tui.wait(lambda s: "step 1" in s and "in flight" in s)
            pid = tui.app_pid()
            engine = wait_for(lambda: children(pid), bool, 10)
            wait_for(lambda: sim_stats(sim.url)["faults"]["drawn"], lambda n: n >= 40, 10)
            tui.keys("+")
            tui.wait(lambda s: "● 8 concurrent" in s)
            (journal,) = _files(folder, "*.journal")
            # Step 1's line is flushed (about once a second) with its requests before it.
            wait_for(lambda: journal.read_bytes(), lambda b: b'"kind":"step"' in b, 10)
            os.kill(pid, signal.SIGKILL)
            wait_for(lambda: [p for p in (pid, *engine) if alive(p)], lambda left: not left, 10)
        drawn = sim_stats(sim.url)["faults"]["drawn"]
        lines = [orjson.loads(raw) for raw in journal.read_bytes().splitlines()]
        requests = [line for line in lines if line["kind"] == "request"]
        (step,) = [line["step"] for line in lines if line["kind"] == "step"]
        # Nothing is lost but the last flush window: requests that ended in the second before the
        # kill, or were in flight (at most 8).
        span_s = max(r["sent_ms"] for r in requests) / 1000
        assert len(requests) <= drawn <= len(requests) + 8 + 1.5 * len(requests) / span_s
        in_step = [r for r in requests if r["step"] == 0]
        assert step["requests_ok"] == sum(r["ok"] for r in in_step)
        assert step["requests_failed"] == sum(not r["ok"] for r in in_step)
        assert step["errors"] == dict(Counter(r["err"] for r in in_step if not r["ok"]))
        assert {r["err"] for r in requests if not r["ok"]} <= REASONS

        status = tmp_path / "status"
        with tmux_session() as again:
            again.start(tui_command(sim.url, folder), status_file=status)
            dialog = again.wait(lambda s: "ended without saving" in s)
            assert f"1 finished steps, {len(requests)} requests" in dialog
            again.keys("r")
            (recovered,) = wait_for(lambda: _files(folder, "*-recovered.json"), bool, 10)
            again.keys("q")
            assert wait_for(lambda: _status(status), bool, 30) == "0"
    snap = load_snapshot(recovered)
    assert snap.label == "killed" and not snap.complete
    assert snap.interrupted_by == "lost (recovered from the journal)"
    finished, cut = snap.steps  # the step the kill cut short is rebuilt from its requests
    assert finished.model_dump(mode="json") == step
    assert cut.incomplete and cut.level == 8
    in_cut = [r for r in requests if r["step"] == cut.index]
    assert cut.requests_ok + cut.requests_failed <= len(in_cut)  # less those of its warm-up
    assert snap.model_extra is not None
    assert snap.model_extra["recovered_from"]["requests"] == len(requests)
    assert not journal.exists()
    wait_for(lambda: lingering(folder), lambda pids: not pids, 10)  # the shell may still be exiting
