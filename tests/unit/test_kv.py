"""The KV/VRAM calculator against domain.md §5 and reference.md §7."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest

from gputui.catalog import memory as kv
from gputui.catalog.memory import (
    BLOCK_SIZE_TOKENS,
    INT4_BYTES_PER_PARAM,
    activation_reserve_bytes,
    blocks_for,
    kv_bytes_per_token,
    plan_kv,
    weight_bytes,
)
from gputui.catalog.specs import GPUS, MODELS

LLAMA8 = MODELS["llama-3.1-8b"]
GIB = 1 << 30


def test_domain_example_kv_per_token_and_per_request() -> None:
    per_token = kv_bytes_per_token(LLAMA8, "bf16")
    assert per_token == 128 * 1024
    assert per_token * 8192 == GIB  # 1 GiB per 8,192-token request
    assert 16 * per_token * 8192 == 16 * GIB


def test_weights_at_each_precision() -> None:
    assert weight_bytes(LLAMA8, "bf16") == 2 * LLAMA8.params
    qwen14 = MODELS["qwen2.5-14b"]
    assert weight_bytes(qwen14, "bf16") / 1e9 == pytest.approx(29.5, abs=0.1)
    # Quantised checkpoints keep embeddings and LM head in BF16: the published sizes.
    assert weight_bytes(LLAMA8, "fp8") / 1e9 == pytest.approx(9.08, abs=0.05)
    assert weight_bytes(LLAMA8, "int4") / 1e9 == pytest.approx(5.73, abs=0.05)
    assert weight_bytes(MODELS["llama-3.1-70b"], "int4") / 1e9 == pytest.approx(39.8, abs=0.3)
    assert 0.5 < INT4_BYTES_PER_PARAM < 0.55


def test_reserve_grows_with_batch_limits() -> None:
    small = activation_reserve_bytes(LLAMA8, 2048, 256)
    assert activation_reserve_bytes(LLAMA8, 8192, 256) > small
    assert activation_reserve_bytes(LLAMA8, 2048, 1024) > small
    activation = activation_reserve_bytes(LLAMA8, 8192, 256) - kv.RUNTIME_RESERVE_BYTES
    assert activation / 1e9 == pytest.approx(1.24, abs=0.05)


@pytest.mark.parametrize("gpu", ["rtx4090-48gb", "a100-80gb-pcie", "h200"])
@pytest.mark.parametrize("kv_dtype", ["bf16", "fp8"])
def test_capacity_matches_the_formula_to_the_block(gpu: str, kv_dtype: str) -> None:
    total = GPUS[gpu].memory_bytes
    plan = plan_kv(total, LLAMA8, "bf16", kv_dtype, 0.9, 2048, 256)  # type: ignore[arg-type]
    # domain.md §5 / reference §7.3, written out independently:
    budget = math.ceil(total * 0.9)
    weights = 2 * LLAMA8.params
    reserve = activation_reserve_bytes(LLAMA8, 2048, 256)
    per_token = 2 * 32 * 8 * 128 * (2 if kv_dtype == "bf16" else 1)
    expected_blocks = (budget - weights - reserve) // (16 * per_token)
    assert plan.num_blocks == expected_blocks
    assert plan.capacity_tokens == expected_blocks * BLOCK_SIZE_TOKENS
    assert plan.kv_pool_bytes - plan.num_blocks * plan.block_bytes < plan.block_bytes


def test_fits_and_shortfall() -> None:
    qwen14 = MODELS["qwen2.5-14b"]
    refused = plan_kv(GPUS["rtx4090-24gb"].memory_bytes, qwen14)
    assert not refused.fits
    assert refused.num_blocks == 0
    assert refused.shortfall_bytes == refused.block_bytes - refused.kv_pool_bytes
    assert refused.shortfall_bytes > 5e9
    accepted = plan_kv(GPUS["rtx4090-48gb"].memory_bytes, qwen14)
    assert accepted.fits
    assert accepted.shortfall_bytes == 0


def test_max_concurrent_requests() -> None:
    plan = plan_kv(GPUS["a100-80gb-pcie"].memory_bytes, LLAMA8)
    assert blocks_for(8192) == 512
    assert blocks_for(8193) == 513
    assert plan.max_concurrent(8192) == plan.num_blocks // 512
    assert plan.max_concurrent(1) == plan.num_blocks


def test_utilisation_is_validated() -> None:
    with pytest.raises(ValueError, match="gpu_memory_utilization"):
        plan_kv(GPUS["h200"].memory_bytes, LLAMA8, gpu_memory_utilization=1.5)


def test_calculator_imports_no_simulator_code() -> None:
    tree = ast.parse(Path(kv.__file__).read_text())
    imported = {
        node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
    } | {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    assert {m for m in imported if m.startswith("gputui")} <= {"gputui.catalog.specs"}
