"""Per-request records (`snapshot.records`): each request's step decided as the snapshot's is,
its figures those the snapshot's statistics are made of, the same rows live and from a file."""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import replace
from pathlib import Path

import numpy as np

from gputui.engine.records import RequestRecord
from gputui.metrics.sla import Sla
from gputui.metrics.step import StepSpec, aggregate_step
from gputui.snapshot.journal import Journal, JournalHeader, load_line, request_line
from gputui.snapshot.models import SlaBounds, Target, Workload
from gputui.snapshot.records import ROW_KEYS, RecordRows, rows_table, session_table, table_rows
from gputui.snapshot.records_file import RecordsFile
from gputui.snapshot.recovery import recover
from gputui.snapshot.store import load_snapshot
from tests.support.records import T0, ns, rec

SLA = Sla(ttft_p95_s=0.1, tpot_p95_s=0.02)
HEADER = JournalHeader(
    label="records",
    target=Target(url="http://127.0.0.1:9/v1", model="m", endpoint="completions"),
    workload=Workload(input_tokens=16, output_tokens=8, endpoint="completions"),
    sla=SlaBounds(ttft_p95_s=0.1, tpot_p95_s=0.02),
    plan={"mode": "concurrency"},
)


def _spec(index: int, start_ms: float, measure_ms: float, end_ms: float | None) -> StepSpec:
    end = -1 if end_ms is None else ns(end_ms)
    return StepSpec(index, "concurrency", 2.0 * (index + 1), ns(start_ms), ns(measure_ms), end)


def _floats(rows: list[dict[str, object]], key: str) -> list[float]:
    return [float(r[key]) for r in rows if isinstance(r[key], int | float)]  # type: ignore[arg-type]


def _step_line(index: int) -> dict[str, object]:
    return {"kind": "step", "step": {"index": index}}


def _two_steps() -> tuple[list[StepSpec], list[RequestRecord]]:
    """Step 0 measures from 100 ms; step 1 (from 1000 ms) from 1200 ms; a failure in each."""
    specs = [_spec(0, 0, 100, 1000), _spec(1, 1000, 1200, 2000)]
    records = [
        rec(sent_ms=10, end_ms=200, tokens_ms=[60, 80, 100], step=0),  # warm-up
        rec(sent_ms=100, end_ms=300, tokens_ms=[150, 170, 190], step=0),  # measured (at start)
        rec(sent_ms=400, end_ms=500, tokens_ms=[410, 420, 430, 440], step=0),
        rec(sent_ms=600, end_ms=650, ok=False, error="http_503", step=0),
        rec(sent_ms=900, end_ms=1300, tokens_ms=[1250], step=0),  # 1 token: no TPOT
        rec(sent_ms=1100, end_ms=1400, tokens_ms=[1150, 1300], step=1),  # warm-up
        rec(sent_ms=1300, end_ms=1700, tokens_ms=[1320, 1400, 1500], step=1),
        rec(sent_ms=1500, end_ms=1600, ok=False, error="timeout", step=1),
    ]
    return specs, records


def test_rows_carry_every_key_and_the_snapshots_own_figures() -> None:
    specs, records = _two_steps()
    decider = RecordRows(SLA)
    lines = [load_line(s, T0, hidden=False) for s in specs]
    lines += [request_line(r, T0) for r in records] + [_step_line(0), _step_line(1)]
    rows = decider.feed(lines) + decider.close()
    assert [list(r) for r in rows] == [list(ROW_KEYS)] * len(records)
    by_id = {r["id"]: r for r in rows}
    for spec in specs:
        step = aggregate_step(spec, records, SLA)
        mine = [by_id[r.request_id] for r in records if by_id[r.request_id]["step"] == spec.index]
        assert len(mine) == step.requests_ok + step.requests_failed
        warm = [r for r in records if r.step_index == spec.index]
        assert len(warm) - len(mine) == step.requests_warmup
        ok = [r for r in mine if r["ok"]]
        ttft = _floats(ok, "ttft_s")
        assert math.isclose(statistics.fmean(ttft), step.ttft_s.mean or 0, rel_tol=1e-12)
        e2e = _floats(ok, "e2e_s")
        assert math.isclose(statistics.fmean(e2e), step.e2e_s.mean or 0, rel_tol=1e-12)
        tpot = _floats(ok, "tpot_s")
        assert len(tpot) == step.tpot_s.n
        good = sum(1 for r in mine if r["good"])
        assert good == round(step.goodput_requests_per_s * step.duration_s)
        assert {r["level"] for r in mine} == {spec.level}
    first = by_id[records[1].request_id]
    assert first["sent_ns"] == ns(100) - T0 and first["first_token_ns"] == ns(150) - T0
    assert first["ttft_s"] == (ns(150) - ns(100)) * 1e-9
    assert first["tpot_s"] == (ns(300) - ns(150)) * 1e-9 / 2
    failed = by_id[records[3].request_id]
    assert (failed["ok"], failed["reason"], failed["good"], failed["e2e_s"]) == (
        False, "http_503", False, None,
    )  # fmt: skip
    assert by_id[records[4].request_id]["tpot_s"] is None


