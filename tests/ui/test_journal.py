"""The session journal: what a kill -9 leaves behind is found, recovered or discarded."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from gputui.engine.records import RequestRecord
from gputui.metrics.step_diagnosis import BottleneckVerdict, StepDiagnosis
from gputui.metrics.ttft_breakdown import ttft_breakdown
from gputui.snapshot.journal import Journal, JournalHeader, JournalWriter
from gputui.snapshot.models import SlaBounds, Target, Workload
from gputui.snapshot.recovery import discard, find_leftovers, read_journal, recover
from gputui.snapshot.store import load_snapshot
from gputui.ui.app import AppOptions
from gputui.ui.screens.dialogs import RecoverJournalScreen
from tests.support.steps import make_step
from tests.ui.conftest import files, replay_app, wait_for

HEADER = JournalHeader(
    label="crashy",
    target=Target(url="http://127.0.0.1:9/v1", model="m", endpoint="completions"),
    workload=Workload(input_tokens=16, output_tokens=8, endpoint="completions"),
    sla=SlaBounds(ttft_p95_s=1.0, tpot_p95_s=0.05),
    plan={"mode": "concurrency"},
)

WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from gputui.engine.records import RequestRecord
    from gputui.snapshot.journal import Journal
    from tests.ui.test_journal import HEADER, sample_steps
    journal = Journal(Path(sys.argv[1]), HEADER)
    for step in sample_steps():
        journal.add_step(step)
    journal.add_requests(
        [RequestRecord(i, 0, 1_000 + i, 2_000 + i, True, output_tokens=8) for i in range(500)], 0
    )
    journal.flush()
    journal.add_requests([RequestRecord(999, 0, 1, 2, True)], 0)  # never flushed
    print("flushed", flush=True)
    time.sleep(60)
    """
)


def sample_steps() -> list:  # type: ignore[type-arg]
    sla = HEADER.sla.to_sla()
    return [
        make_step(level, output_tokens_per_s=tps, ttft_p95_s=ttft, index=i, sla=sla)
        for i, (level, tps, ttft) in enumerate([(1, 100, 0.1), (2, 190, 0.2), (4, 200, 1.5)])
    ]


def _killed_journal(folder: Path) -> Path:
    """A journal whose writer was killed with SIGKILL after one flush."""
    path = folder / "20260101-000000-crashy-1.journal"
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "flushed"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=10)
    return path


def test_kill_9_loses_no_flushed_request_and_recovers(tmp_path: Path) -> None:
    path = _killed_journal(tmp_path)
    header, steps, requests = read_journal(path)
    assert header["label"] == "crashy"
    assert requests == 500
    assert [s.level for s in steps] == [1, 2, 4]
    (leftover,) = find_leftovers(tmp_path)
    assert (leftover.steps, leftover.requests, leftover.label) == (3, 500, "crashy")
    out = recover(path, tmp_path)
    assert out is not None and not path.exists()
    snap = load_snapshot(out)
    assert not snap.complete
    assert [s.level for s in snap.steps] == [1, 2, 4]
    assert snap.capacity is not None and snap.capacity.level == 2
    assert snap.model_extra is not None and snap.model_extra["recovered_from"]["requests"] == 500


def test_live_journals_are_not_leftovers_and_torn_lines_are_skipped(tmp_path: Path) -> None:
    journal = Journal.create(tmp_path, HEADER)
    journal.add_requests([RequestRecord(1, 0, 10, 20, False, error="http_503")], 0)
    journal.flush()
    assert find_leftovers(tmp_path) == []  # its writer (this process) is alive
    journal.close(delete=False)
    with journal.path.open("ab") as file:
        file.write(b'{"kind": "request", "step"')  # torn by a crash mid-write
    assert read_journal(journal.path)[2] == 1
    discard(journal.path)
    assert not journal.path.exists()
    journal = Journal.create(tmp_path, HEADER)
    journal.close(delete=True)
    assert list(tmp_path.iterdir()) == []


