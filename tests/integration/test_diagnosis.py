"""Issue 18 against the simulator on loopback: server latency, TTFT breakdown, verdicts.

Each test starts its own simulated card, drives it with `gputui run` (a subprocess, as a user
runs it) or with plain HTTP, and checks the diagnosis against what the simulator itself did.
"""

from __future__ import annotations

import asyncio
import dataclasses
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from gputui.sim.fixed import FixedProfileSpec
from gputui.sim.frontend import NO_FRONT_END
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


@pytest.mark.alone  # the TTFT split and the client state read timings: no neighbour
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
            value, true = summary[label], float(np.percentile(values, q))
            bound = summary["bounds"].get(label)
            if bound is not None:  # too coarse a bucket: a bound that holds, never a number
                # A bound names the bucket holding rank q x n (Prometheus' rule): the truth it
                # bounds is that order statistic, not numpy's interpolation toward the one below
                # (60 values, p99: the 60th, where the interpolation read 0.293 under a 0.3 edge).
                ranked = float(np.percentile(values, q, method="inverted_cdf"))
                assert value is None
                assert bound["above_s"] <= ranked, (name, label)
                assert bound["below_s"] is None or ranked <= bound["below_s"], (name, label)
                continue
            width = summary["resolution_s"][label]
            assert width is not None and width <= summary["mean"], (name, label)
            assert abs(value - true) <= width, (name, label)
    # The sim's server overhead (3 ms by default) is in TTFT, not in queue or prefill: exactly that
    # for a request that finds the API server's CPU free (the first one), more for one admitted
    # behind others' admissions or streams (sim.frontend: 12 arrive together here).
    overhead = [r["ttft_s"] - r["queue_s"] - r["prefill_s"] for r in truth]
    assert min(overhead) == pytest.approx(0.003, abs=1e-4)
    assert all(o >= 0.003 - 1e-4 for o in overhead)


def recorder_now() -> int:
    import time

    return time.perf_counter_ns()


def _steps(out: Path) -> list[Any]:
    return list(load_snapshot(out).steps)


@pytest.mark.alone  # the TTFT split and the client state read timings: no neighbour
def test_breakdown_sums_to_the_clients_ttft_over_a_sweep(a100: SimProcess, tmp_path: Path) -> None:
    out = tmp_path / "sweep.json"
    stdout = gputui_run(
        a100.url, out, "--concurrency", "1,16,128", "--step-seconds", "5",
        "--input-tokens", "256", "--output-tokens", "32",
    )  # fmt: skip
    steps = _steps(out)
    assert [s.level for s in steps] == [1, 16, 128]
    report = []
    for step in steps:
        b = step.ttft_breakdown
        assert b is not None, step.level
        parts = b["network_s"] + b["queue_s"] + b["prefill_s"] + b["server_other_s"]
        report.append((step.level, round(b["ttft_s"] * 1e3, 1), round(parts * 1e3, 1)))
        assert step.server_latency is not None
        assert step.server_latency["interpolation"].startswith("Prometheus histogram_quantile")
    print("level, client TTFT ms, network+queue+prefill+server other ms:", report)
    for _level, ttft_ms, parts_ms in report:
        assert abs(parts_ms - ttft_ms) <= 0.05 * ttft_ms, report
    assert stdout.count("  bound by ") == len(steps)


def assert_no_percentile_finer_than_its_bucket(latency: dict[str, Any]) -> None:
    """Every server percentile is a number only where its bucket is no wider than the mean."""
    for key, summary in latency.items():
        if not (isinstance(summary, dict) and "bounds" in summary):
            continue
        for q in ("p50", "p90", "p95", "p99"):
            if summary[q] is None:
                assert q in summary["bounds"] or summary["n"] == 0, (key, q)
            else:
                assert q not in summary["bounds"], (key, q)
                assert summary["resolution_s"][q] <= summary["mean"], (key, q, summary)
                assert summary["resolution_s"][q] <= 0.25 * summary[q], (key, q, summary)


# Inside the full suite server_other read 6.1 ms (and 10.3 ms here under load): the TTFT
# histogram's window and the queue/prefill one held different requests (a first wave's long
# TTFTs in one only). The server's parts now come from one set (evidence.same_requests_server_ttft)
# and a window starts after the earlier load's last observation (HistogramRecorder floor_ns).
@pytest.mark.alone  # the TTFT split and the client state read timings: no neighbour
def test_one_and_four_streams_split_the_servers_overhead_from_the_clients(tmp_path: Path) -> None:
    """The issue's acceptance against the sim: 512-token prompts at 1 and 4 streams.

    The sim spends 8 ms here between arrival and the engine's queue, as vLLM's API server does
    (8.6 ms on the real vLLM's transcripts): the decomposition must put it in `server_other_s`,
    not in `client_s`, whose value on loopback is the client's own small overhead. The API
    server's CPU model is off (sim.frontend), so those 8 ms do not grow when 4 requests are
    admitted together: what is checked is the split, not the API server's queueing.
    """
    out = tmp_path / "split.json"
    spec = dataclasses.replace(A100, server_overhead_s=0.008, front_end=NO_FRONT_END)
    with start_background(spec) as sim:
        stdout = gputui_run(
            sim.url, out, "--concurrency", "1,4", "--step-seconds", "5",
            "--warmup-seconds", "2", "--input-tokens", "512", "--output-tokens", "32",
        )  # fmt: skip
    steps = _steps(out)
    assert [s.level for s in steps] == [1, 4]
    for step in steps:
        b, latency = step.ttft_breakdown, step.server_latency
        assert b is not None and latency is not None
        rest = b["ttft_s"] - b["server_ttft_s"] - b["network_s"]
        print(
            f"level {step.level:g}: TTFT {b['ttft_s'] * 1e3:.3f} ms = queue "
            f"{b['queue_s'] * 1e3:.3f} + prefill {b['prefill_s'] * 1e3:.3f} + server other "
            f"{b['server_other_s'] * 1e3:.3f} + network {b['network_s'] * 1e3:.3f} + client "
            f"{b['client_s'] * 1e3:.3f} ms (server TTFT {b['server_ttft_s'] * 1e3:.3f} ms); "
            f"queue p50 {latency['queue_s']['bounds'].get('p50')}"
        )
        assert b["unsplit"] is None
        assert abs(b["client_s"] - rest) <= 0.001
        assert b["server_other_s"] == pytest.approx(0.008, abs=0.0015)
        assert -0.001 <= b["client_s"] <= 0.004  # loopback: the client's own overhead only
        assert_no_percentile_finer_than_its_bucket(latency)
        assert latency["queue_s"]["p50"] is None
        assert latency["queue_s"]["bounds"]["p50"]["text"] == "< 0.3 s"
    assert stdout.count("server other") == 2 and stdout.count("server p50 (p95):") == 2
    assert "queue < 0.3 s (< 0.3 s)" in stdout


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
    assert verdict["verdict"] == "kv-capacity", verdict  # the queue, explained
    line = next(e for e in verdict["evidence"] if "waiting" in e)
    # Judged by admission (vLLM allocates whole blocks: usage alone misleads): the pool holds 5
    # requests of ~8k tokens whole, and as many ran while the rest waited.
    assert "the cache holds 5 requests of the step's length whole" in line, line
    assert "free while requests waited" in line and "a prompt needs 438" in line, line
    assert "preemptions" in line, line  # how many (0-2 in 8 s) depends on chunk timing


@pytest.mark.alone  # the TTFT split and the client state read timings: no neighbour
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
