"""The server's own latency histograms: read from one scrape, differenced over a window, summarised.

Contract: `latency_histograms(index)` finds, in a parsed /metrics scrape, the per-request latency
histograms of the backend it recognises and returns them under common names (`ttft`, `queue`,
`prefill`, `decode`, `itl`, `tpot`, `e2e`, `inference`), each a `Histogram` of cumulative bucket
counts with `_sum` and `_count`, series of several engines or models summed bound by bound.
`window_delta(before, after)` is what happened between two scrapes (None for a metric whose
counts went down: the server restarted). `summarize_histogram(h)` gives the window's mean (exact:
delta `_sum` / delta `_count`) and p50/p90/p95/p99 interpolated from the buckets the way
Prometheus' `histogram_quantile` does: rank = q x count; the first bucket whose cumulative count
reaches the rank holds the quantile; inside it the value is interpolated linearly between the
bucket's lower bound (the previous bound, 0 for the first bucket) and its upper bound; a rank in
the +Inf bucket returns the highest finite bound. A quantile is therefore only as fine as its
bucket: `resolution_s` gives the width of the bucket each quantile fell in, and a quantile whose
bucket is coarser than the values, or wider than a quarter of the quantile itself, is reported as a
bound, not a number (`bucket_bound`).

Names (reference.md section 4): vLLM `vllm:time_to_first_token_seconds`,
`vllm:request_queue_time_seconds`, `vllm:request_prefill_time_seconds`,
`vllm:request_decode_time_seconds`, `vllm:inter_token_latency_seconds` (older:
`vllm:time_per_output_token_seconds`), `vllm:e2e_request_latency_seconds`,
`vllm:request_inference_time_seconds`; SGLang `sglang:time_to_first_token_seconds`,
`sglang:queue_time_seconds`, `sglang:inter_token_latency_seconds` (older
`sglang:time_per_output_token_seconds`), `sglang:e2e_request_latency_seconds`; TGI
`tgi_request_queue_duration`, `tgi_request_inference_duration`, `tgi_request_duration`,
`tgi_request_mean_time_per_token_duration` (per request: a TPOT, not an ITL). llama.cpp exposes no
latency histogram: its per-request `timings` are read from the responses instead.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, TypedDict

from gputui.telemetry.prom import PromIndex

INTERPOLATION: Final = (
    "Prometheus histogram_quantile: linear within the bucket holding rank q x count, from the "
    "previous bound (0 for the first) to the bucket's bound; means exact from _sum/_count. A "
    "quantile in the first bucket, in the +Inf bucket or in a bucket wider than the window's "
    "mean or than a quarter of the quantile is a bound (bounds[q]: '< 0.3 s', '> 80 s', "
    "'0.1-0.25 s'), its value None"
)
QUANTILES: Final = (("p50", 0.5), ("p90", 0.9), ("p95", 0.95), ("p99", 0.99))

LATENCY_NAMES: Final[dict[str, dict[str, tuple[str, ...]]]] = {
    "vllm": {
        "ttft": ("vllm:time_to_first_token_seconds",),
        "queue": ("vllm:request_queue_time_seconds",),
        "prefill": ("vllm:request_prefill_time_seconds",),
        "decode": ("vllm:request_decode_time_seconds",),
        "itl": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
        "e2e": ("vllm:e2e_request_latency_seconds",),
        "inference": ("vllm:request_inference_time_seconds",),
    },
    "sglang": {
        "ttft": ("sglang:time_to_first_token_seconds",),
        "queue": ("sglang:queue_time_seconds",),
        "itl": ("sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds"),
        "e2e": ("sglang:e2e_request_latency_seconds",),
    },
    "tgi": {
        "queue": ("tgi_request_queue_duration",),
        "inference": ("tgi_request_inference_duration",),
        "e2e": ("tgi_request_duration",),
        "tpot": ("tgi_request_mean_time_per_token_duration",),
    },
}
"""Common name -> the exposed histogram names, first found wins, per backend."""


@dataclass(frozen=True, slots=True)
class Histogram:
    """Cumulative bucket counts of one latency histogram (bounds ascending, the last is +Inf)."""

    name: str
    bounds: tuple[float, ...]
    cumulative: tuple[float, ...]
    sum: float
    count: float


def _histogram(index: PromIndex, name: str) -> Histogram | None:
    buckets: dict[float, float] = {}
    for sample in index.get(f"{name}_bucket"):
        try:
            le = float(sample.labels.get("le", "nan"))
        except ValueError:
            continue
        if math.isnan(le) or not math.isfinite(sample.value):
            continue
        buckets[le] = buckets.get(le, 0.0) + sample.value
    if not buckets:
        return None
    total = index.total(f"{name}_count")
    bounds = tuple(sorted(buckets))
    cumulative = tuple(buckets[b] for b in bounds)
    return Histogram(
        name=name,
        bounds=bounds,
        cumulative=cumulative,
        sum=index.total(f"{name}_sum") or 0.0,
        count=total if total is not None else cumulative[-1],
    )


def latency_histograms(index: PromIndex, backend: str | None) -> dict[str, Histogram]:
    """The backend's latency histograms in this scrape, under their common names."""
    names = LATENCY_NAMES.get(backend or "", {})
    found: dict[str, Histogram] = {}
    for common, candidates in names.items():
        for name in candidates:
            histogram = _histogram(index, name)
            if histogram is not None:
                found[common] = histogram
                break
    return found


