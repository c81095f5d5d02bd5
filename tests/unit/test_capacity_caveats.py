"""Issue 23: a provisional capacity rather than none, and the caveats a capacity carries."""

from __future__ import annotations

from dataclasses import replace

from gputui.metrics.capacity_caveats import judged_capacity
from gputui.metrics.sla import Sla
from gputui.metrics.step import StepResult
from gputui.metrics.step_diagnosis import StepDiagnosis, bottleneck_verdict
from gputui.metrics.summary import Summary
from gputui.snapshot.models import CapacityModel
from tests.support.steps import make_step

SLA = Sla(ttft_p95_s=1.0, tpot_p95_s=0.035)


def _short(level: float, ttft: float, tpot: float, n: int, index: int) -> StepResult:
    """A hand-paced step: n requests, so the P95's interval is open above when n < 59."""
    step = make_step(level, output_tokens_per_s=100.0 * level, requests_ok=n, index=index)
    open_above = n < 59
    ttft_s = Summary(
        ttft, ttft, ttft, ttft, ttft, n, p95_ci=(ttft * 0.8, None if open_above else ttft * 1.1)
    )
    tpot_s = Summary(
        tpot, tpot, tpot, tpot, tpot, n, p95_ci=(tpot * 0.8, None if open_above else tpot * 1.1)
    )
    return replace(step, ttft_s=ttft_s, tpot_s=tpot_s)


def test_no_decisive_step_gives_a_provisional_capacity_with_its_reason() -> None:
    steps = [
        _short(1, 0.05, 0.012, 14, 0),
        _short(2, 0.06, 0.014, 20, 1),
        _short(4, 0.08, 0.040, 30, 2),  # its point estimate breaks the TPOT bound
    ]
    found = judged_capacity(steps, SLA)
    cap = found.capacity
    assert cap is not None
    assert (cap.level, cap.provisional, cap.output_tokens_per_s) == (2.0, True, 200.0)
    assert cap.provisional_reason == "P95 on 20 requests; 59 decide it"
    assert found.reason.startswith("provisional: concurrency 2 is the highest level")
    model = CapacityModel.from_capacity(cap)
    dumped = model.model_dump(mode="json")
    assert dumped["provisional"] is True
    assert dumped["provisional_reason"] == "P95 on 20 requests; 59 decide it"
    assert dumped["caveats"] == []


def test_a_decisive_capacity_is_not_provisional() -> None:
    steps = [_short(1, 0.05, 0.012, 80, 0), _short(2, 0.06, 0.014, 20, 1)]
    cap = judged_capacity(steps, SLA).capacity
    assert cap is not None and cap.level == 1.0 and cap.provisional is False


def test_a_capacity_above_failed_levels_carries_that_caveat() -> None:
    steps = [
        make_step(16, index=0),
        make_step(21, tpot_p95_s=0.05, index=1),
        make_step(32, tpot_p95_s=0.06, index=2),
        make_step(42, index=3),
        make_step(64, tpot_p95_s=0.09, index=4),
    ]
    cap = judged_capacity(steps, SLA).capacity
    assert cap is not None and cap.level == 42.0
    assert cap.caveats[0].startswith("21 and 32 fail below it: ")


def _diagnosis(verdict: dict[str, object]) -> StepDiagnosis:
    return StepDiagnosis(bottleneck=bottleneck_verdict(verdict))


def test_a_suspect_or_throttled_step_marks_its_capacity() -> None:
    steps = [make_step(8, index=0), make_step(16, index=1), make_step(32, tpot_p95_s=0.1, index=2)]
    diagnoses = {1: _diagnosis({"verdict": "decode-bandwidth", "suspect": True})}
    cap = judged_capacity(steps, SLA, diagnoses=diagnoses).capacity
    assert cap is not None and cap.level == 16.0
    assert [c.split(":")[0] for c in cap.caveats] == ["SUSPECT"]
    assert "the client was saturated" in cap.caveats[0]
    # A host whose other processes held the CPUs: not the client's saturation (issue 31).
    busy = {1: _diagnosis({"verdict": "host-contended", "suspect": True,
                           "client_state": "host-contended"})}  # fmt: skip
    cap = judged_capacity(steps, SLA, diagnoses=busy).capacity
    assert cap is not None and cap.caveats[0].startswith("SUSPECT: measured on a contended host")
    assert "saturated" not in cap.caveats[0]
    hot = {1: _diagnosis({"verdict": "throttled", "throttled": True})}
    cap = judged_capacity(steps, SLA, diagnoses=hot).capacity
    assert cap is not None and [c.split(":")[0] for c in cap.caveats] == ["throttled"]