async def test_recovery_dialog_on_start(tmp_path: Path) -> None:
    _killed_journal(tmp_path)
    leftovers = tuple(find_leftovers(tmp_path))
    app, _ = replay_app(options=AppOptions(snapshot_dir=tmp_path, leftovers=leftovers))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RecoverJournalScreen))
        await pilot.press("r")
        await wait_for(pilot, lambda: bool(app.recovered))
    (out,) = app.recovered
    assert [s.level for s in load_snapshot(out).steps] == [1, 2, 4]
    assert not files(tmp_path, "*.journal")


async def test_discard_from_the_dialog(tmp_path: Path) -> None:
    _killed_journal(tmp_path)
    leftovers = tuple(find_leftovers(tmp_path))
    app, _ = replay_app(options=AppOptions(snapshot_dir=tmp_path, leftovers=leftovers))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RecoverJournalScreen))
        await pilot.press("d")
        await wait_for(pilot, lambda: not files(tmp_path, "*.journal"))
    assert files(tmp_path, "*") == []


def test_the_writer_journals_each_request_and_step_once(tmp_path: Path) -> None:
    records: list[RequestRecord] = []
    writer = JournalWriter(Journal.create(tmp_path, HEADER), lambda: list(records), 0)
    records += [RequestRecord(i, 0, 10 + i, 20 + i, True, output_tokens=8) for i in range(3)]
    writer.poll()
    records += [RequestRecord(3, 1, 30, 40, False, error="http_503")]
    (step, _, _) = sample_steps()
    writer.add_step(step)
    writer.poll()
    writer.poll()  # nothing new: nothing written twice
    writer.stop(delete=False)
    header, steps, requests = read_journal(writer.path)
    assert (header["label"], requests, [s.level for s in steps]) == ("crashy", 4, [1])
    writer = JournalWriter(Journal.create(tmp_path / "clean", HEADER), list, 0, interval_s=0.01)
    writer.start()
    writer.stop(delete=True)  # a clean save: the journal is gone
    assert not writer.path.exists()


def _diagnosis(verdict: str, queue_s: float) -> StepDiagnosis:
    """A step's diagnosis as the Session makes it (the breakdown from ttft_breakdown itself)."""
    return StepDiagnosis(
        ttft_breakdown=ttft_breakdown(0.1 + queue_s, 0.001, queue_s, 0.09),
        bottleneck=BottleneckVerdict(
            verdict=verdict, evidence=["41 waiting"], suspect=False, throttled=False
        ),
    )


def test_a_recovered_snapshot_keeps_the_live_diagnosis(tmp_path: Path) -> None:
    journal = Journal.create(tmp_path, HEADER)
    verdicts = [("decode-bandwidth", 0.0), ("decode-bandwidth", 0.01), ("queue", 0.4)]
    for step, (verdict, queue_s) in zip(sample_steps(), verdicts, strict=True):
        journal.add_step(step, _diagnosis(verdict, queue_s))
    journal.add_requests([RequestRecord(1, 2, 10, 20, True, output_tokens=8)], 0)
    journal.flush()
    journal.close(delete=False)
    out = recover(journal.path, tmp_path)
    assert out is not None
    snap = load_snapshot(out)
    assert [s.bottleneck["verdict"] for s in snap.steps if s.bottleneck] == [v for v, _ in verdicts]
    queue = snap.steps[2].ttft_breakdown
    assert queue is not None and queue["queue_s"] == 0.4 and queue["ttft_s"] == 0.5
    assert snap.knee is not None and snap.knee.explanation is not None
    assert snap.knee.explanation.startswith(f"knee at {snap.knee.level:g}: bound by queue at 4")
    assert "queue 400" in snap.knee.explanation
    assert snap.model_extra is not None
    assert "cut short has none" in snap.model_extra["recovered_from"]["diagnosis"]
