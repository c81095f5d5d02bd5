"""Step aggregation: warm-up exclusion, late finishers, token-arrival throughput, goodput, errors.

The scenario (times in ms from T0): the step starts at 0, measures from 1,000 and ends at 11,000,
so W = [1 s, 11 s) and duration_s = 10.
"""

from __future__ import annotations

import pytest

from gputui.engine.records import RequestRecord
from gputui.metrics.sla import Sla
from gputui.metrics.step import StepResult, StepSpec, aggregate_step
from tests.support.records import ns, rec

SPEC = StepSpec(
    index=0,
    mode="rate",  # rates over W itself (a closed loop reads whole cycles: test_rate_window)
    level=4,
    start_ns=ns(0),
    measure_start_ns=ns(1000),
    end_ns=ns(11_000),
)


def scenario() -> list[RequestRecord]:
    return [
        # warm-up: not measured, but 3 of its tokens (1.0, 1.2, 1.4 s) arrive in W and it ends in W
        rec(
            sent_ms=500,
            end_ms=1400,
            tokens_ms=[600, 800, 1000, 1200, 1400],
            input_tokens=999,
            connect_ms=7,
        ),
        # M1: TTFT 0.5, 4 events carry 8 usage tokens (2 each), TPOT 0.4 / 7, ITL 0.1 x 3
        rec(
            sent_ms=2000,
            end_ms=2900,
            tokens_ms=[2500, 2600, 2700, 2800],
            output_tokens=8,
            input_tokens=100,
            requested=8,
            connect_ms=5,
        ),
        # M2: sent in the step, ends after it (11.2 s); 3 events in W; TTFT 0.3, TPOT 0.4 / 3
        rec(
            sent_ms=10_500,
            end_ms=11_200,
            tokens_ms=[10_800, 10_900, 10_950, 11_100],
            input_tokens=200,
            requested=4,
        ),
        # M6: one token, short of the 16 asked for; TTFT 0.2, no TPOT; counted chunks (no usage)
        rec(
            sent_ms=5000, end_ms=5250, tokens_ms=[5200], input_tokens=50, requested=16, usage=False
        ),
        # failures, one per reason; the timeout got 2 tokens before it failed
        rec(
            sent_ms=3000,
            end_ms=4000,
            tokens_ms=[3500, 3600],
            ok=False,
            error="timeout",
            usage=False,
            connect_ms=9,
        ),
        rec(sent_ms=3000, end_ms=3010, ok=False, error="http_503"),
        rec(sent_ms=3000, end_ms=3010, ok=False, error=None),
        # another step's record: ignored entirely
        rec(sent_ms=5000, end_ms=6000, tokens_ms=[5500, 5600], step=1, input_tokens=7),
    ]


def aggregate(sla: Sla | None = None) -> StepResult:
    return aggregate_step(SPEC, scenario(), sla or Sla())


def test_shape_of_the_step() -> None:
    r = aggregate()
    assert (r.index, r.mode, r.level) == (0, "rate", 4.0)
    assert r.duration_s == pytest.approx(10.0)
    assert r.warmup_s == pytest.approx(1.0)
    assert r.incomplete is False
    assert aggregate_step(SPEC, scenario(), Sla(), incomplete=True).incomplete is True


def test_counts_measured_requests_and_keeps_every_failure_reason() -> None:
    r = aggregate()
    assert r.requests_ok == 3  # M1, M2 (ended after the step) and M6; the warm-up one is out
    assert r.requests_failed == 3
    assert r.errors == {"http_503": 1, "timeout": 1, "unknown": 1}
    assert r.error_rate == pytest.approx(0.5)


def test_throughput_counts_what_arrived_or_ended_inside_w() -> None:
    r = aggregate()
    # tokens in W: warm-up 3 + M1 4 x 2 + M2 3 + M6 1 + the timeout's 2 = 17
    assert r.output_tokens_per_s == pytest.approx(1.7)
    # ok and ended in W: warm-up (1.4 s), M1, M6; not M2 (11.2 s)
    assert r.requests_per_s == pytest.approx(0.3)
    # ok with the first token in W: M1 100 + M2 200 + M6 50; the warm-up one's came at 0.6 s
    assert r.input_tokens_per_s == pytest.approx(35.0)


