"""How a step ends: the step policy (`StepLimits`) and the small rules it becomes for each step.

Contract:
- `StepRules.for_step(limits, session, index)` is the one place a policy becomes rules. With a
  precision target a step ends when its settled P95 TTFT, P95 TPOT and output tok/s are known to
  within it (`metrics.precision`, asked at most once a second and never before `min_measured_s`
  measured), or at `max_s` (the whole step, settling included; the Session then marks it
  `imprecise`). A step that cannot reach a two-sided P95 interval (59 requests) by `max_s` ends as
  soon as its output tok/s is precise (imprecise all the same). Without a target: settling
  (bounded by the Session's warm-up), then `step_s`. Every step also ends once closed elsewhere
  or flooded with rejections (they measure nothing). `until_decided` (the TUI's hold) runs by
  `HoldLooks` instead: it looks at its SLA verdict only at `metrics.hold_looks.HOLD_LOOKS` requests
  (the 2.5 % error split between the looks) and ends at the first look that is decided while the
  step is precise, at the last look, or at `max_s`, whichever comes first; the step is saved with
  its latest look's verdict (before the first: inconclusive).
- Each rule's `check` says why the open step should end now, or None: the first reason ends it.
- Every step-length default lives here: `DEFAULT_MAX_STEP_S`, `DEFAULT_MAX_HOLD_S`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from gputui.control.driven import DrivenSession
from gputui.metrics.confidence import min_n_two_sided
from gputui.metrics.hold_looks import (
    HOLD_LOOKS,
    Look,
    due_look,
    in_send_order,
    look_sample,
    take_look,
)
from gputui.metrics.precision import DEFAULT_TARGET_PRECISION, StepPrecision

DEFAULT_MAX_STEP_S = 40.0
"""The longest a step runs for precision unless `--max-step-seconds` says: both front ends."""
DEFAULT_MAX_HOLD_S = 300.0
"""The hold (`h`) waits for a decided verdict too: at 1 request/s a P95 needs about a minute."""
PRECISION_EVERY_S = 1.0
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
    """The TUI's hold: ended by `HoldLooks` (decided at a look and precise, or its last look)."""


def step_limits(
    target_precision: float | None,
    max_step_s: float | None,
    step_s: float | None,
    *,
    precise: bool,
) -> StepLimits:
    """The step policy from the flags, for both front ends.

    To the target (the default one when `precise`: the auto sweep) within `max_step_s`, else
    `step_s` once settled.
    """
    target = target_precision
    if target is None and precise:
        target = DEFAULT_TARGET_PRECISION
    fixed_s = step_s if step_s is not None else DEFAULT_MAX_STEP_S
    max_s = max_step_s
    if max_s is None:
        max_s = fixed_s if target is None or step_s is not None else DEFAULT_MAX_STEP_S
    return StepLimits(target, max_s, fixed_s if target is None else max_s)


def hold_limits(target_precision: float, max_step_s: float | None) -> StepLimits:
    """The TUI's hold: decided at a look and precise, within `max_step_s` (else 5 minutes)."""
    max_s = DEFAULT_MAX_HOLD_S if max_step_s is None else max_step_s
    return StepLimits(target_precision, max_s, max_s, until_decided=True)


@dataclass(frozen=True, slots=True)
class OpenStep:
    """The open step at one poll, as the rules read it."""

    session: DrivenSession
    index: int
    opened_ns: int
    """When the runner began watching it (the whole step's maximum counts from here)."""
    now_ns: int
    measured_s: float | None = None
    """Seconds since it settled: `Settled` sets it for the rules it gates (None elsewhere)."""


class StepRule(Protocol):
    """One reason a step may end."""

    def check(self, step: OpenStep) -> str | None:
        """Why the step should end now, or None to go on."""
        ...


class Closed:
    """Something else closed the step (the operator, the session stopping)."""

    def check(self, step: OpenStep) -> str | None:
        current = step.session.current_step
        return "closed elsewhere" if current is None or current.index != step.index else None


@dataclass(frozen=True, slots=True)
class MaxLength:
    """The whole step, settling included, runs at most `max_s`."""

    max_s: float

    def check(self, step: OpenStep) -> str | None:
        if step.now_ns >= step.opened_ns + int(self.max_s * 1e9):
            return f"reached its maximum, {self.max_s:g} s"
        return None


class Flooded:
    """Rejected requests measure nothing: the step ends as soon as the error log says so."""

    def check(self, step: OpenStep) -> str | None:
        why = step.session.error_log.flooded(step.index)
        return None if why is None else f"flooded with rejections: {why}"


@dataclass(frozen=True, slots=True)
class FixedLength:
    """Measure `step_s` once settled (gated by `Settled`)."""

    step_s: float

    def check(self, step: OpenStep) -> str | None:
        if step.measured_s is not None and step.measured_s >= self.step_s:
            return f"measured {self.step_s:g} s"
        return None


