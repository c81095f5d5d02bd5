"""The hold's verdict under repeated looks: pre-set sample sizes, the error split between them.

Why (docs/domain.md §8, issue 28): a hold that checks its SLA verdict every second and stops at
the first decisive answer passes a server whose true P95 sits exactly on the bound 8-10 % of the
time, not the nominal 2.5 %. `benchmarks/hold_false_pass.py` measures that rule, the looks,
and the looks with the final look at the limit.

Contract (alpha spending with a Bonferroni split):
- A hold looks at its verdict only at `HOLD_LOOKS` measured requests (120, 240, 480, 960), each
  look on the first n requests of the step in the order they were sent (never the first n to
  finish: those are the fast ones). The one-sided error `HOLD_ALPHA` (2.5 %) of each direction
  is split evenly between the looks: each look tests at `HOLD_ALPHA / len(looks)` (0.625 %), so
  whatever look the hold stops at, P(a false pass) <= 2.5 % and P(a false fail) <= 2.5 %.
- A P95 bound passes at a look when the order statistic x_(u) of its n samples is within the
  bound, u the smallest rank with P(Binomial(n, 0.95) >= u) <= alpha (an upper confidence bound
  of level 1 - alpha, exact for a continuous distribution); it fails when x_(l) is over it, l the
  largest rank with P(Binomial(n, 0.95) <= l - 1) <= alpha. An error-rate bound b > 0 uses the
  one-sided Wilson bounds at alpha; b = 0 passes exactly when nothing failed. The look's verdict
  combines the bounds as `metrics.verdict.combine` does (fail beats inconclusive beats pass).
- A hold that reaches its time limit between two looks takes a final look there
  (`final_look`) on every request it may read, at the error the looks not taken leave unspent
  (`unspent_alpha`: 2.5 % less 0.625 % for each look taken), so its data decide it when they
  can; the union of all its looks still errs at most 2.5 % each way.
- `in_send_order(records, measure_start_ns, now_ns)` is what a look may read of an open step:
  its measured records sent before a guard (twice the longest E2E so far, at least 1 s, before
  `now_ns`), so that a request sent earlier and still running (a slow one) is rare enough not
  to bias the first n toward the fast ones; `look_sample` turns the first n into a `LookSample`.
- Nothing here reads a clock: callers pass `now_ns`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist
from typing import Final

import numpy as np

from gputui.engine.records import RequestRecord
from gputui.metrics.confidence import rank_coverage
from gputui.metrics.request_metrics import request_metrics
from gputui.metrics.sla import Sla
from gputui.metrics.verdict import Verdict, combine

HOLD_LOOKS: Final = (120, 240, 480, 960)
"""Measured requests at which a hold looks at its verdict; the last is the hold's request limit."""
HOLD_ALPHA: Final = 0.025
"""One-sided error of a hold's verdict in each direction (false pass, false fail), all looks."""
_Q: Final = 0.95


def look_alpha(looks: Sequence[int] = HOLD_LOOKS, alpha: float = HOLD_ALPHA) -> float:
    """Each look's one-sided error: the total split evenly (Bonferroni)."""
    return alpha / len(looks)


def unspent_alpha(
    taken: int, looks: Sequence[int] = HOLD_LOOKS, alpha: float = HOLD_ALPHA
) -> float:
    """The error the looks after the first `taken` would have spent: the final look's."""
    return max(len(looks) - taken, 0) * look_alpha(looks, alpha)


@lru_cache(maxsize=1024)
def upper_rank(n: int, alpha: float, q: float = _Q) -> int | None:
    """Smallest rank u with P(x_(u) < true q-quantile) <= alpha; None when even x_(n) is not."""
    if n < 1:
        return None
    # P(x_(u) < xi) = P(B >= u) = 1 - P(B <= u - 1), B ~ Binomial(n, q): falls as u grows.
    lo, hi = 1, n
    if 1.0 - rank_coverage(n, q, 0, n) > alpha:
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if 1.0 - rank_coverage(n, q, 0, mid) <= alpha:
            hi = mid
        else:
            lo = mid + 1
    return lo


@lru_cache(maxsize=1024)
def lower_rank(n: int, alpha: float, q: float = _Q) -> int | None:
    """Largest rank l with P(x_(l) > true q-quantile) <= alpha; None when even x_(1) is not."""
    if n < 1:
        return None
    # P(x_(l) > xi) = P(B <= l - 1) = rank_coverage(n, q, 0, l): grows with l.
    if rank_coverage(n, q, 0, 1) > alpha:
        return None
    lo, hi = 1, n
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if rank_coverage(n, q, 0, mid) <= alpha:
            lo = mid
        else:
            hi = mid - 1
    return lo


def p95_look(samples: Sequence[float] | np.ndarray, bound: float, alpha: float) -> Verdict:
    """One P95 bound at one look: pass, fail or inconclusive at one-sided error `alpha`."""
    ordered = np.sort(np.asarray(samples, dtype=np.float64))
    n = int(ordered.size)
    u = upper_rank(n, alpha)
    if u is not None and ordered[u - 1] <= bound:
        return "pass"
    lo = lower_rank(n, alpha)
    if lo is not None and ordered[lo - 1] > bound:
        return "fail"
    return "inconclusive"


