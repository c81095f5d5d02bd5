"""The step policy: `StepLimits` from the flags, for both front ends.

Contract: `step_limits` and `hold_limits` turn the flags into the limits a plan's step runs under;
the rules those limits become are pure functions on the session's loop (`session.step_end`), which
ends the step itself. Every step-length default lives here: `DEFAULT_MAX_STEP_S`,
`DEFAULT_MAX_HOLD_S`.
"""

from __future__ import annotations

from gputui.metrics.precision import DEFAULT_TARGET_PRECISION
from gputui.session.step_end import StepLimits

__all__ = ["DEFAULT_MAX_HOLD_S", "DEFAULT_MAX_STEP_S", "StepLimits", "hold_limits", "step_limits"]

DEFAULT_MAX_STEP_S = 40.0
"""The longest a step runs for precision unless `--max-step-seconds` says: both front ends."""
DEFAULT_MAX_HOLD_S = 300.0
"""The hold (`h`) waits for a decided verdict too: at 1 request/s a P95 needs about a minute."""


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
