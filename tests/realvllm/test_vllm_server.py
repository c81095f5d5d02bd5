"""The realvllm harness itself: what later tests lean on holds on this server.

- /v1/models names the model and its `max_model_len` (pre-flight limits read it);
- `reset_prefix_cache()` really empties vLLM's prefix cache (isolation tests start cold), seen
  both in the Responses API's `cached_tokens` (which vLLM reports without
  `--enable-prompt-tokens-details`) and in vLLM's counters, in 128-token blocks;
- chat usage carries no `cached_tokens` on this server (its default flags): hit rates must come
  from `vllm:prefix_cache_queries_total` and `vllm:prefix_cache_hits_total`.
"""

from __future__ import annotations

import httpx
import pytest

from tests.support.vllm_server import MAX_MODEL_LEN, VllmServer

# Not `alone` (tests/conftest.py): /v1/models, usage fields and cache counts, nothing timed
# (3 of 3 passed beside two busy loops on the 2 cores).
pytestmark = [pytest.mark.realvllm, pytest.mark.not_alone]

BLOCK = 128
"""vLLM's prefix-cache block here: a prompt shorter than this never hits."""
PROMPT = " ".join(["the quick brown fox jumps over the lazy dog"] * 40)  # 374 tokens as input


def _cached(vllm: VllmServer) -> tuple[int, int]:
    body = {"model": vllm.model, "input": PROMPT, "max_output_tokens": 2, "stream": False}
    usage = vllm.post("/v1/responses", body).json()["usage"]
    return usage["input_tokens"], usage["input_tokens_details"]["cached_tokens"]


def test_models_names_the_model_and_its_limit(vllm: VllmServer) -> None:
    (model,) = vllm.get("/v1/models").json()["data"]
    assert (model["id"], model["owned_by"], model["max_model_len"]) == (
        "tiny",
        "vllm",
        MAX_MODEL_LEN,
    )


def test_reset_prefix_cache_starts_cold(vllm: VllmServer) -> None:
    vllm.reset_prefix_cache()
    before = vllm.counters()
    n, first = _cached(vllm)
    _, second = _cached(vllm)
    vllm.reset_prefix_cache()
    _, third = _cached(vllm)
    after = vllm.counters()
    full_blocks = (n - 1) // BLOCK * BLOCK  # the last token is always computed
    print(f"\n{n} input tokens: cached {first}, then {second}, after a reset {third}")
    assert (first, second, third) == (0, full_blocks, 0)
    hits = after["vllm:prefix_cache_hits_total"] - before["vllm:prefix_cache_hits_total"]
    queries = after["vllm:prefix_cache_queries_total"] - before["vllm:prefix_cache_queries_total"]
    assert (hits, queries) == (full_blocks, 3 * n)


def test_chat_usage_has_no_cached_tokens_by_default(vllm: VllmServer) -> None:
    body = {
        "model": vllm.model,
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": 2,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    with httpx.stream("POST", vllm.url + "/v1/chat/completions", json=body, timeout=60) as reply:
        text = reply.read().decode()
    assert '"prompt_tokens":' in text
    assert "cached_tokens" not in text
