"""The uncertainty columns of a comparison: intervals at the qualified level, and significance.

Contract: `capacity_intervals` reads the 95 % intervals of a run's qualified throughput, P95 TTFT
and P95 TPOT (the snapshot capacity's keys, else those of the step it was measured on; None in
files saved before intervals existed). `significance` says whether a row's throughput and
latencies differ from the reference row's beyond both uncertainties (`confidence.significant`):
True, False ("not significant"), or None when an interval is missing or open, so "n/a" is never
read as "not significant".
"""

from __future__ import annotations

from typing import Protocol

from gputui.metrics.confidence import Interval, significant
from gputui.snapshot.models import Snapshot, Step


class Judged(Protocol):
    """What significance reads of a row (`compare.CompareRow`; a protocol: no import cycle)."""

    @property
    def qualified_output_tokens_per_s(self) -> float | None: ...
    @property
    def qualified_output_tokens_per_s_ci(self) -> Interval | None: ...
    @property
    def ttft_p95_s(self) -> float | None: ...
    @property
    def ttft_p95_ci(self) -> Interval | None: ...
    @property
    def tpot_p95_s(self) -> float | None: ...
    @property
    def tpot_p95_ci(self) -> Interval | None: ...


def capacity_intervals(
    snap: Snapshot, step: Step | None
) -> tuple[Interval | None, Interval | None, Interval | None]:
    """(tok/s, P95 TTFT, P95 TPOT) intervals at the qualified level (capacity's, else step's)."""
    cap = snap.capacity
    if cap is None:
        return None, None, None
    return (
        cap.output_tokens_per_s_ci or (step.goodput_output_tokens_per_s_ci if step else None),
        cap.ttft_p95_ci or (step.ttft_s.p95_ci if step else None),
        cap.tpot_p95_ci or (step.tpot_s.p95_ci if step else None),
    )


def significance(row: Judged, first: Judged) -> tuple[bool | None, bool | None, bool | None]:
    """(tok/s, P95 TTFT, P95 TPOT): does `row` differ from `first` beyond both intervals?"""
    return (
        significant(
            first.qualified_output_tokens_per_s,
            first.qualified_output_tokens_per_s_ci,
            row.qualified_output_tokens_per_s,
            row.qualified_output_tokens_per_s_ci,
        ),
        significant(first.ttft_p95_s, first.ttft_p95_ci, row.ttft_p95_s, row.ttft_p95_ci),
        significant(first.tpot_p95_s, first.tpot_p95_ci, row.tpot_p95_s, row.tpot_p95_ci),
    )
