"""Adaptive steps: a step cut short is imprecise and never passes; settling by the first wave."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from gputui.engine.records import RequestRecord
from gputui.metrics.precision import mark_precision
from gputui.metrics.summary import Summary
from gputui.session.settling import SettleTracker
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
