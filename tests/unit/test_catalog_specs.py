"""The GPU and model catalogs: required entries, sources, lookups and figures from reference.md."""

from __future__ import annotations

import pytest

from gputui.catalog.listing import list_catalogs
from gputui.catalog.memory import kv_bytes_per_token
from gputui.catalog.specs import (
    GPUS,
    MODELS,
    CatalogError,
    check_precision,
    get_gpu,
    get_model,
)

REQUIRED_GPUS = (
    "rtx4090-24gb",
    "rtx4090-48gb",
    "a100-80gb-pcie",
    "a100-80gb-sxm",
    "h100-sxm",
    "h200",
    "l40s",
)
REQUIRED_MODELS = ("llama-3.1-8b", "mistral-7b", "qwen2.5-14b", "qwen2.5-32b", "llama-3.1-70b")


def test_required_entries_exist_with_a_source() -> None:
    for name in REQUIRED_GPUS:
        assert GPUS[name].name == name
        assert GPUS[name].source
    for name in REQUIRED_MODELS:
        assert MODELS[name].name == name
        assert MODELS[name].source


def test_gpu_figures_follow_reference_table() -> None:
    assert GPUS["rtx4090-24gb"].mem_bandwidth_bytes_per_s == 1008e9
    assert GPUS["a100-80gb-pcie"].mem_bandwidth_bytes_per_s == 1935e9
    assert GPUS["a100-80gb-sxm"].mem_bandwidth_bytes_per_s == 2039e9
    assert GPUS["h100-sxm"].bf16_tflops == 989.5
    assert GPUS["a100-80gb-pcie"].fp8_tflops is None  # Ampere has no FP8 tensor cores
    assert GPUS["l40s"].fp8_tflops == 733.0


def test_modified_4090_is_the_24gb_card_with_double_memory() -> None:
    small, big = GPUS["rtx4090-24gb"], GPUS["rtx4090-48gb"]
    assert big.mem_bandwidth_bytes_per_s == small.mem_bandwidth_bytes_per_s
    assert big.bf16_tflops == small.bf16_tflops
    assert big.fp8_tflops == small.fp8_tflops
    assert big.memory_bytes == pytest.approx(2 * small.memory_bytes, rel=0.01)


def test_a100_stays_cooler_than_a_4090_by_construction() -> None:
    for gpu in GPUS.values():
        assert gpu.idle_power_w < gpu.tdp_w
        assert gpu.sw_thermal_limit_c < gpu.hw_slowdown_c
        assert gpu.idle_clock_mhz < gpu.boost_clock_mhz


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("llama-3.1-8b", 131_072),
        ("qwen2.5-7b", 57_344),
        ("qwen2.5-14b", 196_608),
        ("qwen2.5-32b", 262_144),
        ("llama-3.1-70b", 327_680),
        ("mistral-7b", 131_072),
        ("qwen3-0.6b", 114_688),
    ],
)
def test_kv_per_token_matches_reference_7_2(model: str, expected: int) -> None:
    assert kv_bytes_per_token(MODELS[model], "bf16") == expected
    assert kv_bytes_per_token(MODELS[model], "fp8") == expected // 2


def test_qwen3_0_6b_params_follow_from_its_config_shape() -> None:
    # Qwen3 sets head_dim apart from hidden_size: 16 query heads x 128 = 2048, wider than 1024.
    m = MODELS["qwen3-0.6b"]
    q, kv = m.num_attention_heads * m.head_dim, m.num_kv_heads * m.head_dim
    attention = m.hidden_size * (q + 2 * kv) + q * m.hidden_size + 2 * m.head_dim  # + q/k norms
    mlp = 3 * m.hidden_size * m.intermediate_size
    layer = attention + mlp + 2 * m.hidden_size
    assert m.tied_embeddings
    assert m.params == m.num_layers * layer + m.embedding_params + m.hidden_size == 596_049_920


def test_lookup_errors_list_valid_names() -> None:
    with pytest.raises(CatalogError, match="rtx4090-48gb") as gpu_err:
        get_gpu("rtx5090")
    assert isinstance(gpu_err.value, KeyError)
    assert "unknown GPU 'rtx5090'" in str(gpu_err.value)
    with pytest.raises(CatalogError, match=r"llama-3\.1-70b"):
        get_model("gpt-5")
    assert get_gpu("h200").nvml_name == "NVIDIA H200"
    assert get_model("qwen2.5-32b").num_layers == 64


def test_check_precision() -> None:
    assert check_precision("int4", "fp8") == ("int4", "fp8")
    with pytest.raises(CatalogError, match="bf16, fp8, int4"):
        check_precision("fp4", "bf16")
    with pytest.raises(CatalogError, match="KV dtype"):
        check_precision("bf16", "int8")


def test_list_catalogs_shows_every_entry() -> None:
    text = list_catalogs()
    for name in (*GPUS, *MODELS):
        assert name in text
    assert "1935" in text
    assert "NVIDIA A100 80GB PCIe" in text
