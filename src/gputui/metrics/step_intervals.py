"""The 95 % intervals of a step's rates and proportions (what `aggregate_step` adds to a step).

Contract of `rate_and_share_intervals(cols, ...)`, on the same selections `metrics.step` uses:
- `output_tokens_per_s_ci`: batch means over `batches` equal slices of the window W of the token
  events that arrived in W (each event weighted as in `request_metrics.tokens_arrived`: its own
  count where the events were counted, else the usage total spread over them; a record without
  events counts its tokens at its end), so the slices' mean is exactly the step's
  `output_tokens_per_s` and the interval sits on the point's basis.
- `goodput_output_tokens_per_s_ci`: the same over the events of the good records only (mean =
  `goodput_output_tokens_per_s`).
- `requests_per_s_ci`: batch means of the ok requests that ended in each slice (mean =
  `requests_per_s`). Both are floored by the Poisson counting interval of their totals.
- `batches`: one slice per request lifetime (median E2E of the measured ok requests), between 3
  and 20 (`confidence.batch_count`).
- `error_rate_ci` and `goodput_share_ci`: Wilson intervals of failed and of good requests (ok and
  within every per-request SLA bound) among the measured ones; `goodput_share` is the point value.
Runs in the Session's reader thread with the rest of the step aggregate, never in the engine.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gputui.metrics.confidence import (
    Bounds,
    batch_count,
    batch_means_ci,
    batch_rates,
    counting_half_width,
    wilson_ci,
)
from gputui.metrics.request_metrics import RecordColumns, event_token_weights

BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class StepIntervals:
    """Rate and proportion intervals of one step (None where there is nothing to estimate)."""

    output_tokens_per_s_ci: Bounds | None
    goodput_output_tokens_per_s_ci: Bounds | None
    requests_per_s_ci: Bounds | None
    batches: int | None
    error_rate_ci: Bounds | None
    goodput_share: float | None
    goodput_share_ci: Bounds | None


def rate_and_share_intervals(
    cols: RecordColumns,
    *,
    lo_ns: int,
    hi_ns: int,
    measured_ok: BoolArray,
    measured_failed: BoolArray,
    good: BoolArray,
    good_tokens: BoolArray,
    lifetime_s: float | None,
) -> StepIntervals:
    """The intervals of one step's rates and shares (contract in the module docstring)."""
    measured = int(measured_ok.sum()) + int(measured_failed.sum())
    good_n = int(good.sum())
    error_ci = wilson_ci(int(measured_failed.sum()), measured)
    share = good_n / measured if measured else None
    share_ci = wilson_ci(good_n, measured)
    if hi_ns <= lo_ns:
        return StepIntervals(None, None, None, None, error_ci, share, share_ci)
    k = batch_count((hi_ns - lo_ns) * 1e-9, lifetime_s)
    eventless = cols.n_events == 0
    times = np.concatenate((cols.stamps_ns, cols.end_ns[eventless]))
    weights = np.concatenate(
        (event_token_weights(cols), cols.output_tokens[eventless].astype(np.float64))
    )
    chosen = np.concatenate((np.repeat(good_tokens, cols.n_events), good_tokens[eventless]))
    requests = batch_rates(cols.end_ns[cols.ok], None, lo_ns, hi_ns, k)
    duration_s = (hi_ns - lo_ns) * 1e-9
    return StepIntervals(
        output_tokens_per_s_ci=_token_ci(times, weights, lo_ns, hi_ns, k),
        goodput_output_tokens_per_s_ci=_token_ci(times[chosen], weights[chosen], lo_ns, hi_ns, k),
        requests_per_s_ci=batch_means_ci(
            requests, counting_half_width(float(requests.mean()) * duration_s, duration_s)
        ),
        batches=k,
        error_rate_ci=error_ci,
        goodput_share=share,
        goodput_share_ci=share_ci,
    )


def _token_ci(
    times: npt.NDArray[np.int64], weights: npt.NDArray[np.float64], lo_ns: int, hi_ns: int, k: int
) -> Bounds | None:
    """Batch-means interval of a token rate, floored by the Poisson interval of its count."""
    rates = batch_rates(times, weights, lo_ns, hi_ns, k)
    duration_s = (hi_ns - lo_ns) * 1e-9
    # The slices' mean rate times the window is the window's count.
    return batch_means_ci(rates, counting_half_width(float(rates.mean()) * duration_s, duration_s))
