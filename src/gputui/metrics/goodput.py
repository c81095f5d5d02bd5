"""Which requests are good (the seeds' 有效输出), per record, on a step's columns.

Contract (docs/domain.md §2):
- `ttfat_censored_s`: per ok record, the time to its first answer token; a record that thought
  and never answered (`no_answer_mask`) is censored at its E2E, the latest its answer could have
  come; a record without thinking answered with its first token (TTFAT = TTFT). NaN for failed
  records.
- `short_mask`: ok records that produced fewer output tokens than they asked for (a record that
  asked for no particular length, 0, is never short).
- `good_mask(cols, sla)`: records that succeeded, met every per-request bound of `sla` (TTFT,
  TPOT, E2E, TTFAT: `sla.meets_sla`) and are not short. A failed or timed-out record is never
  good: it counts as over every bound. A record that waited for a `--max-in-flight` slot is
  judged on its TTFT from its schedule (`request_metrics.ttft_judged_s`), as the step's verdict.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from gputui.metrics.request_metrics import (
    RecordColumns,
    e2e_aligned_s,
    tpot_aligned_s,
    ttft_judged_s,
)
from gputui.metrics.sla import Sla, meets_sla

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

_NS_TO_S = 1e-9


def no_answer_mask(cols: RecordColumns) -> BoolArray:
    """Ok records that thought and never reached an answer token."""
    return cols.ok & (cols.reasoning_tokens > 0) & ~cols.has_first_answer


def ttfat_censored_s(cols: RecordColumns) -> FloatArray:
    """TTFAT per ok record, censored at E2E where no answer came (NaN for failed records)."""
    unanswered = no_answer_mask(cols) | ~cols.has_first_token
    answer_ns = np.where(
        cols.has_first_answer,
        cols.first_answer_ns,
        np.where(unanswered, cols.end_ns, cols.first_token_ns),
    )
    return np.where(cols.ok, (answer_ns - cols.sent_ns) * _NS_TO_S, np.nan)


def short_mask(cols: RecordColumns) -> BoolArray:
    """Ok records that stopped before the output tokens they asked for."""
    asked = cols.requested_output_tokens > 0
    return cols.ok & asked & (cols.output_tokens < cols.requested_output_tokens)


def good_mask(cols: RecordColumns, sla: Sla) -> BoolArray:
    """Records that succeeded, met every per-request bound and reached their length."""
    good = cols.ok & ~short_mask(cols)
    if not good.any():
        return good
    judged = meets_sla(
        ttft_judged_s(cols)[good],
        tpot_aligned_s(cols)[good],
        sla,
        e2e_aligned_s(cols)[good],
        ttfat_censored_s(cols)[good],
    )
    good[good] = judged
    return good
