"""Build StepResults from a handful of numbers, for the capacity, knee and sweep-planner tests."""

from __future__ import annotations

from dataclasses import replace

from gputui.metrics.sla import Sla, step_meets_sla
from gputui.metrics.step import StepMode, StepResult
from gputui.metrics.summary import EMPTY_SUMMARY, Summary


def p95_only(value: float | None, n: int = 100) -> Summary:
    """A summary whose every percentile is `value` (None: no samples)."""
    if value is None:
        return EMPTY_SUMMARY
    return Summary(mean=value, p50=value, p90=value, p95=value, p99=value, n=n)


def make_step(
    level: float,
    *,
    output_tokens_per_s: float = 1000.0,
    good_output_tokens_per_s: float | None = None,
    ttft_p95_s: float | None = 0.5,
    tpot_p95_s: float | None = 0.02,
    requests_ok: int = 100,
    requests_failed: int = 0,
    mode: StepMode = "concurrency",
    incomplete: bool = False,
    index: int = 0,
    sla: Sla | None = None,
) -> StepResult:
    """A step at `level` with these headline numbers; `sla_ok` judged against `sla` if given.

    Its good output is all of its output unless `good_output_tokens_per_s` says otherwise.
    """
    good = output_tokens_per_s if good_output_tokens_per_s is None else good_output_tokens_per_s
    step = StepResult(
        index=index,
        mode=mode,
        level=float(level),
        duration_s=30.0,
        warmup_s=5.0,
        requests_ok=requests_ok,
        requests_failed=requests_failed,
        errors={"http_503": requests_failed} if requests_failed else {},
        requests_per_s=output_tokens_per_s / 200.0,
        input_tokens_per_s=output_tokens_per_s * 2.0,
        output_tokens_per_s=output_tokens_per_s,
        ttft_s=p95_only(ttft_p95_s),
        tpot_s=p95_only(tpot_p95_s),
        itl_s=p95_only(tpot_p95_s),
        e2e_s=p95_only(None if ttft_p95_s is None else ttft_p95_s + 5.0),
        connect_s=EMPTY_SUMMARY,
        goodput_requests_per_s=0.0,
        goodput_output_tokens_per_s=good,
        sla_ok=False,
        incomplete=incomplete,
        output_tokens_from_usage=True,
        short_outputs=0,
    )
    return step if sla is None else replace(step, sla_ok=step_meets_sla(step, sla))
