"""What the open step's SLA verdict still needs: samples, and time at the step's request rate.

Contract (docs/domain.md §8, `metrics.verdict`):
- `verdict_progress(so_far, sla)` judges the open step's figures so far (`aggregate_step` on its
  records up to now) with `judge_step`, and finds the bound that needs the most requests still:
  - a P95 needs `P95_DECIDES` (59) samples before its 95 % interval has two finite ends, so below
    that a step cannot pass (it may already fail: the lower end exists earlier); its samples are
    the fewer of P95 TTFT's and P95 TPOT's for the bounds the SLA sets (TPOT only when some
    output had two tokens);
  - an error-rate bound b > 0 needs the requests at which the Wilson interval of the failures so
    far, with no further failure, lies under b (`error_rate_decides`: 381 for 1 % and none
    failed).
  The time left is the missing requests over the step's ok requests per second so far. Before
  any request has finished the verdict is "inconclusive" (an empty step is no failure yet).
- `verdict_needs_text` is the one-line answer the TUI's header shows: "P95 verdict: 23 of 59
  requests, ~40 s", "SLA verdict: pass (n=64)", or "SLA verdict: inconclusive on 80 requests
  (an interval straddles its bound: hold longer)". Nothing here reads a clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from gputui.metrics.confidence import min_n_two_sided, wilson_ci
from gputui.metrics.sla import Sla
from gputui.metrics.step import StepResult
from gputui.metrics.verdict import Verdict, judge_step

P95_DECIDES: Final = min_n_two_sided(0.95)
"""Samples a P95 needs before its interval has two finite ends (59)."""
_MAX_REQUESTS: Final = 10_000_000


@dataclass(frozen=True, slots=True)
class VerdictProgress:
    """The open step's verdict so far and what deciding it still needs."""

    verdict: Verdict
    n: int
    """Requests behind the limiting bound so far."""
    requests_per_s: float
    """Ok requests per second of the step so far (what fills the missing samples)."""
    bounded: bool = True
    """False when the SLA sets no bound (nothing to wait for)."""
    needed: int = P95_DECIDES
    """Requests the limiting bound needs before it can pass."""
    limit: str = "P95"
    """Which bound limits: "P95" or "error-rate"."""

    @property
    def decided(self) -> bool:
        """Pass or fail: more samples will not change the answer's kind."""
        return self.verdict != "inconclusive"

    @property
    def seconds_left(self) -> float | None:
        """Seconds until `needed` samples at the current rate (None: decided, enough, no rate)."""
        missing = self.needed - self.n
        if self.decided or missing <= 0 or self.requests_per_s <= 0:
            return None
        return missing / self.requests_per_s


def error_rate_decides(failed: int, total: int, bound: float) -> int | None:
    """Requests at which the failures so far (and no more) put the Wilson interval under `bound`."""
    if bound <= 0 or bound >= 1:
        return None

    def under(n: int) -> bool:
        ci = wilson_ci(failed, n)
        return ci is not None and ci[1] is not None and ci[1] <= bound

    lo, hi = max(total, failed, 1), _MAX_REQUESTS
    if not under(hi):
        return None
    while lo < hi:  # the upper end falls as requests without failure add up
        mid = (lo + hi) // 2
        if under(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def verdict_progress(so_far: StepResult, sla: Sla) -> VerdictProgress:
    """The verdict of the step's figures so far, and the bound that needs the most still."""
    counts: list[int] = []
    if sla.ttft_p95_s is not None:
        counts.append(so_far.ttft_s.n)
    if sla.tpot_p95_s is not None and so_far.tpot_s.n > 0:
        counts.append(so_far.tpot_s.n)
    latency_bound = sla.ttft_p95_s is not None or sla.tpot_p95_s is not None
    n = min(counts) if counts else so_far.requests_ok
    needs = [(P95_DECIDES - n, n, P95_DECIDES, "P95")] if latency_bound else []
    if sla.max_error_rate is not None:
        total = so_far.requests_ok + so_far.requests_failed
        wanted = error_rate_decides(so_far.requests_failed, total, sla.max_error_rate)
        if wanted is not None:
            needs.append((wanted - total, total, wanted, "error-rate"))
    _, n, needed, limit = max(needs, default=(0, n, P95_DECIDES, "P95"))
    nothing_yet = so_far.requests_ok + so_far.requests_failed == 0  # not a "no request" fail
    return VerdictProgress(
        verdict="inconclusive" if nothing_yet else judge_step(so_far, sla).verdict,
        n=n,
        requests_per_s=so_far.requests_per_s,
        bounded=latency_bound or sla.max_error_rate is not None,
        needed=needed,
        limit=limit,
    )


def wait_text(seconds: float) -> str:
    """A short wait: "~40 s", "~3 min"."""
    if seconds < 100:
        return f"~{max(math.ceil(seconds), 1)} s"
    return f"~{seconds / 60:.0f} min"


def verdict_needs_text(progress: VerdictProgress) -> str:
    """The header's line: the verdict once decided, else what deciding it needs."""
    if not progress.bounded:
        return "SLA verdict: pass (no bound set)"
    if progress.decided:
        return f"SLA verdict: {progress.verdict} (n={progress.n})"
    if progress.n >= progress.needed:
        return (
            f"SLA verdict: inconclusive on {progress.n} requests "
            "(an interval straddles its bound: hold longer)"
        )
    text = f"{progress.limit} verdict: {progress.n} of {progress.needed} requests"
    left = progress.seconds_left
    return text if left is None else f"{text}, {wait_text(left)}"
