"""One knee, one capacity, one bound (`metrics.knee_summary`): which steps they rest on."""

from __future__ import annotations

from gputui.metrics.knee_summary import KneeBound, knee_bound, knee_mode, knee_summary
from gputui.metrics.sla import Sla
from gputui.metrics.step import StepResult
from gputui.metrics.step_diagnosis import BottleneckVerdict, StepDiagnosis
from tests.support.steps import make_step

SLA = Sla(1.0, 0.035, None)


def _verdict(name: str, *, low: bool = False) -> StepDiagnosis:
    verdict = BottleneckVerdict(verdict=name, evidence=["e"], suspect=False, throttled=False)
    if low:
        verdict["low_confidence"] = True
    return StepDiagnosis(bottleneck=verdict)


def _sweep() -> list[StepResult]:
    # 1, 2, 4, 8: tok/s doubles to 4, then 8 adds 2.5 %: the knee is 4 - but only if the
    # incomplete step at 8 (the operator quit during it) counts for what it measured.
    tok = {1: 100.0, 2: 200.0, 4: 400.0, 8: 410.0}
    return [
        make_step(level, output_tokens_per_s=t, index=i, incomplete=level == 8, sla=SLA)
        for i, (level, t) in enumerate(tok.items())
    ]


def test_an_incomplete_step_counts_for_what_it_measured() -> None:
    summary = knee_summary(_sweep(), SLA)
    assert summary.knee is not None
    assert (summary.knee.level, summary.knee.index) == (4.0, 2)


def test_a_step_with_no_data_is_never_the_knee_nor_the_bound() -> None:
    steps = [*_sweep()[:3], make_step(8, output_tokens_per_s=0.0, requests_ok=0, index=3)]
    steps += [make_step(16, output_tokens_per_s=405.0, index=4, sla=SLA)]
    steps += [make_step(32, output_tokens_per_s=404.0, index=5, sla=SLA)]
    diagnoses = {3: _verdict("prefill-compute"), 4: _verdict("queue", low=True)}
    summary = knee_summary(steps, SLA, diagnoses)
    assert summary.knee is not None and summary.knee.level == 4.0  # 8 (no data) is skipped
    assert summary.bound == KneeBound("queue", 16.0, 4, low_confidence=True)
    assert summary.bound.text() == "queue? at 16"
    # Without the diagnosis at 16, the next step past the knee with a verdict: none here.
    assert knee_bound(4.0, "concurrency", steps, {3: _verdict("prefill-compute")}) is None


def test_the_knee_mode_is_the_mode_most_steps_with_data_have() -> None:
    rate = [make_step(x, mode="rate", index=i) for i, x in enumerate((1, 2, 4))]
    closed = [make_step(4, index=3), make_step(8, index=4, requests_ok=0)]
    assert knee_mode([*rate, *closed]) == "rate"
    assert knee_mode([rate[0], closed[0]]) == "concurrency"  # a tie: closed loop
    assert knee_mode([]) == "concurrency"


def test_the_capacity_and_its_reason_come_with_it() -> None:
    steps = [
        make_step(4, index=0, sla=SLA),
        make_step(8, index=1, tpot_p95_s=0.05, sla=SLA),
    ]
    summary = knee_summary(steps, SLA)
    assert summary.capacity is not None and summary.capacity.level == 4.0
    assert summary.knee is None and summary.bound is None
    empty = knee_summary([], SLA)
    assert (empty.knee, empty.capacity, empty.knee_reason) == (None, None, "no finished step yet")
