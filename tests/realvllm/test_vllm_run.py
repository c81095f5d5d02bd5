"""`gputui run` against a real vLLM (CPU build, tiny head_dim-32 model): lengths token-exact.

The tiny model never emits end-of-sequence, so every request yields exactly `--output-tokens`,
and prompts are sized through vLLM's /tokenize, so every prompt is exactly `--input-tokens`:
what gputui counts is held to the usage of every request and to vLLM's own counters
(`vllm:prompt_tokens_total`, `vllm:generation_tokens_total`, `vllm:request_success_total`),
token for token. vLLM's TTFT and ITL histograms (`_sum` / `_count`) give its own view of the
same requests: their counts must match gputui's exactly (one TTFT per request, one ITL per token
after the first, however many tokens an event carried), their means roughly.

Each run prints its numbers (run pytest with -s to see them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gputui.snapshot.models import Snapshot, Step
from tests.realvllm.diagnosis_checks import check_decomposition, check_percentiles, vllm_buckets
from tests.realvllm.helpers import client_means, run_gputui, server_means
from tests.support.vllm_server import VllmServer

# On the 2-core CI host vLLM's CPU build contends with the client (loop lags over 1 s seen), and a
# run's verdict and TTFT split then read host-contended. strict=False keeps these tests running and
# reported (xpass when the host is quiet) until they are robust to that.
CONTENDED_HOST = pytest.mark.xfail(strict=False, reason="host contended by vLLM's CPU build")


pytestmark = [pytest.mark.realvllm, pytest.mark.slow]

INPUT_TOKENS = 512
OUTPUT_TOKENS = 32
LEVELS = (1, 4)
STEPS = ("--step-seconds", "2", "--warmup-seconds", "0.5")
IDENTITY = ("--connect-timeout", "30")
"""The identity probe keeps within the pre-flight's timeout (--connect-timeout): vLLM's dev-mode
/server_info took 15 s on its first call on a busy 2-core host."""


def _check_exact(
    snap: Snapshot, stdout: str, delta: dict[str, float], levels: tuple[int, ...] = LEVELS
) -> dict[str, Any]:
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
    # Request by request, by each one's usage (the run's own closing lines) ...
    assert f"input tokens: requested mean {INPUT_TOKENS}.0" in stdout
    assert (
        f"measured mean {INPUT_TOKENS}.0 (p50 {INPUT_TOKENS}, p95 {INPUT_TOKENS}); exact {n}/{n}"
        in stdout
    )
    assert (
        f"measured mean {OUTPUT_TOKENS}.0 (p50 {OUTPUT_TOKENS}, p95 {OUTPUT_TOKENS}); exact {n}/{n}"
        in stdout
    )
    # ... and in all, by the usage and by vLLM's counters.
    assert totals["input_tokens_total"] == n * INPUT_TOKENS
    assert totals["output_tokens_total"] == n * OUTPUT_TOKENS
    assert delta["vllm:request_success_total"] == n
    assert delta["vllm:prompt_tokens_total"] == n * INPUT_TOKENS
    assert delta["vllm:generation_tokens_total"] == n * OUTPUT_TOKENS
    assert [step.level for step in snap.steps] == [float(x) for x in levels]
    for step in snap.steps:
        assert step.requests_failed == 0, step.errors
        assert step.requests_ok >= 2
        assert step.output_tokens_from_usage
        # One ITL sample per token after the first, whatever the tokens per event.
        assert step.itl_s.n == step.requests_ok * (OUTPUT_TOKENS - 1)
        assert step.ttft_s.n == step.requests_ok
    return totals


def _print_steps(snap: Snapshot, endpoint: str) -> None:
    for step in snap.steps:
        print(
            f"{endpoint} concurrency {step.level:g}: {step.requests_ok} requests in "
            f"{step.duration_s:.1f} s, "
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
        ("--endpoint", endpoint, "--concurrency", ",".join(map(str, LEVELS)), *STEPS),
        input_tokens=INPUT_TOKENS,
        output_tokens=OUTPUT_TOKENS,
    )
    _check_exact(snap, stdout, delta)
    assert snap.workload.input_tokens_method == "server /tokenize (exact)"
    _print_steps(snap, endpoint)
    server_ttft, server_itl = server_means(delta)
    print(
        f"vLLM over the run: TTFT mean {server_ttft * 1e3:.2f} ms, "
        f"ITL mean {server_itl * 1e3:.2f} ms"
    )
    # The decomposition and vLLM's percentiles, step by step (see diagnosis_checks).
    buckets = vllm_buckets(vllm)
    for step in snap.steps:
        check_decomposition(step)
        seen = check_percentiles(step, buckets)
        assert seen["numbers"] + seen["bounds"] > 0


def test_responses_endpoint_ttft_itl_and_tokens(vllm: VllmServer, tmp_path: Path) -> None:
    """`--endpoint responses`: the same exactness through /v1/responses' own events and usage."""
    vllm.reset_prefix_cache()
    snap, stdout, delta = run_gputui(
        vllm,
        tmp_path / "responses.json",
        ("--endpoint", "responses", "--concurrency", ",".join(map(str, LEVELS)), *STEPS),
        input_tokens=INPUT_TOKENS,
        output_tokens=OUTPUT_TOKENS,
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
    server_ttft, server_itl = server_means(delta)
    client_ttft, client_itl = client_means(snap)
    print(
        f"responses: client TTFT mean {client_ttft * 1e3:.2f} ms "
        f"vs vLLM {server_ttft * 1e3:.2f} ms; "
        f"client ITL mean {client_itl * 1e3:.3f} ms vs vLLM {server_itl * 1e3:.3f} ms"
    )
    # The client's TTFT holds vLLM's and the way back; its ITL is vLLM's, seen a hop later. Only
    # roughly: the client's means are over the measured steps, vLLM's over every request (warm-up
    # and drain too). On 2 cores vLLM's own engine can hold both CPUs: the client then waits to
    # run and reads a whole answer's events in one go (ITL near 0, measured here: 0.3 ms against
    # vLLM's 1.3). gputui says so (its verdict: host-contended), and then its ITL means nothing.
    assert client_ttft > server_ttft * 0.9
    verdicts = [(step.bottleneck or {}).get("verdict") for step in snap.steps]
    print(f"responses: verdicts {verdicts}")
    if "host-contended" not in verdicts:
        assert client_itl == pytest.approx(server_itl, rel=0.5)


@pytest.mark.timeout(480)  # four runs, and the server's start when this test runs alone
def test_messages_endpoint_is_exact_and_matches_chat(vllm: VllmServer, tmp_path: Path) -> None:
    """`--endpoint messages` (Anthropic's /v1/messages, served from vLLM's chat path): the same
    exactness, its TTFT inside vLLM's own histogram, and chat's figures on the same prompts.

    The two endpoints run in turn at each level (messages 1, chat 1, messages 4, chat 4), so both
    sides of a comparison meet the same host: run as two whole sweeps, the messages half once met
    a busier host (vLLM's own TTFT 2.3x chat's) and read a TTFT p50 2.8x chat's.
    """
    figures: dict[tuple[str, int], Step] = {}
    for level in LEVELS:
        for endpoint in ("messages", "chat"):
            vllm.reset_prefix_cache()
            snap, stdout, delta = run_gputui(
                vllm,
                tmp_path / f"{endpoint}-{level}.json",
                ("--endpoint", endpoint, "--concurrency", str(level), *STEPS, *IDENTITY),
                input_tokens=INPUT_TOKENS,
                output_tokens=OUTPUT_TOKENS,
            )
            totals = _check_exact(snap, stdout, delta, levels=(level,))
            _print_steps(snap, endpoint)
            (figures[endpoint, level],) = snap.steps
            buckets = vllm_buckets(vllm)
            check_decomposition(snap.steps[0])  # the client's TTFT holds vLLM's own, within 1 ms
            check_percentiles(snap.steps[0], buckets)
            if endpoint == "messages":
                assert snap.workload.endpoint == "messages"
                assert set(totals["event_tokens_methods"]) <= {"events", "tokenizer"}
                assert delta["vllm:time_to_first_token_seconds_count"] == totals["requests"]
                # The server's identity, from /version and (dev mode) /server_info.
                assert (snap.target.engine, snap.target.version) == ("vllm", "0.32.0")
                assert snap.target.context_limit == 2048
                assert snap.target.max_sequences is not None
    # The same prompts through chat: the same 512 tokens billed (the chat template applied alike,
    # _check_exact) and the same TTFT within noise. On 2 cores shared with vLLM (and, here, with
    # other test runs) back-to-back runs of the two endpoints measured TTFT p50 ratios of 0.6 to
    # 2.8, so the bound only catches a TTFT taken at the wrong event (at message_stop: the whole
    # 32-token answer, 5-10x the first token here).
    for level in LEVELS:
        messages, chat = figures["messages", level], figures["chat", level]
        assert messages.ttft_s.p50 is not None and chat.ttft_s.p50 is not None
        ratio = messages.ttft_s.p50 / chat.ttft_s.p50
        tok_s = messages.output_tokens_per_s / chat.output_tokens_per_s
        print(
            f"concurrency {level}: TTFT p50 messages/chat {ratio:.2f}, "
            f"output tok/s messages/chat {tok_s:.2f}"
        )
        assert 0.25 <= ratio <= 4.0
