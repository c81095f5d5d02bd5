"""How a step ends: pure functions of a frozen `OpenStepState` that the session loop publishes.

Contract (issue 28: the step's end lives on the session's loop):
- The message that opens or keeps a step for a plan carries its `StepLimits`; the loop
  (`session.watch.StepWatch`) keeps one `OpenStepState`, advances it with what it reads (the clock,
  settling, rejections, the precision so far, a hold's looks), and asks `end_reason`. Nothing here
  reads a clock, the ledger or the Session: every input is a field of the state.
- With a precision target a step ends when its settled P95 TTFT, P95 TPOT and output tok/s are
  known to within it (`precision_due`: read at most once a second, never before `min_measured_s`
  measured), or at `max_s` (the whole step, settling included; it is then marked `imprecise`). A
  step that cannot reach a two-sided P95 interval (59 requests) by `max_s` ends as soon as its
  output tok/s is precise (imprecise all the same). Without a target: settling (bounded by the
  session's warm-up, `settle_bound_s`), then `step_s`. Every step also ends once closed elsewhere
  or flooded with rejections (they measure nothing).
- `until_decided` (the TUI's hold) runs by its looks instead (`look_at`): its SLA verdict only at
  `metrics.hold_looks.HOLD_LOOKS` requests (the 2.5 % error split between the looks); it ends at
  the first look that is decided while the step is precise, at the last look, or at `max_s`,
  whichever comes first. At `max_s` between two looks it takes a final look on what it has, at
  the error the looks not taken leave unspent (`metrics.hold_looks.final_look`), so data that
  decide end it decided. The step is saved with its latest look's verdict, and `hold_basis`
  says which rule ended it ("decided at look 2 of 4", "its last look", "at its 5-min limit:
  final look").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from gputui.engine.records import RequestRecord
from gputui.metrics.confidence import min_n_two_sided
from gputui.metrics.hold_looks import (
    HOLD_LOOKS,
    Look,
    due_look,
    final_look,
    in_send_order,
    look_sample,
)
from gputui.metrics.hold_looks import take_look as judge_look
from gputui.metrics.precision import StepPrecision
from gputui.metrics.sla import Sla
from gputui.metrics.step import StepResult, StepSpec

PRECISION_EVERY_NS = 1_000_000_000
"""A step's precision is aggregated at most once a second (it is not free)."""
_P95_MIN_N = min_n_two_sided(0.95)


@dataclass(frozen=True, slots=True)
class StepLimits:
    """How long a step runs: to a precision target within `max_s`, or a fixed `step_s`."""

    target_precision: float | None
    max_s: float
    step_s: float
    min_measured_s: float = 2.0
    """No step stops on precision before measuring this long (a lucky early window)."""
    until_decided: bool = False
    """The TUI's hold: ended by its looks (decided at a look and precise, or its last look)."""


@dataclass(frozen=True, slots=True)
class OpenStepState:
    """The watched open step as the rules read it (module contract); the loop alone advances it."""

    index: int
    limits: StepLimits
    opened_ns: int
    """When its watch began, or its level started if later (a hand-over): `max_s` counts here."""
    now_ns: int
    settle_bound_s: float
    """The session's longest settling: a fixed-length step's maximum is this plus `step_s`."""
    settled_ns: int | None = None
    """When it was first seen settled (its measuring rules count from here)."""
    closed: bool = False
    """Something else closed it (the operator, the run stopping)."""
    flooded: str | None = None
    """Why its requests count as flooded with rejections (`metrics.error_log`), if they do."""
    precision: StepPrecision | None = None
    measured_n: int = 0
    """Measured requests behind `precision`."""
    checked_ns: int | None = None
    """When `precision` was read."""
    look: Look | None = None
    """A hold's latest look."""
    looked_ns: int | None = None
    """When `look` was taken."""


@dataclass(frozen=True, slots=True)
class StepEnded:
    """A watched step the loop ended: as the ledger has it then, why, and its figures if asked."""

    spec: StepSpec
    reason: str
    ended_ns: int
    """When its rules ended it (before any finishing)."""
    flooded: bool
    """Its requests were rejected: a next level would be alike."""
    result: StepResult | None


def max_s(state: OpenStepState) -> float:
    """The whole step's longest run, settling included."""
    limits = state.limits
    if limits.target_precision is None:
        return state.settle_bound_s + limits.step_s  # settling is bounded, then `step_s`
    return limits.max_s


def measured_s(state: OpenStepState) -> float | None:
    """Seconds since it settled (None before)."""
    return None if state.settled_ns is None else (state.now_ns - state.settled_ns) / 1e9


