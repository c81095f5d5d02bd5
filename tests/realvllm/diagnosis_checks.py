"""Checks of a step's diagnosis against a real vLLM: the TTFT decomposition and the percentiles.

- The decomposition (`steps[].ttft_breakdown`): its client part must be what is left of the
  client's mean TTFT once vLLM's own TTFT (over the requests of its queue and prefill means: its
  E2E - decode means over the step, `server_latency`) and the network are taken out, within
  1 ms; vLLM's own overhead beyond queue and prefill (`server_other_s`) is the server's, never
  the client's. vLLM's histogram window must hold most
  of the step's requests (its `n` against the client's), or the two means are not of one load.
- The percentiles (`steps[].server_latency.<metric>`): each is a number only inside a bucket that
  is neither vLLM's first (0 to its first bound) nor its +Inf one and no wider than the window's
  mean nor than a quarter of the quantile itself; otherwise it is None and `bounds[q]` holds the
  bucket's edges. The buckets are read from
  vLLM's own /metrics, not from gputui.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from gputui.snapshot.models import Step
from gputui.telemetry.latency_histograms import LATENCY_NAMES, QUANTILE_RESOLUTION, QUANTILES
from tests.support.saved import saved
from tests.support.vllm_server import VllmServer

CLIENT_TOLERANCE_S = 1e-3


def check_decomposition(step: Step) -> dict[str, float]:
    """The step's client part is client TTFT - vLLM's TTFT - network (1 ms); its parts, seconds."""
    b = step.ttft_breakdown
    latency = step.server_latency
    assert b is not None and latency is not None, f"step {step.level:g} was not diagnosed"
    b, latency = saved(b), saved(latency)
    assert latency["source"] == "histograms"
    server_ttft = latency["ttft_s"]
    assert step.ttft_s.mean is not None
    assert b["unsplit"] is None and b["server_other_s"] is not None
    # vLLM's TTFT over the requests of its queue and prefill means: E2E - decode, all observed
    # at each request's end (its TTFT histogram's window holds other requests at its edges).
    same_requests = latency["e2e_s"]["mean"] - latency["decode_s"]["mean"]
    assert b["server_ttft_s"] == round(same_requests, 6)
    # The client's mean TTFT over the step's requests that window holds (its `ttft_s`).
    assert abs(b["ttft_s"] - step.ttft_s.mean) <= 0.5 * step.ttft_s.mean
    gap = b["ttft_s"] - same_requests - b["network_s"]
    parts = {
        "ttft": b["ttft_s"],
        "step_ttft": step.ttft_s.mean,
        "server_ttft": same_requests,
        "server_ttft_histogram": server_ttft["mean"],
        "network": b["network_s"],
        "queue": b["queue_s"],
        "prefill": b["prefill_s"],
        "server_other": b["server_other_s"],
        "client": b["client_s"],
        "gap": gap,
    }
    print(
        f"concurrency {step.level:g}: "
        + ", ".join(f"{k} {v * 1e3:.3f} ms" for k, v in parts.items())
        + f" (n {step.ttft_s.n}, vLLM's {server_ttft['n']}; explained {b['explained_share']:.1%})"
    )
    # vLLM's TTFT histogram counted about this step's requests: its window is cut at scrapes
    # of /metrics (every 0.5 s, later when the host is busy), so it may take in or leave out
    # some; it must hold most of them for the two means to be of the same load.
    assert 0.5 * step.ttft_s.n <= server_ttft["n"] <= 1.5 * step.ttft_s.n, parts
    assert b["client_s"] == _approx(gap), parts
    # The parts add up to the client's TTFT, and vLLM's rest is its own (it spends some there).
    total = b["network_s"] + b["queue_s"] + b["prefill_s"] + b["server_other_s"] + b["client_s"]
    assert total == _approx(b["ttft_s"], 1e-5)
    assert b["server_other_s"] > 0.0, parts
    return parts


def _approx(value: float, tolerance: float = CLIENT_TOLERANCE_S) -> Any:
    return pytest.approx(value, abs=tolerance)


def vllm_buckets(vllm: VllmServer) -> dict[str, tuple[float, ...]]:
    """Each latency histogram's upper bounds as vLLM exposes them (common name -> bounds)."""
    out: dict[str, tuple[float, ...]] = {}
    for common, names in LATENCY_NAMES["vllm"].items():
        for name in names:
            buckets = vllm.buckets(name)
            if buckets:
                out[common] = tuple(bound for bound, _ in buckets)
                break
    return out


def _bucket(bounds: tuple[float, ...], value: float) -> tuple[float, float]:
    """(lower, upper] of vLLM's bucket holding `value`."""
    lower = 0.0
    for upper in bounds:
        if value <= upper:
            return lower, upper
        lower = upper
    return lower, math.inf


def check_percentiles(step: Step, buckets: dict[str, tuple[float, ...]]) -> dict[str, int]:
    """No percentile finer than vLLM's bucket; counts of {numbers, bounds} over the step."""
    latency = saved(step.server_latency)
    seen = {"numbers": 0, "bounds": 0}
    for key, summary in latency.items():
        if not key.endswith("_s") or key == "window_s":
            continue
        common = key[:-2]
        bounds = buckets[common]
        mean = summary["mean"]
        shown = []
        for q, _ in QUANTILES:
            value, bound = summary[q], summary["bounds"].get(q)
            if value is not None:
                lower, upper = _bucket(bounds, value)
                assert bound is None
                assert lower > 0.0 and math.isfinite(upper), (key, q, value, lower, upper)
                assert upper - lower <= mean, (key, q, value, lower, upper, mean)
                assert upper - lower <= QUANTILE_RESOLUTION * value, (key, q, value, lower, upper)
                assert summary["resolution_s"][q] == _approx(upper - lower, 1e-9)
                seen["numbers"] += 1
                shown.append(f"{q} {value * 1e3:.3f} ms (bucket {lower:g}-{upper:g} s)")
            else:
                assert bound is not None, (key, q, summary)
                above, below = bound["above_s"], bound["below_s"]
                # The bound is one of vLLM's buckets: its first, its +Inf, or one wider than
                # the mean.
                finite = [b for b in bounds if math.isfinite(b)]
                if below is None:
                    assert above == finite[-1], (key, q, bound)
                else:
                    index = bounds.index(below)
                    assert above == (bounds[index - 1] if index else 0.0), (key, q, bound)
                    # ... or one wider than a quarter of the quantile in it (so of its lower edge)
                    coarse = below - above > mean or below - above > QUANTILE_RESOLUTION * above
                    assert above == 0.0 or coarse, (key, q, bound, mean)
                seen["bounds"] += 1
                shown.append(f"{q} {bound['text']}")
        print(f"  vLLM {common}: mean {mean * 1e3:.3f} ms n {summary['n']}; " + "; ".join(shown))
    return seen
