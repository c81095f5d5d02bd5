"""`gputui run` against a real vLLM (CPU build, tiny head_dim-32 model): lengths token-exact.

The tiny model never emits end-of-sequence, so every request yields exactly `--output-tokens`,
and prompts are sized through vLLM's /tokenize, so every prompt is exactly `--input-tokens`:
what gputui counts is held to the usage of every request and to vLLM's own counters
(`vllm:prompt_tokens_total`, `vllm:generation_tokens_total`, `vllm:request_success_total`),
token for token. vLLM's TTFT and ITL histograms (`_sum` / `_count`) give its own view of the
same requests: the counts must match gputui's exactly, the means closely (the client's
TTFT also holds the network and the HTTP and SSE framing, so it is the longer one).

Each run prints its numbers (run pytest with -s to see them).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gputui.snapshot.models import Snapshot
from gputui.snapshot.store import load_snapshot
from tests.support.vllm_server import VllmServer

pytestmark = [pytest.mark.realvllm, pytest.mark.slow]

INPUT_TOKENS = 512
OUTPUT_TOKENS = 32
LEVELS = (1, 4)

COUNTERS = (
    "vllm:request_success_total",
    "vllm:prompt_tokens_total",
    "vllm:generation_tokens_total",
    "vllm:time_to_first_token_seconds_sum",
    "vllm:time_to_first_token_seconds_count",
    "vllm:inter_token_latency_seconds_sum",
    "vllm:inter_token_latency_seconds_count",
)


def run_gputui(
    vllm: VllmServer, out: Path, *args: str, timeout_s: float = 150.0
) -> tuple[Snapshot, str, dict[str, float]]:
    """`gputui run` as a user types it; (the snapshot, its stdout, vLLM's counters' deltas)."""
    before = vllm.counters()
    started = time.monotonic()
    result = subprocess.run(
        [
            *(sys.executable, "-m", "gputui", "run", "--url", vllm.url, "--model", vllm.model),
            *("--input-tokens", str(INPUT_TOKENS), "--output-tokens", str(OUTPUT_TOKENS)),
            *("--out", str(out), *args),
        ],
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    after = vllm.counters()
    print(f"\n$ gputui run {' '.join(args)}  ({time.monotonic() - started:.1f} s)")
    print(result.stdout)
    assert result.returncode == 0, result.stdout + result.stderr
    delta = {name: after.get(name, 0.0) - before.get(name, 0.0) for name in COUNTERS}
    return load_snapshot(out), result.stdout, delta


def _check_exact(snap: Snapshot, stdout: str, delta: dict[str, float]) -> dict[str, Any]:
    """Every request's lengths are exact, by its usage and by vLLM's counters."""
    assert "backend vllm" in stdout
    assert snap.target.backend == "vllm"
    assert snap.model_extra is not None
    totals: dict[str, Any] = snap.model_extra["totals"]
    n = totals["requests"]
    print("gputui totals:", totals)
    print("vLLM counters (delta over the run):", delta)
    assert totals["requests_failed"] == 0
    assert totals["ok_requests_without_usage"] == 0
    assert totals["short_outputs"] == 0
    assert totals["response_models"] == {"tiny": n}
    assert totals["input_tokens_total"] == n * INPUT_TOKENS
    assert totals["output_tokens_total"] == n * OUTPUT_TOKENS
    assert delta["vllm:request_success_total"] == n
    assert delta["vllm:prompt_tokens_total"] == n * INPUT_TOKENS
    assert delta["vllm:generation_tokens_total"] == n * OUTPUT_TOKENS
    assert [step.level for step in snap.steps] == [float(x) for x in LEVELS]
    for step in snap.steps:
        assert step.requests_failed == 0, step.errors
        assert step.requests_ok >= 2
        assert step.output_tokens_from_usage
        # One ITL sample per token after the first, whatever the tokens per event.
        assert step.itl_s.n == step.requests_ok * (OUTPUT_TOKENS - 1)
        assert step.ttft_s.n == step.requests_ok
    return totals


def _server_means(delta: dict[str, float]) -> tuple[float, float]:
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


def _client_means(snap: Snapshot) -> tuple[float, float]:
    """gputui's mean TTFT and ITL over the measured steps, weighted by their samples."""
    ttft_sum = itl_sum = 0.0
    for step in snap.steps:
        assert step.ttft_s.mean is not None and step.itl_s.mean is not None
        ttft_sum += step.ttft_s.mean * step.ttft_s.n
        itl_sum += step.itl_s.mean * step.itl_s.n
    ttft_n = sum(step.ttft_s.n for step in snap.steps)
    itl_n = sum(step.itl_s.n for step in snap.steps)
    return ttft_sum / ttft_n, itl_sum / itl_n


