"""What the open step's verdict still needs: samples against 59, and time at the step's rate."""

from __future__ import annotations

import pytest

from gputui.engine.records import RequestRecord
from gputui.metrics.rejudge import rejudge_by_intervals, rejudge_step
from gputui.metrics.sla import Sla
from gputui.metrics.step import StepResult, StepSpec, aggregate_step
from gputui.metrics.verdict_progress import (
    P95_DECIDES,
    VerdictProgress,
    error_rate_decides,
    verdict_needs_text,
    verdict_progress,
    wait_text,
)
from tests.support.records import ns, rec

SLA = Sla(ttft_p95_s=1.0, tpot_p95_s=0.05)


def _requests(ttfts_ms: list[float], gap_ms: float) -> list[RequestRecord]:
    """One request every `gap_ms` ms, each with this TTFT and 8 tokens 20 ms apart."""
    out = []
    for i, ttft in enumerate(ttfts_ms):
        sent = i * gap_ms
        stamps = [sent + ttft + 20.0 * k for k in range(8)]
        out.append(rec(sent_ms=sent, end_ms=stamps[-1], tokens_ms=stamps))
    return out


def _so_far(records: list[RequestRecord], now_ms: float, sla: Sla = SLA) -> StepResult:
    spec = StepSpec(0, "rate", 4, ns(0), ns(0), ns(now_ms))  # rates over W (no cycles)
    return aggregate_step(spec, records, sla)


def test_p95_needs_59_requests() -> None:
    assert P95_DECIDES == 59


def test_23_requests_at_half_a_request_per_second_need_72_seconds_more() -> None:
    # 23 fast requests, one every 2 s: the P95 interval has no upper end yet, so no pass.
    records = _requests([100.0] * 23, gap_ms=2000.0)
    progress = verdict_progress(_so_far(records, now_ms=46_000.0), SLA)
    assert progress.verdict == "inconclusive"
    assert progress.n == 23
    assert progress.requests_per_s == pytest.approx(23 / 46.0)
    assert progress.seconds_left == pytest.approx((59 - 23) / (23 / 46.0))  # 72 s
    assert verdict_needs_text(progress) == "P95 verdict: 23 of 59 requests, ~72 s"


def test_the_text_counts_down_and_names_minutes_when_long() -> None:
    progress = VerdictProgress("inconclusive", n=10, requests_per_s=0.25)
    assert progress.seconds_left == pytest.approx(196.0)
    assert verdict_needs_text(progress) == "P95 verdict: 10 of 59 requests, ~3 min"
    assert wait_text(39.2) == "~40 s"
    assert verdict_needs_text(VerdictProgress("inconclusive", 0, 0.0)) == (
        "P95 verdict: 0 of 59 requests"
    )


def test_a_decided_step_shows_its_verdict() -> None:
    fast = verdict_progress(_so_far(_requests([100.0] * 64, 100.0), 7000.0), SLA)
    assert (fast.verdict, fast.n, fast.decided, fast.seconds_left) == ("pass", 64, True, None)
    assert verdict_needs_text(fast) == "SLA verdict: pass (n=64)"
    # Five requests at 2 s are enough to fail a 1 s bound (the interval's lower end exists).
    slow = verdict_progress(_so_far(_requests([2000.0] * 5, 500.0), 5000.0), SLA)
    assert verdict_needs_text(slow) == "SLA verdict: fail (n=5)"


def test_enough_samples_but_straddling_says_so() -> None:
    ttfts = [900.0 + 4.0 * i for i in range(60)]  # P95 near 1.13 s with an interval over 1 s
    progress = verdict_progress(_so_far(_requests(ttfts, 100.0), 7000.0), Sla(1.12, None))
    assert progress.verdict == "inconclusive" and progress.n == 60
    assert verdict_needs_text(progress).startswith("SLA verdict: inconclusive on 60 requests")


def test_nothing_finished_yet_is_undecided_not_a_fail() -> None:
    progress = verdict_progress(_so_far([], now_ms=500.0), SLA)
    assert (progress.verdict, progress.n, progress.decided) == ("inconclusive", 0, False)
    assert verdict_needs_text(progress) == "P95 verdict: 0 of 59 requests"


def test_without_latency_bounds_there_is_nothing_to_wait_for() -> None:
    progress = verdict_progress(_so_far(_requests([100.0] * 3, 100.0), 1000.0), Sla())
    assert not progress.bounded and progress.verdict == "pass"
    assert verdict_needs_text(progress) == "SLA verdict: pass (no bound set)"


def test_an_error_rate_bound_of_1_percent_needs_381_clean_requests() -> None:
    # Wilson upper end with no failure: z^2 / (n + z^2) <= 0.01 once n >= 381.
    assert error_rate_decides(0, 64, 0.01) == 381
    assert error_rate_decides(2, 64, 0.01) == 726  # Wilson: 0.010002 at 725, 0.009988 at 726
    assert error_rate_decides(0, 10, 0.0) is None  # "no failure at all" is decided at once
    records = _requests([100.0] * 64, 100.0)
    progress = verdict_progress(_so_far(records, 7000.0), Sla(1.0, 0.05, 0.01))
    assert (progress.verdict, progress.limit, progress.n, progress.needed) == (
        "inconclusive",
        "error-rate",
        64,
        381,
    )
    assert verdict_needs_text(progress).startswith("error-rate verdict: 64 of 381 requests, ~")


def test_rejudge_changes_only_what_the_sla_decides() -> None:
    records = _requests([100.0] * 64, 100.0)
    spec = StepSpec(0, "concurrency", 4, ns(0), ns(0), ns(7000.0))
    step = aggregate_step(spec, records, SLA)
    assert step.sla_verdict == "pass" and step.goodput_share == 1.0
    tight = Sla(ttft_p95_s=0.05, tpot_p95_s=0.05)
    judged = rejudge_step(step, spec, records, tight)
    assert (judged.sla_verdict, judged.sla_ok, judged.goodput_share) == ("fail", False, 0.0)
    assert judged.goodput_output_tokens_per_s == 0.0
    assert judged.ttft_s == step.ttft_s and judged.output_tokens_per_s == step.output_tokens_per_s
    by_intervals = rejudge_by_intervals(step, tight)
    assert (by_intervals.sla_verdict, by_intervals.goodput_share) == ("fail", 1.0)
