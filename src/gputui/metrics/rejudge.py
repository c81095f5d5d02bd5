"""Re-judge finished steps against a changed SLA (the TUI's settings dialog, mid-session).

Contract:
- `rejudge_step(step, spec, records, sla)` aggregates the step's records again under `sla` and
  takes from that only what the SLA decides: `sla_ok`, `sla_verdict` and goodput (requests/s,
  output tok/s, share and its interval). Every other figure, and the precision marks, stay those
  of `step`, so a re-judged step differs from the old one in its verdicts alone.
- `rejudge_by_intervals(step, sla)` is for a step without its records (a replay, a saved
  snapshot): the verdicts from its intervals and point estimates; goodput stays as measured.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from gputui.engine.records import RequestRecord
from gputui.metrics.sla import Sla, step_meets_sla
from gputui.metrics.step import StepResult, StepSpec, aggregate_step
from gputui.metrics.verdict import step_verdict


def rejudge_step(
    step: StepResult, spec: StepSpec, records: Sequence[RequestRecord], sla: Sla
) -> StepResult:
    """The step with its verdicts and goodput under `sla` (its other figures unchanged)."""
    fresh = aggregate_step(spec, records, sla, incomplete=step.incomplete)
    return replace(
        step,
        sla_ok=fresh.sla_ok,
        sla_verdict=fresh.sla_verdict,
        goodput_requests_per_s=fresh.goodput_requests_per_s,
        goodput_output_tokens_per_s=fresh.goodput_output_tokens_per_s,
        goodput_share=fresh.goodput_share,
        goodput_share_ci=fresh.goodput_share_ci,
    )


def rejudge_by_intervals(step: StepResult, sla: Sla) -> StepResult:
    """The step's verdicts under `sla` from its own figures (no records: goodput unchanged)."""
    verdict = step_verdict(step, sla)  # a hold's looks judged the old bounds: no basis now
    return replace(step, sla_ok=step_meets_sla(step, sla), sla_verdict=verdict, verdict_basis=None)