def delta(before: Histogram, after: Histogram) -> Histogram | None:
    """`after - before` bound by bound; None when the bounds differ or a count went down."""
    if before.bounds != after.bounds or after.count < before.count:
        return None
    counts = tuple(a - b for a, b in zip(after.cumulative, before.cumulative, strict=True))
    if any(c < 0 for c in counts):
        return None
    return Histogram(
        after.name, after.bounds, counts, after.sum - before.sum, after.count - before.count
    )


def window_delta(
    before: Mapping[str, Histogram], after: Mapping[str, Histogram]
) -> dict[str, Histogram]:
    """Every metric present in both scrapes, differenced (restarted ones left out)."""
    out: dict[str, Histogram] = {}
    for name, late in after.items():
        early = before.get(name)
        if early is None:
            continue
        diff = delta(early, late)
        if diff is not None:
            out[name] = diff
    return out


def quantile(h: Histogram, q: float) -> tuple[float, float] | None:
    """(value, width of its bucket) by histogram_quantile's rule; None when the window is empty."""
    total = h.cumulative[-1] if h.cumulative else 0.0
    if total <= 0:
        return None
    rank = q * total
    previous_bound, previous_count = 0.0, 0.0
    for bound, count in zip(h.bounds, h.cumulative, strict=True):
        if count >= rank:
            if math.isinf(bound):
                return previous_bound, math.inf
            lower = previous_bound if previous_bound < bound else 0.0
            in_bucket = count - previous_count
            share = (rank - previous_count) / in_bucket if in_bucket > 0 else 1.0
            return lower + (bound - lower) * share, bound - lower
        previous_bound, previous_count = bound, count
    return previous_bound, math.inf


def _seconds_text(value_s: float) -> str:
    return f"{value_s:g} s" if value_s >= 0.1 else f"{value_s * 1e3:g} ms"


def _range_text(lower_s: float, upper_s: float) -> str:
    """'0.1-0.25 s', '25-50 ms', '50 ms-0.1 s'."""
    if (lower_s >= 0.1) == (upper_s >= 0.1):
        low, high = _seconds_text(lower_s), _seconds_text(upper_s)
        return f"{low.split()[0]}-{high}"
    return f"{_seconds_text(lower_s)}-{_seconds_text(upper_s)}"