class HoldLooks:
    """The hold's rule: its verdict only at pre-set request counts (module contract).

    Each look reads the first n measured requests in the order sent (`hold_looks.in_send_order`)
    and is told to the session as the step's verdict, so the header and the saved step agree.
    """

    def __init__(self, target: float, looks: Sequence[int] = HOLD_LOOKS) -> None:
        self.target = target
        self.looks = tuple(looks)
        self.latest: Look | None = None
        self._told = False

    def check(self, step: OpenStep) -> str | None:
        session = step.session
        if not self._told:  # before the first look the hold has decided nothing
            self._told = True
            basis = f"no look yet (the first at {self.looks[0]} requests)"
            session.set_step_verdict(step.index, "inconclusive", basis)
        spec, records = session.open_step_records()
        if spec is None or spec.index != step.index:
            return None
        ordered = in_send_order(records, spec.measure_start_ns, step.now_ns)
        taken = 0 if self.latest is None else self.latest.number
        number = due_look(len(ordered), taken, self.looks)
        if number is None:
            return None
        sample = look_sample(ordered[: self.looks[number - 1]])
        look = take_look(number, sample, session.sla, self.looks)
        self.latest = look
        session.set_step_verdict(step.index, look.verdict, look.text())
        if look.last:
            return f"{look.text()}: its last look"
        if not look.decided:
            return None
        reached, _ = session.current_precision(self.target)
        if reached is not None and reached.precise:
            return f"{look.text()}, precise to ±{self.target * 100:g} %"
        return None


class TargetPrecision:
    """Precise to `target`, or hopeless by `max_s` (gated)."""

    def __init__(self, target: float, max_s: float, min_measured_s: float) -> None:
        self.target = target
        self.max_s = max_s
        self.min_measured_s = min_measured_s
        self._checked_ns = 0

    def check(self, step: OpenStep) -> str | None:
        measured_s = step.measured_s
        if measured_s is None or measured_s < self.min_measured_s:
            return None
        if step.now_ns - self._checked_ns < PRECISION_EVERY_S * 1e9:
            return None
        self._checked_ns = step.now_ns
        reached, n = step.session.current_precision(self.target)
        if reached is None:
            return None
        if reached.precise:
            return f"precise to ±{self.target * 100:g} %"
        left_s = (step.opened_ns + int(self.max_s * 1e9) - step.now_ns) / 1e9
        if _hopeless(reached, n, measured_s, left_s):
            return "too few requests for a P95 interval by its maximum; output tok/s is precise"
        return None


def _hopeless(reached: StepPrecision, n: int, measured_s: float, left_s: float) -> bool:
    """Too few requests by the maximum for a two-sided P95 interval, and throughput is known.

    Such a step (a low level with long requests) ends imprecise whatever it does; ending it once
    its output tok/s is precise keeps the ramp's throughput figures and saves the rest.
    """
    projected = n * (measured_s + left_s) / measured_s
    tokens = reached.output_tokens_per_s
    return projected < _P95_MIN_N and tokens is not None and tokens <= reached.target


class Settled:
    """The measuring rules count from the moment the step settled, and not before."""

    def __init__(self, *gated: StepRule) -> None:
        self.gated = gated
        self._since_ns: int | None = None

    def check(self, step: OpenStep) -> str | None:
        if self._since_ns is None and step.session.settled(step.index):
            self._since_ns = step.now_ns
        if self._since_ns is None:
            return None
        measured = replace(step, measured_s=(step.now_ns - self._since_ns) / 1e9)
        return _first_reason(self.gated, measured)


class StepRules:
    """The rules one open step ends by, asked in order at each poll (module contract)."""

    def __init__(self, rules: Sequence[StepRule]) -> None:
        self.rules = tuple(rules)

    def check(self, step: OpenStep) -> str | None:
        """Why the step ends now (the first rule that says so), or None."""
        return _first_reason(self.rules, step)

    @classmethod
    def for_step(cls, limits: StepLimits, session: DrivenSession, index: int) -> StepRules:
        """Fresh rules for step `index` under `limits`; a target is told to the session."""
        target = limits.target_precision
        measuring: StepRule
        if target is None:
            # Without a target the step measures `step_s` once settled (the settling is bounded).
            bound_s = _settle_bound_s(session) + limits.step_s
            measuring = FixedLength(limits.step_s)
        elif limits.until_decided:
            bound_s = limits.max_s
            measuring = HoldLooks(target)
            session.set_step_target(index, target)
        else:
            bound_s = limits.max_s
            measuring = TargetPrecision(target, limits.max_s, limits.min_measured_s)
            session.set_step_target(index, target)
        return cls([Closed(), MaxLength(bound_s), Flooded(), Settled(measuring)])


def _first_reason(rules: Sequence[StepRule], step: OpenStep) -> str | None:
    for rule in rules:
        reason = rule.check(step)
        if reason is not None:
            return reason
    return None


def _settle_bound_s(session: DrivenSession) -> float:
    return session.max_warmup_s if session.warmup_s is None else session.warmup_s