def precision_due(state: OpenStepState) -> bool:
    """Whether the loop should read the step's precision now for its rules."""
    limits = state.limits
    if limits.target_precision is None:
        return False
    if limits.until_decided:  # a hold reads it only at a decided look, to end there
        look = state.look
        return look is not None and state.looked_ns == state.now_ns and look.decided
    measured = measured_s(state)
    if measured is None or measured < limits.min_measured_s:
        return False
    return state.checked_ns is None or state.now_ns - state.checked_ns >= PRECISION_EVERY_NS


def at_limit(state: OpenStepState) -> bool:
    """Whether the step has reached its maximum (`max_s`) at `now_ns`."""
    return state.now_ns >= state.opened_ns + int(max_s(state) * 1e9)


def look_at(
    state: OpenStepState, records: Sequence[RequestRecord], spec: StepSpec, sla: Sla
) -> OpenStepState:
    """A hold's next look, if one is due (records in the order sent; `metrics.hold_looks`).

    At its maximum, between two looks, that is the final look on every request it may read.
    """
    if not state.limits.until_decided or state.settled_ns is None:
        return state
    if state.look is not None and state.look.last:
        return state  # it has ended
    ordered = in_send_order(list(records), spec.measure_start_ns, state.now_ns)
    taken = 0 if state.look is None else state.look.number
    number = due_look(len(ordered), taken, HOLD_LOOKS)
    if at_limit(state):  # whatever look was due: this one reads all of it, at more error
        look = final_look(taken, look_sample(ordered), sla, HOLD_LOOKS)
    elif number is not None:
        look = judge_look(number, look_sample(ordered[: HOLD_LOOKS[number - 1]]), sla, HOLD_LOOKS)
    else:
        return state
    return replace(state, look=look, looked_ns=state.now_ns)


def no_look_yet() -> str:
    """A hold's verdict basis before its first look."""
    return f"no look yet (the first at {HOLD_LOOKS[0]} requests)"


def limit_text(seconds: float) -> str:
    """A hold's limit as the operator reads it: '5-min', '90-s'."""
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g}-min"
    return f"{seconds:g}-s"


def hold_basis(state: OpenStepState) -> str | None:
    """Which rule ended a hold at its fresh look, with the verdict it saves (None: it goes on).

    'pass, decided at look 2 of 4 (...)' (the precision is `end_reason`'s to add), 'inconclusive
    at look 4 of 4 (...): its last look', 'fail at its 5-min limit: final look (...)'.
    """
    look = state.look
    if not state.limits.until_decided or state.closed:
        return None
    if look is None and state.settled_ns is None and at_limit(state):
        return f"inconclusive at its {limit_text(max_s(state))} limit: it never settled, no look"
    if look is None or state.looked_ns != state.now_ns:
        return None
    if look.final:
        return f"{look.verdict} at its {limit_text(max_s(state))} limit: {look.where()}"
    if look.last:
        return f"{look.text()}: its last look"
    reached = state.precision
    if look.decided and reached is not None and reached.precise:
        return f"{look.verdict}, decided at {look.where()}"
    return None


def end_reason(state: OpenStepState) -> str | None:
    """Why the step ends now, or None to go on (module contract; the first reason wins)."""
    if state.closed:
        return "closed elsewhere"
    longest_s = max_s(state)
    if at_limit(state):
        basis = hold_basis(state)  # a hold: its final look there (or it never settled)
        return basis if basis is not None else f"reached its maximum, {longest_s:g} s"
    if state.flooded is not None:
        return f"flooded with rejections: {state.flooded}"
    measured = measured_s(state)
    if measured is None:
        return None
    limits = state.limits
    target = limits.target_precision
    if target is None:
        return f"measured {limits.step_s:g} s" if measured >= limits.step_s else None
    if limits.until_decided:
        return _hold_reason(state, target)
    reached = state.precision
    if state.checked_ns != state.now_ns or reached is None:
        return None  # only on a fresh reading
    if reached.precise:
        return f"precise to ±{target * 100:g} %"
    left_s = (state.opened_ns + int(limits.max_s * 1e9) - state.now_ns) / 1e9
    if _hopeless(reached, state.measured_n, measured, left_s):
        return "too few requests for a P95 interval by its maximum; output tok/s is precise"
    return None


def _hold_reason(state: OpenStepState, target: float) -> str | None:
    basis = hold_basis(state)  # a hold decides only at a look
    if basis is None or state.look is None or state.look.last:
        return basis
    return f"{basis}, precise to ±{target * 100:g} %"


def _hopeless(reached: StepPrecision, n: int, measured: float, left_s: float) -> bool:
    """Too few requests by the maximum for a two-sided P95 interval, and throughput is known.

    Such a step (a low level with long requests) ends imprecise whatever it does; ending it once
    its output tok/s is precise keeps the ramp's throughput figures and saves the rest.
    """
    if measured <= 0:
        return False
    projected = n * (measured + left_s) / measured
    tokens = reached.output_tokens_per_s
    return projected < _P95_MIN_N and tokens is not None and tokens <= reached.target
