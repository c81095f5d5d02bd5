"""The installed `gputui tui` in tmux against the simulator: real keys in, a snapshot out."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gputui.sim.runner import SimProcess
from gputui.snapshot.store import load_snapshot

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]

GPUTUI = Path(sys.executable).with_name("gputui")


def _tmux(*args: str) -> str:
    done = subprocess.run(["tmux", *args], capture_output=True, text=True, timeout=10, check=True)
    return done.stdout


@pytest.fixture
def session() -> Iterator[str]:
    """A tmux session name of our own, killed afterwards (never any other)."""
    name = f"gputui-e2e-{uuid.uuid4().hex[:8]}"
    yield name
    subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True, timeout=10)


def _wait(pane: Callable[[], str], check: Callable[[str], bool], timeout_s: float = 30) -> str:
    deadline = time.monotonic() + timeout_s
    while True:
        text = pane()
        if check(text):
            return text
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out; the screen was:\n{text}")
        time.sleep(0.2)


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
    _tmux("new-session", "-d", "-s", session, "-x", "160", "-y", "48",
          f"{command}; echo GPUTUI-EXIT=$?; sleep 60")  # fmt: skip

    def pane() -> str:
        return _tmux("capture-pane", "-p", "-t", session)

    _wait(pane, lambda s: "step 1" in s and "in flight" in s)
    for level in (2, 4, 8):
        time.sleep(1.5)  # let each step gather requests past its warm-up
        _tmux("send-keys", "-t", session, "+")
        _wait(pane, lambda s, lv=level: f"● {lv} concurrent" in s)  # type: ignore[misc]
    _tmux("send-keys", "-t", session, "s")
    _wait(pane, lambda s: "Save a snapshot" in s and "enter save" in s)
    time.sleep(0.5)  # the dialog's input takes the focus just after it is first drawn
    _tmux("send-keys", "-t", session, "C-u")
    _tmux("send-keys", "-t", session, "-l", "e2e label")
    _tmux("send-keys", "-t", session, "Enter")
    _wait(lambda: " ".join(p.name for p in tmp_path.glob("*.json")), lambda s: "e2e-label" in s)
    labelled = load_snapshot(next(tmp_path.glob("*-e2e-label.json")))
    assert labelled.label == "e2e label"
    assert [s.level for s in labelled.steps] == [1, 2, 4]

    _tmux("send-keys", "-t", session, "q")
    screen = _wait(pane, lambda s: "GPUTUI-EXIT=" in s)
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
    _tmux("new-session", "-d", "-s", session, "-x", "100", "-y", "30", command)

    def pane() -> str:
        return _tmux("capture-pane", "-p", "-t", session)

    _wait(pane, lambda s: "step 1" in s)
    time.sleep(1.5)
    _tmux("send-keys", "-t", session, "+")
    _wait(pane, lambda s: "● 2 concurrent" in s)
    time.sleep(1.0)
    _tmux("kill-session", "-t", session)
    names = _wait(lambda: " ".join(p.name for p in tmp_path.glob("*.json")), bool)
    assert names.endswith("-session.json")
    snap = load_snapshot(next(tmp_path.glob("*.json")))
    assert snap.interrupted_by == "SIGHUP"
    assert [s.level for s in snap.steps] == [1, 2]
    _wait(lambda: " ".join(p.name for p in tmp_path.glob("*.journal")), lambda s: not s)

    def still_running() -> str:
        found = subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True, text=True)
        return found.stdout.strip()

    _wait(still_running, lambda pids: not pids)  # the hung-up TUI exits, it does not linger
