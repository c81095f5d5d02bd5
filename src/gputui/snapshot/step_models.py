"""One step's snapshot form: `Step` and its `Stats`, the length checks, and their conversion.

Contract: part of the snapshot schema in `snapshot.models` (which re-exports every name here), so
the same rules hold: JSON keys never change within a schema version, models are frozen and keep
keys they do not know (`extra="allow"`). `step_from_result` is the one way a finished
`metrics.StepResult` becomes a `Step`; its optional keys live in `model_extra`, read back with
`step_ttfat` and `step_reasoning_share`.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat, NonNegativeInt

from gputui.metrics.step import StepMode, StepResult
from gputui.metrics.summary import Summary


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="allow")


CiInterval = tuple[float | None, float | None]
"""A 95 % confidence interval as JSON [lo, hi]; null marks an open end (see metrics.confidence)."""


class Stats(_Model):
    """Mean and percentiles (seconds) of one metric, with the sample count behind them."""

    mean: float | None = None
    p50: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None
    n: NonNegativeInt = 0
    p50_ci: CiInterval | None = None
    """95 % interval [lo, hi] of P50 (None for an open end); absent in files before issue 16."""
    p95_ci: CiInterval | None = None
    p99_ci: CiInterval | None = None

    @classmethod
    def from_summary(cls, summary: Summary) -> Stats:
        """Snapshot form of a metrics Summary."""
        return cls(
            mean=summary.mean,
            p50=summary.p50,
            p90=summary.p90,
            p95=summary.p95,
            p99=summary.p99,
            n=summary.n,
            p50_ci=summary.p50_ci,
            p95_ci=summary.p95_ci,
            p99_ci=summary.p99_ci,
        )

    def to_summary(self) -> Summary:
        """Metrics form, e.g. to re-judge a saved step against another SLA."""
        return Summary(
            mean=self.mean,
            p50=self.p50,
            p90=self.p90,
            p95=self.p95,
            p99=self.p99,
            n=self.n,
            p50_ci=self.p50_ci,
            p95_ci=self.p95_ci,
            p99_ci=self.p99_ci,
        )


class LengthStats(_Model):
    """Token lengths (not seconds): mean, percentiles and range, with the count behind them."""

    mean: float | None = None
    p50: float | None = None
    p95: float | None = None
    min: int | None = None
    max: int | None = None
    n: NonNegativeInt = 0


class LengthCheck(_Model):
    """Requested against measured lengths; `exact` + `shorter` + `longer` were comparable."""

    requested: LengthStats
    measured: LengthStats
    exact: NonNegativeInt = 0
    shorter: NonNegativeInt = 0
    longer: NonNegativeInt = 0
    unknown: NonNegativeInt = 0
    """No usage report or no requested length: not comparable."""


class StepLengths(_Model):
    """One step's length check (the index is the step's)."""

    step: NonNegativeInt
    input: LengthCheck
    output: LengthCheck


class Step(_Model):
    """One load level's results; semantics in `gputui.metrics.step`."""

    index: NonNegativeInt
    mode: StepMode
    level: float
    duration_s: NonNegativeFloat
    warmup_s: NonNegativeFloat
    requests_ok: NonNegativeInt
    requests_failed: NonNegativeInt
    errors: dict[str, NonNegativeInt] = Field(default_factory=dict)
    requests_per_s: NonNegativeFloat
    input_tokens_per_s: NonNegativeFloat
    output_tokens_per_s: NonNegativeFloat
    ttft_s: Stats
    tpot_s: Stats
    itl_s: Stats
    e2e_s: Stats
    connect_s: Stats
    goodput_requests_per_s: NonNegativeFloat
    goodput_output_tokens_per_s: NonNegativeFloat
    sla_ok: bool
    incomplete: bool = False
    output_tokens_from_usage: bool
    short_outputs: NonNegativeInt = 0
    output_tokens_per_s_ci: CiInterval | None = None
    """95 % batch-means interval of `output_tokens_per_s` (issue 16; absent in older files)."""
    requests_per_s_ci: CiInterval | None = None
    rate_ci_batches: NonNegativeInt | None = None
    error_rate_ci: CiInterval | None = None
    """95 % Wilson interval of failed / (ok + failed)."""
    goodput_share: float | None = None
    goodput_share_ci: CiInterval | None = None
    sla_verdict: str | None = None
    """"pass", "fail" or "inconclusive" (`metrics.verdict`); a plain str so newer values load."""
    turns: tuple[dict[str, object], ...] | None = None
    """Multi-turn runs, per turn: requests, `ttft_s`, mean prompt, hit rate."""
    prefix_cache_hit_rate: float | None = None
    """Cached / all prompt tokens of the step's ok requests (`metrics.prefix_cache`)."""
    prefix_cache_source: str | None = None
    """Where the hit rate was read: "usage", "server timings" or "server counters"."""
    prefix_cache_warning: str | None = None
    """Set when a step meant to be cold was served from the prefix cache (its hit rate > 5 %)."""
    conversations: dict[str, object] | None = None
    """Multi-turn runs: conversations started and complete in the step, and their `e2e_s`."""
    requests_warmup: NonNegativeInt = 0
    """Requests sent before the step's measurement started: in no statistic, but counted, so
    the steps account for every request (`totals.requests`); 0 in files from before it."""
    handover_s: NonNegativeFloat | None = None
    """After the step closed, how long its load ran on unmeasured until its last measured
    request ended; the next level started only then (None in files from before it)."""
    dispatch_lateness: dict[str, object] | None = None
    """Trace replay: send time minus schedule (`p50_ms`, `p99_ms`, `max_ms`, `count`)."""
    server_latency: dict[str, object] | None = None
    """The server's own latency over the step (histogram deltas or llama.cpp timings)."""
    ttft_breakdown: dict[str, object] | None = None
    """Mean TTFT = network + queue + prefill + client, in seconds and shares of TTFT."""
    e2e_breakdown: dict[str, object] | None = None
    roofline: dict[str, object] | None = None
    """Decode bandwidth and prefill compute use against the card's peak (metrics.roofline_use)."""
    bottleneck: dict[str, object] | None = None
    """{verdict, evidence, suspect, throttled}: what bound the step (metrics.bottleneck)."""
    error_messages: dict[str, list[str]] | None = None
    """Per failure reason, the server's first distinct messages (metrics.error_log)."""
    ended_early: str | None = None
    """Why the step ended early (flooded with rejections: metrics.error_log)."""


