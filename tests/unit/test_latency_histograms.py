"""Server latency histograms: parsing, window deltas, histogram_quantile's interpolation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gputui.sim.latency import REQUEST_BUCKETS_S, TTFT_BUCKETS_S, LatencyRecorder
from gputui.telemetry.latency_histograms import (
    Histogram,
    latency_histograms,
    quantile,
    summarize_histogram,
    window_delta,
)
from gputui.telemetry.prom import parse
from gputui.telemetry.server_metrics import detect_backend


def _recorder_with(ttfts_s: list[float], start_id: int = 0) -> LatencyRecorder:
    rec = LatencyRecorder()
    _feed(rec, ttfts_s, start_id)
    return rec


def _feed(rec: LatencyRecorder, ttfts_s: list[float], start_id: int = 0) -> None:
    for i, ttft in enumerate(ttfts_s, start=start_id):
        arrival = 1_000_000_000 * (i + 1)
        rec.arrived(i, arrival)
        rec.scheduled(i, arrival + round(ttft * 0.25e9))
        first = arrival + round(ttft * 1e9)
        rec.token(i, first)
        rec.token(i, first + 20_000_000)
        rec.finished(i, first + 20_000_000)


def _scrape(rec: LatencyRecorder) -> dict[str, Histogram]:
    index = parse(rec.prometheus_text("m"))
    backend = detect_backend(index)
    assert backend == "vllm"
    return latency_histograms(index, backend)


def test_vllm_names_and_bucket_bounds_are_read() -> None:
    found = _scrape(_recorder_with([0.03, 0.07]))
    assert set(found) == {"ttft", "queue", "prefill", "decode", "itl", "e2e", "inference"}
    assert found["ttft"].bounds == (*TTFT_BUCKETS_S, math.inf)
    assert found["e2e"].bounds == (*REQUEST_BUCKETS_S, math.inf)
    assert found["ttft"].count == 2
    assert found["itl"].count == 2  # one gap per request


def test_quantile_interpolates_like_histogram_quantile() -> None:
    # Prometheus: rank 0.5 x 10 = 5 lands in (0.1, 0.2], counts 4..8: 0.1 + 0.1 x 1/4.
    h = Histogram("x", (0.1, 0.2, 0.4, math.inf), (4.0, 8.0, 10.0, 10.0), 1.5, 10.0)
    value, width = quantile(h, 0.5) or (None, None)
    assert value == pytest.approx(0.125)
    assert width == pytest.approx(0.1)
    assert quantile(h, 0.2) == pytest.approx((0.05, 0.1))  # first bucket: from 0
    over = Histogram("x", (0.1, math.inf), (1.0, 3.0), 9.0, 3.0)
    assert quantile(over, 0.99) == (0.1, math.inf)  # +Inf bucket: the highest finite bound
    assert quantile(Histogram("x", (0.1, math.inf), (0.0, 0.0), 0.0, 0.0), 0.5) is None


def test_window_delta_means_exact_and_quantiles_within_a_bucket() -> None:
    rng = np.random.default_rng(3)
    rec = _recorder_with(list(rng.uniform(0.002, 0.09, 50)))
    before = _scrape(rec)
    window = list(rng.uniform(0.02, 0.6, 400))
    _feed(rec, window, start_id=1000)
    delta = window_delta(before, _scrape(rec))
    summary = summarize_histogram(delta["ttft"])
    assert summary["n"] == 400
    assert summary["mean"] == pytest.approx(float(np.mean(window)), abs=1e-9)  # ns stamps
    for key, q in (("p50", 50), ("p90", 90), ("p99", 99)):
        truth = float(np.percentile(window, q))
        assert abs(summary[key] - truth) <= summary["resolution_s"][key]
    queue = summarize_histogram(delta["queue"])
    prefill = summarize_histogram(delta["prefill"])
    assert queue["mean"] + prefill["mean"] == pytest.approx(summary["mean"], rel=1e-9)


def test_restarted_server_gives_no_delta() -> None:
    after = _scrape(_recorder_with([0.05]))
    before = _scrape(_recorder_with([0.05, 0.06, 0.07]))
    assert window_delta(before, after) == {}


def test_sglang_and_tgi_names() -> None:
    text = "\n".join(
        [
            "# TYPE sglang:queue_time_seconds histogram",
            'sglang:queue_time_seconds_bucket{le="0.1"} 2',
            'sglang:queue_time_seconds_bucket{le="+Inf"} 3',
            "sglang:queue_time_seconds_sum 0.5",
            "sglang:queue_time_seconds_count 3",
            "# TYPE sglang:num_queue_reqs gauge",
            "sglang:num_queue_reqs 1",
            "",
        ]
    )
    index = parse(text)
    found = latency_histograms(index, detect_backend(index))
    assert found["queue"].count == 3
    assert summarize_histogram(found["queue"])["mean"] == pytest.approx(0.5 / 3)
    tgi = parse(
        "# TYPE tgi_request_queue_duration histogram\n"
        'tgi_request_queue_duration_bucket{le="0.5"} 1\n'
        'tgi_request_queue_duration_bucket{le="+Inf"} 1\n'
        "tgi_request_queue_duration_sum 0.2\ntgi_request_queue_duration_count 1\n"
    )
    assert latency_histograms(tgi, "tgi")["queue"].sum == pytest.approx(0.2)
