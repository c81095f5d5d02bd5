"""The validation hold's verdict: does the SLA hold at a fixed rate, and does the queue stay level?

Contract: `queue_verdict(t_s, in_flight)` judges the requests in flight over a hold (a growing
client-side queue rises steadily across it); `validation_hold(rate, seconds, step_index, result,
queue)` is the hold's result, the snapshot's `validation` (`to_json`, keys in the order saved).

`held_capacity(capacity, hold, skipped)` is what the hold makes of the capacity (issue 31): a
closed-loop level is a sustained rate only once an open-loop hold near it held. When the hold
held, the capacity's requests/s is the rate held (a setpoint: no interval); when it failed, or
was skipped (`skipped` says why: `--no-validate`, the time bound), the capacity is provisional
with that reason, beside any reason it already had. Without a hold and without `skipped` (no
`--auto` run) the capacity is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from gputui.metrics.capacity import Capacity
from gputui.metrics.step import StepResult

MIN_SAMPLES = 4
"""Fewer frames than this over a hold say nothing about a trend."""


@dataclass(frozen=True, slots=True)
class QueueVerdict:
    """Whether the requests in flight stayed level over a hold, with the figures that decided."""

    queue_bounded: bool
    in_flight_mean: float | None
    in_flight_max: int | None
    in_flight_growth: float | None
    queue_reason: str


@dataclass(frozen=True, slots=True)
class ValidationHold:
    """One rate hold's result (the snapshot's `validation`)."""

    rate: float
    seconds: float
    step_index: int
    sla_ok: bool
    sla_verdict: str | None
    requests_per_s: float
    output_tokens_per_s: float
    ttft_p95_s: float | None
    tpot_p95_s: float | None
    error_rate: float | None
    queue: QueueVerdict
    holds: bool
    """The SLA held and the queue stayed bounded."""

    def to_json(self) -> dict[str, object]:
        """The snapshot's `validation` object, keys in their saved order."""
        q = self.queue
        return {
            "rate": self.rate,
            "seconds": self.seconds,
            "step_index": self.step_index,
            "sla_ok": self.sla_ok,
            "sla_verdict": self.sla_verdict,
            "requests_per_s": self.requests_per_s,
            "output_tokens_per_s": self.output_tokens_per_s,
            "ttft_p95_s": self.ttft_p95_s,
            "tpot_p95_s": self.tpot_p95_s,
            "error_rate": self.error_rate,
            "queue_bounded": q.queue_bounded,
            "in_flight_mean": q.in_flight_mean,
            "in_flight_max": q.in_flight_max,
            "in_flight_growth": q.in_flight_growth,
            "queue_reason": q.queue_reason,
            "holds": self.holds,
        }


def validation_hold(
    rate: float, seconds: float, step_index: int, result: StepResult, queue: QueueVerdict
) -> ValidationHold:
    """The hold's result from its finished step and its queue's verdict."""
    return ValidationHold(
        rate=rate,
        seconds=seconds,
        step_index=step_index,
        sla_ok=result.sla_ok,
        sla_verdict=result.sla_verdict,
        requests_per_s=result.requests_per_s,
        output_tokens_per_s=result.output_tokens_per_s,
        ttft_p95_s=result.ttft_s.p95,
        tpot_p95_s=result.tpot_s.p95,
        error_rate=result.error_rate,
        queue=queue,
        holds=bool(result.sla_ok and queue.queue_bounded),
    )


def queue_verdict(t_s: np.ndarray, in_flight: np.ndarray) -> QueueVerdict:
    """Is the client-side queue bounded? A growing queue rises steadily across the hold.

    The trend is a least-squares slope over the whole hold; it counts as growth when the rise it
    implies over the hold exceeds half the mean in flight plus two requests (Poisson noise alone
    moves the count by about its square root).
    """
    if in_flight.size < MIN_SAMPLES:
        return QueueVerdict(True, None, None, None, "too few samples to judge")
    slope = float(np.polyfit(t_s, in_flight, 1)[0])
    span = float(t_s[-1] - t_s[0]) or 1.0
    growth = slope * span
    mean = float(in_flight.mean())
    bounded = growth <= 0.5 * mean + 2
    return QueueVerdict(
        queue_bounded=bounded,
        in_flight_mean=round(mean, 2),
        in_flight_max=int(in_flight.max()),
        in_flight_growth=round(growth, 2),
        queue_reason=(
            f"requests in flight {'stayed level' if bounded else 'kept growing'} "
            f"(trend {growth:+.1f} over {span:.0f} s, mean {mean:.1f})"
        ),
    )


def hold_failure_text(hold: ValidationHold) -> str:
    """Why a hold did not hold: 'the open-loop hold at 5.4 req/s did not hold: SLA fail'."""
    why = []
    if not hold.sla_ok:
        why.append(f"SLA {hold.sla_verdict or 'fail'}")
    if not hold.queue.queue_bounded:
        why.append(hold.queue.queue_reason)
    return f"the open-loop hold at {hold.rate:g} req/s did not hold: {'; '.join(why) or 'failed'}"


def held_capacity(
    capacity: Capacity, hold: ValidationHold | None, skipped: str | None = None
) -> Capacity:
    """The capacity as the validation hold leaves it (module contract)."""
    if hold is not None and hold.holds:
        return replace(capacity, requests_per_s=hold.rate, requests_per_s_ci=None)
    if hold is not None:
        why = hold_failure_text(hold)
    elif skipped is not None:
        why = f"not validated: {skipped}"
    else:
        return capacity
    earlier = capacity.provisional_reason if capacity.provisional else None
    reason = why if earlier is None else f"{earlier}; {why}"
    return replace(capacity, provisional=True, provisional_reason=reason)