def test_a_no_data_step_is_neither_a_failure_below_nor_the_level_above() -> None:
    """Two quick `+` presses leave a step in which nothing finished: it measured nothing."""
    empty = replace(_short(8, 0.0, 0.0, 0, 1), requests_ok=0, requests_failed=0)
    empty = replace(empty, ttft_s=Summary(None, None, None, None, None, 0))
    steps = [_short(4, 0.10, 0.015, 80, 0), empty, _short(16, 0.30, 0.017, 80, 2)]
    cap = judged_capacity(steps, SLA).capacity
    assert cap is not None and cap.level == 16 and cap.caveats == ()  # not "8 fails below it"
    tight = judged_capacity(steps, Sla(ttft_p95_s=0.2, tpot_p95_s=0.035)).capacity
    assert tight is not None and tight.level == 4
    assert (tight.above_level, tight.above_verdict) == (16.0, "fail")  # not "(8: fail)"


def test_a_capacity_below_a_lower_levels_good_output_says_so() -> None:
    sla = Sla(ttft_p95_s=1.0, tpot_p95_s=0.035, max_error_rate=0.25)
    # 8 streams: 4 % timed out, so half of its output is good; 4 streams gave more good output.
    steps = [
        make_step(4, output_tokens_per_s=500.0, index=0, sla=sla),
        make_step(
            8,
            output_tokens_per_s=800.0,
            good_output_tokens_per_s=400.0,
            requests_failed=4,
            index=1,
            sla=sla,
        ),
    ]
    capacity = judged_capacity(steps, sla).capacity
    assert capacity is not None and capacity.level == 8
    assert capacity.output_tokens_per_s == 400.0
    assert capacity.caveats == (
        "concurrency 4 gave more good output (500.0 tok/s against 400.0): "
        "the extra load bought nothing",
    )


def _held(step: StepResult, verdict: str, basis: str) -> StepResult:
    return replace(step, sla_verdict=verdict, verdict_basis=basis)  # type: ignore[arg-type]


def test_a_held_step_counts_by_its_holds_verdict_not_by_its_intervals_read_again() -> None:
    # 8 and 16 have intervals well under the bounds (n=300); 16 was held, and its looks ended
    # undecided: the intervals read once more after the hold stopped would pass it.
    eight = _short(8, 0.3, 0.020, 300, 0)
    sixteen = _short(16, 0.5, 0.030, 300, 1)
    undecided = _held(sixteen, "inconclusive", "inconclusive at look 4 of 4 (n=960)")
    found = judged_capacity([eight, undecided], SLA)
    assert found.capacity is not None and found.capacity.level == 8.0
    assert "hold: inconclusive at look 4 of 4" in found.reason
    passed = _held(sixteen, "pass", "pass at look 2 of 4 (n=240, 0.625 % each side)")
    assert (judged_capacity([eight, passed], SLA).capacity or eight).level == 16.0
    # A hold's fail stands even where the whole step's point estimates meet the bounds.
    failed = _held(sixteen, "fail", "fail at look 1 of 4 (n=120, 0.625 % each side)")
    result = judged_capacity([eight, failed], SLA)
    assert result.capacity is not None and result.capacity.level == 8.0
    assert "concurrency 16: hold: fail at look 1 of 4" in result.reason


def test_a_saved_held_step_counts_by_its_saved_verdict_too() -> None:
    from gputui.snapshot.step_models import step_from_result

    eight = step_from_result(_short(8, 0.3, 0.020, 300, 0))
    held = _held(_short(16, 0.5, 0.030, 300, 1), "inconclusive", "inconclusive at look 4 of 4")
    sixteen = step_from_result(held)
    assert (sixteen.model_extra or {})["verdict_basis"] == "inconclusive at look 4 of 4"
    found = judged_capacity([eight, sixteen], SLA)
    assert found.capacity is not None and found.capacity.level == 8.0
