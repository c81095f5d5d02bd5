"""Host CPU/memory/swap from /proc text, and the words the UI shows when the host is the limit."""

from __future__ import annotations

from pathlib import Path

import pytest

from gputui.errors import TelemetryUnavailable
from gputui.telemetry.host import HostSource, host_pressure, parse_kv_file, parse_stat
from gputui.telemetry.samples import HostSample

GIB = 1 << 30

STAT_0 = """cpu  1000 0 500 8000 100 0 0 0 0 0
cpu0 500 0 250 4000 50 0 0 0 0 0
cpu1 500 0 250 4000 50 0 0 0 0 0
intr 12345
ctxt 999
"""
# Over the interval: cpu0 fully busy (100 user jiffies), cpu1 idle (100 idle jiffies).
STAT_1 = """cpu  1100 0 500 8100 100 0 0 0 0 0
cpu0 600 0 250 4000 50 0 0 0 0 0
cpu1 500 0 250 4100 50 0 0 0 0 0
"""
MEMINFO = """MemTotal:       65536000 kB
MemFree:         1000000 kB
MemAvailable:   16384000 kB
SwapTotal:       8192000 kB
SwapFree:        6144000 kB
"""


def write_proc(root: Path, stat: str, pswpin: int, pswpout: int) -> None:
    (root / "stat").write_text(stat)
    (root / "meminfo").write_text(MEMINFO)
    (root / "vmstat").write_text(f"nr_free_pages 1\npswpin {pswpin}\npswpout {pswpout}\n")


def test_parsers() -> None:
    overall, cores = parse_stat(STAT_0)
    assert overall is not None
    assert (overall.busy, overall.total) == (1500, 9600)
    assert len(cores) == 2
    mem = parse_kv_file(MEMINFO)
    assert mem["MemTotal"] == 65536000 * 1024
    assert parse_kv_file("pswpin 7\n")["pswpin"] == 7


def test_deltas_between_samples(tmp_path: Path) -> None:
    now = [0]
    write_proc(tmp_path, STAT_0, 100, 200)
    source = HostSource(tmp_path, clock=lambda: now[0])
    write_proc(tmp_path, STAT_1, 300, 200)
    now[0] = 2_000_000_000
    s = source.sample()
    assert s.t_ns == 2_000_000_000
    assert s.cpu_pct == pytest.approx(50.0)
    assert s.cpu_busiest_core_pct == pytest.approx(100.0)
    assert s.cpu_count == 2
    assert s.mem_total_bytes == 65536000 * 1024
    assert s.mem_used_bytes == (65536000 - 16384000) * 1024
    assert s.swap_used_bytes == (8192000 - 6144000) * 1024
    assert s.swap_in_pages_per_s == pytest.approx(100.0)
    assert s.swap_out_pages_per_s == pytest.approx(0.0)
    assert host_pressure(s) == (
        "one CPU core pegged (100%): a single-threaded server loop or tokenizer may be the "
        "bottleneck, not the GPU",
        "host is swapping (100 pages/s)",
    )


def test_this_machine(tmp_path: Path) -> None:
    if not Path("/proc/stat").is_file():
        pytest.skip("no /proc")
    s = HostSource().sample()
    assert s.mem_total_bytes is not None
    assert s.mem_total_bytes > 0
    assert s.cpu_count is not None


def test_no_proc_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(TelemetryUnavailable, match="Linux-only"):
        HostSource(tmp_path / "nothing")


def test_pressure_words() -> None:
    calm = HostSample(t_ns=0, cpu_pct=30.0, cpu_busiest_core_pct=60.0)
    assert host_pressure(calm) == ()
    saturated = HostSample(t_ns=0, cpu_pct=97.0, cpu_busiest_core_pct=100.0)
    assert host_pressure(saturated) == ("host CPU saturated (97% of all cores)",)
    full = HostSample(t_ns=0, mem_used_bytes=63 * GIB, mem_total_bytes=64 * GIB)
    assert host_pressure(full) == ("host memory nearly full (98% used)",)
