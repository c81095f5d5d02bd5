"""Adaptive steps: a step cut short is imprecise and never passes; settling by the first wave."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from gputui.engine.records import RequestRecord
from gputui.metrics.precision import mark_precision
from gputui.metrics.summary import Summary
from gputui.session.settling import SettleTracker, first_verdict_s, settle_bound_s
from tests.support.steps import make_step


def _with_ci(summary: Summary, half: float) -> Summary:
    assert summary.p95 is not None
    return replace(summary, p95_ci=(summary.p95 * (1 - half), summary.p95 * (1 + half)))


def test_a_step_short_of_its_target_is_imprecise_and_keeps_its_interval_verdict() -> None:
    step = make_step(8, ttft_p95_s=0.5, tpot_p95_s=0.02)
    step = replace(
        step,
        ttft_s=_with_ci(step.ttft_s, 0.12),
        tpot_s=_with_ci(step.tpot_s, 0.01),
        output_tokens_per_s_ci=(980.0, 1020.0),
        sla_verdict="pass",
        sla_ok=True,
    )
    marked = mark_precision(step, 0.05)
    assert marked.imprecise is True
    assert marked.sla_verdict == "pass"  # the whole (wide) interval lies within the bound
    assert marked.precision == {"ttft_p95": 0.12, "tpot_p95": 0.01, "output_tokens_per_s": 0.02}
    precise = mark_precision(step, 0.15)
    assert precise.imprecise is False and precise.sla_verdict == "pass"


def test_an_open_interval_is_recorded_as_null_and_an_empty_window_is_not_a_fail() -> None:
    step = make_step(64, requests_ok=0, ttft_p95_s=None, tpot_p95_s=None)
    step = replace(step, sla_verdict="fail", output_tokens_per_s_ci=None)
    marked = mark_precision(step, 0.05)
    assert marked.imprecise is True
    assert marked.sla_verdict == "inconclusive"  # nothing measured: no evidence of a failure
    failing = replace(make_step(64, ttft_p95_s=3.0), sla_verdict="fail")
    failing = replace(failing, ttft_s=replace(failing.ttft_s, p95_ci=(2.5, None)))
    marked = mark_precision(failing, 0.05)
    assert marked.sla_verdict == "fail"  # a decisive fail on measured requests stays a fail
    assert marked.precision is not None and marked.precision["ttft_p95"] is None  # open: null


def _record(i: int, sent_ns: int, end_ns: int) -> RequestRecord:
    return RequestRecord(request_id=i, step_index=0, sent_ns=sent_ns, end_ns=end_ns, ok=True)


def test_closed_loop_settles_when_the_first_wave_completed() -> None:
    s = 1_000_000_000
    tracker = SettleTracker(
        index=0, mode="concurrency", level=4, change_ns=0, max_warmup_s=30, lifetime_hint_s=None
    )
    tracker.on_batch(s // 100, sent=4, in_flight=4)  # the wave of 4 went out at once
    wave = [_record(i, i * 1000, (3 + i) * s) for i in range(3)]  # one member still in flight
    assert tracker.decide(5 * s, wave) is None
    wave.append(_record(3, 3000, 7 * s))
    wave.append(_record(4, 4 * s, 8 * s))  # a refill sent later does not count
    found = tracker.decide(9 * s, wave)
    assert found is not None and found.reason == "first wave completed"
    assert found.warmup_s == 7.0


def test_an_unsettled_step_opens_at_the_maximum_warm_up() -> None:
    s = 1_000_000_000
    tracker = SettleTracker(
        index=0, mode="rate", level=5, change_ns=0, max_warmup_s=3, lifetime_hint_s=1.0
    )
    for k, t in enumerate(np.arange(0, 3.2, 0.25)):
        tracker.on_batch(int(t * s), sent=k, in_flight=k * 3)  # a queue that keeps growing
    assert tracker.decide(2 * s, []) is None
    found = tracker.decide(int(3.2 * s), [])
    assert found is not None and found.reason == "maximum warm-up" and found.warmup_s == 3.0


def test_the_hand_overs_requests_are_not_the_first_wave() -> None:
    """Issue 28: the old load's requests count in the new step but sent before its level."""
    s = 1_000_000_000
    change = 10 * s
    tracker = SettleTracker(
        index=0,
        mode="concurrency",
        level=4,
        change_ns=change,
        max_warmup_s=30,
        lifetime_hint_s=None,
        sent_before=6,  # as the last batch before the switch said; 2 more went out after it
    )
    tail = [_record(i, change - (8 - i) * 1000, change + s) for i in range(8)]
    tracker.on_batch(change + s // 10, sent=10, in_flight=6)  # 8 hand-over + 2 at the level
    wave = [_record(10 + i, change + 1000 * i, change + 3 * s) for i in range(2)]
    assert tracker.decide(change + 4 * s, tail + wave) is None  # 2 of the wave: not yet
    tracker.on_batch(change + 2 * s // 10, sent=12, in_flight=4)  # the other 2 went out
    wave += [_record(12 + i, change + s // 10 + 1000 * i, change + 5 * s) for i in range(2)]
    found = tracker.decide(change + 6 * s, tail + wave)
    assert found is not None and found.reason == "first wave completed"
    assert found.warmup_s == 5.0  # the fourth wave member's end, not the 30 s bound


def test_settling_is_bounded_by_what_the_level_needs() -> None:
    """Issue 28: three lifetimes at the new level (5 s at least), not a fixed 30 s."""
    assert settle_bound_s(30.0, None, 16, 8) == 30.0  # nothing to go by: the maximum
    assert settle_bound_s(30.0, 1.2, 16, 16) == 5.0  # 3.6 s: the floor
    assert settle_bound_s(30.0, 2.0, 16, 8) == pytest.approx(12.0)  # 3 x 2 s x twice the load
    assert settle_bound_s(30.0, 2.0, 4, 8) == pytest.approx(6.0)  # a lower level: no shrink
    assert settle_bound_s(30.0, 4.0, 128, 16) == 30.0  # 8x the load: capped


def test_the_first_verdict_comes_after_one_lifetime_and_a_p95_worth_of_requests() -> None:
    assert first_verdict_s("concurrency", 16, None, 8) is None
    # 16 streams, a 2 s lifetime at 8 -> 4 s at 16: settled at 4 s, 59 requests at 4/s later.
    assert first_verdict_s("concurrency", 16, 2.0, 8) == pytest.approx(4.0 + 59 / 4.0)
    assert first_verdict_s("rate", 10, 1.0, 10) == pytest.approx(1.0 + 5.9)
