"""Run the installed `gputui` in a tmux session of our own: keys in, the screen and pids out."""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TypeVar

import pytest

GPUTUI = Path(sys.executable).with_name("gputui")
needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
T = TypeVar("T")


def tmux(*args: str) -> str:
    """One tmux command; its stdout."""
    done = subprocess.run(["tmux", *args], capture_output=True, text=True, timeout=10, check=True)
    return done.stdout


def wait_for(probe: Callable[[], T], check: Callable[[T], bool], timeout_s: float = 30) -> T:
    """Poll `probe` until `check` holds; fail with the last value after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if check(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out; the last value was:\n{value}")
        time.sleep(0.1)


def tui_command(url: str, folder: Path, *extra: str) -> list[str]:
    """`gputui tui` against `url`, saving into `folder`, short requests and no warm-up."""
    return [
        *(str(GPUTUI), "tui", "--url", url, "--model", "sim", "--snapshot-dir", str(folder)),
        *("--input-tokens", "16", "--output-tokens", "16", "--warmup-seconds", "0", *extra),
    ]


class Tmux:
    """One tmux session (never anyone else's): start a command, press keys, read the screen."""

    def __init__(self) -> None:
        self.name = f"gputui-test-{uuid.uuid4().hex[:8]}"

    def start(
        self,
        command: list[str],
        *,
        size: tuple[int, int] = (120, 40),
        env: Mapping[str, str] | None = None,
        status_file: Path | None = None,
    ) -> None:
        """Run `command` in a new session; its exit status goes to `status_file` when given."""
        line = shlex.join(command)
        if status_file is not None:
            line += f"; echo $? > {shlex.quote(str(status_file))}"
        flags = [f"-e{key}={value}" for key, value in (env or {}).items()]
        tmux("new-session", "-d", "-s", self.name, "-x", str(size[0]), "-y", str(size[1]),
             *flags, line)  # fmt: skip

    def screen(self) -> str:
        """The pane's text now."""
        return tmux("capture-pane", "-p", "-t", self.name)

    def wait(self, check: Callable[[str], bool], timeout_s: float = 30) -> str:
        """The screen, once `check` holds for it."""
        return wait_for(self.screen, check, timeout_s)

    def keys(self, *keys: str) -> None:
        """Press keys (tmux key names)."""
        tmux("send-keys", "-t", self.name, *keys)

    def app_pid(self) -> int:
        """The pid of `gputui`: the pane's process (the shell exec'd it) or the shell's child."""
        pane = int(tmux("display-message", "-p", "-t", self.name, "#{pane_pid}").strip())
        if is_gputui(pane):
            return pane
        return wait_for(lambda: [p for p in children(pane) if is_gputui(p)], bool, 10)[0]

    def kill(self) -> None:
        """End the session (the terminal hangs up on what runs in it)."""
        subprocess.run(["tmux", "kill-session", "-t", self.name], capture_output=True, timeout=10)


@contextlib.contextmanager
def tmux_session() -> Iterator[Tmux]:
    """A tmux session, killed afterwards."""
    session = Tmux()
    try:
        yield session
    finally:
        session.kill()


def children(pid: int) -> list[int]:
    """Child pids of `pid` (pgrep -P)."""
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True, timeout=10)
    return [int(p) for p in found.stdout.split()]


def is_gputui(pid: int) -> bool:
    """The process runs the `gputui` script (not a shell or a load engine)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except FileNotFoundError:
        return False
    return any(arg.decode(errors="replace").endswith("/gputui") for arg in argv[:2])


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state != "Z"


def lingering(folder: Path) -> list[int]:
    """Processes whose command line names `folder` (a `gputui tui` that did not exit)."""
    found = subprocess.run(["pgrep", "-f", str(folder)], capture_output=True, text=True, timeout=10)
    return [int(p) for p in found.stdout.split() if int(p) != os.getpid() and alive(int(p))]
