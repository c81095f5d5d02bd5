"""Step-end rules (`session.step_end`): pure functions of the frozen open-step state."""

from __future__ import annotations

from dataclasses import replace

from gputui.control.rules import (
    DEFAULT_MAX_HOLD_S,
    DEFAULT_MAX_STEP_S,
    StepLimits,
    hold_limits,
    step_limits,
)
from gputui.engine.records import RequestRecord
from gputui.metrics.precision import StepPrecision
from gputui.metrics.sla import Sla
from gputui.metrics.step import StepSpec
from gputui.session.step_end import (
    OpenStepState,
    end_reason,
    hold_basis,
    look_at,
    precision_due,
)

S = 1_000_000_000
T0 = 10 * S
"""When the loop began watching the step (any origin: the rules read differences)."""
SLA = Sla(0.5, 0.05, None)


def _state(limits: StepLimits, settle_bound_s: float = 30.0) -> OpenStepState:
    return OpenStepState(0, limits, T0, T0, settle_bound_s)


def _at(state: OpenStepState, seconds: float, **changes: object) -> OpenStepState:
    return replace(state, now_ns=T0 + round(seconds * S), **changes)  # type: ignore[arg-type]


def _read(state: OpenStepState, precision: StepPrecision | None, n: int) -> OpenStepState:
    """What the loop does when `precision_due`: a fresh reading at `now_ns`."""
    if not precision_due(state):
        return state
    return replace(state, precision=precision, measured_n=n, checked_ns=state.now_ns)


def _precision(worst: float, target: float = 0.05) -> StepPrecision:
    return StepPrecision(target, worst, worst, worst, precise=worst <= target)


def test_a_fixed_length_step_measures_exactly_step_s_once_settled() -> None:
    state = _state(StepLimits(None, 1.5, 1.5), settle_bound_s=2.0)
    assert end_reason(_at(state, 0.0)) is None  # not settled yet
    settled = _at(state, 0.3, settled_ns=T0 + round(0.3 * S))
    assert end_reason(settled) is None  # measuring starts here
    assert end_reason(_at(settled, 1.799_999_999)) is None
    assert end_reason(_at(settled, 1.8)) == "measured 1.5 s"
    assert not precision_due(_at(settled, 1.8))  # no target: never read


def test_an_unsettled_fixed_step_ends_at_its_warm_up_bound_plus_step_s() -> None:
    state = _state(StepLimits(None, 1.5, 1.5), settle_bound_s=0.5)
    assert end_reason(_at(state, 1.999)) is None
    assert end_reason(_at(state, 2.0)) == "reached its maximum, 2 s"
    state = _state(StepLimits(None, 1.5, 1.5), settle_bound_s=30.0)  # the session's maximum
    assert end_reason(_at(state, 31.4)) is None
    assert end_reason(_at(state, 31.5)) == "reached its maximum, 31.5 s"


def test_a_step_with_59_requests_at_4_percent_ends_on_precision() -> None:
    state = _state(StepLimits(0.05, 40.0, 40.0), settle_bound_s=0.0)
    state = _at(state, 0.0, settled_ns=T0)
    for seconds in (0.0, 1.999):  # under the 2 s minimum measured: not even read
        step = _at(state, seconds)
        assert not precision_due(step) and end_reason(step) is None
    assert end_reason(_read(_at(state, 2.0), _precision(0.04), 59)) == "precise to ±5 %"


def test_precision_is_read_at_most_once_a_second() -> None:
    state = _at(_state(StepLimits(0.05, 40.0, 40.0)), 0.0, settled_ns=T0)
    reads = 0
    for seconds in (0.0, 2.0, 2.5, 2.9, 2.999, 3.0, 3.5, 4.0):
        step = _at(state, seconds)
        if precision_due(step):
            reads += 1
            state = _read(step, _precision(0.08), 200)
            assert end_reason(state) is None
    assert reads == 3  # at 2.0, 3.0 and 4.0 s
    assert end_reason(_read(_at(state, 4.9), _precision(0.03), 240)) is None  # not due: unread
    assert end_reason(_read(_at(state, 5.0), _precision(0.03), 240)) == "precise to ±5 %"


def test_a_step_that_cannot_reach_59_requests_ends_once_its_throughput_is_precise() -> None:
    state = _at(_state(StepLimits(0.05, 10.0, 10.0)), 0.0, settled_ns=T0)
    tokens_known = StepPrecision(0.05, float("inf"), None, 0.03, precise=False)
    # 30 in 2 s of 10: 150 by the maximum, enough
    assert end_reason(_read(_at(state, 2.0), tokens_known, 30)) is None
    assert end_reason(_read(_at(state, 3.0), tokens_known, 10)) == (  # 10 in 3 s: 33, under 59
        "too few requests for a P95 interval by its maximum; output tok/s is precise"
    )
    unknown = StepPrecision(0.05, float("inf"), None, 0.08, precise=False)
    assert end_reason(_read(_at(state, 3.0), unknown, 10)) is None  # throughput not known: go on
    assert end_reason(_at(state, 10.0)) == "reached its maximum, 10 s"


def _records(ttft_s: list[float], start_ns: int = T0) -> list[RequestRecord]:
    """Requests sent 10 ms apart from `start_ns`, each 8 tokens at 10 ms TPOT."""
    out = []
    for i, ttft in enumerate(ttft_s):
        sent = start_ns + i * 10_000_000
        first = sent + round(ttft * S)
        out.append(
            RequestRecord(
                request_id=i,
                step_index=0,
                sent_ns=sent,
                first_token_ns=first,
                end_ns=first + 7 * 10_000_000,
                ok=True,
                output_tokens=8,
            )
        )
    return out


SPEC = StepSpec(0, "concurrency", 4.0, T0, T0, -1)


