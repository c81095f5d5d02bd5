"""Helpers for realvllm tests: `gputui run` against the server, vLLM's counters around it."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from gputui.snapshot.models import Snapshot
from gputui.snapshot.store import load_snapshot
from tests.support.priority import first_in_line
from tests.support.vllm_server import VllmServer, parse_samples

COUNTERS = (
    "vllm:request_success_total",
    "vllm:prompt_tokens_total",
    "vllm:generation_tokens_total",
    "vllm:time_to_first_token_seconds_sum",
    "vllm:time_to_first_token_seconds_count",
    "vllm:inter_token_latency_seconds_sum",
    "vllm:inter_token_latency_seconds_count",
    "vllm:prefix_cache_queries_total",
    "vllm:prefix_cache_hits_total",
)

GENERATING_ROUTES = (
    "/v1/completions",
    "/v1/chat/completions",
    "/v1/responses",
    "/v1/messages",
)


def run_gputui(
    vllm: VllmServer,
    out: Path,
    args: Sequence[str],
    *,
    input_tokens: int = 512,
    output_tokens: int = 32,
    timeout_s: float = 150.0,
) -> tuple[Snapshot, str, dict[str, float]]:
    """`gputui run` as a user types it, its output printed; (snapshot, stdout, counter deltas).

    It runs in its own session ahead of vLLM's (`first_in_line`): vLLM's CPU build computes on
    the client's cores, and a client left waiting for them reads `host-contended`, truly but not
    what these tests measure.

    The deltas are vLLM's COUNTERS over the run (every request the run sent, warm-up included).
    """
    before = vllm.counters()
    started = time.monotonic()
    result = subprocess.run(
        [
            *(sys.executable, "-m", "gputui", "run", "--url", vllm.url, "--model", vllm.model),
            *("--input-tokens", str(input_tokens), "--output-tokens", str(output_tokens)),
            *("--out", str(out), *args),
        ],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        preexec_fn=first_in_line(),  # before vLLM's own session on the 2 cores (tests.support)
    )
    after = vllm.counters()
    print(f"\n$ gputui run {' '.join(args)}  ({time.monotonic() - started:.1f} s)")
    print(result.stdout)
    assert result.returncode == 0, result.stdout + result.stderr
    delta = {name: after.get(name, 0.0) - before.get(name, 0.0) for name in COUNTERS}
    return load_snapshot(out), result.stdout, delta


def server_hit_rate(delta: dict[str, float]) -> float:
    """vLLM's own prefix-cache hit rate over the run: hit / queried prompt tokens, its counters."""
    return delta["vllm:prefix_cache_hits_total"] / delta["vllm:prefix_cache_queries_total"]


def generation_posts(vllm: VllmServer) -> dict[str, float]:
    """POSTs vLLM's HTTP layer has answered so far on each generating route, by status class.

    `http_requests_total{handler, method, status}`: every request, whatever its answer (a 400
    too), unlike vLLM's engine counters, which see only the requests that reached the engine.
    """
    posts: dict[str, float] = {}
    for name, labels, value in parse_samples(vllm.metrics_text()):
        handler = labels.get("handler", "")
        if name == "http_requests_total" and handler in GENERATING_ROUTES:
            key = f"{handler} {labels.get('status')}"
            posts[key] = posts.get(key, 0.0) + value
    return posts


def server_means(delta: dict[str, float]) -> tuple[float, float]:
    """vLLM's mean TTFT and ITL over the run, from its histograms' sums and counts (seconds)."""
    ttft = (
        delta["vllm:time_to_first_token_seconds_sum"]
        / delta["vllm:time_to_first_token_seconds_count"]
    )
    itl = (
        delta["vllm:inter_token_latency_seconds_sum"]
        / delta["vllm:inter_token_latency_seconds_count"]
    )
    return ttft, itl


def client_means(snap: Snapshot) -> tuple[float, float]:
    """gputui's mean TTFT and ITL over the measured steps, weighted by their samples."""
    ttft_sum = itl_sum = 0.0
    for step in snap.steps:
        assert step.ttft_s.mean is not None and step.itl_s.mean is not None
        ttft_sum += step.ttft_s.mean * step.ttft_s.n
        itl_sum += step.itl_s.mean * step.itl_s.n
    ttft_n = sum(step.ttft_s.n for step in snap.steps)
    itl_n = sum(step.itl_s.n for step in snap.steps)
    return ttft_sum / ttft_n, itl_sum / itl_n
