"""Requested against measured lengths, overall and per step."""

from __future__ import annotations

from gputui.engine.records import RequestRecord
from gputui.snapshot.models import LengthCheck
from gputui.workloads.lengths import describe_check, length_report


def record(
    step: int,
    asked_in: int | None,
    got_in: int | None,
    asked_out: int,
    got_out: int,
    ok: bool = True,
) -> RequestRecord:
    return RequestRecord(
        request_id=0,
        step_index=step,
        sent_ns=0,
        end_ns=1,
        ok=ok,
        requested_input_tokens=asked_in,
        input_tokens=got_in,
        requested_output_tokens=asked_out,
        output_tokens=got_out,
        tokens_from_usage=True,
    )


def test_report_counts_exact_short_long_and_unknown() -> None:
    records = [
        record(0, 100, 100, 10, 10),
        record(0, 100, 100, 10, 7),
        record(1, 200, 201, 20, 20),
        record(1, 200, None, 20, 20),
        record(1, None, 50, 20, 20),
        record(1, 300, 1, 30, 1, ok=False),  # failed: not in the report
    ]
    report = length_report(records)
    inp = LengthCheck.model_validate(report["input"])
    assert (inp.exact, inp.shorter, inp.longer, inp.unknown) == (2, 0, 1, 2)
    assert inp.requested.n == 4
    assert inp.requested.mean == 150.0
    assert inp.measured.max == 201
    out = LengthCheck.model_validate(report["output"])
    assert (out.exact, out.shorter, out.longer) == (4, 1, 0)
    assert [s["step"] for s in report["by_step"]] == [0, 1]
    assert report["by_step"][0]["output"]["shorter"] == 1
    line = describe_check("output", report["output"])
    assert line.startswith("output tokens: requested mean 16.0 (p50 20, p95 20)")
    assert line.endswith("exact 4/5, shorter 1")


def test_empty_report() -> None:
    report = length_report([])
    assert report["input"]["requested"] == {"n": 0}
    assert report["by_step"] == []
