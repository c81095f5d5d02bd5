"""Issue 18 against the simulator on loopback: server latency, TTFT breakdown, verdicts.

Each test starts its own simulated card, drives it with `gputui run` (a subprocess, as a user
runs it) or with plain HTTP, and checks the diagnosis against what the simulator itself did.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from gputui.sim.fixed import FixedProfileSpec
from gputui.sim.gpu_profile import GpuProfileSpec
from gputui.sim.netdelay import NetworkDelay
from gputui.sim.runner import SimProcess, start_background
from gputui.snapshot.store import load_snapshot
from gputui.telemetry.histogram_recorder import HistogramRecorder
from gputui.telemetry.latency_histograms import summarize_histogram

A100 = GpuProfileSpec(gpu="a100-80gb-pcie", model="llama-3.1-8b")


@pytest.fixture
def a100() -> Iterator[SimProcess]:
    with start_background(A100) as sim:
        yield sim


def gputui_run(url: str, out: Path, *extra: str, timeout_s: float = 150) -> str:
    result = subprocess.run(
        [
            sys.executable, "-m", "gputui", "run", "--url", url, "--model", "llama-3.1-8b",
            "--ignore-eos", "--out", str(out), *extra,
        ],
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


async def _load(url: str, requests: int, concurrency: int) -> None:
    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as client:
        gate = asyncio.Semaphore(concurrency)

        async def one(i: int) -> None:
            async with gate:
                body = {"model": "m", "prompt": "word " * (64 + 37 * (i % 9)), "max_tokens": 24,
                        "stream": True, "ignore_eos": True}  # fmt: skip
                async with client.stream("POST", "/v1/completions", json=body) as response:
                    async for _ in response.aiter_bytes():
                        pass

        await asyncio.gather(*(one(i) for i in range(requests)))


def test_histogram_quantiles_and_means_agree_with_the_sims_own_record(a100: SimProcess) -> None:
    recorder = HistogramRecorder(a100.url + "/metrics").start()
    try:
        asyncio.run(_load(a100.url, requests=60, concurrency=12))
        window = recorder.between(0, recorder_now())
    finally:
        recorder.stop()
    assert window is not None
    assert window.backend == "vllm"
    truth = httpx.get(a100.url + "/sim/latency").json()["requests"]
    assert len(truth) == 60
    for name, key in (("ttft", "ttft_s"), ("queue", "queue_s"), ("prefill", "prefill_s"),
                      ("decode", "decode_s"), ("e2e", "e2e_s")):  # fmt: skip
        summary = summarize_histogram(window.histograms[name])
        values = np.array([r[key] for r in truth])
        assert summary["n"] == 60
        assert summary["mean"] == pytest.approx(float(values.mean()), rel=1e-9, abs=1e-12)
        for label, q in (("p50", 50), ("p90", 90), ("p99", 99)):
            width = summary["resolution_s"][label]
            assert width is not None
            assert abs(summary[label] - float(np.percentile(values, q))) <= width, (name, label)


def recorder_now() -> int:
    import time

    return time.perf_counter_ns()


def _steps(out: Path) -> list[Any]:
    return list(load_snapshot(out).steps)


def test_breakdown_sums_to_the_clients_ttft_over_a_sweep(a100: SimProcess, tmp_path: Path) -> None:
    out = tmp_path / "sweep.json"
    stdout = gputui_run(
        a100.url, out, "--concurrency", "1,4,16,64,128", "--step-seconds", "5",
        "--warmup-seconds", "3", "--input-tokens", "256", "--output-tokens", "32",
    )  # fmt: skip
    steps = _steps(out)
    assert [s.level for s in steps] == [1, 4, 16, 64, 128]
    report = []
    for step in steps:
        b = step.ttft_breakdown
        assert b is not None, step.level
        parts = b["network_s"] + b["queue_s"] + b["prefill_s"]
        report.append((step.level, round(b["ttft_s"] * 1e3, 1), round(parts * 1e3, 1)))
        assert step.server_latency is not None
        assert step.server_latency["interpolation"].startswith("Prometheus histogram_quantile")
    print("level, client TTFT ms, network+queue+prefill ms:", report)
    for _level, ttft_ms, parts_ms in report:
        assert abs(parts_ms - ttft_ms) <= 0.05 * ttft_ms, report
    assert stdout.count("  bound by ") == len(steps)


def test_a_single_stream_is_decode_bandwidth_bound(a100: SimProcess, tmp_path: Path) -> None:
    out = tmp_path / "single.json"
    stdout = gputui_run(
        a100.url, out, "--concurrency", "1", "--step-seconds", "4",
        "--warmup-seconds", "1", "--input-tokens", "128", "--output-tokens", "128",
    )  # fmt: skip
    (step,) = _steps(out)
    assert step.bottleneck is not None
    assert step.bottleneck["verdict"] == "decode-bandwidth", step.bottleneck
    assert step.roofline is not None
    use = step.roofline["decode_bandwidth_utilization"]
    print("single stream:", step.output_tokens_per_s, "tok/s,", use, "of the bandwidth")
    assert 0.6 <= use <= 1.0, step.roofline
    assert "bound by decode-bandwidth" in stdout


def test_a_far_client_is_network_bound(tmp_path: Path) -> None:
    with start_background(A100, network=NetworkDelay(40.0, 5.0)) as sim:
        out = tmp_path / "far.json"
        stdout = gputui_run(
            sim.url, out, "--concurrency", "1", "--step-seconds", "4",
            "--warmup-seconds", "1", "--input-tokens", "64", "--output-tokens", "16",
        )  # fmt: skip
    (step,) = _steps(out)
    assert step.requests_failed == 0 and step.requests_ok >= 5  # jitter never garbles a stream
    b = step.ttft_breakdown
    assert b is not None
    assert b["network_s"] == pytest.approx(0.040, abs=0.004)
    assert b["network_share"] > 0.5
    assert step.bottleneck is not None
    assert step.bottleneck["verdict"] == "network"
    assert "bound by network" in stdout


def test_long_contexts_on_a_4090_queue(tmp_path: Path) -> None:
    spec = GpuProfileSpec(gpu="rtx4090-24gb", model="llama-3.1-8b")
    with start_background(spec) as sim:
        out = tmp_path / "queue.json"
        # 48 streams of ~8k-token contexts: the 46k-token KV pool holds 5; the rest wait, and the
        # requests time out before their turn (the verdict reads the server, not their latency).
        gputui_run(
            sim.url, out, "--concurrency", "48", "--step-seconds", "8", "--warmup-seconds", "6",
            "--input-tokens", "7000", "--output-tokens", "1000", "--request-timeout", "10",
        )  # fmt: skip
    (step,) = _steps(out)
    verdict = step.bottleneck
    assert verdict is not None
    assert verdict["verdict"] == "queue", verdict
    line = next(e for e in verdict["evidence"] if "waiting" in e)
    assert "KV cache full" in line, line
    assert "no room for another request" in line, line
    assert "preemptions" in line, line  # how many (0-2 in 8 s) depends on chunk timing


def test_a_saturated_client_is_flagged_suspect(tmp_path: Path) -> None:
    # One worker at 512 streams against ITL 1 ms would have to read 512k tokens/s: its core pegs.
    spec = FixedProfileSpec(ttft_ms=20, itl_ms=1, served_model_name="llama-3.1-8b")
    with start_background(spec) as sim:
        out = tmp_path / "client.json"
        stdout = gputui_run(
            sim.url, out, "--concurrency", "512", "--step-seconds", "3",
            "--warmup-seconds", "1", "--input-tokens", "16", "--output-tokens", "64",
        )  # fmt: skip
    (step,) = _steps(out)
    assert step.bottleneck is not None
    # On a host whose other processes hold the CPUs the engine waits more than it runs: the
    # verdict is then host-contended (tests/integration/test_host_contention.py pins both cases).
    state = step.bottleneck["client_state"]
    expected = {"client-bound": "client", "host-contended": "host-contended"}
    assert step.bottleneck["verdict"] == expected[state], step.bottleneck
    assert step.bottleneck["suspect"] is True
    assert f"SUSPECT: {state}" in stdout
