"""The rows `gputui kv` prints: one KV/VRAM plan per GPU, with vLLM's serving defaults.

Contract: `kv_row(...)` sizes one model on one device's memory with `catalog.memory.plan_kv` (the
same function the simulator sizes its pool with) and returns a flat, JSON-ready `KvRow` with units
in every name. The batch limits default to what vLLM V1 would pick on that device
(`vllm_default_limits`), which is the rule of `gputui.sim.device.default_limits` restated for a
device known only by its reported memory and name (a local GPU); a test keeps the two equal over
the catalog.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Final

from gputui.catalog.memory import BLOCK_SIZE_TOKENS, plan_kv
from gputui.catalog.specs import KvDtype, ModelSpec, Precision
from gputui.jsontypes import JsonObject

_LARGE_GPU_BYTES: Final = 70 << 30


def vllm_default_limits(memory_bytes: int, name: str) -> tuple[int, int]:
    """VLLM V1's default (max_num_seqs, max_num_batched_tokens) on a device of this size and name.

    1024 / 8192 on cards with >= 70 GiB except A100s, 256 / 2048 elsewhere.
    """
    if memory_bytes >= _LARGE_GPU_BYTES and "a100" not in name.lower():
        return 1024, 8192
    return 256, 2048


@dataclass(frozen=True, slots=True)
class KvRow:
    """One model on one GPU: weights, KV pool, capacity and concurrent requests at a context."""

    gpu: str
    gpu_name: str
    memory_total_bytes: int
    memory_source: str
    """"catalog" (as nvidia-smi reports that card) or "nvml" (this machine's GPU)."""
    model: str
    precision: Precision
    kv_dtype: KvDtype
    context_tokens: int
    gpu_memory_utilization: float
    max_num_seqs: int
    max_batched_tokens: int
    budget_bytes: int
    weights_bytes: int
    reserve_bytes: int
    kv_pool_bytes: int
    kv_bytes_per_token: int
    kv_block_size: int
    kv_blocks: int
    kv_capacity_tokens: int
    max_concurrent_requests: int
    """Requests of `context_tokens` whose KV fits at once (before `max_num_seqs` caps them)."""
    fits: bool
    shortfall_bytes: int
    context_exceeds_model: bool
    """The context is longer than the model's `max_position_embeddings`."""

    def to_dict(self) -> JsonObject:
        """JSON-ready form."""
        return dataclasses.asdict(self)


def kv_row(
    *,
    gpu: str,
    gpu_name: str,
    memory_total_bytes: int,
    memory_source: str,
    model: ModelSpec,
    precision: Precision,
    kv_dtype: KvDtype,
    context_tokens: int,
    gpu_memory_utilization: float = 0.9,
    max_num_seqs: int | None = None,
    max_batched_tokens: int | None = None,
) -> KvRow:
    """Plan `model` on a device with `memory_total_bytes` (see the module docstring)."""
    default_seqs, default_tokens = vllm_default_limits(memory_total_bytes, f"{gpu} {gpu_name}")
    seqs = default_seqs if max_num_seqs is None else max_num_seqs
    tokens = default_tokens if max_batched_tokens is None else max_batched_tokens
    plan = plan_kv(
        memory_total_bytes, model, precision, kv_dtype, gpu_memory_utilization, tokens, seqs
    )
    return KvRow(
        gpu=gpu,
        gpu_name=gpu_name,
        memory_total_bytes=memory_total_bytes,
        memory_source=memory_source,
        model=model.name,
        precision=precision,
        kv_dtype=kv_dtype,
        context_tokens=context_tokens,
        gpu_memory_utilization=gpu_memory_utilization,
        max_num_seqs=seqs,
        max_batched_tokens=tokens,
        budget_bytes=plan.requested_bytes,
        weights_bytes=plan.weight_bytes,
        reserve_bytes=plan.reserve_bytes,
        kv_pool_bytes=plan.kv_pool_bytes,
        kv_bytes_per_token=plan.kv_bytes_per_token,
        kv_block_size=BLOCK_SIZE_TOKENS,
        kv_blocks=plan.num_blocks,
        kv_capacity_tokens=plan.capacity_tokens,
        max_concurrent_requests=plan.max_concurrent(context_tokens) if plan.fits else 0,
        fits=plan.fits,
        shortfall_bytes=plan.shortfall_bytes,
        context_exceeds_model=context_tokens > model.max_position_embeddings,
    )


def gb_gib(n_bytes: float) -> str:
    """Both units, labelled: "16.06 GB (14.96 GiB)"."""
    return f"{n_bytes / 1e9:.2f} GB ({n_bytes / 2**30:.2f} GiB)"


def format_row(row: KvRow) -> str:
    """The plain-text report of one row."""
    fit = "yes" if row.fits else f"NO (short by {gb_gib(row.shortfall_bytes)})"
    lines = [
        f"{row.model} {row.precision} (KV {row.kv_dtype}) on {row.gpu} ({row.gpu_name}), "
        f"context {row.context_tokens} tokens",
        f"  memory          {gb_gib(row.memory_total_bytes)} ({row.memory_source})",
        f"  vLLM budget     {gb_gib(row.budget_bytes)} at gpu_memory_utilization "
        f"{row.gpu_memory_utilization:g}",
        f"  weights         {gb_gib(row.weights_bytes)}",
        f"  reserve         {gb_gib(row.reserve_bytes)} (activations at max_batched_tokens "
        f"{row.max_batched_tokens}, max_num_seqs {row.max_num_seqs}, runtime)",
        f"  KV pool         {gb_gib(max(0, row.kv_pool_bytes))}",
        f"  KV per token    {row.kv_bytes_per_token} B ({row.kv_bytes_per_token / 1024:.1f} KiB)",
        f"  KV capacity     {row.kv_capacity_tokens} tokens "
        f"({row.kv_blocks} blocks of {row.kv_block_size})",
        f"  concurrent      {row.max_concurrent_requests} requests of {row.context_tokens} tokens"
        + (
            f" (vLLM runs at most {row.max_num_seqs} at once)"
            if row.max_concurrent_requests > row.max_num_seqs
            else ""
        ),
        f"  fits            {fit}",
    ]
    if row.context_exceeds_model:
        lines.append("  note            the context exceeds the model's max_position_embeddings")
    return "\n".join(lines)


def format_table(rows: list[KvRow]) -> str:
    """The `--gpu all` table (memory in GiB = 2^30 bytes)."""
    first = rows[0]
    header = (
        f"{first.model} {first.precision} (KV {first.kv_dtype}), context {first.context_tokens} "
        f"tokens; sizes in GiB (2^30 bytes)"
    )
    cols = (
        f"{'gpu':<16}{'memory':>8}{'weights':>9}{'KV pool':>9}{'KV tokens':>11}"
        f"{'requests':>10}  fits"
    )
    lines = [header, cols]
    lines.extend(
        f"{r.gpu:<16}{r.memory_total_bytes / 2**30:>8.1f}{r.weights_bytes / 2**30:>9.1f}"
        f"{max(0, r.kv_pool_bytes) / 2**30:>9.1f}{r.kv_capacity_tokens:>11}"
        f"{r.max_concurrent_requests:>10}  {'yes' if r.fits else 'no'}"
        for r in rows
    )
    return "\n".join(lines)