def _print_steps(snap: Snapshot, endpoint: str) -> None:
    for step in snap.steps:
        print(
            f"{endpoint} concurrency {step.level:g}: {step.requests_ok} requests, "
            f"TTFT mean {step.ttft_s.mean * 1e3:.2f} ms p50 {step.ttft_s.p50 * 1e3:.2f} ms, "  # type: ignore[operator]
            f"ITL mean {step.itl_s.mean * 1e3:.2f} ms (n {step.itl_s.n}), "  # type: ignore[operator]
            f"TPOT mean {step.tpot_s.mean * 1e3:.2f} ms, "  # type: ignore[operator]
            f"{step.output_tokens_per_s:.1f} output tokens/s"
        )


@pytest.mark.parametrize("endpoint", ["completions", "chat"])
def test_run_lengths_are_token_exact(vllm: VllmServer, tmp_path: Path, endpoint: str) -> None:
    vllm.reset_prefix_cache()
    snap, stdout, delta = run_gputui(
        vllm,
        tmp_path / "run.json",
        *("--endpoint", endpoint, "--concurrency", ",".join(map(str, LEVELS))),
        *("--step-seconds", "4", "--warmup-seconds", "0.5"),
    )
    _check_exact(snap, stdout, delta)
    assert snap.workload.input_tokens_method == "server /tokenize (exact)"
    _print_steps(snap, endpoint)
    server_ttft, server_itl = _server_means(delta)
    print(
        f"vLLM over the run: TTFT mean {server_ttft * 1e3:.2f} ms, "
        f"ITL mean {server_itl * 1e3:.2f} ms"
    )


def test_responses_endpoint_ttft_itl_and_tokens(vllm: VllmServer, tmp_path: Path) -> None:
    """`--endpoint responses`: the same exactness through /v1/responses' own events and usage."""
    vllm.reset_prefix_cache()
    snap, stdout, delta = run_gputui(
        vllm,
        tmp_path / "responses.json",
        *("--endpoint", "responses", "--concurrency", ",".join(map(str, LEVELS))),
        *("--step-seconds", "4", "--warmup-seconds", "0.5"),
    )
    totals = _check_exact(snap, stdout, delta)
    assert snap.workload.endpoint == "responses"
    _print_steps(snap, "responses")
    # Every request's events were counted: one token each, or by vLLM's /tokenize where the
    # detokenizer put two tokens in one delta; never guessed one per event.
    assert set(totals["event_tokens_methods"]) <= {"events", "tokenizer"}
    # vLLM measured every token gap that gputui did, and every first token: the same counts.
    assert delta["vllm:inter_token_latency_seconds_count"] == totals["requests"] * (
        OUTPUT_TOKENS - 1
    )
    assert delta["vllm:time_to_first_token_seconds_count"] == totals["requests"]
    server_ttft, server_itl = _server_means(delta)
    client_ttft, client_itl = _client_means(snap)
    print(
        f"responses: client TTFT mean {client_ttft * 1e3:.2f} ms "
        f"vs vLLM {server_ttft * 1e3:.2f} ms; "
        f"client ITL mean {client_itl * 1e3:.3f} ms vs vLLM {server_itl * 1e3:.3f} ms"
    )
    # The client's TTFT holds vLLM's and the way back; its ITL is vLLM's, seen a hop later.
    assert client_ttft > server_ttft * 0.9
    assert client_itl == pytest.approx(server_itl, rel=0.25)
