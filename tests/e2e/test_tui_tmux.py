"""The installed `gputui tui` in tmux against the simulator: real keys in, a snapshot out."""

from __future__ import annotations

import re
import shlex
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gputui.sim.runner import SimProcess
from gputui.snapshot.store import load_snapshot
from tests.e2e.tmux import GPUTUI, needs_tmux, tmux, tmux_session, wait_for

pytestmark = [pytest.mark.e2e, needs_tmux]


@pytest.fixture
def session() -> Iterator[str]:
    """A tmux session name of our own, killed afterwards (never any other)."""
    with tmux_session() as own:
        yield own.name


def test_step_up_three_times_save_with_a_label_and_quit(
    fixed_sim: SimProcess, tmp_path: Path, session: str
) -> None:
    command = shlex.join(
        [
            str(GPUTUI),
            "tui",
            "--url",
            fixed_sim.url,
            "--model",
            "sim",
            "--snapshot-dir",
            str(tmp_path),
            "--input-tokens",
            "16",
            "--output-tokens",
            "8",
            "--warmup-seconds",
            "0.3",
        ]
    )
    tmux("new-session", "-d", "-s", session, "-x", "160", "-y", "48",
          f"{command}; echo GPUTUI-EXIT=$?; sleep 60")  # fmt: skip

    def pane() -> str:
        return tmux("capture-pane", "-p", "-t", session)

    wait_for(pane, lambda s: "step 1" in s and "in flight" in s)
    for level in (2, 4, 8):
        time.sleep(1.5)  # let each step gather requests past its warm-up
        tmux("send-keys", "-t", session, "+")
        wait_for(pane, lambda s, lv=level: f"● {lv} concurrent" in s)  # type: ignore[misc]
    tmux("send-keys", "-t", session, "s")
    wait_for(pane, lambda s: "Save a snapshot" in s and "enter save" in s)
    time.sleep(0.5)  # the dialog's input takes the focus just after it is first drawn
    tmux("send-keys", "-t", session, "C-u")
    tmux("send-keys", "-t", session, "-l", "e2e label")
    tmux("send-keys", "-t", session, "Enter")
    wait_for(lambda: " ".join(p.name for p in tmp_path.glob("*.json")), lambda s: "e2e-label" in s)
    labelled = load_snapshot(next(tmp_path.glob("*-e2e-label.json")))
    assert labelled.label == "e2e label"
    assert [s.level for s in labelled.steps] == [1, 2, 4]

    tmux("send-keys", "-t", session, "q")
    screen = wait_for(pane, lambda s: "GPUTUI-EXIT=" in s)
    assert "GPUTUI-EXIT=0" in screen
    assert "Traceback" not in screen
    (line,) = [x for x in screen.splitlines() if "snapshot written to" in x]
    final = load_snapshot(line.split("snapshot written to ", 1)[1].strip())
    assert [s.level for s in final.steps] == [1, 2, 4, 8]
    assert all(s.requests_ok > 0 and s.requests_failed == 0 for s in final.steps[:3]), [
        (s.requests_ok, s.requests_failed, s.errors) for s in final.steps
    ]
    assert not list(tmp_path.glob("*.journal"))


def test_a_dropped_terminal_saves_the_session(
    fixed_sim: SimProcess, tmp_path: Path, session: str
) -> None:
    """SIGHUP (the SSH session dropped: here tmux closes the terminal) saves, like q."""
    command = shlex.join(
        [str(GPUTUI), "tui", "--url", fixed_sim.url, "--model", "sim",
         "--snapshot-dir", str(tmp_path), "--output-tokens", "8", "--warmup-seconds", "0.3"]
    )  # fmt: skip
    tmux("new-session", "-d", "-s", session, "-x", "100", "-y", "30", command)

    def pane() -> str:
        return tmux("capture-pane", "-p", "-t", session)

    wait_for(pane, lambda s: "step 1" in s)
    time.sleep(1.5)
    tmux("send-keys", "-t", session, "+")
    wait_for(pane, lambda s: "● 2 concurrent" in s)
    time.sleep(1.0)
    tmux("kill-session", "-t", session)
    names = wait_for(lambda: " ".join(p.name for p in tmp_path.glob("*.json")), bool)
    assert names.endswith("-session.json")
    snap = load_snapshot(next(tmp_path.glob("*.json")))
    assert snap.interrupted_by == "SIGHUP"
    assert [s.level for s in snap.steps] == [1, 2]
    wait_for(lambda: " ".join(p.name for p in tmp_path.glob("*.journal")), lambda s: not s)

    def still_running() -> str:
        found = subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True, text=True)
        return found.stdout.strip()

    wait_for(still_running, lambda pids: not pids)  # the hung-up TUI exits, it does not linger


