"""The host gputui runs on, from /proc: CPU (total and busiest core), memory, swap and swapping.

Contract: `HostSource(proc_root)` reads /proc/stat, /proc/meminfo and /proc/vmstat (Linux only;
elsewhere it raises `TelemetryUnavailable`). CPU percentages and swap rates are deltas since the
previous `sample()` (the constructor takes the first reading, so the first sample already has
them). `host_pressure(sample)` says in words when the host, not the GPU, may be the limit: a pegged
core (a single-threaded server loop or tokenizer), an exhausted CPU, or a swapping host explain
"new GPU, same throughput". No psutil: three small text files give everything needed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from gputui.errors import TelemetryUnavailable
from gputui.telemetry.samples import HostSample

BUSIEST_CORE_PCT: Final = 95.0
"""A core this busy is pegged: a single-threaded component is at its limit."""
ALL_CORES_PCT: Final = 90.0
MEM_USED_FRACTION: Final = 0.95
SWAP_PAGES_PER_S: Final = 10.0
"""Sustained paging above this rate means the host is swapping, not just holding old pages."""


@dataclass(frozen=True, slots=True)
class _CpuTimes:
    busy: int
    total: int


def parse_stat(text: str) -> tuple[_CpuTimes | None, list[_CpuTimes]]:
    """(all CPUs, each core) jiffies from /proc/stat; busy counts steal (the VM was starved)."""
    overall: _CpuTimes | None = None
    cores: list[_CpuTimes] = []
    for line in text.splitlines():
        if not line.startswith("cpu"):
            continue
        label, *fields = line.split()
        values = [int(v) for v in fields[:8]]  # guest time is already inside user time
        values += [0] * (8 - len(values))
        idle = values[3] + values[4]  # idle + iowait
        times = _CpuTimes(busy=sum(values) - idle, total=sum(values))
        if label == "cpu":
            overall = times
        else:
            cores.append(times)
    return overall, cores


def parse_kv_file(text: str) -> dict[str, int]:
    """`Name: value [kB]` or `name value` lines (meminfo, vmstat) as integers, kB -> bytes."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.replace(":", " ").split()
        if len(parts) < 2:
            continue
        try:
            value = int(parts[1])
        except ValueError:
            continue
        out[parts[0]] = value * 1024 if len(parts) > 2 and parts[2] == "kB" else value
    return out


def _pct(now: _CpuTimes, before: _CpuTimes) -> float | None:
    total = now.total - before.total
    if total <= 0:
        return None
    return 100.0 * max(0, now.busy - before.busy) / total


class HostSource:
    """CPU, memory and swap of this machine (see the module docstring)."""

    name = "host"

    def __init__(
        self, proc_root: Path = Path("/proc"), *, clock: Callable[[], int] = time.perf_counter_ns
    ) -> None:
        self._root = proc_root
        self._clock = clock
        if not (proc_root / "stat").is_file():
            raise TelemetryUnavailable(f"{proc_root}/stat not found (host telemetry is Linux-only)")
        self._prev_t_ns = clock()
        self._prev_cpu, self._prev_cores = self._read_cpu()
        self._prev_swap = self._read_swap_pages()

    def _read(self, name: str) -> str:
        try:
            return (self._root / name).read_text()
        except OSError:
            return ""

    def _read_cpu(self) -> tuple[_CpuTimes | None, list[_CpuTimes]]:
        return parse_stat(self._read("stat"))

    def _read_swap_pages(self) -> tuple[int, int] | None:
        vm = parse_kv_file(self._read("vmstat"))
        if "pswpin" not in vm or "pswpout" not in vm:
            return None
        return vm["pswpin"], vm["pswpout"]

    def sample(self) -> HostSample:
        """CPU and swap rates since the previous call; memory now."""
        t_ns = self._clock()
        cpu, cores = self._read_cpu()
        swap = self._read_swap_pages()
        mem = parse_kv_file(self._read("meminfo"))
        dt_s = (t_ns - self._prev_t_ns) / 1e9
        total_pct = None
        if cpu is not None and self._prev_cpu is not None:
            total_pct = _pct(cpu, self._prev_cpu)
        core_pcts = [
            p
            for now, before in zip(cores, self._prev_cores, strict=False)
            if (p := _pct(now, before)) is not None
        ]
        swap_in = swap_out = None
        if swap is not None and self._prev_swap is not None and dt_s > 0:
            swap_in = max(0, swap[0] - self._prev_swap[0]) / dt_s
            swap_out = max(0, swap[1] - self._prev_swap[1]) / dt_s
        self._prev_t_ns, self._prev_cpu, self._prev_cores, self._prev_swap = t_ns, cpu, cores, swap
        mem_total = mem.get("MemTotal")
        available = mem.get("MemAvailable")
        swap_total = mem.get("SwapTotal")
        swap_free = mem.get("SwapFree")
        return HostSample(
            t_ns=t_ns,
            cpu_pct=total_pct,
            cpu_busiest_core_pct=max(core_pcts) if core_pcts else None,
            cpu_count=len(cores) or None,
            mem_used_bytes=None
            if mem_total is None or available is None
            else mem_total - available,
            mem_total_bytes=mem_total,
            swap_used_bytes=None
            if swap_total is None or swap_free is None
            else swap_total - swap_free,
            swap_total_bytes=swap_total,
            swap_in_pages_per_s=swap_in,
            swap_out_pages_per_s=swap_out,
        )

    def close(self) -> None:
        """Nothing to release."""


def host_pressure(sample: HostSample) -> tuple[str, ...]:
    """Plain-words reasons the host itself may be capping throughput (empty when none)."""
    notes = []
    busiest = sample.cpu_busiest_core_pct
    if sample.cpu_pct is not None and sample.cpu_pct >= ALL_CORES_PCT:
        notes.append(f"host CPU saturated ({sample.cpu_pct:.0f}% of all cores)")
    elif busiest is not None and busiest >= BUSIEST_CORE_PCT:
        notes.append(
            f"one CPU core pegged ({busiest:.0f}%): a single-threaded server loop or tokenizer "
            "may be the bottleneck, not the GPU"
        )
    paging = (sample.swap_in_pages_per_s or 0.0) + (sample.swap_out_pages_per_s or 0.0)
    if paging >= SWAP_PAGES_PER_S:
        notes.append(f"host is swapping ({paging:.0f} pages/s)")
    if sample.mem_used_bytes is not None and sample.mem_total_bytes:
        fraction = sample.mem_used_bytes / sample.mem_total_bytes
        if fraction >= MEM_USED_FRACTION:
            notes.append(f"host memory nearly full ({100 * fraction:.0f}% used)")
    return tuple(notes)
