"""The header's third line: what the step's verdict still needs, the SLA, the price and the cost.

`terms_line(view)` reads the frame's `verdict_progress` (`metrics.verdict_progress`), the view's
SLA and price, and the cost per million output tokens at the capacity (`metrics.sla_terms`): a
range when the capacity's throughput interval is wide, the point otherwise.
"""

from __future__ import annotations

from gputui.frontends.view import LiveView
from gputui.metrics.outcome import step_outcome
from gputui.metrics.sla_terms import CostRange, cost_range, sla_text
from gputui.metrics.verdict_progress import verdict_needs_text
from gputui.ui.render.spans import Line

_VERDICT_ROLES = {"pass": "ok", "fail": "crit"}


def money(value: float) -> str:
    """A cost: "123", "12.2", "1.25"."""
    if value >= 100:
        return f"{value:.0f}"
    return f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def cost_text(cost: CostRange) -> str:
    """The cost: the point, or the range when the interval is wide (an open end: "≥ 11.0")."""
    if not cost.wide and cost.low is not None and cost.high is not None:
        return money(cost.point)
    if cost.low is not None and cost.high is not None:
        return f"{money(cost.low)}-{money(cost.high)}"
    if cost.low is not None and cost.high is None:
        return f"≥ {money(cost.low)}"
    return money(cost.point)


def verdict_spans(view: LiveView) -> Line:
    """The open step's "P95 verdict: 23 of 59 requests, ~40 s" (nothing while settling)."""
    frame = view.frame
    if view.stopped and view.steps:  # the last step as saved, not its last live estimate
        last = view.steps[-1]
        outcome = step_outcome(last)
        mark = ", incomplete" if last.incomplete else ""
        text = f"step {len(view.steps)} ({last.level:g}{mark}): {outcome}, as saved"
        return [(text, _VERDICT_ROLES.get(outcome, "inconclusive"))]
    if frame is not None and frame.hold_look is not None and not frame.paused:
        verdict, basis = frame.hold_look  # what the hold will save, not the nominal interval's
        waiting = basis.startswith("no look")  # nothing decided yet: as the progress reads
        role = _VERDICT_ROLES.get(verdict, "warn" if waiting else "inconclusive")
        return [(f"hold verdict: {basis}", role)]
    progress = frame.verdict_progress if frame is not None else None
    if progress is None or frame is None or frame.paused:
        return []
    if frame.settle_remaining_s is not None or frame.in_warmup:
        return []  # nothing is measured yet
    role = _VERDICT_ROLES.get(progress.verdict, "inconclusive") if progress.decided else "warn"
    return [(verdict_needs_text(progress), role)]


TermsPart = tuple[int, Line]
"""A part of the terms, never split: (priority, spans); 0 stays longest (`status.pack`)."""


def terms_parts(view: LiveView) -> list[TermsPart]:
    """The verdict's progress, the SLA, the price and the cost at the capacity, each whole.

    The price and the cost always stay (at 80x24 too: what the operator pays is the point); when
    the line is short the SLA goes first (the chart labels its lines and `e` shows it), then the
    verdict's progress.
    """
    verdict = verdict_spans(view)
    parts: list[TermsPart] = [(1, verdict)] if verdict else []
    parts.append((2, [("SLA ", "label"), (sla_text(view.sla), "")]))
    if view.price_per_hour is None:
        return [*parts, (0, [("price ", "label"), ("none (e sets it)", "dim")])]
    parts.append((0, [("price ", "label"), (f"{view.price_per_hour:g}/h", "")]))
    cost = cost_range(view.capacity, view.price_per_hour)
    if cost is None:
        return [*parts, (0, [("cost ", "label"), ("- (no qualified capacity yet)", "dim")])]
    unit = "/s" if view.capacity is not None and view.capacity.mode == "rate" else ""
    level = f" at {view.capacity.level:g}{unit}" if view.capacity is not None else ""
    return [*parts, (0, [("cost ", "label"), (f"{cost_text(cost)}/M out tok{level}", "accent")])]


def terms_line(view: LiveView) -> Line:
    """The verdict's progress, then the SLA, the price and the cost at the capacity."""
    line: Line = []
    for _, part in terms_parts(view):
        line += [("  ", ""), *part] if line else part
    return line