def _bucket_of(h: Histogram, q: float) -> tuple[float, float] | None:
    """(lower edge, upper edge) of the bucket holding quantile q (upper inf for +Inf)."""
    total = h.cumulative[-1] if h.cumulative else 0.0
    if total <= 0:
        return None
    rank = q * total
    previous = 0.0
    for bound, count in zip(h.bounds, h.cumulative, strict=True):
        if count >= rank:
            return (previous if previous < bound else 0.0), bound
        previous = bound
    return previous, math.inf


class QuantileBound(TypedDict):
    """A quantile too coarse to be a number: the bucket's edges (`below_s` None: +Inf)."""

    above_s: float
    below_s: float | None
    text: str


QUANTILE_RESOLUTION: Final = 0.25
"""A quantile whose bucket is wider than this share of its value is a bound, not a number."""


def bucket_bound(
    lower_s: float, upper_s: float, mean_s: float | None, value_s: float | None = None
) -> QuantileBound | None:
    """The bound a quantile in bucket (lower, upper] is reported as, or None (see the rule).

    The rule: a quantile is only as fine as the bucket it fell in, so it is a bound, never an
    interpolated number, when
    - it fell in the first bucket (0 to the first bound: the histogram says only "at most"),
      e.g. vLLM's queue and prefill histograms start at 0.3 s while a fast server's values are
      ~0.01 ms: interpolation would say 150 ms, the bound says '< 0.3 s';
    - it fell in the +Inf bucket (only "more than the highest bound": '> 80 s');
    - its bucket is wider than the window's mean (the bucket is coarser than the values it
      summarises), or than QUANTILE_RESOLUTION of the quantile's own interpolated value
      (`value_s`; a mean of 0.21 s in the 0.1-0.25 s bucket read "183 ms"): the bucket's
      edges, '0.1-0.25 s'.
    Returns {"above_s", "below_s" (None for +Inf), "text"}.
    """
    if math.isinf(upper_s):
        return {"above_s": lower_s, "below_s": None, "text": f"> {_seconds_text(lower_s)}"}
    if lower_s <= 0.0:
        return {"above_s": 0.0, "below_s": upper_s, "text": f"< {_seconds_text(upper_s)}"}
    width = upper_s - lower_s
    coarse = value_s is not None and width > QUANTILE_RESOLUTION * value_s
    if coarse or (mean_s is not None and width > mean_s):
        return {"above_s": lower_s, "below_s": upper_s, "text": _range_text(lower_s, upper_s)}
    return None


def summarize_histogram(h: Histogram) -> dict[str, Any]:
    """Mean (exact), quantiles (interpolated, or None with a bound) and bucket widths, seconds.

    `bounds[q]` holds the bound of each quantile too coarse to be a number (`bucket_bound`).
    """
    n = round(h.count)
    mean = h.sum / h.count if h.count > 0 else None
    out: dict[str, Any] = {"mean": mean, "n": n}
    resolution: dict[str, float | None] = {}
    bounds: dict[str, QuantileBound] = {}
    for key, q in QUANTILES:
        found = quantile(h, q)
        bucket = _bucket_of(h, q)
        value = None if found is None else found[0]
        bound = None if bucket is None else bucket_bound(*bucket, mean, value)
        out[key] = None if found is None or bound is not None else found[0]
        resolution[key] = None if found is None or math.isinf(found[1]) else found[1]
        if bound is not None:
            bounds[key] = bound
    out["resolution_s"] = resolution
    out["bounds"] = bounds
    return out


def quantile_text(summary: dict[str, Any], key: str) -> str:
    """A summary's quantile for the screen: '34.2 ms', or its bound ('< 0.3 s'), or '-'."""
    bound = (summary.get("bounds") or {}).get(key)
    if bound is not None:
        return str(bound["text"])
    value = summary.get(key)
    if not isinstance(value, int | float):
        return "-"
    return f"{value:.3g} s" if value >= 1 else f"{value * 1e3:.3g} ms"
