"""Adaptive steps and the knee-and-capacity auto sweep, driving a Session (issue 16).

Contract:
- `run_step` opens a step and returns once it has run long enough: with a precision target,
  when the settled step's P95 TTFT, P95 TPOT and output tok/s are known to within it
  (`metrics.precision`), or when `max_s` (the whole step, settling included) ends it; the
  Session then marks it `imprecise`. A step that cannot reach a two-sided P95 interval (59
  requests) by `max_s` ends as soon as its output tok/s is precise (imprecise all the
  same). Without a target: settling (bounded by the Session's maximum warm-up), then `step_s`.
- `finish_step` closes it while the load carries on (`Session.hold`) and waits for its figures.
- `AutoRun.run` is the auto sweep (`metrics.knee_sweep`) under one deadline; a re-run of an
  inconclusive level gets twice the maximum length per attempt. It runs in the caller's thread
  and ends within a moment of `stop`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from gputui.engine.load import LoadMode
from gputui.metrics.confidence import min_n_two_sided
from gputui.metrics.error_log import ErrorLog
from gputui.metrics.knee_sweep import KneeDecision, KneeSweep
from gputui.metrics.precision import StepPrecision
from gputui.metrics.sla import Sla
from gputui.metrics.step import StepResult, StepSpec
from gputui.metrics.verdict_progress import verdict_progress


class DrivenSession(Protocol):
    """What a plan needs of the session it drives: a `Session`, or a job's guarded view of one."""

    @property
    def warmup_s(self) -> float | None: ...
    @property
    def max_warmup_s(self) -> float: ...
    @property
    def current_step(self) -> StepSpec | None: ...
    def step_specs(self) -> list[StepSpec]: ...
    def finished_steps(self) -> list[StepResult]: ...
    def set_load(self, mode: LoadMode, level: float) -> StepSpec: ...
    def hold(self) -> StepSpec | None: ...
    def set_step_target(self, index: int, target_precision: float) -> None: ...
    def settled(self, index: int) -> bool: ...
    def current_precision(self, target_precision: float) -> tuple[StepPrecision | None, int]: ...
    @property
    def sla(self) -> Sla: ...
    @property
    def error_log(self) -> ErrorLog: ...
    def step_so_far(self) -> StepResult | None: ...


DEFAULT_MAX_STEP_S = 40.0
"""The longest a step runs for precision unless `--max-step-seconds` says: both front ends."""
_POLL_S = 0.1
_PRECISION_EVERY_S = 1.0
_P95_MIN_N = min_n_two_sided(0.95)


@dataclass(frozen=True, slots=True)
class StepLimits:
    """How long a step runs: to a precision target within `max_s`, or a fixed `step_s`."""

    target_precision: float | None
    max_s: float
    step_s: float
    min_measured_s: float = 2.0
    """No step stops on precision before measuring this long (a lucky early window)."""


def run_step(
    session: DrivenSession, stop: threading.Event, mode: LoadMode, level: float, limits: StepLimits
) -> StepSpec:
    """Open a step at `level` and return when it has run long enough (module contract)."""
    step = session.set_load(mode, level)
    hold_step(session, stop, step.index, limits)
    return step


def hold_step(
    session: DrivenSession,
    stop: threading.Event,
    index: int,
    limits: StepLimits,
    *,
    until_decided: bool = False,
) -> None:
    """Wait while the open step `index` runs to its limits (see `run_step`).

    `until_decided` (the TUI's hold): precise is not enough, its SLA verdict must be decided too.
    """
    start_ns = time.perf_counter_ns()
    target = limits.target_precision
    # Without a target the step measures `step_s` once settled (the settling is bounded).
    bound_s = limits.max_s if target is not None else _settle_bound_s(session) + limits.step_s
    deadline_ns = start_ns + int(bound_s * 1e9)
    if target is not None:
        session.set_step_target(index, target)
    checked_ns = 0
    measuring_since: int | None = None
    while not stop.is_set():
        now = time.perf_counter_ns()
        current = session.current_step
        if current is None or current.index != index or now >= deadline_ns:
            return
        if session.error_log.flooded(index) is not None:  # rejected requests measure nothing
            return
        if measuring_since is None and session.settled(index):
            measuring_since = now
        if measuring_since is not None:
            measured_s = (now - measuring_since) / 1e9
            if target is None and measured_s >= limits.step_s:
                return
            if (
                target is not None
                and measured_s >= limits.min_measured_s
                and now - checked_ns >= _PRECISION_EVERY_S * 1e9
            ):
                checked_ns = now
                reached, n = session.current_precision(target)
                precise = reached is not None and reached.precise
                if precise and until_decided:
                    precise = _decided(session)
                if reached is not None and (
                    precise or _hopeless(reached, n, measured_s, deadline_ns, now)
                ):
                    return
        stop.wait(_POLL_S)


def _decided(session: DrivenSession) -> bool:
    """The open step's SLA verdict so far is a pass or a fail."""
    so_far = session.step_so_far()
    return so_far is not None and verdict_progress(so_far, session.sla).decided


def _settle_bound_s(session: DrivenSession) -> float:
    return session.max_warmup_s if session.warmup_s is None else session.warmup_s


def _hopeless(
    reached: StepPrecision, n: int, measured_s: float, deadline_ns: int, now_ns: int
) -> bool:
    """Too few requests by the maximum for a two-sided P95 interval, and throughput is known.

    Such a step (a low level with long requests) ends imprecise whatever it does; ending it once
    its output tok/s is precise keeps the ramp's throughput figures and saves the rest.
    """
    projected = n * (measured_s + (deadline_ns - now_ns) / 1e9) / measured_s
    tokens = reached.output_tokens_per_s
    return projected < _P95_MIN_N and tokens is not None and tokens <= reached.target


def finish_step(session: DrivenSession, stop: threading.Event, index: int) -> StepResult | None:
    """Close step `index` keeping its load, and wait for its finished figures."""
    current = session.current_step
    if current is not None and current.index == index:
        session.hold()
    while not stop.is_set():
        for result in session.finished_steps():
            if result.index == index:
                return result
        stop.wait(_POLL_S)
    return None


class AutoRun:
    """The auto sweep on a started Session (module contract)."""

    def __init__(
        self,
        session: DrivenSession,
        stop: threading.Event,
        *,
        planner: KneeSweep,
        limits: StepLimits,
        deadline_ns: int | None,
        on_decision: Callable[[KneeDecision], None] | None = None,
    ) -> None:
        self.session = session
        self.stop = stop
        self.planner = planner
        self.limits = limits
        self.deadline_ns = deadline_ns
        self.on_decision = on_decision
        self.last: KneeDecision | None = None
        self._first_index = len(session.step_specs())

    def run(self) -> str:
        """Run the sweep; returns why it ended."""
        while not self.stop.is_set():
            mine = [s for s in self.session.finished_steps() if s.index >= self._first_index]
            decision = self.planner.decide(mine)
            self.last = decision
            if self.on_decision is not None:
                self.on_decision(decision)
            if decision.level is None:
                return decision.reason
            max_s = self.limits.max_s * decision.attempt
            if self.deadline_ns is not None:
                left_s = (self.deadline_ns - time.perf_counter_ns()) / 1e9
                if left_s < min(10.0, self.limits.max_s):
                    return f"stopped at the time bound ({decision.reason})"
                max_s = min(max_s, left_s)
            limits = StepLimits(self.limits.target_precision, max_s, self.limits.step_s)
            step = run_step(self.session, self.stop, self.planner.mode, decision.level, limits)
            finish_step(self.session, self.stop, step.index)
        return "interrupted"
