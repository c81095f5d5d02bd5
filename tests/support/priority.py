"""Give a test's client the CPU first: its own session, with a raised autogroup priority.

Linux with autogroup (`/proc/sys/kernel/sched_autogroup_enabled`) shares the CPUs fairly between
sessions first and only then between the processes of a session by their nice values, so
`os.nice` alone does nothing against other sessions' work: a real server started in its own
session (vLLM's CPU build, `vllm_server`) or another user's job takes its half of the cores
whatever the client's nice says. Measured on the 2-core host: `gputui run` pinned alone on a
core with `nice -20` still ran 24-39 % of the time and waited 58-78 % in the run queue; in its own
session with the autogroup at -15 it ran 94 % and waited 4 %.

`first_in_line(nice)` is a `preexec_fn`: the child starts a session and sets that session's
autogroup nice. Lowering a nice needs CAP_SYS_NICE; where it is refused (or there is no
autogroup) the child just runs in its own session at the default priority.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path

AUTOGROUP = Path("/proc/self/autogroup")
CLIENT_NICE = -10
"""Weight 9548 against a nice-0 session's 1024: the client runs when it is ready."""


def first_in_line(nice: int = CLIENT_NICE, *, cores: set[int] | None = None) -> Callable[[], None]:
    """A `preexec_fn`: a new session whose autogroup runs at `nice` (and pinned to `cores`)."""

    def setup() -> None:
        os.setsid()
        if cores is not None:
            os.sched_setaffinity(0, cores)
        with contextlib.suppress(OSError):  # no CAP_SYS_NICE, or no autogroup: default priority
            AUTOGROUP.write_text(str(nice))

    return setup