def wilson_one_sided(failed: int, total: int, alpha: float) -> tuple[float, float] | None:
    """Wilson bounds of failed / total, each one-sided at error `alpha` (None: no request)."""
    if total <= 0:
        return None
    z = NormalDist().inv_cdf(1.0 - alpha)
    p = failed / total
    denom = 1.0 + z * z / total
    centre = (p + z * z / (2 * total)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total))
    lo = 0.0 if failed == 0 else max(0.0, centre - half)
    hi = 1.0 if failed == total else min(1.0, centre + half)
    return lo, hi


def error_rate_look(failed: int, total: int, bound: float, alpha: float) -> Verdict:
    """The error-rate bound at one look (a bound of 0: pass exactly when nothing failed)."""
    if bound <= 0:
        return "fail" if failed else "pass"
    ci = wilson_one_sided(failed, total, alpha)
    if ci is None:
        return "inconclusive"
    if ci[1] <= bound:
        return "pass"
    return "fail" if ci[0] > bound else "inconclusive"


@dataclass(frozen=True, slots=True)
class LookSample:
    """The first n measured requests of a step, in the order they were sent."""

    ttft_s: Sequence[float]
    """TTFT of the ok ones."""
    tpot_s: Sequence[float]
    """TPOT of the ok ones with two or more output tokens."""
    ok: int
    failed: int


@dataclass(frozen=True, slots=True)
class Look:
    """One look's verdict: at which look, on how many requests, at what error."""

    number: int
    """1-based: the look at `HOLD_LOOKS[number - 1]` requests (a final look: the next one's)."""
    of: int
    n: int
    alpha: float
    verdict: Verdict
    final: bool = False
    """Taken at the hold's time limit, between two looks, at their unspent error."""

    @property
    def decided(self) -> bool:
        """Pass or fail."""
        return self.verdict != "inconclusive"

    @property
    def last(self) -> bool:
        """The hold's last look: it ends here whatever the verdict."""
        return self.final or self.number >= self.of

    def where(self) -> str:
        """'look 2 of 4 (n=240, 0.625 % each side)', or the final look's with its error's source."""
        error = f"{self.alpha * 100:.3g} % each side"
        if not self.final:
            return f"look {self.number} of {self.of} (n={self.n}, {error})"
        spares = f"look {self.of}" if self.number == self.of else f"looks {self.number}-{self.of}"
        return f"final look (n={self.n}, {error}: unspent by {spares})"

    def text(self) -> str:
        """'pass at look 2 of 4 (n=240, 0.625 % each side)'."""
        return f"{self.verdict} at {self.where()}"


def judge_look(sample: LookSample, sla: Sla, alpha: float) -> Verdict:
    """The look's verdict against every bound of `sla` (module contract)."""
    if sample.ok <= 0:
        return "fail" if sample.failed > 0 else "inconclusive"
    parts: list[Verdict] = []
    if sla.ttft_p95_s is not None:
        parts.append(p95_look(sample.ttft_s, sla.ttft_p95_s, alpha))
    if sla.tpot_p95_s is not None and len(sample.tpot_s) > 0:
        parts.append(p95_look(sample.tpot_s, sla.tpot_p95_s, alpha))
    if sla.max_error_rate is not None:
        total = sample.ok + sample.failed
        parts.append(error_rate_look(sample.failed, total, sla.max_error_rate, alpha))
    return combine(parts)


def take_look(number: int, sample: LookSample, sla: Sla, looks: Sequence[int] = HOLD_LOOKS) -> Look:
    """Look `number` (1-based) of `looks` on its sample."""
    alpha = look_alpha(looks)
    n = sample.ok + sample.failed
    return Look(number, len(looks), n, alpha, judge_look(sample, sla, alpha))


def final_look(taken: int, sample: LookSample, sla: Sla, looks: Sequence[int] = HOLD_LOOKS) -> Look:
    """The look at the hold's time limit after `taken` looks, at their unspent error."""
    alpha = unspent_alpha(taken, looks)
    n = sample.ok + sample.failed
    return Look(taken + 1, len(looks), n, alpha, judge_look(sample, sla, alpha), final=True)


def due_look(measured: int, taken: int, looks: Sequence[int] = HOLD_LOOKS) -> int | None:
    """The 1-based look due with `measured` requests in order when `taken` are done (None)."""
    if taken < len(looks) and measured >= looks[taken]:
        return taken + 1
    return None


_MIN_GUARD_NS: Final = 1_000_000_000


def in_send_order(
    records: Sequence[RequestRecord], measure_start_ns: int, now_ns: int
) -> list[RequestRecord]:
    """The measured records a look may read, in the order sent (module contract)."""
    measured = [r for r in records if r.sent_ns >= measure_start_ns]
    if not measured:
        return []
    longest_ns = max(r.end_ns - r.sent_ns for r in measured)
    cut_ns = now_ns - max(2 * longest_ns, _MIN_GUARD_NS)
    return sorted((r for r in measured if r.sent_ns < cut_ns), key=lambda r: r.sent_ns)


def look_sample(records: Sequence[RequestRecord]) -> LookSample:
    """The TTFT and TPOT samples and the counts of these requests."""
    ok = [r for r in records if r.ok]
    figures = request_metrics(ok)
    return LookSample(
        ttft_s=figures.ttft_s.tolist(),
        tpot_s=figures.tpot_s.tolist(),
        ok=len(ok),
        failed=len(records) - len(ok),
    )
