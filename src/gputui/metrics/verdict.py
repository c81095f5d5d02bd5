"""Three-way SLA verdicts from confidence intervals (docs/domain.md §8).

Contract of `judge_step(step, sla)`:
- Each bound gets a verdict from the 95 % interval of its statistic: "pass" when the whole interval
  lies within the bound (hi <= bound), "fail" when the whole interval lies over it (lo > bound),
  "inconclusive" when it straddles the bound. An open upper end (too few samples for a two-sided
  interval, e.g. n < 59 for P95) can never pass; an open lower end can never fail.
- P95 TTFT, TPOT, E2E and TTFAT use the order-statistic intervals of `Summary.p95_ci` (TTFAT
  censored at E2E where no answer came; a step without TTFAT figures is judged on its TTFT;
  where `--max-in-flight` bound, the TTFT from the schedule, named so: `sla.judged_ttft`). The
  error-rate bound uses the Wilson interval of failed / (ok + failed), computed here from the
  counts; a bound of 0 is no rate but "no failure at all", so it passes exactly when nothing
  failed.
- The step's verdict combines every bound: "fail" if any bound fails, else "inconclusive" if any
  is, else "pass". No ok request: "fail". An absent P95 TPOT (every output had one token) passes;
  an absent P95 TTFT fails a TTFT bound (as `sla.step_meets_sla`).
- Every step `aggregate_step` builds carries its intervals, so it never passes on a handful of
  samples. A step without them (saved before issue 16, or built by hand: a TTFT or TPOT summary
  with samples but no `p95_ci`) carries no uncertainty and is judged wholly on its point
  estimates, as when it was saved: "pass" or "fail" as `sla.step_meets_sla`, never
  "inconclusive", so old files keep their capacity.
- Whenever the verdict is decisive it agrees with `step_meets_sla` (the point estimate lies inside
  its interval), so readers of `sla_ok` and of the verdict never contradict each other on a pass
  or a fail; they differ only where `sla_verdict` says "inconclusive".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from gputui.metrics.confidence import Interval, min_n_two_sided, wilson_ci
from gputui.metrics.sla import Sla, judged_ttft, step_meets_sla, ttfat_stats

Verdict = Literal["pass", "fail", "inconclusive"]

_P95_MIN_N = min_n_two_sided(0.95)


class HasP95Interval(Protocol):
    """A latency summary with its P95, the P95's interval and its sample count."""

    @property
    def p95(self) -> float | None: ...

    @property
    def p95_ci(self) -> Interval | None: ...

    @property
    def n(self) -> int: ...


class VerdictStep(Protocol):
    """What `judge_step` reads from a step (a `StepResult` or a snapshot's `Step`)."""

    @property
    def requests_ok(self) -> int: ...

    @property
    def requests_failed(self) -> int: ...

    @property
    def ttft_s(self) -> HasP95Interval: ...

    @property
    def tpot_s(self) -> HasP95Interval: ...

    @property
    def e2e_s(self) -> HasP95Interval: ...


@dataclass(frozen=True, slots=True)
class Judgement:
    """A step's verdict and, for each bound that is not a pass, a phrase saying why."""

    verdict: Verdict
    reasons: tuple[str, ...] = ()


def combine(verdicts: list[Verdict]) -> Verdict:
    """Fail beats inconclusive beats pass (an empty list passes)."""
    if "fail" in verdicts:
        return "fail"
    return "inconclusive" if "inconclusive" in verdicts else "pass"


def bound_verdict(interval: Interval, bound: float) -> Verdict:
    """Pass when the interval lies within the bound, fail when it lies over it."""
    lo, hi = interval
    if hi is not None and hi <= bound:
        return "pass"
    if lo is not None and lo > bound:
        return "fail"
    return "inconclusive"


def _seconds(value: float) -> str:
    return f"{value:.2f} s" if value >= 1 else f"{value * 1000:.1f} ms"


