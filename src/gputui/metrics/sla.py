"""Service-level bounds, judged per request (for goodput) and per step (for effective capacity).

Contract (docs/domain.md §2, §4):
- A request is *good* when it succeeded, its own TTFT <= `ttft_p95_s` and its own TPOT <=
  `tpot_p95_s`. A bound that is None is no constraint. A 1-token output has no TPOT and passes the
  TPOT bound; an ok request without a first token has no TTFT and fails a TTFT bound (it cannot
  prove it met it).
- A step *meets the SLA* when P95 TTFT <= the TTFT bound, P95 TPOT <= the TPOT bound and the error
  rate (failed / (ok + failed)) <= `max_error_rate`. A step with no ok request fails, whatever the
  bounds. An absent P95 TPOT (every output had one token) passes; an absent P95 TTFT fails a TTFT
  bound.

`step_meets_sla` takes anything shaped like a step (a `StepResult` or a snapshot's `Step`), so a
saved run can be re-judged against another SLA. It judges point estimates (a step's `sla_ok`);
the three-way verdict from confidence intervals, which capacity uses, is `metrics.verdict`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class Sla:
    """Latency bounds (seconds, compared with P95s) and an error-rate bound; None = unbounded."""

    ttft_p95_s: float | None = None
    tpot_p95_s: float | None = None
    max_error_rate: float | None = None


class _HasP95(Protocol):
    @property
    def p95(self) -> float | None: ...


class StepLike(Protocol):
    """What `step_meets_sla` reads from a step."""

    @property
    def requests_ok(self) -> int: ...

    @property
    def requests_failed(self) -> int: ...

    @property
    def ttft_s(self) -> _HasP95: ...

    @property
    def tpot_s(self) -> _HasP95: ...


def error_rate(requests_ok: int, requests_failed: int) -> float | None:
    """Failed / (ok + failed), or None when nothing was measured."""
    total = requests_ok + requests_failed
    return requests_failed / total if total else None


def meets_sla(ttft_s: npt.ArrayLike, tpot_s: npt.ArrayLike, sla: Sla) -> BoolArray:
    """Per-request verdicts for ok requests; NaN TPOT (1 token) passes, NaN TTFT fails a bound."""
    ttft = np.asarray(ttft_s, dtype=np.float64)
    tpot = np.asarray(tpot_s, dtype=np.float64)
    good = np.ones(np.broadcast_shapes(ttft.shape, tpot.shape), dtype=np.bool_)
    if sla.ttft_p95_s is not None:
        good &= ttft <= sla.ttft_p95_s
    if sla.tpot_p95_s is not None:
        good &= np.isnan(tpot) | (tpot <= sla.tpot_p95_s)
    return good


def step_meets_sla(step: StepLike, sla: Sla) -> bool:
    """Whether a step's P95 latencies and error rate hold the SLA (no ok request: False)."""
    if step.requests_ok <= 0:
        return False
    if sla.ttft_p95_s is not None:
        p95 = step.ttft_s.p95
        if p95 is None or p95 > sla.ttft_p95_s:
            return False
    if sla.tpot_p95_s is not None:
        p95 = step.tpot_s.p95
        if p95 is not None and p95 > sla.tpot_p95_s:
            return False
    if sla.max_error_rate is not None:
        rate = error_rate(step.requests_ok, step.requests_failed)
        if rate is not None and rate > sla.max_error_rate:
            return False
    return True
