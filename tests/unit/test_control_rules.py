"""Step-end rules (`control.rules`): each step ends for one stated reason, when it should."""

from __future__ import annotations

from dataclasses import replace

from gputui.control.rules import (
    DEFAULT_MAX_HOLD_S,
    DEFAULT_MAX_STEP_S,
    OpenStep,
    StepLimits,
    StepRules,
    hold_limits,
    step_limits,
)
from gputui.engine.records import RequestRecord
from gputui.metrics.precision import StepPrecision
from tests.support.driven import FakeSession, rejections

S = 1_000_000_000
T0 = 10 * S
"""When the runner began watching the step (any origin: the rules read differences)."""


def _open(session: FakeSession, limits: StepLimits) -> tuple[StepRules, int]:
    index = session.set_load("concurrency", 4).index
    return StepRules.for_step(limits, session, index), index


def _at(rules: StepRules, session: FakeSession, index: int, seconds: float) -> str | None:
    return rules.check(OpenStep(session, index, T0, T0 + round(seconds * S)))


def _precision(worst: float, target: float = 0.05) -> StepPrecision:
    return StepPrecision(target, worst, worst, worst, precise=worst <= target)


def test_a_fixed_length_step_measures_exactly_step_s_once_settled() -> None:
    session = FakeSession(warmup_s=2.0)
    rules, index = _open(session, StepLimits(None, 1.5, 1.5))
    session.is_settled = False
    assert _at(rules, session, index, 0.0) is None
    session.is_settled = True
    assert _at(rules, session, index, 0.3) is None  # settled now: measuring starts here
    assert _at(rules, session, index, 1.799_999_999) is None
    assert _at(rules, session, index, 1.8) == "measured 1.5 s"
    assert session.targets == {}  # no target told without one


def test_an_unsettled_fixed_step_ends_at_its_warm_up_bound_plus_step_s() -> None:
    session = FakeSession(warmup_s=0.5)
    session.is_settled = False
    rules, index = _open(session, StepLimits(None, 1.5, 1.5))
    assert _at(rules, session, index, 1.999) is None
    assert _at(rules, session, index, 2.0) == "reached its maximum, 2 s"
    session.warmup_s = None  # steady-state settling: bounded by the session's maximum warm-up
    rules, index = _open(session, StepLimits(None, 1.5, 1.5))
    assert _at(rules, session, index, 31.4) is None
    assert _at(rules, session, index, 31.5) == "reached its maximum, 31.5 s"


def test_a_step_with_59_requests_at_4_percent_ends_on_precision() -> None:
    session = FakeSession()
    rules, index = _open(session, StepLimits(0.05, 40.0, 40.0))
    assert session.targets == {index: 0.05}  # the session judges the step against it
    session.precision = (_precision(0.04), 59)
    assert _at(rules, session, index, 0.0) is None  # settled here
    assert _at(rules, session, index, 1.999) is None  # under the 2 s minimum measured
    assert session.precision_asks == 0
    assert _at(rules, session, index, 2.0) == "precise to ±5 %"


def test_precision_is_asked_at_most_once_a_second() -> None:
    session = FakeSession()
    rules, index = _open(session, StepLimits(0.05, 40.0, 40.0))
    session.precision = (_precision(0.08), 200)
    for seconds in (0.0, 2.0, 2.5, 2.9, 2.999, 3.0, 3.5, 4.0):
        assert _at(rules, session, index, seconds) is None
    assert session.precision_asks == 3  # at 2.0, 3.0 and 4.0 s
    session.precision = (_precision(0.03), 240)
    assert _at(rules, session, index, 4.9) is None
    assert _at(rules, session, index, 5.0) == "precise to ±5 %"


def test_a_step_that_cannot_reach_59_requests_ends_once_its_throughput_is_precise() -> None:
    session = FakeSession()
    rules, index = _open(session, StepLimits(0.05, 10.0, 10.0))
    tokens_known = StepPrecision(0.05, float("inf"), None, 0.03, precise=False)
    session.precision = (tokens_known, 30)  # 30 in 2 s of 10: 150 by the maximum, enough
    assert _at(rules, session, index, 0.0) is None
    assert _at(rules, session, index, 2.0) is None
    session.precision = (tokens_known, 10)  # 10 in 3 s: 33 by the maximum, under 59
    assert _at(rules, session, index, 3.0) == (
        "too few requests for a P95 interval by its maximum; output tok/s is precise"
    )
    rules, index = _open(session, StepLimits(0.05, 10.0, 10.0))
    session.precision = (StepPrecision(0.05, float("inf"), None, 0.08, precise=False), 10)
    assert _at(rules, session, index, 0.0) is None
    assert _at(rules, session, index, 3.0) is None  # throughput not known yet: go on
    assert _at(rules, session, index, 10.0) == "reached its maximum, 10 s"


