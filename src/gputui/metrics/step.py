"""Aggregate one load step (a concurrency or arrival-rate level) into the numbers a snapshot keeps.

Semantics of `aggregate_step(spec, records, sla)` (the snapshot's step keys mean exactly this):

- Only records with `step_index == spec.index` are used; the rest of `records` is ignored, so a
  caller may pass every record of a run or, faster, a pre-filtered list.
- The *measured requests* are those sent in [`spec.measure_start_ns`, `spec.end_ns`) (start +
  warm-up, to the close): the transition after a change of load is excluded. A measured request
  counts wherever it ended, even after `spec.end_ns` (the caller passes it in once it is done):
  the Session keeps the step's load running, unmeasured, until then (`session.loads`), and
  `handover_s` is how long its last measured request ran past the close.
- Bursts (`metrics.burst_window`): a burst's own requests are in no figure (`requests_burst`
  counts them). Nor are the step's requests in flight under a burst's load, from its first send
  until its last request is back plus one lifetime (`requests_under_burst`), and the rates leave
  that time out of W (`burst_window_s`): `gputui run --burst` does not close its steps at a burst.
- `requests_ok`, `requests_failed` and `errors` {reason: count} count the measured requests; a
  failure without a reason counts as "unknown", so none is dropped. Error rate = failed / (ok +
  failed).
- Window W = [measure_start_ns, end_ns); `duration_s` is its length (rates are 0.0 when it is
  empty). A closed-loop step reads its rates and their intervals over the most whole request
  cycles (the measured ok requests' mean E2E) that fit in W from its start, so that a step gives
  the same rate at any length (`metrics.rate_window`); open loop reads W whole.
  - `output_tokens_per_s`: output tokens that *arrived* inside W, from every record of this step
    (warm-up and failed ones included: the server produced those tokens in W). Each token event
    counts output_tokens / events when the usage report disagrees with the number of events; a
    record with usage tokens but no event counts them at its end_ns.
  - `requests_per_s`: ok requests of this step whose end_ns lies in W.
  - `input_tokens_per_s`: input tokens of ok requests of this step whose first token arrived in W
    (the prompt has been processed by then); a missing usage report counts 0.
- Latency summaries (`ttft_s`, `tpot_s`, `itl_s`, `e2e_s`, `connect_s`) are over the measured ok
  requests; each Summary carries the number of samples behind it, and `requests_failed` says how
  many measured requests they leave out.
- Goodput (the seeds' 有效输出): a record is *good* when it succeeded, met every per-request SLA
  bound and reached its length (`metrics.goodput.good_mask`). `goodput_output_tokens_per_s` counts
  the tokens of good records that arrived in W, from every record of the step, exactly as
  `output_tokens_per_s` counts all of them, so it never exceeds it (and equals it when every
  request was good); `goodput_requests_per_s` counts good requests that ended in W, as
  `requests_per_s` counts ok ones. `goodput_share` is good / measured requests. `sla_ok` is
  `step_meets_sla` on the finished step.
- `output_tokens_from_usage` is False when any ok record of the step counted chunks instead of
  reading a usage report; `short_outputs` counts measured ok requests that produced fewer tokens
  than asked (they are not good).
- Uncertainty (issue 16): the TTFT, TPOT, ITL and E2E summaries carry 95 % intervals of P50, P95
  and P99 (`Summary.p50_ci` ...); `output_tokens_per_s_ci`, `requests_per_s_ci` (batch means),
  `error_rate_ci`, `goodput_share` and `goodput_share_ci` (Wilson) are those of
  `metrics.step_intervals`. `sla_verdict` is `metrics.verdict.step_verdict`: "pass", "fail" or
  "inconclusive"; `sla_ok` stays the point-estimate judgement for older readers.
- Streams with thinking (reasoning models): `ttfat_s` summarizes the time to the first answer token
  of the measured ok requests, with intervals; a request that never answered is censored at its
  E2E and counted in `ttfat_no_answer`. `reasoning_share` is their thinking tokens / output
  tokens. Both are None when no measured ok request thought and every one answered (TTFAT is
  then TTFT). `reasoning_tokens` sums the thinking tokens.
- `event_tokens_method`: how the tokens of each event were counted for ITL (engine.event_tokens:
  continuous_usage, tokenizer, usage_spread, events), over the measured ok requests; several
  methods are joined with "+"; None without any.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal, NamedTuple

import numpy as np
import numpy.typing as npt

from gputui.engine.records import RequestRecord
from gputui.metrics.burst_window import burst_windows, squeeze
from gputui.metrics.confidence import Bounds
from gputui.metrics.energy import StepEnergy, step_energy
from gputui.metrics.error_log import first_messages, flood_reason
from gputui.metrics.goodput import good_mask, no_answer_mask, short_mask, ttfat_censored_s
from gputui.metrics.rate_window import whole_cycles_end
from gputui.metrics.request_metrics import (
    SLOT_WAIT_NS,
    RecordColumns,
    metrics_from_columns,
    record_columns,
    tokens_arrived,
)
from gputui.metrics.sla import Sla, error_rate, step_meets_sla
from gputui.metrics.step_intervals import StepIntervals, rate_and_share_intervals
from gputui.metrics.summary import Summary, summarize
from gputui.metrics.verdict import Verdict, step_verdict
from gputui.telemetry.step_telemetry import StepTelemetry

StepMode = Literal["concurrency", "rate"]

#: Reason recorded for a failed request that carries none.
UNKNOWN_REASON = "unknown"

_NS_TO_S = 1e-9


@dataclass(frozen=True, slots=True)
class StepSpec:
    """Where a step sits in time: its level, and when its warm-up ends and it closes."""

    index: int
    mode: StepMode
    level: float
    """Concurrency (requests in flight) or arrival rate (requests/s)."""
    start_ns: int
    measure_start_ns: int
    """start_ns + warm-up: requests sent before this are not measured."""
    end_ns: int


@dataclass(frozen=True, slots=True)
class StepResult:
    """The finished numbers of one step (the snapshot's `Step`, with Summary objects)."""

    index: int
    mode: StepMode
    level: float
    duration_s: float
    warmup_s: float
    requests_ok: int
    requests_failed: int
    errors: dict[str, int]
    requests_per_s: float
    input_tokens_per_s: float
    output_tokens_per_s: float
    ttft_s: Summary
    tpot_s: Summary
    itl_s: Summary
    e2e_s: Summary
    connect_s: Summary
    goodput_requests_per_s: float
    goodput_output_tokens_per_s: float
    """Tokens of good requests arrived in the window (module docstring): the qualified output."""
    sla_ok: bool
    incomplete: bool
    output_tokens_from_usage: bool
    short_outputs: int
    output_tokens_per_s_ci: Bounds | None = None
    goodput_output_tokens_per_s_ci: Bounds | None = None
    requests_per_s_ci: Bounds | None = None
    rate_ci_batches: int | None = None
    """Time slices behind the two rate intervals."""
    error_rate_ci: Bounds | None = None
    goodput_share: float | None = None
    """Good requests / measured requests."""
    goodput_share_ci: Bounds | None = None
    sla_verdict: Verdict | None = None
    ttfat_s: Summary | None = None
    ttfat_no_answer: int = 0
    """Measured ok requests that never answered (their TTFAT is censored at their E2E)."""
    ttft_schedule_s: Summary | None = None
    """Open loop: TTFT from each request's scheduled arrival (`queued_ns`), not from its send, so
    a wait for a slot under `--max-in-flight` counts as the user would feel it; None when no
    measured request had a schedule (closed loop)."""
    slot_waits: int = 0
    """Measured requests that waited for a free slot (sent over `SLOT_WAIT_NS` after their
    scheduled arrival, connection setup aside): the in-flight cap bound."""
    reasoning_share: float | None = None
    reasoning_tokens: int = 0
    event_tokens_method: str | None = None
    imprecise: bool | None = None
    """Set on steps run to a precision target: True when the step ended (at its maximum length)
    before reaching it; None when no target applied (`metrics.precision.mark_precision`)."""
    precision: dict[str, float | None] | None = None
    """Relative 95 % CI half-width reached per metric, on steps run to a precision target."""
    requests_warmup: int = 0
    """Requests of the step sent before its measurement started (in no statistic, but counted,
    so that a session's steps account for every request it received)."""
    error_messages: dict[str, list[str]] | None = None
    """Per failure reason, the server's first distinct messages (`metrics.error_log`), over all
    the step's requests (warm-up included: a flooded step may end before it measured any)."""
    verdict_basis: str | None = None
    """Set when `sla_verdict` is not the intervals' own: a hold's latest look
    (`metrics.hold_looks`), e.g. 'pass at look 2 of 4 (n=240, 0.625 % each side)'."""
    ended_early: str | None = None
    """Why the step ended early: flooded with rejections (`metrics.error_log.flood_reason`)."""
    requests_burst: int = 0
    """Requests a burst sent during the step: counted, but in none of its figures."""
    requests_under_burst: int = 0
    """The step's requests in flight under a burst's load (`metrics.burst_window`): counted, in
    none of its figures (neither measured nor warm-up)."""
    burst_window_s: float = 0.0
    """Time of the step's window under a burst's load: left out of its rates."""
    handover_s: float = 0.0
    """How long the step's load ran on, unmeasured, after it closed: until its last measured
    request ended (the next level starts only then: `session.loads`)."""
    telemetry: StepTelemetry | None = None
    """What telemetry saw in the measured window (`telemetry.step_telemetry`), attached where
    the step is finished (`session.ledger`); None without telemetry."""

    @property
    def error_rate(self) -> float | None:
        """Failed / (ok + failed) of the measured requests; None when there were none."""
        return error_rate(self.requests_ok, self.requests_failed)

    @property
    def energy(self) -> StepEnergy | None:
        """The step's `energy` object (`metrics.energy`); None without an energy figure."""
        found = self.telemetry.energy if self.telemetry is not None else None
        if found is None:
            return None
        return step_energy(
            found,
            self.duration_s,
            output_tokens_per_s=self.output_tokens_per_s,
            input_tokens_per_s=self.input_tokens_per_s,
            good_output_tokens_per_s=self.goodput_output_tokens_per_s,
        )


def aggregate_step(
    spec: StepSpec,
    records: Sequence[RequestRecord],
    sla: Sla,
    *,
    incomplete: bool = False,
) -> StepResult:
    """Reduce a step's finished records to its StepResult (semantics in the module docstring)."""
    # A burst's requests are the burst's (`metrics.bursts`): in none of the step's figures, nor
    # are the step's own requests under its load, nor its window's time in the rates.
    mine = [r for r in records if r.step_index == spec.index and not r.burst]
    bursts = [r for r in records if r.step_index == spec.index and r.burst]
    cols = record_columns(mine)
    lo_ns, hi_ns = spec.measure_start_ns, spec.end_ns
    duration_s = max(hi_ns - lo_ns, 0) * _NS_TO_S
    cut = burst_windows(bursts, cols, lo_ns, hi_ns)
    rated, rate_hi_ns = squeeze(cols, cut.windows, lo_ns), _rate_end(hi_ns, cut.cut_ns)

    in_time = cols.sent_ns >= lo_ns
    if hi_ns >= 0:  # sent after the close: the hand-over's unmeasured load
        in_time &= cols.sent_ns < hi_ns
    measured = in_time & ~cut.under
    measured_ok = measured & cols.ok
    measured_failed = measured & ~cols.ok
    errors = Counter(
        cols.errors[i] or UNKNOWN_REASON for i in np.flatnonzero(measured_failed).tolist()
    )

    samples = metrics_from_columns(cols, measured_ok)
    cycle_ns = float(samples.e2e_s.mean()) * 1e9 if samples.e2e_s.size else 0.0  # a user's cycle
    rate_hi_ns = whole_cycles_end(spec.mode == "concurrency", lo_ns, rate_hi_ns, cycle_ns)
    good_all = good_mask(cols, sla)
    rates = _rates(rated, cols.input_tokens, good_all, lo_ns, rate_hi_ns)
    good = good_all & measured

    requests_ok = int(measured_ok.sum())
    short = measured & short_mask(cols)
    result = StepResult(
        index=spec.index,
        mode=spec.mode,
        level=float(spec.level),
        duration_s=duration_s,
        warmup_s=max(spec.measure_start_ns - spec.start_ns, 0) * _NS_TO_S,
        requests_ok=requests_ok,
        requests_failed=int(measured_failed.sum()),
        errors=dict(sorted(errors.items())),
        requests_per_s=rates.requests,
        input_tokens_per_s=rates.input_tokens,
        output_tokens_per_s=rates.output_tokens,
        ttft_s=summarize(samples.ttft_s, ci=True),
        tpot_s=summarize(samples.tpot_s, ci=True),
        itl_s=summarize(samples.itl_s, ci=True),
        e2e_s=summarize(samples.e2e_s, ci=True),
        connect_s=summarize(samples.connect_s),
        goodput_requests_per_s=rates.good_requests,
        goodput_output_tokens_per_s=rates.good_tokens,
        sla_ok=False,
        incomplete=incomplete,
        output_tokens_from_usage=bool(cols.tokens_from_usage[cols.ok].all()),
        short_outputs=int(short.sum()),
        requests_warmup=int((~in_time).sum()),
        error_messages=first_messages(mine) or None,
        ended_early=flood_reason(mine),
        handover_s=_handover_s(cols.end_ns[in_time], hi_ns),
        requests_burst=len(bursts),
        requests_under_burst=int((in_time & cut.under).sum()),
        burst_window_s=cut.cut_ns * _NS_TO_S,
    )
    ci = rate_and_share_intervals(
        rated,
        lo_ns=lo_ns,
        hi_ns=rate_hi_ns,
        measured_ok=measured_ok,
        measured_failed=measured_failed,
        good=good,
        good_tokens=good_all,
        lifetime_s=result.e2e_s.p50,
    )
    result = _with_intervals(result, ci)
    result = _with_schedule(result, mine, measured_ok)
    no_answer = measured & no_answer_mask(cols)
    result = _with_streams(
        result,
        mine,
        measured_ok,
        ttfat_censored_s(cols)[measured_ok],
        int(no_answer.sum()),
        cols.reasoning_tokens,
        cols.output_tokens,
    )
    # The verdicts read the finished summaries, so they are filled in last.
    return replace(
        result, sla_ok=step_meets_sla(result, sla), sla_verdict=step_verdict(result, sla)
    )


class _Rates(NamedTuple):
    """A step's rates per second over its window (the bursts' windows cut out)."""

    requests: float
    input_tokens: float
    output_tokens: float
    good_requests: float
    good_tokens: float


def _rate_end(hi_ns: int, cut_ns: int) -> int:
    """The end of the window the rates read: the close, less the bursts' windows (open: -1)."""
    return hi_ns - cut_ns if hi_ns >= 0 else hi_ns


def _rates(
    rated: RecordColumns,
    input_tokens: npt.NDArray[np.int64],
    good: npt.NDArray[np.bool_],
    lo_ns: int,
    hi_ns: int,
) -> _Rates:
    """Requests ended, prompts first answered and tokens arrived in [lo_ns, hi_ns), per second."""
    per_s = 1.0 / ((hi_ns - lo_ns) * _NS_TO_S) if hi_ns > lo_ns else 0.0
    ended = rated.ok & (rated.end_ns >= lo_ns) & (rated.end_ns < hi_ns)
    first = rated.ok & rated.has_first_token
    first &= (rated.first_token_ns >= lo_ns) & (rated.first_token_ns < hi_ns)
    every = np.ones(len(rated), dtype=np.bool_)
    return _Rates(
        requests=int(ended.sum()) * per_s,
        input_tokens=int(input_tokens[first].sum()) * per_s,
        output_tokens=tokens_arrived(rated, every, lo_ns, hi_ns) * per_s,
        good_requests=int((good & ended).sum()) * per_s,
        good_tokens=tokens_arrived(rated, good, lo_ns, hi_ns) * per_s,
    )


def _with_intervals(result: StepResult, ci: StepIntervals) -> StepResult:
    """The result with its rates' and shares' intervals (`metrics.step_intervals`)."""
    return replace(
        result,
        output_tokens_per_s_ci=ci.output_tokens_per_s_ci,
        goodput_output_tokens_per_s_ci=ci.goodput_output_tokens_per_s_ci,
        requests_per_s_ci=ci.requests_per_s_ci,
        rate_ci_batches=ci.batches,
        error_rate_ci=ci.error_rate_ci,
        goodput_share=ci.goodput_share,
        goodput_share_ci=ci.goodput_share_ci,
    )


def _handover_s(measured_end_ns: npt.NDArray[np.int64], end_ns: int) -> float:
    """Seconds from the close to the end of the last measured request (0: none ran past it)."""
    if end_ns < 0 or measured_end_ns.size == 0:
        return 0.0
    return max(int(measured_end_ns.max()) - end_ns, 0) * _NS_TO_S


def _with_schedule(
    result: StepResult, records: Sequence[RequestRecord], measured_ok: npt.NDArray[np.bool_]
) -> StepResult:
    """TTFT from the schedule and the slot waits of the measured ok open-loop requests."""
    ttft, waits = [], 0
    for i in np.flatnonzero(measured_ok).tolist():
        r = records[i]
        if r.queued_ns is None or r.first_token_ns is None:
            continue
        ttft.append((r.first_token_ns - r.queued_ns) * _NS_TO_S)
        waits += r.sent_ns - r.queued_ns - (r.connect_ns or 0) > SLOT_WAIT_NS
    if not ttft:
        return result
    return replace(result, ttft_schedule_s=summarize(ttft, ci=True), slot_waits=waits)


def _with_streams(
    result: StepResult,
    records: Sequence[RequestRecord],
    measured_ok: npt.NDArray[np.bool_],
    ttfat_s: npt.NDArray[np.float64],
    no_answer: int,
    reasoning_tokens: npt.NDArray[np.int64],
    output_tokens: npt.NDArray[np.int64],
) -> StepResult:
    """TTFAT (censored), reasoning share and the event-counting method of the measured ok ones."""
    thinking = int(reasoning_tokens[measured_ok].sum())
    output = int(output_tokens[measured_ok].sum())
    methods = sorted({records[i].event_tokens_method for i in np.flatnonzero(measured_ok).tolist()})
    return replace(
        result,
        event_tokens_method="+".join(methods) if methods else None,
        reasoning_tokens=thinking,
        ttfat_s=summarize(ttfat_s, ci=True) if thinking or no_answer else None,
        ttfat_no_answer=no_answer,
        reasoning_share=thinking / output if thinking and output else None,
    )
