"""Roofline iteration timing: bandwidth-bound decode, compute-bound prefill, clock scaling."""

from __future__ import annotations

import pytest

from gputui.catalog.specs import GPUS, MODELS
from gputui.sim.roofline import (
    EAGER_HOST_PER_LAYER_S,
    HOST_PER_SEQUENCE_S,
    HOST_STEP_S,
    ITERATION_OVERHEAD_S,
    Roofline,
)

LLAMA8 = MODELS["llama-3.1-8b"]


def roofline(gpu: str, precision: str = "bf16") -> Roofline:
    return Roofline(GPUS[gpu], LLAMA8, precision, "bf16")  # type: ignore[arg-type]


@pytest.mark.parametrize("gpu", sorted(GPUS))
def test_single_stream_decode_is_60_to_100_percent_of_bandwidth_roofline(gpu: str) -> None:
    r = roofline(gpu)
    ceiling_tok_s = GPUS[gpu].mem_bandwidth_bytes_per_s / r.weight_bytes
    assert r.decode_bandwidth_roofline_tok_s() == pytest.approx(ceiling_tok_s)
    cost = r.iteration(tokens=1, sequences=1, attention_pairs=1024, kv_tokens_read=1024)
    speed = 1.0 / cost.duration_s
    assert 0.6 * ceiling_tok_s <= speed <= ceiling_tok_s
    assert cost.memory_s > cost.compute_s  # batch-1 decode is bandwidth-bound


def test_weights_are_read_once_per_iteration() -> None:
    r = roofline("a100-80gb-pcie")
    one = r.iteration(1, 1, 1024, 1024).duration_s
    eight = r.iteration(8, 8, 8 * 1024, 8 * 1024).duration_s
    assert eight < 1.3 * one  # 8x the tokens for a fraction more time: batching amortises


def test_prefill_is_compute_bound_and_slows_with_the_clock() -> None:
    r = roofline("rtx4090-48gb")
    full = r.iteration(2048, 1, 2048 * 2049 // 2, 2048, clock_ratio=1.0)
    half = r.iteration(2048, 1, 2048 * 2049 // 2, 2048, clock_ratio=0.5)
    assert full.compute_s > full.memory_s
    assert full.compute_share == 1.0
    assert half.compute_s == pytest.approx(2 * full.compute_s)
    decode_full = r.iteration(1, 1, 512, 512, clock_ratio=1.0)
    decode_half = r.iteration(1, 1, 512, 512, clock_ratio=0.5)
    assert decode_half.duration_s == pytest.approx(decode_full.duration_s)  # bandwidth-bound


def test_fp8_uses_fp8_tensor_cores_only_where_they_exist() -> None:
    prefill = (4096, 1, 4096 * 4097 // 2, 4096)
    h100_bf16 = roofline("h100-sxm").iteration(*prefill).compute_s
    h100_fp8 = roofline("h100-sxm", "fp8").iteration(*prefill).compute_s
    assert h100_fp8 == pytest.approx(h100_bf16 / 2)
    a100_bf16 = roofline("a100-80gb-pcie").iteration(*prefill).compute_s
    a100_fp8 = roofline("a100-80gb-pcie", "fp8").iteration(*prefill).compute_s
    assert a100_fp8 == pytest.approx(a100_bf16)  # weight-only on Ampere


def test_overhead_is_included() -> None:
    cost = roofline("h200").iteration(1, 1, 1, 1)
    assert cost.duration_s > max(cost.compute_s, cost.memory_s) + ITERATION_OVERHEAD_S * 0.99


def test_a_step_over_the_largest_cuda_graph_pays_every_layers_launch_on_the_host() -> None:
    # vLLM 0.19 graphs steps of up to 512 tokens; a 0.6B model's 517-token step (a 512-token
    # prompt and 5 decodes) is launched layer by layer from Python: 28 x 0.343 ms more host time.
    qwen = MODELS["qwen3-0.6b"]
    r = Roofline(GPUS["h100-sxm"], qwen, "bf16", "bf16", cudagraph_max_tokens=512)
    graphed = r.iteration(512, 6, 512 * 513 // 2 + 5 * 600, 512 + 5 * 600)
    eager = r.iteration(517, 6, 512 * 513 // 2 + 5 * 600, 517 + 5 * 600)
    assert graphed.host_s == pytest.approx(HOST_STEP_S + 6 * HOST_PER_SEQUENCE_S)
    assert eager.host_s - graphed.host_s == pytest.approx(qwen.num_layers * EAGER_HOST_PER_LAYER_S)
    assert eager.duration_s == pytest.approx(eager.host_s + ITERATION_OVERHEAD_S)  # host-bound
    assert graphed.duration_s < 3e-3 < 10e-3 < eager.duration_s
    # An 8B model's large prefill keeps the GPU busier than its launches keep the host.
    big = roofline("h100-sxm").iteration(4096, 8, 4096 * 4097 // 2, 4096)
    assert big.duration_s == pytest.approx(big.compute_s + ITERATION_OVERHEAD_S)
