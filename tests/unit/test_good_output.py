"""Issue 31: the capacity prices good output only, on the basis of its output tok/s.

A level where 4 of 100 requests decode over the TPOT bound: its P95 TPOT meets the bound, so
the level qualifies, but the 4 slow requests' tokens are not output a user paid for.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from gputui.engine.records import RequestRecord
from gputui.metrics.capacity_caveats import judged_capacity
from gputui.metrics.cost import cost_per_million_output_tokens
from gputui.metrics.sla import Sla, judged_ttft, step_meets_sla
from gputui.metrics.sla_terms import cost_range
from gputui.metrics.step import StepSpec, aggregate_step
from gputui.metrics.verdict import judge_step
from gputui.snapshot.step_models import step_from_result
from tests.support.records import ns, rec

# Rates over W itself (a closed loop reads them over whole cycles: test_rate_window).
SPEC = StepSpec(0, "rate", 8, ns(0), ns(1000), ns(11_000))
SLA = Sla(ttft_p95_s=1.0, tpot_p95_s=0.035, max_error_rate=0.01)


def level(
    slow: set[int], n: int = 100, failed: frozenset[int] = frozenset()
) -> list[RequestRecord]:
    """`n` requests of 10 tokens inside W: 20 ms apart, 50 ms for the `slow` ones."""
    records = []
    for i in range(n):
        sent = 1000 + 90 * i
        gap = 50 if i in slow else 20
        tokens = [sent + 100 + gap * k for k in range(10)]
        records.append(
            rec(
                sent_ms=sent,
                end_ms=tokens[-1],
                tokens_ms=tokens,
                requested=10,
                ok=i not in failed,
                error="timeout" if i in failed else None,
            )
        )
    return records


def test_a_level_with_4_percent_over_the_tpot_bound_prices_only_the_good_ones() -> None:
    step = aggregate_step(SPEC, level(slow={7, 31, 55, 90}), SLA)
    assert step.tpot_s.p95 is not None and step.tpot_s.p95 <= 0.035  # the level meets the SLA
    assert step.output_tokens_per_s == pytest.approx(1000 / 10)  # 100 x 10 tokens in 10 s
    assert step.goodput_output_tokens_per_s == pytest.approx(960 / 10)
    assert step.goodput_share == pytest.approx(0.96)
    capacity = judged_capacity([step], SLA).capacity
    assert capacity is not None
    assert capacity.output_tokens_per_s == pytest.approx(96.0)
    assert capacity.all_output_tokens_per_s == pytest.approx(100.0)
    cost = cost_range(capacity, 7.0)
    assert cost is not None
    # 7 / (96 x 3600) x 1e6 = 20.25, where every token (100 tok/s) would say 19.44
    assert cost.point == pytest.approx(20.2546, abs=1e-4)
    assert cost.point == pytest.approx(cost_per_million_output_tokens(7.0, 100.0) / 0.96)
    lo, hi = step.goodput_output_tokens_per_s_ci or (0.0, 0.0)
    assert lo <= step.goodput_output_tokens_per_s <= hi


def test_good_output_never_exceeds_output_and_failures_are_never_good() -> None:
    step = aggregate_step(SPEC, level(slow=set(), failed=frozenset({3, 4})), SLA)
    assert step.requests_failed == 2
    # the failed requests' tokens arrived (the server made them) but are not good output
    assert step.goodput_output_tokens_per_s == pytest.approx(980 / 10)
    assert step.goodput_output_tokens_per_s <= step.output_tokens_per_s
    assert step.error_rate == pytest.approx(0.02)
    assert step.sla_ok is False  # 2 % failed > the 1 % bound


def test_short_outputs_are_not_good() -> None:
    records = level(slow=set())
    records[10] = rec(sent_ms=1900, end_ms=2050, tokens_ms=[2000, 2050], requested=10)
    step = aggregate_step(SPEC, records, Sla())
    assert step.short_outputs == 1
    assert step.goodput_share == pytest.approx(0.99)
    assert step.goodput_output_tokens_per_s == pytest.approx(990 / 10)


def test_a_bound_in_flight_cap_gives_ttft_from_the_schedule_and_counts_the_waits() -> None:
    spec = replace(SPEC, mode="rate", level=10.0)
    records = level(slow=set(), n=20)
    # the first 5 were scheduled 400 ms before they could be sent (no free slot); the rest on time
    records = [
        replace(r, queued_ns=r.sent_ns - (400_000_000 if i < 5 else 1_000_000))
        for i, r in enumerate(records)
    ]
    step = aggregate_step(spec, records, SLA)
    assert step.slot_waits == 5
    assert step.ttft_schedule_s is not None and step.ttft_schedule_s.n == 20
    assert step.ttft_s.p95 == pytest.approx(0.1)  # from the send: the wait is hidden
    assert step.ttft_schedule_s.p95 == pytest.approx(0.5)  # from the schedule: it shows
    closed = aggregate_step(SPEC, level(slow=set(), n=5), SLA)
    assert closed.ttft_schedule_s is None and closed.slot_waits == 0


def test_where_the_in_flight_cap_binds_the_sla_judges_ttft_from_the_schedule() -> None:
    # 80 open-loop requests at 100 ms TTFT from the send; 20 waited 1.2 s for a slot
    # (--max-in-flight): a user waited 1.3 s for their first token, which the SLA must see.
    spec = replace(SPEC, mode="rate", level=8.0)
    records = level(slow=set(), n=80)
    waited = [
        replace(r, queued_ns=r.sent_ns - (1_200_000_000 if i % 4 == 0 else 1_000_000))
        for i, r in enumerate(records)
    ]
    sla = Sla(ttft_p95_s=1.0)
    step = aggregate_step(spec, waited, sla)
    assert step.slot_waits == 20 and step.ttft_s.p95 == pytest.approx(0.1)
    assert step.sla_ok is False and step.sla_verdict == "fail"
    ttft, name = judged_ttft(step)
    assert ttft is step.ttft_schedule_s
    assert name == "TTFT from the schedule (20 waited for a --max-in-flight slot)"
    (reason,) = judge_step(step, sla).reasons
    assert reason.startswith("P95 TTFT from the schedule (20 waited for a --max-in-flight slot)")
    # The saved step (its schedule figures are extra keys) is judged the same way.
    saved = step_from_result(step)
    assert judge_step(saved, sla).verdict == "fail" and not step_meets_sla(saved, sla)
    # The same requests are not good output: 60 of 80 met the bound, those that waited did not.
    assert step.goodput_share == pytest.approx(60 / 80)
    # On schedule (no slot wait) the TTFT from the send is judged: it passes.
    on_time = [replace(r, queued_ns=r.sent_ns - 1_000_000) for r in records]
    assert aggregate_step(spec, on_time, sla).sla_verdict == "pass"
