"""How long this process waited for a CPU (Linux schedstat), beside how long it ran.

A late event loop has two causes that call for opposite remedies: the client's own work fills its
core (more `--workers` help), or other processes hold the CPUs while the client waits in the run
queue (more workers only add waiters). `time.process_time()` tells the first; the kernel's
per-thread `schedstat` (second field: nanoseconds spent runnable but waiting for a CPU) tells the
second. `run_wait_s()` sums it over this process's threads (read by the engine with each status,
so it works wherever the engine runs); `cpu_pressure()` reads the host-wide PSI line
(`/proc/pressure/cpu`, "some avg10": the share of the last 10 s in which some task waited).
Both return None where the kernel does not provide them (not Linux, schedstats off).

A loop that was late while the process neither ran nor waited for a CPU was stalled: `GcPauses`
times this process's garbage collections (`gc.callbacks`) and `steal_ticks()` reads the host's
steal time (`/proc/stat`: a hypervisor ran someone else on our virtual CPU), the two stalls the
tool can name; what neither explains is a blocking call.
"""

from __future__ import annotations

import gc
import time
from pathlib import Path
from typing import Final, Protocol

_TASKS: Final = "/proc/self/task"
_PSI_CPU: Final = "/proc/pressure/cpu"
_STAT: Final = "/proc/stat"


def run_wait_s() -> float | None:
    """Seconds this process's threads have spent waiting in a run queue so far."""
    try:
        tasks = list(Path(_TASKS).iterdir())
    except OSError:
        return None
    total_ns, seen = 0, False
    for task in tasks:
        try:
            fields = (task / "schedstat").read_bytes().split()
        except OSError:
            continue  # the thread ended meanwhile
        if len(fields) >= 2:
            total_ns += int(fields[1])
            seen = True
    return total_ns / 1e9 if seen else None


def cpu_pressure() -> float | None:
    """Host-wide CPU pressure, % of the last 10 s with some task waiting (PSI "some avg10")."""
    try:
        first = Path(_PSI_CPU).read_text(encoding="ascii").split("\n", 1)[0].split()
    except OSError:
        return None
    for field in first[1:]:
        name, _, value = field.partition("=")
        if name == "avg10":
            try:
                return float(value)
            except ValueError:
                return None
    return None


def steal_ticks() -> tuple[int, int] | None:
    """(steal, all) CPU ticks of the host so far (/proc/stat's `cpu` line); None without it."""
    try:
        with Path(_STAT).open("rb") as stat:
            first = stat.readline().split()
    except OSError:
        return None
    if len(first) < 9 or first[0] != b"cpu":
        return None
    try:
        ticks = [int(x) for x in first[1:9]]  # user .. steal (guest time is inside user)
    except ValueError:
        return None
    return ticks[7], sum(ticks)


class GcPauses:
    """The longest garbage collection of this process since the last `take_max_ns` (ns)."""

    def __init__(self) -> None:
        self._started_ns = 0
        self._max_ns = 0
        gc.callbacks.append(self._on_gc)

    def _on_gc(self, phase: str, _info: dict[str, int]) -> None:
        now = time.perf_counter_ns()
        if phase == "start":
            self._started_ns = now
        elif self._started_ns:
            self._max_ns = max(self._max_ns, now - self._started_ns)
            self._started_ns = 0

    def take_max_ns(self) -> int:
        """The longest pause since the last call, and start over."""
        longest, self._max_ns = self._max_ns, 0
        return longest

    def close(self) -> None:
        """Stop timing (the callback list is the process's)."""
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)


class _Timed(Protocol):
    @property
    def run_wait_s(self) -> float | None: ...

    @property
    def wall_s(self) -> float: ...


def wait_percent(now: _Timed, before: _Timed) -> float | None:
    """Run-queue wait between two engine statuses, in % of wall time (None when unmeasured)."""
    wall = now.wall_s - before.wall_s
    if now.run_wait_s is None or before.run_wait_s is None or wall <= 0:
        return None
    return 100.0 * max(now.run_wait_s - before.run_wait_s, 0.0) / wall