def test_latencies_over_measured_ok_requests() -> None:
    r = aggregate()
    assert r.ttft_s.n == 3
    assert r.ttft_s.mean == pytest.approx((0.5 + 0.3 + 0.2) / 3)
    assert r.ttft_s.p95 == pytest.approx(0.48)  # [0.2, 0.3, 0.5] at index 1.9
    assert r.tpot_s.n == 2  # the 1-token output is out
    assert r.tpot_s.mean == pytest.approx((0.4 / 7 + 0.4 / 3) / 2)
    assert r.itl_s.n == 6  # M1's three and M2's three, nothing from warm-up or failures
    assert r.itl_s.mean == pytest.approx(0.6 / 6)
    assert r.itl_s.p50 == pytest.approx(0.1)
    assert r.itl_s.p99 == pytest.approx(0.1 + 0.95 * 0.05)  # [.05 .1 .1 .1 .1 .15] at 4.95
    assert r.e2e_s.n == 3
    assert r.e2e_s.p50 == pytest.approx(0.7)
    assert r.connect_s.n == 1
    assert r.connect_s.mean == pytest.approx(0.005)


def test_usage_flag_and_short_outputs() -> None:
    r = aggregate()
    assert r.output_tokens_from_usage is False  # M6 counted chunks
    assert r.short_outputs == 1
    all_usage = [x for x in scenario() if x.ok and x.tokens_from_usage]
    assert aggregate_step(SPEC, all_usage, Sla()).output_tokens_from_usage is True


def test_goodput_excludes_exactly_the_slow_first_token() -> None:
    r = aggregate(Sla(ttft_p95_s=0.4, tpot_p95_s=0.25))
    # Good: the warm-up one (TTFT 0.1, TPOT 0.2) and M2 (TTFT 0.3); M1 (TTFT 0.5) is over, M6
    # is short. Requests ended in W: the warm-up one; tokens in W: its 3 + M2's 3.
    assert r.goodput_requests_per_s == pytest.approx(0.1)
    assert r.goodput_output_tokens_per_s == pytest.approx((3 + 3) / 10)
    assert r.goodput_share == pytest.approx(1 / 6)  # M2 of the 6 measured


def test_goodput_excludes_exactly_the_slow_decoder() -> None:
    r = aggregate(Sla(tpot_p95_s=0.1))
    # Over: the warm-up one (TPOT 0.2) and M2 (0.133); M1 (0.057) is good; M6 is short
    assert r.goodput_requests_per_s == pytest.approx(0.1)
    assert r.goodput_output_tokens_per_s == pytest.approx(8 / 10)


def test_no_sla_means_every_ok_full_length_request_is_good() -> None:
    r = aggregate()
    # Good: warm-up, M1, M2; M6 stopped short, the failures are never good. Ended in W: the
    # warm-up one and M1; tokens in W: 3 + 8 + 3 of the 17 that output tok/s counts.
    assert r.goodput_requests_per_s == pytest.approx(0.2)
    assert r.goodput_output_tokens_per_s == pytest.approx(1.4)
    assert r.goodput_output_tokens_per_s <= r.output_tokens_per_s
    assert r.goodput_share == pytest.approx(2 / 6)
    assert r.sla_ok is True


def test_goodput_is_output_when_every_request_is_good() -> None:
    good = [x for x in scenario() if x.ok and x.output_tokens >= x.requested_output_tokens]
    r = aggregate_step(SPEC, good, Sla())
    assert r.goodput_output_tokens_per_s == pytest.approx(r.output_tokens_per_s)
    assert r.goodput_output_tokens_per_s_ci == r.output_tokens_per_s_ci


@pytest.mark.parametrize(
    ("sla", "expected"),
    [
        (Sla(ttft_p95_s=1.0, tpot_p95_s=0.2, max_error_rate=0.5), True),
        (Sla(ttft_p95_s=0.4), False),  # P95 TTFT 0.48
        (Sla(tpot_p95_s=0.12), False),  # P95 TPOT 0.057 + 0.95 * 0.076 = 0.129
        (Sla(max_error_rate=0.4), False),  # 3 of 6 failed
    ],
)
def test_sla_verdict(sla: Sla, expected: bool) -> None:
    assert aggregate(sla).sla_ok is expected


def test_step_with_no_requests() -> None:
    r = aggregate_step(SPEC, [], Sla())
    assert (r.requests_ok, r.requests_failed, r.errors) == (0, 0, {})
    assert r.ttft_s.n == 0
    assert r.ttft_s.p95 is None
    assert r.output_tokens_per_s == 0.0
    assert r.error_rate is None
    assert r.sla_ok is False


def test_only_failures_fail_the_sla() -> None:
    r = aggregate_step(SPEC, [rec(sent_ms=2000, end_ms=2001, ok=False, error="connect")], Sla())
    assert r.errors == {"connect": 1}
    assert r.sla_ok is False


def test_empty_window_gives_zero_rates() -> None:
    spec = StepSpec(
        index=0, mode="rate", level=2.5, start_ns=ns(0), measure_start_ns=ns(0), end_ns=ns(0)
    )
    r = aggregate_step(spec, scenario(), Sla())
    assert r.duration_s == 0.0
    assert r.requests_per_s == 0.0
    assert r.goodput_requests_per_s == 0.0
