"""Issue 31: a failed or skipped validation hold is not a capacity; a held one sets its rate."""

from __future__ import annotations

from dataclasses import replace

from gputui.metrics.capacity import Capacity
from gputui.metrics.validation import QueueVerdict, ValidationHold, held_capacity

CAPACITY = Capacity(
    level=16,
    mode="concurrency",
    output_tokens_per_s=816.0,
    requests_per_s=6.37,
    ttft_p95_s=0.3,
    tpot_p95_s=0.023,
    error_rate=0.0,
    requests_per_s_ci=(6.0, 6.7),
)
LEVEL = QueueVerdict(True, 5.1, 9, 0.4, "requests in flight stayed level (trend +0.4 over 60 s)")
GROWING = QueueVerdict(False, 40.0, 80, 60.0, "requests in flight kept growing (trend +60.0)")


def hold(sla_ok: bool, queue: QueueVerdict = LEVEL) -> ValidationHold:
    return ValidationHold(
        rate=5.733,
        seconds=60.0,
        step_index=7,
        sla_ok=sla_ok,
        sla_verdict="pass" if sla_ok else "fail",
        requests_per_s=5.7,
        output_tokens_per_s=700.0,
        ttft_p95_s=0.4,
        tpot_p95_s=0.03,
        error_rate=0.0,
        queue=queue,
        holds=sla_ok and queue.queue_bounded,
    )


def test_a_held_rate_is_the_capacitys_requests_per_second() -> None:
    held = held_capacity(CAPACITY, hold(True))
    assert held.requests_per_s == 5.733
    assert held.requests_per_s_ci is None
    assert held.provisional is False
    assert held.output_tokens_per_s == 816.0  # the level's good output stays its figure


def test_a_failed_hold_makes_the_capacity_provisional_with_the_reason() -> None:
    missed = held_capacity(CAPACITY, hold(False))
    assert missed.provisional is True
    assert missed.provisional_reason == "the open-loop hold at 5.733 req/s did not hold: SLA fail"
    grew = held_capacity(CAPACITY, hold(True, GROWING))
    assert grew.provisional is True
    assert grew.provisional_reason == (
        "the open-loop hold at 5.733 req/s did not hold: "
        "requests in flight kept growing (trend +60.0)"
    )
    assert missed.requests_per_s == 6.37  # nothing was held: the closed-loop figure, marked


def test_a_skipped_hold_says_why_beside_an_earlier_reason() -> None:
    skipped = held_capacity(CAPACITY, None, "--no-validate skipped the open-loop hold")
    assert skipped.provisional is True
    assert skipped.provisional_reason == "not validated: --no-validate skipped the open-loop hold"
    earlier = replace(CAPACITY, provisional=True, provisional_reason="P95 on 14 requests")
    both = held_capacity(earlier, None, "the run was stopped before its validation hold")
    assert both.provisional_reason == (
        "P95 on 14 requests; not validated: the run was stopped before its validation hold"
    )


def test_no_auto_run_leaves_the_capacity_alone() -> None:
    assert held_capacity(CAPACITY, None) == CAPACITY