def _hold() -> OpenStepState:
    return _at(_state(hold_limits(0.05, None)), 0.0, settled_ns=T0)


def _look(state: OpenStepState, seconds: float, records: list[RequestRecord]) -> OpenStepState:
    return look_at(_at(state, seconds), records, SPEC, SLA)


def test_the_hold_looks_only_at_120_240_480_and_960_requests() -> None:
    state = _look(_hold(), 10.0, _records([0.1] * 119))
    assert state.look is None and end_reason(state) is None  # 119: no look, whatever they say
    # The 130th was sent at 1.29 s: with the 1 s guard only the first 120 or so count at 2.3 s.
    state = _look(state, 2.3, _records([0.1] * 130))
    assert state.look is not None and state.look.text() == (
        "pass at look 1 of 4 (n=120, 0.625 % each side)"
    )
    assert precision_due(state)  # a decided look: is the step precise?
    assert end_reason(_read(state, _precision(0.08), 0)) is None  # not precise: go on
    state = _look(state, 3.0, _records([0.1] * 130))
    assert state.looked_ns != state.now_ns and not precision_due(state)  # no look due
    state = _read(_look(state, 4.0, _records([0.1] * 240)), _precision(0.04), 0)
    assert end_reason(state) == (
        "pass, decided at look 2 of 4 (n=240, 0.625 % each side), precise to ±5 %"
    )


def test_a_look_reads_the_first_requests_sent_and_fails_a_slow_server() -> None:
    slow = _records([0.6] * 120)  # every TTFT over the 0.5 s bound
    # 20 fast ones sent later have finished too: the look still reads the first 120 sent.
    records = _records([0.01] * 20, start_ns=T0 + 2 * S)[::-1] + slow
    state = _read(_look(_hold(), 4.0, records), _precision(0.04), 0)
    assert end_reason(state) == (
        "fail, decided at look 1 of 4 (n=120, 0.625 % each side), precise to ±5 %"
    )
    assert hold_basis(state) == "fail, decided at look 1 of 4 (n=120, 0.625 % each side)"


def test_the_hold_ends_at_its_last_look_undecided() -> None:
    # TTFT spread around the bound: the 0.5 s bound sits at the sample's 95th percentile.
    records = _records([0.5 * (k % 100 + 1) / 95 for k in range(960)])
    state, reasons = _hold(), []
    for k in range(4):
        state = _read(_look(state, 20.0 + k, records), _precision(0.04), 0)
        reasons.append(end_reason(state))
    assert reasons[:3] == [None, None, None]  # looks 1-3: inconclusive
    assert reasons[3] == "inconclusive at look 4 of 4 (n=960, 0.625 % each side): its last look"
    assert state.look is not None and state.look.verdict == "inconclusive"


def test_a_hold_at_its_limit_between_looks_takes_a_final_look_with_the_unspent_error() -> None:
    # The first 120 sent spread around the 0.5 s bound (look 1: inconclusive); the 80 after
    # them take 1 s: 85 of 200 over the bound by the 5-min limit, before look 2's 240.
    around = [0.5 * (k % 100 + 1) / 95 for k in range(120)]
    records = _records(around + [1.0] * 80)
    state = _look(_hold(), 20.0, records[:130])
    assert state.look is not None and state.look.verdict == "inconclusive"
    assert end_reason(state) is None
    state = _look(state, 299.9, records)
    assert state.look is not None and state.look.number == 1  # 200 < 240: no look due
    state = _look(state, 300.0, records)
    final = "fail at its 5-min limit: final look (n=200, 1.88 % each side: unspent by looks 2-4)"
    assert end_reason(state) == final and hold_basis(state) == final
    assert state.look is not None and state.look.alpha == 0.025 - 0.00625
    # Data that do not decide stay inconclusive there, at the same error.
    undecided = _records([0.5 * (k % 100 + 1) / 95 for k in range(200)])  # 5 % over it
    state = _look(_look(_hold(), 20.0, undecided[:130]), 300.0, undecided)
    assert end_reason(state) == (
        "inconclusive at its 5-min limit: final look (n=200, 1.88 % each side: "
        "unspent by looks 2-4)"
    )
    # A hold that never settled has no look to take: it says so.
    unsettled = _at(_state(hold_limits(0.05, 90.0)), 90.0)
    assert end_reason(look_at(unsettled, records, SPEC, SLA)) == (
        "inconclusive at its 90-s limit: it never settled, no look"
    )


def test_a_flooded_or_closed_step_ends_at_once() -> None:
    state = _state(StepLimits(0.05, 40.0, 40.0))
    reason = end_reason(_at(state, 0.0, flooded="16 requests rejected"))
    assert reason == "flooded with rejections: 16 requests rejected"
    assert end_reason(_at(state, 0.0, closed=True)) == "closed elsewhere"


def test_the_step_policy_from_the_flags() -> None:
    assert step_limits(None, None, None, precise=False) == StepLimits(None, 40.0, 40.0)
    assert step_limits(None, None, 8.0, precise=False) == StepLimits(None, 8.0, 8.0)
    assert step_limits(None, None, 8.0, precise=True) == StepLimits(0.05, 8.0, 8.0)  # --auto
    assert step_limits(None, None, None, precise=True) == StepLimits(0.05, 40.0, 40.0)
    assert step_limits(0.1, 5.0, None, precise=False) == StepLimits(0.1, 5.0, 5.0)
    assert step_limits(0.1, None, None, precise=False).max_s == DEFAULT_MAX_STEP_S
    assert hold_limits(0.1, None) == StepLimits(0.1, 300.0, 300.0, until_decided=True)
    assert hold_limits(0.1, 20.0).max_s == 20.0 and DEFAULT_MAX_HOLD_S == 300.0