def _hold(session: FakeSession) -> tuple[StepRules, int]:
    """A hold whose step measures from T0 (the records below are stamped from there)."""
    rules, index = _open(session, hold_limits(0.05, None))
    session.specs[-1] = replace(session.specs[-1], start_ns=T0, measure_start_ns=T0)
    return rules, index


def _records(step: int, ttft_s: list[float], start_ns: int = T0) -> list[RequestRecord]:
    """Requests of `step` sent 10 ms apart from `start_ns`, each 8 tokens at 10 ms TPOT."""
    out = []
    for i, ttft in enumerate(ttft_s):
        sent = start_ns + i * 10_000_000
        first = sent + round(ttft * S)
        out.append(
            RequestRecord(
                request_id=i,
                step_index=step,
                sent_ns=sent,
                first_token_ns=first,
                end_ns=first + 7 * 10_000_000,
                ok=True,
                output_tokens=8,
            )
        )
    return out


def test_the_hold_looks_only_at_120_240_480_and_960_requests() -> None:
    session = FakeSession()  # P95 TTFT <= 0.5 s, P95 TPOT <= 50 ms
    rules, index = _hold(session)
    session.precision = (_precision(0.08), 0)  # not precise yet
    session.records = _records(index, [0.1] * 119)
    assert _at(rules, session, index, 10.0) is None  # 119 requests: no look, whatever they say
    assert session.verdicts[index] == ("inconclusive", "no look yet (the first at 120 requests)")
    session.records = _records(index, [0.1] * 130)
    # The 130th was sent at 1.29 s: with the 1 s guard only the first 120 or so count at 2.3 s.
    assert _at(rules, session, index, 2.3) is None  # look 1: a pass, but not precise: go on
    assert session.verdicts[index] == ("pass", "pass at look 1 of 4 (n=120, 0.625 % each side)")
    session.precision = (_precision(0.04), 0)
    assert _at(rules, session, index, 3.0) is None  # precise now, but no look is due
    session.records = _records(index, [0.1] * 240)
    assert _at(rules, session, index, 4.0) == (
        "pass at look 2 of 4 (n=240, 0.625 % each side), precise to ±5 %"
    )


def test_a_look_reads_the_first_requests_sent_and_fails_a_slow_server() -> None:
    session = FakeSession()
    rules, index = _hold(session)
    session.precision = (_precision(0.04), 0)
    slow = _records(index, [0.6] * 120)  # every TTFT over the 0.5 s bound
    # 20 fast ones sent later have finished too: the look still reads the first 120 sent.
    session.records = _records(index, [0.01] * 20, start_ns=T0 + 2 * S)[::-1] + slow
    assert _at(rules, session, index, 4.0) == (
        "fail at look 1 of 4 (n=120, 0.625 % each side), precise to ±5 %"
    )


def test_the_hold_ends_at_its_last_look_undecided() -> None:
    session = FakeSession()
    rules, index = _hold(session)
    session.precision = (_precision(0.04), 0)
    # TTFT spread around the bound: the 0.5 s bound sits at the sample's 95th percentile.
    spread = [0.5 * (k % 100 + 1) / 95 for k in range(960)]
    session.records = _records(index, spread)
    reasons = [_at(rules, session, index, 20.0 + k) for k in range(4)]
    assert reasons[:3] == [None, None, None]  # looks 1-3: inconclusive
    assert reasons[3] == "inconclusive at look 4 of 4 (n=960, 0.625 % each side): its last look"
    assert session.verdicts[index][0] == "inconclusive"


def test_a_flooded_or_closed_step_ends_at_once() -> None:
    session = FakeSession()
    rules, index = _open(session, StepLimits(0.05, 40.0, 40.0))
    session.error_log.add(rejections(index, 16))
    reason = _at(rules, session, index, 0.0)
    assert reason is not None and reason.startswith("flooded with rejections: 16 requests")
    rules, index = _open(session, StepLimits(None, 5.0, 5.0))
    session.set_load("concurrency", 8)  # the operator moved on
    assert _at(rules, session, index, 0.0) == "closed elsewhere"


def test_the_step_policy_from_the_flags() -> None:
    assert step_limits(None, None, None, precise=False) == StepLimits(None, 40.0, 40.0)
    assert step_limits(None, None, 8.0, precise=False) == StepLimits(None, 8.0, 8.0)
    assert step_limits(None, None, 8.0, precise=True) == StepLimits(0.05, 8.0, 8.0)  # --auto
    assert step_limits(None, None, None, precise=True) == StepLimits(0.05, 40.0, 40.0)
    assert step_limits(0.1, 5.0, None, precise=False) == StepLimits(0.1, 5.0, 5.0)
    assert step_limits(0.1, None, None, precise=False).max_s == DEFAULT_MAX_STEP_S
    assert hold_limits(0.1, None) == StepLimits(0.1, 300.0, 300.0, until_decided=True)
    assert hold_limits(0.1, 20.0).max_s == 20.0 and DEFAULT_MAX_HOLD_S == 300.0
