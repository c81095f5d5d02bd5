"""Live headroom: the server's KV report first, the calculator plus NVML memory as the fallback."""

from __future__ import annotations

import pytest

from gputui.catalog.memory import plan_kv
from gputui.catalog.specs import GPUS, MODELS
from gputui.sim.device import default_limits
from gputui.telemetry.headroom import live_headroom
from gputui.telemetry.kvplan import vllm_default_limits
from gputui.telemetry.samples import GpuSample, ServerSample

LLAMA8 = MODELS["llama-3.1-8b"]
A100 = GPUS["a100-80gb-pcie"]


def gpu(used: int | None = 70 << 30, total: int | None = A100.memory_bytes) -> GpuSample:
    return GpuSample(
        index=0,
        uuid="GPU-0",
        name=A100.nvml_name,
        t_ns=0,
        memory_used_bytes=used,
        memory_total_bytes=total,
    )


def test_server_usage_and_capacity() -> None:
    server = ServerSample(t_ns=0, backend="vllm", kv_cache_usage=0.25, kv_capacity_tokens=400_000)
    h = live_headroom(server, [gpu()], context_tokens=8192)
    assert h.method == "server"
    assert h.detail == "vllm reports its KV usage"
    assert h.kv_free_tokens == 300_000
    assert h.requests_fit_now == 300_000 // 8192
    assert h.vram_total_bytes == A100.memory_bytes
    assert h.vram_free_bytes == A100.memory_bytes - (70 << 30)


def test_server_usage_with_calculated_capacity() -> None:
    server = ServerSample(t_ns=0, backend="sglang", kv_cache_usage=0.5)
    h = live_headroom(server, [gpu()], model=LLAMA8)
    expected = plan_kv(A100.memory_bytes, LLAMA8, max_batched_tokens=2048, max_num_seqs=256)
    assert h.method == "server+calculator"
    assert h.kv_capacity_tokens == expected.capacity_tokens
    assert h.kv_free_tokens == round(0.5 * expected.capacity_tokens)
    assert "capacity from the calculator" in h.detail


def test_calculator_fallback_estimates_usage_from_running_requests() -> None:
    server = ServerSample(t_ns=0, backend="tgi", requests_running=10)
    h = live_headroom(server, [gpu()], model=LLAMA8, context_tokens=4096)
    capacity = plan_kv(A100.memory_bytes, LLAMA8).capacity_tokens
    assert h.method == "calculator"
    assert h.kv_cache_usage == pytest.approx(10 * 4096 / capacity)
    assert "upper bound" in h.detail
    assert "GiB" in h.detail


def test_unavailable_says_why() -> None:
    h = live_headroom(ServerSample(t_ns=0, backend="tgi"), [gpu()])
    assert h.method == "unavailable"
    assert "no model shape" in h.detail
    h = live_headroom(None, [], model=LLAMA8)
    assert h.method == "unavailable"
    assert "no GPU memory reading" in h.detail
    assert h.vram_free_bytes is None


def test_default_limits_agree_with_the_simulator() -> None:
    for spec in GPUS.values():
        assert vllm_default_limits(spec.memory_bytes, spec.name) == default_limits(spec)
        assert vllm_default_limits(spec.memory_bytes, spec.nvml_name) == default_limits(spec)
