"""Live KV-cache and VRAM headroom: how much more load fits right now, and how we know.

Contract: `live_headroom(server, gpus, ...)` prefers what the server reports (its KV usage fraction
and, where given, its KV capacity in tokens); when the server reports no KV usage (TGI, current
llama.cpp) it falls back to the calculator (`catalog.memory.plan_kv` on the memory NVML reports for
the first GPU) and estimates the tokens in use as running requests x context length, an upper
bound. `Headroom.method` says which ("server", "server+calculator", "calculator" or "unavailable")
and `detail` says it in words, so the UI can label the gauge honestly. VRAM used/total is summed
over the GPUs as reported: vLLM preallocates its pool, so VRAM used says little about KV use.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from gputui.catalog.memory import plan_kv
from gputui.catalog.specs import KvDtype, ModelSpec, Precision
from gputui.telemetry.kvplan import vllm_default_limits
from gputui.telemetry.samples import GpuSample, ServerSample

Method = Literal["server", "server+calculator", "calculator", "unavailable"]


@dataclass(frozen=True, slots=True)
class Headroom:
    """KV and VRAM headroom at one instant."""

    method: Method
    detail: str
    kv_cache_usage: float | None = None
    """Fraction 0..1 of the KV cache in use."""
    kv_capacity_tokens: int | None = None
    kv_free_tokens: int | None = None
    requests_fit_now: int | None = None
    """More requests of `context_tokens` that fit in the free KV cache now."""
    vram_used_bytes: int | None = None
    vram_total_bytes: int | None = None

    @property
    def vram_free_bytes(self) -> int | None:
        """Total minus used, when both are known."""
        if self.vram_used_bytes is None or self.vram_total_bytes is None:
            return None
        return self.vram_total_bytes - self.vram_used_bytes


def _vram(gpus: Sequence[GpuSample]) -> tuple[int | None, int | None]:
    used = [g.memory_used_bytes for g in gpus]
    total = [g.memory_total_bytes for g in gpus]
    if not gpus or None in used or None in total:
        return None, None
    return sum(u for u in used if u is not None), sum(t for t in total if t is not None)


def _calculated_capacity(
    gpus: Sequence[GpuSample],
    model: ModelSpec | None,
    precision: Precision,
    kv_dtype: KvDtype,
    gpu_memory_utilization: float,
) -> tuple[int | None, str]:
    if model is None:
        return None, "no model shape given (--model or --model-config)"
    first = next((g for g in gpus if g.memory_total_bytes), None)
    if first is None or first.memory_total_bytes is None:
        return None, "no GPU memory reading"
    seqs, tokens = vllm_default_limits(first.memory_total_bytes, first.name)
    plan = plan_kv(
        first.memory_total_bytes, model, precision, kv_dtype, gpu_memory_utilization, tokens, seqs
    )
    return plan.capacity_tokens, (
        f"calculator: {model.name} {precision} (KV {kv_dtype}) on GPU {first.index}'s "
        f"{first.memory_total_bytes / 2**30:.1f} GiB at utilization {gpu_memory_utilization:g}"
    )


def live_headroom(
    server: ServerSample | None,
    gpus: Sequence[GpuSample],
    *,
    model: ModelSpec | None = None,
    precision: Precision = "bf16",
    kv_dtype: KvDtype = "bf16",
    context_tokens: int | None = None,
    gpu_memory_utilization: float = 0.9,
) -> Headroom:
    """Headroom from the server's KV report, else from the calculator plus NVML memory."""
    used, total = _vram(gpus)
    usage = server.kv_cache_usage if server is not None else None
    capacity = server.kv_capacity_tokens if server is not None else None
    method: Method
    if usage is not None:
        name = server.backend if server is not None and server.backend else "server"
        method, detail = "server", f"{name} reports its KV usage"
        if capacity is None:
            capacity, calc = _calculated_capacity(
                gpus, model, precision, kv_dtype, gpu_memory_utilization
            )
            if capacity is not None:
                method, detail = "server+calculator", f"{detail}; capacity from the {calc}"
    else:
        capacity, calc = _calculated_capacity(
            gpus, model, precision, kv_dtype, gpu_memory_utilization
        )
        if capacity is None:
            return Headroom(
                "unavailable",
                f"the server reports no KV usage and the calculator has {calc}",
                vram_used_bytes=used,
                vram_total_bytes=total,
            )
        method, detail = "calculator", calc
        running = server.requests_running if server is not None else None
        if running is not None and context_tokens is not None and capacity > 0:
            usage = min(1.0, running * context_tokens / capacity)
            detail += "; usage estimated as running requests x context (an upper bound)"
    free = None if usage is None or capacity is None else round((1.0 - usage) * capacity)
    fit = None if free is None or not context_tokens else free // context_tokens
    return Headroom(
        method=method,
        detail=detail,
        kv_cache_usage=usage,
        kv_capacity_tokens=capacity,
        kv_free_tokens=free,
        requests_fit_now=fit,
        vram_used_bytes=used,
        vram_total_bytes=total,
    )
