"""End to end: scrape the GPU simulator's /metrics with the sampler while streaming load runs.

The simulator exposes vLLM's and dcgm-exporter's names, so one endpoint exercises the server
normalizer, the DCGM parser and the sampler's threads against a live server. Load is bounded by
request count and by time.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from gputui.cli.tool_flags import add_metrics_arguments
from gputui.cli.typed import take
from gputui.sim.gpu_profile import GpuProfileSpec
from gputui.sim.runner import SimProcess, start_background
from gputui.telemetry.commands import MetricsOptions, run_metrics
from gputui.telemetry.sampler import TelemetrySampler
from gputui.telemetry.samples import ServerSample
from gputui.telemetry.server_metrics import ServerMetricsSource

REQUESTS = 6
CONCURRENCY = 3
MAX_TOKENS = 96
PROMPT = " ".join(["the quick brown fox jumps over the lazy dog"] * 40)


@pytest.fixture(scope="module")
def gpu_sim() -> Iterator[SimProcess]:
    spec = GpuProfileSpec(gpu="a100-80gb-pcie", model="llama-3.1-8b", served_model_name="sim")
    with start_background(spec) as sim:
        yield sim


def stream_one(base_url: str) -> tuple[int, int]:
    """One streaming completion: (tokens in content chunks, completion_tokens from usage)."""
    body = {
        "model": "sim",
        "prompt": PROMPT,
        "max_tokens": MAX_TOKENS,
        "stream": True,
        "ignore_eos": True,
        "stream_options": {"include_usage": True},
    }
    chunks = 0
    usage = 0
    with (
        httpx.Client(base_url=base_url, timeout=30.0) as client,
        client.stream("POST", "/v1/completions", json=body) as response,
    ):
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line.removeprefix("data: "))
            if event.get("usage"):
                usage = event["usage"]["completion_tokens"]
            chunks += sum(1 for c in event.get("choices", []) if c.get("text"))
    return chunks, usage


def scrape_server(url: str) -> ServerSample:
    source = ServerMetricsSource(url)
    try:
        sample = source.scrape().server
    finally:
        source.close()
    assert sample is not None
    return sample


@pytest.mark.slow
def test_scraping_the_simulator_under_load(gpu_sim: SimProcess) -> None:
    metrics_url = gpu_sim.url + "/metrics"
    before = scrape_server(metrics_url)
    assert before.backend == "vllm"
    assert before.kv_capacity_tokens is not None
    assert before.kv_capacity_tokens > 0
    sampler = TelemetrySampler(server=ServerMetricsSource(metrics_url), server_interval_s=0.05)
    started = time.monotonic()
    with sampler, ThreadPoolExecutor(CONCURRENCY) as pool:
        results = list(pool.map(stream_one, [gpu_sim.url] * REQUESTS))
        time.sleep(0.2)  # one more scrape after the last request finished
    assert time.monotonic() - started < 60
    received = sum(usage for _, usage in results)
    assert received == REQUESTS * MAX_TOKENS
    assert [chunks for chunks, _ in results] == [usage for _, usage in results]

    after = scrape_server(metrics_url)
    assert before.generation_tokens_total is not None
    assert after.generation_tokens_total is not None
    assert after.generation_tokens_total - before.generation_tokens_total == received
    assert after.requests_running == 0

    series = sampler.traces(downsample_to=None).server
    assert len(series) >= 5
    assert max(s.requests_running or 0 for s in series) > 0
    usages = [s.kv_cache_usage for s in series if s.requests_running]
    assert usages
    assert all(u is not None and 0 < u <= 1 for u in usages)
    times = [s.t_ns for s in series]
    assert times == sorted(times)
    counters = [s.generation_tokens_total or 0 for s in series]
    assert counters == sorted(counters)

    gpus = sampler.traces(downsample_to=None).gpu  # DCGM lines in the same text
    assert gpus
    assert sampler.gpu_source == "dcgm (via /metrics)"
    last = gpus[-1]
    assert last.name == "NVIDIA A100 80GB PCIe"
    assert last.temperature_c is not None
    assert last.temperature_c > 20
    assert last.sm_clock_mhz is not None
    assert last.sm_clock_mhz > 0
    assert last.power_w is not None
    assert last.power_w > 0
    assert max(g.power_w or 0 for g in gpus) > min(g.power_w or 0 for g in gpus)


def _metrics_wired() -> bool:
    done = subprocess.run(
        [sys.executable, "-m", "gputui", "metrics", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done.returncode == 0 and "--url" in done.stdout


@pytest.mark.slow
def test_metrics_command_against_the_simulator(
    gpu_sim: SimProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    if _metrics_wired():
        done = subprocess.run(
            [sys.executable, "-m", "gputui", "metrics", "--url", gpu_sim.url, "--json"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        out = done.stdout
    else:
        parser = argparse.ArgumentParser()
        add_metrics_arguments(parser)
        args = take(MetricsOptions, parser.parse_args(["--url", gpu_sim.url, "--json"]))
        assert run_metrics(args) == 0
        out = capsys.readouterr().out
    doc = json.loads(out)
    assert doc["backend"] == "vllm"
    assert doc["requests_running"] == 0
    assert doc["kv_cache_usage"] == 0.0
    assert doc["gpu_source"] == "dcgm (same endpoint)"
    (gpu,) = doc["gpus"]
    assert gpu["memory_total_bytes"] == 81920 << 20
    assert isinstance(gpu["throttle_reasons"], list)  # ["gpu_idle"] once the card has idled
    assert gpu["temperature_c"] > 0
    assert gpu["sm_clock_mhz"] > 0
