"""The hand-over as the ledger sees it (`session.ledger`, `session.handover`): pure, no engine."""

from __future__ import annotations

from gputui.metrics.step import StepSpec
from gputui.session.handover import (
    HANDOVER_MAX_S,
    handover_cut_event,
    handover_state,
    handover_waits,
)
from gputui.session.ledger import StepLedger
from tests.support.records import MS, T0, rec


def _spec(
    index: int, level: float, start_ms: float, *, measure_ms: float | None = None
) -> StepSpec:
    start = T0 + int(start_ms * MS)
    measure = start if measure_ms is None else T0 + int(measure_ms * MS)
    return StepSpec(index, "concurrency", level, start, measure, -1)


def test_a_pending_step_waits_for_the_measured_requests_of_the_step_before() -> None:
    ledger = StepLedger()
    ledger.open(_spec(0, 64, 0), hidden=False)
    done = [rec(sent_ms=10.0 * i, end_ms=10.0 * i + 4000, tokens_ms=[], step=0) for i in range(9)]
    ledger.add_records(done)
    ledger.set_sent({0: 12})
    ledger.open(_spec(1, 128, 5000), hidden=False, pending=True)  # closes step 0 at 5 s
    assert ledger.pending == 1
    assert [s.index for s in ledger.handing_over()] == [0]
    shown = handover_state(ledger, T0 + 6000 * MS)
    assert shown is not None
    assert (shown.index, shown.level, shown.requests_left, shown.next_level) == (0, 64, 3, 128)
    assert shown.eta_s is not None and abs(shown.eta_s - 3.0) < 1e-6  # P90 E2E 4 s, 1 s gone
    late = handover_state(ledger, T0 + 9500 * MS)
    assert late is not None and late.eta_s == 0.0  # overdue: never negative
    # A second press while pending: the last level wins, the index stays.
    assert ledger.replace_pending(_spec(1, 256, 5000))
    assert ledger.specs[1].level == 256


def test_a_pending_step_closed_before_its_level_ran_measured_nothing() -> None:
    ledger = StepLedger()
    ledger.open(_spec(0, 8, 0), hidden=False)
    ledger.open(_spec(1, 16, 5000, measure_ms=5000), hidden=False, pending=True)
    ledger.close_current(T0 + 9000 * MS)  # the run ends during the hand-over
    step = ledger.specs[1]
    assert ledger.pending is None
    assert step.measure_start_ns == step.end_ns  # an empty window: the old load's requests
    assert handover_state(ledger, T0 + 9000 * MS) is None


def test_the_next_level_waits_at_most_the_cap_and_says_what_was_still_out() -> None:
    ledger = StepLedger()
    ledger.open(_spec(0, 64, 0), hidden=False)
    ledger.add_records([rec(sent_ms=10.0, end_ms=4000.0, tokens_ms=[], step=0)])
    ledger.set_sent({0: 5})
    ledger.open(_spec(1, 128, 5000), hidden=False, pending=True)
    assert handover_waits(ledger, T0 + 6000 * MS)
    assert not handover_waits(ledger, T0 + int((5 + HANDOVER_MAX_S) * 1000) * MS)
    assert handover_cut_event(ledger) == (
        "warning",
        "hand-over cut at 60 s: 4 measured requests of step 1 finish under the next level",
    )