def stats_from_summary(summary: Summary) -> Stats:
    """Snapshot form of a metrics Summary."""
    return Stats.from_summary(summary)


def step_from_result(result: StepResult) -> Step:
    """Snapshot form of a finished step.

    Optional keys (absent when they do not apply, so older readers see nothing new):
    `event_tokens_method`, and for streams with thinking `ttfat_s` and `reasoning_share`; on
    steps run to a precision target, `imprecise` and `precision` (metric: relative half-width); on
    a held step, `verdict_basis` (its `sla_verdict` is the hold's latest look's).
    """
    step = _step_core(result)
    extra: dict[str, object] = {}
    if result.event_tokens_method is not None:
        extra["event_tokens_method"] = result.event_tokens_method
    if result.ttfat_s is not None:
        extra["ttfat_s"] = Stats.from_summary(result.ttfat_s).model_dump()
        extra["reasoning_share"] = result.reasoning_share
    if result.imprecise is not None:
        extra["imprecise"] = result.imprecise
        extra["precision"] = dict(result.precision or {})
    if result.verdict_basis is not None:
        extra["verdict_basis"] = result.verdict_basis
    return step.model_copy(update=extra) if extra else step


def step_ttfat(step: Step) -> Stats | None:
    """The step's TTFAT statistics (streams with thinking only), from a run or a loaded file."""
    value = (step.model_extra or {}).get("ttfat_s")
    if isinstance(value, Stats):
        return value
    return Stats.model_validate(value) if isinstance(value, dict) else None


def step_reasoning_share(step: Step) -> float | None:
    """Thinking tokens / output tokens of the step's measured requests (None: no thinking)."""
    value = (step.model_extra or {}).get("reasoning_share")
    return float(value) if isinstance(value, (int, float)) else None


def _step_core(result: StepResult) -> Step:
    return Step(
        index=result.index,
        mode=result.mode,
        level=result.level,
        duration_s=result.duration_s,
        warmup_s=result.warmup_s,
        requests_ok=result.requests_ok,
        requests_failed=result.requests_failed,
        errors=dict(result.errors),
        requests_per_s=result.requests_per_s,
        input_tokens_per_s=result.input_tokens_per_s,
        output_tokens_per_s=result.output_tokens_per_s,
        ttft_s=Stats.from_summary(result.ttft_s),
        tpot_s=Stats.from_summary(result.tpot_s),
        itl_s=Stats.from_summary(result.itl_s),
        e2e_s=Stats.from_summary(result.e2e_s),
        connect_s=Stats.from_summary(result.connect_s),
        goodput_requests_per_s=result.goodput_requests_per_s,
        goodput_output_tokens_per_s=result.goodput_output_tokens_per_s,
        sla_ok=result.sla_ok,
        incomplete=result.incomplete,
        output_tokens_from_usage=result.output_tokens_from_usage,
        short_outputs=result.short_outputs,
        output_tokens_per_s_ci=result.output_tokens_per_s_ci,
        requests_per_s_ci=result.requests_per_s_ci,
        rate_ci_batches=result.rate_ci_batches,
        error_rate_ci=result.error_rate_ci,
        goodput_share=result.goodput_share,
        goodput_share_ci=result.goodput_share_ci,
        sla_verdict=result.sla_verdict,
        requests_warmup=result.requests_warmup,
        error_messages=result.error_messages,
        ended_early=result.ended_early,
        handover_s=result.handover_s,
    )


def renumbered(steps: Sequence[Step]) -> tuple[Step, ...]:
    """The steps in order, indexed 0, 1, 2 ... (every saved and recovered snapshot).

    A session's hidden carry-on steps (after a hold, between a plan's steps) took indices in
    between; a file numbers only the steps it holds, as the Steps table and the event log do.
    """
    ordered = sorted(steps, key=lambda s: s.index)
    return tuple(
        s if s.index == k else s.model_copy(update={"index": k}) for k, s in enumerate(ordered)
    )