def test_a_request_waits_for_its_step_and_a_hidden_steps_are_warm_up() -> None:
    specs, records = _two_steps()
    decider = RecordRows(SLA)
    assert decider.feed([load_line(s, T0, hidden=s.index == 1) for s in specs]) == []
    # step 0's requests wait for its step line; the hidden step's are decided at once
    rows = decider.feed([request_line(r, T0) for r in records])
    assert {r["id"] for r in rows} == {r.request_id for r in records if r.step_index == 1}
    assert all(r["step"] is None for r in rows)
    # a later measure line moves the window before the step finishes: the final one counts
    later = StepSpec(0, "concurrency", 2.0, ns(0), ns(450), ns(1000))
    decider.feed([{"kind": "measure", "index": 0, "measure_ns": later.measure_start_ns - T0}])
    rows = decider.feed([_step_line(0)])
    measured = [r["id"] for r in rows if r["step"] == 0]
    assert measured == [r.request_id for r in records[3:5]]
    assert decider.close() == []


def test_close_decides_what_is_left_warm_up_or_cut_short() -> None:
    specs, records = _two_steps()
    lines = [load_line(s, T0, hidden=False) for s in specs]
    lines += [request_line(r, T0) for r in records] + [_step_line(0)]
    live = RecordRows(SLA)
    live.feed(lines)
    assert {r["step"] for r in live.close()} == {None}  # step 1 never finished: not in a snapshot
    crashed = RecordRows(SLA)
    crashed.feed(lines)
    assert [r["step"] for r in crashed.close(cut_short=True)] == [None, 1, 1]


def test_the_snapshot_table_gives_back_the_same_rows() -> None:
    specs, records = _two_steps()
    table = session_table(records, specs, [0, 1], T0, SLA)
    encoded = json.loads(json.dumps(table))  # as saved
    assert "ttft_s" not in encoded["columns"]  # derived: computed again on the way out
    rows = list(table_rows(encoded))
    decider = RecordRows(SLA)
    lines = [load_line(s, T0, hidden=False) for s in specs]
    live = decider.feed([*lines, *(request_line(r, T0) for r in records), _step_line(0)])
    live += decider.feed([_step_line(1)])
    assert sorted(rows, key=lambda r: str(r["id"])) == sorted(live, key=lambda r: str(r["id"]))
    assert rows_table(rows) == table


def test_an_old_journal_without_exact_times_still_gives_rows() -> None:
    line = {"kind": "request", "step": 0, "id": 3, "sent_ms": 1.5, "ttft_ms": 2.0,
            "e2e_ms": 10.0, "in": 4, "out": 3, "cached": None, "ok": True, "err": None}  # fmt: skip
    decider = RecordRows(SLA)
    decider.feed([{"kind": "load", "index": 0, "level": 1, "mode": "rate", "measure_ms": 0.0}])
    (row,) = decider.feed([line, _step_line(0)])
    assert (row["step"], row["sent_ns"], row["first_token_ns"], row["last_ns"]) == (
        0, 1_500_000, 3_500_000, 11_500_000,
    )  # fmt: skip
    assert math.isclose(_floats([row], "tpot_s")[0], 0.004)
    assert row["events"] is None


def test_the_records_file_follows_the_journal_and_recovery_keeps_the_table(
    tmp_path: Path,
) -> None:
    specs, records = _two_steps()
    out = tmp_path / "r.jsonl"
    tap = RecordsFile(out, SLA)
    journal = Journal(tmp_path / "s.journal", HEADER, taps=[tap])
    for spec in specs:
        journal.add_load(spec, T0)
    journal.add_requests(records, T0)
    journal.flush()
    assert out.read_text() == ""  # no step has finished: nothing is decided yet
    result = aggregate_step(specs[0], records, SLA)
    journal.add_step(result)
    journal.flush()
    first = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(first) == 5 and {r["step"] for r in first} == {0, None}
    journal.close(delete=False)  # a crash: step 1 never finished
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == len(records) and tap.rows_written == len(records)
    recovered = recover(tmp_path / "s.journal", tmp_path)
    assert recovered is not None
    snap = load_snapshot(recovered)
    table = list(table_rows((snap.model_extra or {})["records"]))
    cut = next(s for s in snap.steps if s.index == 1)
    assert sum(1 for r in table if r["step"] == 1) == cut.requests_ok + cut.requests_failed
    assert sum(1 for r in table if r["step"] == 0) == result.requests_ok + result.requests_failed


