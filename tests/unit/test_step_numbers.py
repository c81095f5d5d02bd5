"""One numbering (issue 28): the event log, the Steps table and the saved file count steps alike."""

from __future__ import annotations

from dataclasses import replace

from gputui.metrics.step import StepSpec
from gputui.metrics.verdict import Verdict
from gputui.session.events import step_events
from gputui.session.ledger import StepLedger
from gputui.snapshot.models import step_from_result
from gputui.snapshot.step_models import renumbered
from tests.support.steps import make_step

S = 1_000_000_000


def _ledger(hidden: set[int]) -> StepLedger:
    ledger = StepLedger()
    for i in range(6):
        ledger.open(StepSpec(i, "concurrency", 2.0**i, i * S, i * S, -1), hidden=i in hidden)
    return ledger


def test_hidden_carry_on_steps_take_no_number() -> None:
    # Steps 1 and 3 are a hold's and a plan's carry-on: 0, 2, 4, 5 are steps 1, 2, 3, 4.
    ledger = _ledger({1, 3})
    assert [ledger.number(i) for i in (0, 2, 4, 5)] == [1, 2, 3, 4]
    assert ledger.number(99) == 100  # a replayed step (not in the ledger): its file numbered it


def test_the_event_log_uses_that_number_and_the_file_is_indexed_alike() -> None:
    ledger = _ledger({1, 3})
    step = make_step(16, index=4, tpot_p95_s=0.09)  # misses the default 35 ms TPOT bound
    verdict: Verdict = "fail"
    step = replace(step, sla_ok=False, sla_verdict=verdict)
    texts = [text for _, text in step_events(step, ledger.number(4))]
    assert "step 3 (16) missed the SLA" in texts
    saved = renumbered(
        [step_from_result(make_step(x, index=i)) for i, x in ((0, 1), (2, 4), (4, 16))]
    )
    assert [(s.index, s.level) for s in saved] == [(0, 1.0), (1, 4.0), (2, 16.0)]  # row 3: index 2
