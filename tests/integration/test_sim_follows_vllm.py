"""The simulator follows a real vLLM 0.32: the same assertions on its transcripts and on the sim.

The transcripts (tests/fixtures/real-servers/vllm-cpu-0.32/, byte for byte from a real vLLM on a
CPU) and the simulator's live output go through the same checks: /metrics parsed with telemetry's
parser (the metric names, labels and histogram bucket bounds gputui reads), the TTFT histogram's
mean above queue + prefill (the server's own overhead), and `prompt_tokens_details.cached_tokens`
only with `--enable-prompt-tokens-details` and only on the final usage chunk.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from gputui.sim.gpu_profile import GpuProfileSpec
from gputui.sim.runner import SimProcess, start_background
from gputui.telemetry.latency_histograms import Histogram, latency_histograms, window_delta
from gputui.telemetry.prom import PromIndex, parse
from gputui.telemetry.server_metrics import detect_backend

REAL = Path(__file__).parents[1] / "fixtures" / "real-servers" / "vllm-cpu-0.32"
SPEC: dict[str, Any] = {
    "gpu": "a100-80gb-pcie",
    "model": "llama-3.1-8b",
    "served_model_name": "tiny",
}

GAUGES_AND_COUNTERS = (
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:num_requests_waiting_by_reason",
    "vllm:kv_cache_usage_perc",
    "vllm:prefix_cache_queries_total",
    "vllm:prefix_cache_hits_total",
    "vllm:prompt_tokens_total",
    "vllm:generation_tokens_total",
    "vllm:num_preemptions_total",
    "vllm:request_success_total",
)
HISTOGRAMS = {
    "ttft": "vllm:time_to_first_token_seconds",
    "itl": "vllm:inter_token_latency_seconds",
    "queue": "vllm:request_queue_time_seconds",
    "prefill": "vllm:request_prefill_time_seconds",
    "decode": "vllm:request_decode_time_seconds",
    "inference": "vllm:request_inference_time_seconds",
    "e2e": "vllm:e2e_request_latency_seconds",
}


def vllm_shape(text: str) -> tuple[PromIndex, dict[str, Histogram]]:
    """The checks both servers must pass; returns the parsed scrape and its histograms."""
    index = parse(text)
    assert detect_backend(index) == "vllm"
    for name in GAUGES_AND_COUNTERS:
        assert index.get(name), name
    assert not index.get("vllm:gpu_cache_usage_perc")  # gone from vLLM: kv_cache_usage_perc
    reasons = {s.labels.get("reason") for s in index.get("vllm:num_requests_waiting_by_reason")}
    assert reasons == {"capacity", "deferred"}
    found = latency_histograms(index, "vllm")
    assert {common: h.name for common, h in found.items()} == HISTOGRAMS
    for h in found.values():
        assert h.bounds[-1] == math.inf
        (series,) = {frozenset(s.labels) for s in index.get(f"{h.name}_count")}
        assert series == {"engine", "model_name"}, h.name
    # vLLM's queue and prefill histograms start at 0.3 s: far coarser than a fast server's values.
    assert found["queue"].bounds[0] == found["prefill"].bounds[0] == 0.3
    return index, found


def server_overhead_s(before: str, after: str) -> float:
    """Mean TTFT (histogram) - mean queue - mean prefill over the window between two scrapes."""
    delta = window_delta(vllm_shape(before)[1], vllm_shape(after)[1])
    ttft, queue, prefill = (delta[k] for k in ("ttft", "queue", "prefill"))
    assert ttft.count == queue.count == prefill.count > 0
    return ttft.sum / ttft.count - queue.sum / queue.count - prefill.sum / prefill.count


def usage_chunks(sse: bytes) -> list[dict[str, Any]]:
    """Every `data:` event's JSON (no [DONE])."""
    events = [line[6:] for line in sse.split(b"\n") if line.startswith(b"data: ")]
    return [orjson.loads(e) for e in events if e != b"[DONE]"]