def test_p95_from_the_rows_is_the_steps_p95() -> None:
    rng = np.random.default_rng(5)
    sent = np.sort(rng.uniform(0, 5000, 200))
    records = [
        rec(sent_ms=s, end_ms=s + 300, tokens_ms=[s + t, s + t + 100, s + 250], step=0)
        for s, t in zip(sent.tolist(), rng.gamma(2, 20, 200).tolist(), strict=True)
    ]
    spec = _spec(0, 0, 1000, 6000)
    rows = list(table_rows(session_table(records, [spec], [0], T0, SLA)))
    ttft = sorted(_floats([r for r in rows if r["step"] == 0], "ttft_s"))
    p95 = statistics.quantiles(ttft, n=100, method="inclusive")[94]
    assert math.isclose(aggregate_step(spec, records, SLA).ttft_s.p95 or 0, p95, abs_tol=1e-12)


def test_a_hidden_step_takes_no_number_as_in_a_saved_snapshot() -> None:
    specs = [_spec(0, 0, 100, 1000), _spec(1, 1000, 1000, 2000), _spec(2, 2000, 2100, 3000)]
    records = [
        rec(sent_ms=500, end_ms=600, tokens_ms=[550, 560], step=0),
        rec(sent_ms=1500, end_ms=1600, tokens_ms=[1550, 1560], step=1),  # the held load
        rec(sent_ms=2500, end_ms=2600, tokens_ms=[2550, 2560], step=2),
    ]
    decider = RecordRows(SLA)
    lines = [load_line(s, T0, hidden=s.index == 1) for s in specs]
    lines += [request_line(r, T0) for r in records] + [_step_line(0), _step_line(2)]
    live = decider.feed(lines)
    assert [r["step"] for r in live] == [None, 0, 1]  # hidden: null; step 2 is the file's 1
    saved = list(table_rows(session_table(records, specs, [0, 2], T0, SLA)))
    assert [r["step"] for r in saved] == [0, None, 1]  # (in the order they finished)


def test_a_bursts_requests_are_in_no_step_as_in_the_snapshot() -> None:
    specs, records = _two_steps()
    burst = [
        replace(rec(sent_ms=400 + k, end_ms=700, tokens_ms=[450, 500], step=0), burst=True)
        for k in range(3)
    ]
    step = aggregate_step(specs[0], records + burst, SLA)
    assert step.requests_burst == 3
    rows = list(table_rows(session_table(records + burst, specs, [0, 1], T0, SLA)))
    mine = [r for r in rows if r["step"] == 0]
    assert len(mine) == step.requests_ok + step.requests_failed
    flagged = [r for r in rows if r["burst"]]
    assert len(flagged) == 3 and {r["step"] for r in flagged} == {None}


def test_good_is_what_goodput_counts_and_the_file_follows_an_sla_change(tmp_path: Path) -> None:
    """`good` is the snapshot's goodput rule (as long as asked, E2E and TTFAT bounds too), and
    after a mid-session SLA change the file already written is judged again (issue 30)."""
    spec = _spec(0, 0, 0, 1000)
    records = [
        rec(sent_ms=0, end_ms=60, tokens_ms=[20, 40, 60], requested=3),  # good
        rec(sent_ms=10, end_ms=70, tokens_ms=[30, 50], requested=3),  # short: never good
        rec(sent_ms=20, end_ms=420, tokens_ms=[40, 200, 420], requested=3),  # E2E 0.4 s
        replace(  # thought for 2 tokens, answered at 300 ms: TTFAT 0.3 s
            rec(sent_ms=30, end_ms=400, tokens_ms=[50, 300, 400], requested=3),
            first_answer_ns=ns(300),
            reasoning_tokens=2,
        ),
    ]
    strict = Sla(ttft_p95_s=0.1, e2e_p95_s=0.3, ttfat_p95_s=0.2)
    loose = Sla(ttft_p95_s=0.1)
    current = [strict]
    out = tmp_path / "r.jsonl"
    tap = RecordsFile(out, lambda: current[0])
    journal = Journal(tmp_path / "s.journal", HEADER, taps=[tap])
    journal.add_load(spec, T0)
    journal.add_requests(records, T0)
    journal.add_step(aggregate_step(spec, records, strict))
    journal.flush()

    def goods() -> list[bool]:
        rows = sorted((json.loads(x) for x in out.read_text().splitlines()), key=lambda r: r["id"])
        return [bool(r["good"]) for r in rows]

    for sla, expected in (
        (strict, [True, False, False, False]),
        (loose, [True, False, True, True]),
    ):
        current[0] = sla
        tap.take([], [])  # what the journal's next flush does: judge the file again
        assert goods() == expected
        step = aggregate_step(spec, records, sla)
        assert sum(expected) == round(step.goodput_requests_per_s * step.duration_s)
        saved = table_rows(session_table(records, [spec], [0], T0, sla))
        assert [r["good"] for r in sorted(saved, key=lambda r: str(r["id"]))] == expected
    assert tap.rows_written == len(records)
    journal.close(delete=True)
