"""The step a crash cut short keeps its window and every request; journalled telemetry returns."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

from gputui.engine.records import RequestRecord
from gputui.metrics.step import StepSpec
from gputui.snapshot.journal import Journal, JournalHeader
from gputui.snapshot.journal_telemetry import hardware_from_lines, telemetry_from_lines
from gputui.snapshot.models import SlaBounds, Target, Workload
from gputui.snapshot.recovery import recover
from gputui.snapshot.store import load_snapshot

HEADER = JournalHeader(
    label="cut",
    target=Target(url="http://127.0.0.1:9/v1", model="m", endpoint="completions"),
    workload=Workload(input_tokens=16, output_tokens=8, endpoint="completions"),
    sla=SlaBounds(ttft_p95_s=1.0, tpot_p95_s=0.05),
    plan={"mode": "concurrency"},
)
S = 1_000_000_000


def _records(sent_s: list[float]) -> list[RequestRecord]:
    return [
        RequestRecord(
            i,
            0,
            int(t * S),
            int(t * S + 0.2 * S),
            True,
            first_token_ns=int(t * S + 0.05 * S),
            output_tokens=8,
            input_tokens=16,
        )
        for i, t in enumerate(sent_s)
    ]


def _journal(tmp_path: Path, *, settled_at_s: float | None) -> Journal:
    journal = Journal(tmp_path / "cut.journal", HEADER)
    spec = StepSpec(0, "concurrency", 4, start_ns=0, measure_start_ns=30 * S, end_ns=-1)
    journal.add_load(spec, 0)
    if settled_at_s is not None:
        journal.add_measure(StepSpec(0, "concurrency", 4, 0, int(settled_at_s * S), -1), 0)
    journal.add_requests(_records([0.1 * i for i in range(1, 16)]), 0)  # sent 0.1 .. 1.5 s
    journal.flush()
    return journal


def test_a_settled_open_step_measures_from_where_it_settled(tmp_path: Path) -> None:
    _journal(tmp_path, settled_at_s=0.55).close(delete=False)
    out = recover(tmp_path / "cut.journal", tmp_path)
    assert out is not None
    (step,) = load_snapshot(out).steps
    assert step.incomplete
    assert (step.requests_warmup, step.requests_ok, step.requests_failed) == (5, 10, 0)
    assert step.warmup_s == 0.55


def test_an_open_step_that_never_settled_is_all_warm_up_but_keeps_its_requests(
    tmp_path: Path,
) -> None:
    _journal(tmp_path, settled_at_s=None).close(delete=False)
    out = recover(tmp_path / "cut.journal", tmp_path)
    assert out is not None
    snap = load_snapshot(out)
    (step,) = snap.steps
    assert (step.requests_warmup, step.requests_ok) == (15, 0)
    assert (snap.model_extra or {})["totals"]["requests"] == 15


def test_a_recovered_step_leaves_a_bursts_requests_out_of_its_figures(tmp_path: Path) -> None:
    """The journal carries the burst flag: a recovered step counts the burst apart (issue 28)."""
    journal = _journal(tmp_path, settled_at_s=0.55)  # 10 measured requests, 0.2 s each
    burst = [
        RequestRecord(100 + i, 0, int(1.0 * S), int(9.0 * S), True, first_token_ns=int(3 * S),
                      output_tokens=8, input_tokens=16, burst=True)
        for i in range(4)
    ]  # fmt: skip
    journal.add_requests(burst, 0)
    journal.flush()
    journal.close(delete=False)
    out = recover(tmp_path / "cut.journal", tmp_path)
    assert out is not None
    (step,) = load_snapshot(out).steps
    assert (step.requests_warmup, step.requests_ok, step.requests_burst) == (5, 3, 4)
    # the burst is out from 1 s to 9 s: 7 of the step's requests ran under its load
    assert step.requests_under_burst == 7
    assert (step.ttft_s.n, step.e2e_s.n) == (3, 3)  # the burst's 2 s TTFTs are in no figure
    assert step.ttft_s.p99 is not None and abs(step.ttft_s.p99 - 0.05) < 1e-9
    assert step.e2e_s.p99 is not None and abs(step.e2e_s.p99 - 0.2) < 1e-9


def test_journalled_telemetry_is_joined_and_downsampled_per_series() -> None:
    hardware = [
        {"kind": "hardware", "hardware": {"gpus": [], "sources": {"gpu": "starting"}}},
        {"kind": "hardware", "hardware": {"gpus": [{"name": "A100"}], "sources": {"gpu": "ok"}}},
    ]
    lines = [
        {
            "kind": "telemetry",
            "gpu": [{"t_s": t, "index": i, "temperature_c": 40 + t} for i in (0, 1)],
            "server": [{"t_s": t, "kv_cache_usage": 0.5}],
            "host": [],
        }
        for t in range(1000)
    ]
    section = telemetry_from_lines(hardware, lines, max_points=100)
    assert section is not None
    gpu, server = section["gpu"], section["server"]
    assert isinstance(gpu, list) and isinstance(server, list)
    assert len(gpu) == 200 and len(server) == 100
    assert {p["index"] for p in gpu} == {0, 1}
    assert max(p["temperature_c"] for p in gpu) == 40 + 999  # the last point is kept
    assert section["sources"] == {"gpu": "ok"}
    assert hardware_from_lines(hardware) == {"gpus": [{"name": "A100"}]}
    assert telemetry_from_lines(hardware, []) is None


def test_an_append_never_waits_for_a_slow_fsync(tmp_path: Path, monkeypatch: Any) -> None:
    # The session's loop appends a step's `load` line while the writer thread flushes; on a busy
    # disk an fsync takes seconds, and the loop (where a step's end is decided) waited for it.
    journal = Journal(tmp_path / "slow.journal", HEADER)
    real_fsync = os.fsync
    in_fsync = threading.Event()

    def slow_fsync(fd: int) -> None:
        in_fsync.set()
        time.sleep(0.5)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", slow_fsync)
    journal.add_requests(_records([0.1, 0.2]), 0)
    writer = threading.Thread(target=journal.flush)
    writer.start()
    assert in_fsync.wait(5.0)
    started = time.perf_counter()
    journal.add_load(StepSpec(1, "concurrency", 8, S, 2 * S, -1), 0)
    appended_s = time.perf_counter() - started
    writer.join()
    assert appended_s < 0.1, appended_s  # it waited the whole 0.5 s fsync before
    journal.close(delete=False)
    kinds = [
        line.split(b'"kind":"')[1].split(b'"')[0] for line in journal.path.read_bytes().splitlines()
    ]
    assert kinds == [b"header", b"request", b"request", b"load"]  # nothing lost, in order