def cached_tokens_where(sse: bytes) -> list[int | None]:
    """cached_tokens of each chunk that has usage (None where the chunk has none)."""
    out = []
    for chunk in usage_chunks(sse):
        usage = chunk.get("usage")
        if usage is not None:
            out.append((usage.get("prompt_tokens_details") or {}).get("cached_tokens"))
    return out


def assert_cached_only_on_the_final_chunk(sse: bytes) -> int:
    chunks = usage_chunks(sse)
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] is not None
    where = cached_tokens_where(sse)
    assert len(where) >= 2 and all(c is None for c in where[:-1]) and where[-1] is not None
    return int(where[-1])


def assert_no_cached_tokens(sse: bytes) -> None:
    assert b"cached_tokens" not in sse
    assert usage_chunks(sse)[-1]["choices"] == []


# -- the real vLLM's transcripts ---------------------------------------------------------------


def test_real_vllm_metrics_have_the_shape() -> None:
    overhead = server_overhead_s(
        (REAL / "metrics-before-run.txt").read_text(), (REAL / "metrics-after-run.txt").read_text()
    )
    print(f"real vLLM: TTFT histogram mean - queue - prefill = {overhead * 1e3:.2f} ms")
    assert 0.001 < overhead < 0.05


def test_real_vllm_sends_cached_tokens_only_with_the_flag_on_the_last_chunk() -> None:
    assert_no_cached_tokens((REAL / "chat-stream.sse").read_bytes())
    for name in (
        "chat-stream-prompt-tokens-details-1.sse",
        "chat-stream-prompt-tokens-details-2.sse",
    ):
        assert_cached_only_on_the_final_chunk((REAL / name).read_bytes())


# -- the simulator, live --------------------------------------------------------------------


@pytest.fixture(scope="module")
def default_sim() -> Iterator[SimProcess]:
    with start_background(GpuProfileSpec(**SPEC)) as sim:
        yield sim


def _chat(url: str, prompt: str, *, max_tokens: int = 8) -> bytes:
    body = {
        "model": "tiny",
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    return httpx.post(url + "/v1/chat/completions", json=body, timeout=30).content


PROMPT = "the same long prompt " * 60


def test_the_sims_metrics_have_the_same_shape_and_bounds(default_sim: SimProcess) -> None:
    before = httpx.get(default_sim.url + "/metrics").text
    for i in range(6):
        _chat(default_sim.url, f"{i} " + PROMPT)
    after = httpx.get(default_sim.url + "/metrics").text
    real = vllm_shape((REAL / "metrics-after-run.txt").read_text())[1]
    sim = vllm_shape(after)[1]
    assert {k: h.bounds for k, h in sim.items()} == {k: h.bounds for k, h in real.items()}
    overhead = server_overhead_s(before, after)
    print(f"sim: TTFT histogram mean - queue - prefill = {overhead * 1e3:.3f} ms")
    assert overhead == pytest.approx(0.003, abs=0.0005)  # the default --server-overhead-ms 3


def test_the_sim_sends_no_cached_tokens_by_default(default_sim: SimProcess) -> None:
    _chat(default_sim.url, PROMPT)
    assert_no_cached_tokens(_chat(default_sim.url, PROMPT))  # a prefix-cache hit, not reported
    index = parse(httpx.get(default_sim.url + "/metrics").text)
    assert (index.total("vllm:prefix_cache_hits_total") or 0) > 0  # the counters show it


def test_the_sim_sends_cached_tokens_with_the_flag_on_the_last_chunk() -> None:
    spec = GpuProfileSpec(**SPEC, prompt_tokens_details=True)
    with start_background(spec) as sim:
        first = assert_cached_only_on_the_final_chunk(_chat(sim.url, PROMPT))
        second = assert_cached_only_on_the_final_chunk(_chat(sim.url, PROMPT))
    assert first == 0 < second
