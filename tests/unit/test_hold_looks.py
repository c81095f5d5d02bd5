"""The hold's looks (`metrics.hold_looks`): ranks, verdicts and the sample a look reads."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gputui.engine.records import RequestRecord
from gputui.metrics.confidence import rank_coverage
from gputui.metrics.hold_looks import (
    HOLD_LOOKS,
    LookSample,
    due_look,
    error_rate_look,
    final_look,
    in_send_order,
    judge_look,
    look_alpha,
    look_sample,
    lower_rank,
    p95_look,
    take_look,
    unspent_alpha,
    upper_rank,
    wilson_one_sided,
)
from gputui.metrics.sla import Sla

S = 1_000_000_000


def test_the_error_is_split_evenly_between_four_looks() -> None:
    assert HOLD_LOOKS == (120, 240, 480, 960)
    assert look_alpha() == pytest.approx(0.00625)
    assert look_alpha((100, 200), 0.05) == pytest.approx(0.025)


@pytest.mark.parametrize(
    ("n", "upper", "lower"), [(120, 120, 107), (240, 237, 219), (480, 468, 443), (960, 929, 894)]
)
def test_ranks_at_each_look_hold_exactly_their_error(n: int, upper: int, lower: int) -> None:
    alpha = look_alpha()
    assert (upper_rank(n, alpha), lower_rank(n, alpha)) == (upper, lower)
    # P(x_(u) < P95) = P(B >= u) <= alpha, and the next rank down would exceed it.
    assert 1 - rank_coverage(n, 0.95, 0, upper) <= alpha
    if upper > 1:
        assert 1 - rank_coverage(n, 0.95, 0, upper - 1) > alpha
    # P(x_(l) > P95) = P(B <= l - 1) <= alpha, and the next rank up would exceed it.
    assert rank_coverage(n, 0.95, 0, lower) <= alpha
    assert rank_coverage(n, 0.95, 0, lower + 1) > alpha


def test_too_few_samples_cannot_pass() -> None:
    # 0.95^n must be under the error for the largest sample to bound the P95: n >= 99 at 0.625 %.
    assert upper_rank(98, look_alpha()) is None
    assert upper_rank(99, look_alpha()) == 99
    assert 0.95**99 <= look_alpha() < 0.95**98
    assert p95_look([0.1] * 98, 0.5, look_alpha()) == "inconclusive"


def test_a_p95_look_on_numbers() -> None:
    alpha = look_alpha()
    values = np.arange(1, 121, dtype=np.float64)  # 1..120: x_(120) = 120, x_(107) = 107
    assert p95_look(values, 120.0, alpha) == "pass"  # the largest is within the bound
    assert p95_look(values, 119.9, alpha) == "inconclusive"
    assert p95_look(values, 106.9, alpha) == "fail"  # x_(107) = 107 over it
    assert p95_look(values, 107.0, alpha) == "inconclusive"
    assert p95_look(values[::-1], 120.0, alpha) == "pass"  # order does not matter within a look


def test_the_one_sided_wilson_bounds_and_the_error_rate_look() -> None:
    lo, hi = wilson_one_sided(0, 240, 0.00625) or (math.nan, math.nan)
    z = 2.4977054744123693  # the normal's 99.375 % point
    assert lo == 0.0
    assert hi == pytest.approx(z * z / 240 / (1 + z * z / 240), rel=1e-9)
    assert error_rate_look(0, 240, 0.05, 0.00625) == "pass"  # hi = 2.53 %
    assert error_rate_look(0, 120, 0.01, 0.00625) == "inconclusive"  # hi = 4.9 %
    assert error_rate_look(40, 240, 0.05, 0.00625) == "fail"
    assert error_rate_look(1, 240, 0.0, 0.00625) == "fail"  # a bound of none: any failure
    assert error_rate_look(0, 0, 0.05, 0.00625) == "inconclusive"


def test_a_look_combines_every_bound() -> None:
    sla = Sla(0.5, 0.05, 0.05)
    fast = LookSample(ttft_s=[0.1] * 240, tpot_s=[0.01] * 240, ok=240, failed=0)
    assert judge_look(fast, sla, look_alpha()) == "pass"
    slow_tpot = LookSample(ttft_s=[0.1] * 240, tpot_s=[0.06] * 240, ok=240, failed=0)
    assert judge_look(slow_tpot, sla, look_alpha()) == "fail"
    look = take_look(2, fast, sla)
    assert look.text() == "pass at look 2 of 4 (n=240, 0.625 % each side)"
    assert look.decided and not look.last
    assert take_look(4, fast, sla).last
    nothing = LookSample(ttft_s=[], tpot_s=[], ok=0, failed=0)
    assert judge_look(nothing, sla, look_alpha()) == "inconclusive"


def test_the_final_look_spends_the_error_the_looks_not_taken_left() -> None:
    assert [unspent_alpha(k) for k in range(5)] == pytest.approx(
        [0.025, 0.01875, 0.0125, 0.00625, 0.0]
    )
    # 200 requests, 3 over the 0.5 s bound: x_(197) = 0.4 s. A look at 0.625 % needs x_(198)
    # within the bound; the final look after one look taken has 1.875 %: x_(197) is enough.
    sample = LookSample(ttft_s=[0.4] * 197 + [0.6] * 3, tpot_s=[], ok=200, failed=0)
    sla = Sla(0.5, None, None)
    assert (upper_rank(200, 0.00625), upper_rank(200, 0.01875)) == (198, 197)
    assert judge_look(sample, sla, look_alpha()) == "inconclusive"
    look = final_look(1, sample, sla)
    assert look.verdict == "pass" and look.alpha == pytest.approx(0.01875)
    assert (look.number, look.final, look.last) == (2, True, True)
    assert look.text() == "pass at final look (n=200, 1.88 % each side: unspent by looks 2-4)"
    assert final_look(3, sample, sla).where() == (
        "final look (n=200, 0.625 % each side: unspent by look 4)"
    )


def test_the_next_look_is_due_at_its_request_count_once() -> None:
    assert due_look(119, 0) is None
    assert due_look(120, 0) == 1
    assert due_look(500, 1) == 2  # taken one at a time, each on its own first n
    assert due_look(500, 3) is None
    assert due_look(5000, 4) is None  # no look after the last


def _record(i: int, sent_s: float, e2e_s: float, *, ok: bool = True) -> RequestRecord:
    sent = round(sent_s * S)
    return RequestRecord(
        request_id=i,
        step_index=0,
        sent_ns=sent,
        first_token_ns=sent + round(e2e_s * S / 2) if ok else None,
        end_ns=sent + round(e2e_s * S),
        ok=ok,
        output_tokens=11 if ok else 0,
        error=None if ok else "http_500",
    )


def test_a_look_reads_measured_requests_in_send_order_behind_a_guard() -> None:
    records = [
        _record(0, 0.5, 0.2),  # sent before the measured window (warm-up)
        _record(2, 2.0, 3.0),  # the longest so far: a 6 s guard
        _record(1, 1.5, 0.2),
        _record(3, 4.1, 0.2),  # sent within the guard before now: left for later
    ]
    kept = in_send_order(records, measure_start_ns=1 * S, now_ns=10 * S)
    assert [r.request_id for r in kept] == [1, 2]
    sample = look_sample([*kept, _record(9, 2.5, 0.4, ok=False)])
    assert (sample.ok, sample.failed) == (2, 1)
    assert sample.ttft_s == pytest.approx([0.1, 1.5])
    assert sample.tpot_s == pytest.approx([0.01, 0.15])  # (E2E - TTFT) / 10 gaps
    assert in_send_order([], 0, 10 * S) == []
