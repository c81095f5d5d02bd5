"""Service-level bounds, judged per request (for goodput) and per step (for effective capacity).

Contract (docs/domain.md §2, §4):
- A request is *good* when it succeeded, its own TTFT <= `ttft_p95_s`, TPOT <= `tpot_p95_s`, E2E
  <= `e2e_p95_s` and TTFAT <= `ttfat_p95_s`, and it reached the output length asked for
  (`metrics.goodput` adds the last two). A bound that is None is no constraint. A 1-token output
  has no TPOT and passes the TPOT bound; an ok request without a first token has no TTFT and fails
  a TTFT bound (it cannot prove it met it); TTFAT without an answer is censored at E2E. A failed
  request is never good: it counts as over every bound.
- A step *meets the SLA* when each P95 is within its bound and the error rate (failed / (ok +
  failed)) <= `max_error_rate`. A step with no ok request fails, whatever the bounds. An absent
  P95 TPOT (every output had one token) passes; an absent P95 TTFT fails a TTFT bound; a step
  without TTFAT figures (no thinking, every request answered) is judged on its TTFT for TTFAT.
- `gputui.sla_defaults.DEFAULT_MAX_ERROR_RATE` (5 %) is the error-rate bound a session has
  unless told otherwise: the seeds' 错误率 is part of every verdict, so failures never vanish.

`step_meets_sla` takes anything shaped like a step (a `StepResult` or a snapshot's `Step`), so a
saved run can be re-judged against another SLA. It judges point estimates (a step's `sla_ok`);
the three-way verdict from confidence intervals, which capacity uses, is `metrics.verdict`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

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
    e2e_p95_s: float | None = None
    """Bound on the P95 full-request latency (the seeds' 完整请求延迟)."""
    ttfat_p95_s: float | None = None
    """Bound on the P95 time to the first answer token (after any thinking)."""


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

    @property
    def e2e_s(self) -> _HasP95: ...


@dataclass(frozen=True, slots=True)
class _SavedStats:
    """A statistics dict a saved step keeps as an extra key (its `ttfat_s`), read by attribute."""

    p95: float | None
    p95_ci: tuple[float | None, float | None] | None
    n: int


def ttfat_stats(step: object) -> Any:
    """The step's TTFAT summary (a Summary, a snapshot Stats or its saved dict), or None.

    None means no request thought and every one answered: TTFAT is then TTFT.
    """
    return _stats(getattr(step, "ttfat_s", None))


def judged_ttft(step: object) -> tuple[Any, str]:
    """The TTFT a step's SLA judges, and its name in a verdict.

    Where `--max-in-flight` bound (the open loop's arrivals waited for a slot: `slot_waits`), a
    user's wait starts at the request's scheduled arrival, not at its send: the TTFT from the
    schedule (`ttft_schedule_s`) is judged, named so. Elsewhere the TTFT from the send.
    """
    waits = getattr(step, "slot_waits", 0) or 0
    schedule = _stats(getattr(step, "ttft_schedule_s", None))
    if waits > 0 and schedule is not None:
        return schedule, f"TTFT from the schedule ({waits} waited for a --max-in-flight slot)"
    return step.ttft_s, "TTFT"  # type: ignore[attr-defined]


def _stats(value: object) -> Any:
    """A summary as it is, or a saved statistics dict read by attribute (None stays None)."""
    if isinstance(value, dict):
        ci = value.get("p95_ci")
        return _SavedStats(
            p95=value.get("p95"),
            p95_ci=(ci[0], ci[1]) if isinstance(ci, (list, tuple)) and len(ci) == 2 else None,
            n=int(value.get("n") or 0),
        )
    return value


def error_rate(requests_ok: int, requests_failed: int) -> float | None:
    """Failed / (ok + failed), or None when nothing was measured."""
    total = requests_ok + requests_failed
    return requests_failed / total if total else None


def meets_sla(
    ttft_s: npt.ArrayLike,
    tpot_s: npt.ArrayLike,
    sla: Sla,
    e2e_s: npt.ArrayLike | None = None,
    ttfat_s: npt.ArrayLike | None = None,
) -> BoolArray:
    """Per-request verdicts for ok requests; NaN TPOT (1 token) passes, NaN elsewhere fails.

    Without `e2e_s` / `ttfat_s` their bounds are not judged (the caller has no such figure).
    """
    ttft = np.asarray(ttft_s, dtype=np.float64)
    tpot = np.asarray(tpot_s, dtype=np.float64)
    good = np.ones(np.broadcast_shapes(ttft.shape, tpot.shape), dtype=np.bool_)
    if sla.ttft_p95_s is not None:
        good &= ttft <= sla.ttft_p95_s
    if sla.tpot_p95_s is not None:
        good &= np.isnan(tpot) | (tpot <= sla.tpot_p95_s)
    if sla.e2e_p95_s is not None and e2e_s is not None:
        good &= np.asarray(e2e_s, dtype=np.float64) <= sla.e2e_p95_s
    if sla.ttfat_p95_s is not None and ttfat_s is not None:
        good &= np.asarray(ttfat_s, dtype=np.float64) <= sla.ttfat_p95_s
    return good


def step_meets_sla(step: StepLike, sla: Sla) -> bool:
    """Whether a step's P95 latencies and error rate hold the SLA (no ok request: False)."""
    if step.requests_ok <= 0:
        return False
    if sla.ttft_p95_s is not None:
        p95 = judged_ttft(step)[0].p95
        if p95 is None or p95 > sla.ttft_p95_s:
            return False
    if sla.tpot_p95_s is not None:
        p95 = step.tpot_s.p95
        if p95 is not None and p95 > sla.tpot_p95_s:
            return False
    if sla.e2e_p95_s is not None:
        p95 = step.e2e_s.p95
        if p95 is None or p95 > sla.e2e_p95_s:
            return False
    if sla.ttfat_p95_s is not None:
        p95 = (ttfat_stats(step) or step.ttft_s).p95
        if p95 is None or p95 > sla.ttfat_p95_s:
            return False
    if sla.max_error_rate is not None:
        rate = error_rate(step.requests_ok, step.requests_failed)
        if rate is not None and rate > sla.max_error_rate:
            return False
    return True
