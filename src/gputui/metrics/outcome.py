"""The one word a finished step's SLA answer is shown with, on every front end (issue 23).

The screen, `gputui run`'s lines and `compare` all say "pass", "fail" or "inconclusive" (the JSON
`sla_verdict` values, `metrics.verdict`), and "no data" for a step in which no request finished:
such a step measured nothing, so it neither passes nor fails. A step without a three-way verdict
(saved before issue 16) reads by its point-estimate `sla_ok`.
"""

from __future__ import annotations

from typing import Literal, Protocol

from gputui.metrics.confidence import min_n_two_sided

Outcome = Literal["pass", "fail", "inconclusive", "no data"]
NO_DATA: Outcome = "no data"


class OutcomeStep(Protocol):
    """What `step_outcome` reads (a `StepResult` or a snapshot's `Step`)."""

    @property
    def requests_ok(self) -> int: ...

    @property
    def requests_failed(self) -> int: ...

    @property
    def sla_ok(self) -> bool: ...

    @property
    def sla_verdict(self) -> str | None: ...


def step_outcome(step: OutcomeStep) -> Outcome:
    """The step's SLA answer in the shared vocabulary (module docstring)."""
    if step.requests_ok + step.requests_failed <= 0:
        return NO_DATA
    verdict = step.sla_verdict
    if verdict == "inconclusive":
        return "inconclusive"
    if verdict in ("pass", "fail"):
        return "pass" if verdict == "pass" else "fail"
    return "pass" if step.sla_ok else "fail"


class HeldStep(Protocol):
    """What `hold_outcome` reads of the step a hold closed."""

    @property
    def imprecise(self) -> bool | None: ...

    @property
    def duration_s(self) -> float: ...

    @property
    def precision(self) -> dict[str, float | None] | None: ...

    @property
    def verdict_basis(self) -> str | None: ...


def hold_outcome(step: HeldStep | None, number: int) -> str:
    """The event that ends a hold: its verdict (its latest look), precise or timed out."""
    if step is None:
        return "hold ended: operator control"
    if step.verdict_basis:  # the verdict the step is saved with: "pass at look 2 of 4 (...)"
        precise = "not precise" if step.imprecise else "precise"
        return (
            f"hold ended after {step.duration_s:.0f} s: step {number} {step.verdict_basis}, "
            f"{precise}; no step open (+ - to measure)"
        )
    if step.imprecise:
        reached = [v for v in (step.precision or {}).values() if v is not None]
        worst = f", worst ±{max(reached) * 100:.1f} %" if reached else ", intervals still open"
        return (
            f"hold timed out after {step.duration_s:.0f} s: step {number} not precise"
            f"{worst}; operator control"
        )
    return f"hold ended: step {number} precise; operator control"


P95_DECIDABLE_N = min_n_two_sided(0.95)
"""Requests before a P95's 95 % interval has an upper end, so that it can pass (59)."""


def p95_needs(measured_n: int, requests_per_s: float | None) -> tuple[int, float | None] | None:
    """What a step's P95 verdict still needs: (requests so far, seconds left at this rate).

    None once the step has the requests to decide it. The time is an estimate from the rate the
    requests finish at now (None when nothing finishes yet).
    """
    if measured_n >= P95_DECIDABLE_N:
        return None
    missing = P95_DECIDABLE_N - max(measured_n, 0)
    eta_s = missing / requests_per_s if requests_per_s and requests_per_s > 0 else None
    return measured_n, eta_s