HEADER_ITEMS = [
    r"● \d+ concurrent ×\d+",
    r"step \d+ \d+s( AUTO| HOLD)? (paused|settling( ≤\d+ s)?|measuring n=\d+( ±(open|[\d.]+ %))?)",
    r"no step open \(\+ - to measure\)",
    r"stopped",
    r"(P95|error-rate) verdict: \d+ of \d+ requests(, ~\d+ s)?",
    r"SLA verdict: (pass|fail) \(n=\d+\)",
    r"SLA verdict: inconclusive on \d+ requests \(.+\)",
    r"in flight \d+",
    r"\d+:\d\d:\d\d",
    r"cpu engine \d+% ui (\d+%|-)",
    r"http://127\.0\.0\.1:\d+",
    r"sim",
    r"capacity ~?[\d.]+(/s)?( provisional)?( \([\d.]+(/s)?: (pass|fail|inconclusive)\))?( · .+)?",
    r"prompts (approximate|reused|share prefixes)",
    r"SLA TTFT p95 .+ · TPOT p95 .+",
    r"price (none \(e sets it\)|[\d.]+/h)",
    r"cost .+/M out tok( at [\d.]+(/s)?)?",
    r"backend .+",
    r"GPU .+",
    r"saved \S+\.json",
]
"""Every item the header may show, whole: an item cut at the edge matches none of them."""


def test_at_80x24_the_header_fits_and_every_key_is_in_the_footer(
    fixed_sim: SimProcess, tmp_path: Path, session: str
) -> None:
    from gputui.ui.screens.live import LiveScreen

    command = shlex.join(
        [str(GPUTUI), "tui", "--url", fixed_sim.url, "--model", "sim",
         "--snapshot-dir", str(tmp_path), "--input-tokens", "16", "--output-tokens", "8",
         "--warmup-seconds", "0.3"]
    )  # fmt: skip
    tmux("new-session", "-d", "-s", session, "-x", "80", "-y", "24",
         f"{command}; echo GPUTUI-EXIT=$?; sleep 60")  # fmt: skip

    def pane() -> str:
        return tmux("capture-pane", "-p", "-t", session)

    wait_for(pane, lambda s: "step 1" in s and "in flight" in s)
    for level in (2, 4):
        time.sleep(1.5)
        tmux("send-keys", "-t", session, "+")
        wait_for(pane, lambda s, lv=level: f"● {lv} concurrent" in s)  # type: ignore[misc]
    screen = wait_for(pane, lambda s: "step 3" in s and "measuring n=" in s)
    rows = screen.splitlines()
    assert len(rows) == 24
    header = rows[:3]
    for row in header:
        assert len(row) <= 80
        items = [item for item in re.split(r"\s{2,}", row.strip()) if item]
        for item in items:
            assert any(re.fullmatch(p, item) for p in HEADER_ITEMS), (item, header)
    footer = " ".join(rows[-3:])  # the footer grows to three rows rather than hide a key
    for binding in LiveScreen.BINDINGS:
        assert not isinstance(binding, tuple)
        if binding.show:
            assert f" {binding.description}" in footer, (binding.description, rows[-3:])
    assert " o Sessions" in footer and " h Hold" in footer and " a Auto" in footer
    tmux("send-keys", "-t", session, "q")
    screen = wait_for(pane, lambda s: "GPUTUI-EXIT=" in s)
    assert "GPUTUI-EXIT=0" in screen and "Traceback" not in screen


def test_a_tui_that_never_reached_its_server_exits_non_zero(tmp_path: Path, session: str) -> None:
    """Nothing measured is a failure: `q` on a target that never answered exits 1, and says so."""
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = shlex.join(
        [str(GPUTUI), "tui", "--url", f"http://127.0.0.1:{port}", "--model", "sim",
         "--snapshot-dir", str(tmp_path), "--gpu-telemetry", "none"]
    )  # fmt: skip
    tmux("new-session", "-d", "-s", session, "-x", "120", "-y", "40",
         f"{command}; echo GPUTUI-EXIT=$?; sleep 60")  # fmt: skip

    def pane() -> str:
        return tmux("capture-pane", "-p", "-t", session)

    wait_for(pane, lambda s: "unreachable" in s)
    tmux("send-keys", "-t", session, "q")
    screen = wait_for(pane, lambda s: "GPUTUI-EXIT=" in s)
    assert "GPUTUI-EXIT=1" in screen
    assert f"gputui: never reached http://127.0.0.1:{port} (unreachable:" in screen
    assert "Traceback" not in screen
