"""Step-quality warnings: what makes a finished step's figures mean less than they seem.

Both front ends show them: `gputui run` under the step's line, the TUI in its event log (the
Session turns each into an event when the step finishes).
"""

from __future__ import annotations

from gputui.metrics.error_log import said_text
from gputui.metrics.step import StepResult

MIN_LIFETIMES_PER_STEP = 3
"""Fewer request lifetimes than this in a step's window and closed-loop waves show in its rates."""


LONGER_IN_RUN = ("use a longer --max-step-seconds", "use longer --step-seconds")
"""What `gputui run` advises for an imprecise step and for a short one (its flags)."""
LONGER_IN_TUI = (
    "hold a level with h to run it until precise",
    "hold a level with h to run it longer",
)
"""The same advice for the TUI, where those flags cannot be set: the hold key."""


def step_warnings(result: StepResult, longer: tuple[str, str] = LONGER_IN_RUN) -> list[str]:
    """What makes a step's throughput mean less than it seems, one line each.

    `longer` is the advice for an imprecise and for a short step (`LONGER_IN_TUI` in the TUI).
    """
    lines = []
    if result.ended_early:
        lines.append(f"ended early: {result.ended_early}")
    lines.extend(said_text(result.error_messages or {}))
    if result.short_outputs:
        share = result.short_outputs / result.requests_ok if result.requests_ok else 0.0
        lines.append(
            f"{result.short_outputs} of {result.requests_ok} ok requests ({share:.0%}) stopped "
            "before the output tokens asked for: out tok/s counts the shorter outputs "
            "(--ignore-eos asks the server to run to the limit)"
        )
    if result.requests_ok and not result.output_tokens_from_usage:
        lines.append("the server sent no usage report: output tokens are counted as content chunks")
    if "usage_spread" in (result.event_tokens_method or ""):
        lines.append(
            "several tokens per event and nothing to count them (no continuous usage, /tokenize "
            "or --tokenizer): each request's usage total is spread evenly over its events, so "
            "mean ITL is per token, single gaps assume an even spread"
        )
    if result.imprecise:
        widths = list((result.precision or {}).values())
        finite = [v for v in widths if v is not None]
        reached = (
            f"±{max(finite):.1%}" if finite and len(finite) == len(widths) else "an open interval"
        )
        if result.verdict_basis is not None:  # a hold (`h`): its looks ended it
            lines.append(
                f"imprecise: the hold ended ({result.verdict_basis}) with {reached}, short of "
                "its precision target; its verdict stands at that look's error"
            )
            return lines
        lines.append(
            f"imprecise: the step ended at its maximum length with {reached}, short of its "
            f"precision target; {longer[0]}"
        )
        return lines
    e2e_s = result.e2e_s.p50
    if result.imprecise is None and e2e_s and result.duration_s < MIN_LIFETIMES_PER_STEP * e2e_s:
        lines.append(
            f"the step ({result.duration_s:.0f} s) is under {MIN_LIFETIMES_PER_STEP} request "
            f"lifetimes (E2E p50 {e2e_s:.1f} s): requests finish in waves, so its tok/s is "
            f"noisy; {longer[1]}"
        )
    return lines