def _interval_text(interval: Interval) -> str:
    lo, hi = interval
    if hi is None:
        return "unbounded" if lo is None else f">= {_seconds(lo)} (open above)"
    if lo is None:
        return f"<= {_seconds(hi)} (open below)"
    return f"{_seconds(lo)}-{_seconds(hi)}"


def _latency(name: str, stats: HasP95Interval, bound: float, required: bool) -> Judgement:
    if stats.p95 is None or stats.n <= 0:
        if required:
            return Judgement("fail", (f"no {name} measured",))
        return Judgement("pass")
    label = f"P95 {name}"
    ci = stats.p95_ci
    if ci is None:  # not reached for steps with intervals (legacy steps: see judge_step)
        if stats.p95 > bound:
            return Judgement("fail", (f"{label} {_seconds(stats.p95)} > {_seconds(bound)}",))
        return Judgement("pass")
    verdict = bound_verdict(ci, bound)
    if verdict == "pass":
        return Judgement("pass")
    if verdict == "inconclusive" and ci[1] is None:
        text = f"{label} has no upper bound on {stats.n} samples (needs {_P95_MIN_N})"
        return Judgement(verdict, (f"{text}; 95 % CI {_interval_text(ci)}",))
    where = "over" if verdict == "fail" else "straddles"
    text = f"{label} 95 % CI {_interval_text(ci)} {where} {_seconds(bound)} (n={stats.n})"
    return Judgement(verdict, (text,))


def _error_rate(ok: int, failed: int, bound: float) -> Judgement:
    total = ok + failed
    if bound <= 0:
        if failed:
            return Judgement("fail", (f"{failed} of {total} requests failed (bound: none)",))
        return Judgement("pass")
    ci = wilson_ci(failed, total)
    if ci is None:
        return Judgement("pass")
    verdict = bound_verdict(ci, bound)
    if verdict == "pass":
        return Judgement("pass")
    lo, hi = ci
    where = "over" if verdict == "fail" else "straddles"
    text = f"error rate 95 % CI {(lo or 0) * 100:.1f}-{(hi or 0) * 100:.1f} %"
    return Judgement(verdict, (f"{text} {where} {bound * 100:g} % ({failed}/{total})",))


def is_legacy(step: VerdictStep) -> bool:
    """A step with latency samples but no intervals (saved before issue 16, or built by hand)."""
    return any(s.n > 0 and s.p95_ci is None for s in (step.ttft_s, step.tpot_s))


def judge_step(step: VerdictStep, sla: Sla) -> Judgement:
    """The step's three-way verdict against every bound of `sla` (contract above)."""
    if step.requests_ok <= 0:
        return Judgement("fail", ("no request succeeded",))
    if is_legacy(step):
        if step_meets_sla(step, sla):
            return Judgement("pass")
        return Judgement("fail", ("its point estimates break the SLA (no intervals recorded)",))
    parts: list[Judgement] = []
    if sla.ttft_p95_s is not None:
        ttft, name = judged_ttft(step)
        parts.append(_latency(name, ttft, sla.ttft_p95_s, required=True))
    if sla.tpot_p95_s is not None:
        parts.append(_latency("TPOT", step.tpot_s, sla.tpot_p95_s, required=False))
    if sla.e2e_p95_s is not None:
        parts.append(_latency("E2E", step.e2e_s, sla.e2e_p95_s, required=True))
    if sla.ttfat_p95_s is not None:
        ttfat = ttfat_stats(step) or step.ttft_s
        parts.append(_latency("TTFAT", ttfat, sla.ttfat_p95_s, required=True))
    if sla.max_error_rate is not None:
        parts.append(_error_rate(step.requests_ok, step.requests_failed, sla.max_error_rate))
    verdict = combine([p.verdict for p in parts])
    reasons = tuple(r for p in parts if p.verdict == verdict for r in p.reasons)
    return Judgement(verdict, reasons)


def step_verdict(step: VerdictStep, sla: Sla) -> Verdict:
    """Just the verdict of `judge_step`."""
    return judge_step(step, sla).verdict
