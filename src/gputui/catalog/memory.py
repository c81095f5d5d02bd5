"""The KV-cache / VRAM calculator: does a model fit, and how many tokens and requests does it hold.

Contract: pure integer arithmetic on a model's shape and a device's memory (domain.md §5,
reference.md §7). The simulator sizes its block pool with `plan_kv`, and `gputui kv` prints the same
plan for a real device (pass the memory NVML reports), so a simulated knee and a planning answer
can never disagree. It imports nothing but the catalog's datasheets.

How vLLM (V1) sizes the pool, reference §7.3, modelled here:
    requested = ceil(total_memory x gpu_memory_utilization)
    kv_pool   = requested - weights - activation/runtime reserve
    blocks    = kv_pool // (block_size x kv_bytes_per_token);  capacity = blocks x block_size
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from gputui.catalog.specs import KvDtype, ModelSpec, Precision

BLOCK_SIZE_TOKENS: Final = 16
"""vLLM's default KV block size on CUDA."""

INT4_BYTES_PER_PARAM: Final = 0.5 + (2 + 0.5) / 128
"""4-bit weights in groups of 128 (AWQ/GPTQ's default), each group carrying an FP16 scale (2 bytes)
and a packed 4-bit zero point (0.5 bytes): 0.5195 bytes per quantised parameter."""

_LINEAR_BYTES_PER_PARAM: Final[dict[str, float]] = {
    "bf16": 2.0,
    "fp8": 1.0,
    "int4": INT4_BYTES_PER_PARAM,
}
"""Bytes per parameter of the quantised (linear-layer) weights. FP8's per-channel scales are
negligible (one FP32 per output row)."""

KV_BYTES_PER_ELEMENT: Final[dict[str, int]] = {"bf16": 2, "fp8": 1}

RUNTIME_RESERVE_BYTES: Final = 512 << 20
"""Memory inside vLLM's budget that is neither weights, activations nor KV: the non-torch
allocations its profiler measures (cuBLAS/NCCL workspaces) and the CUDA-graph pool. vLLM's startup
log typically shows 0.1-0.5 GiB non-torch plus a few hundred MiB of graphs: 0.5 GiB in all."""

ACTIVATION_TENSORS_PER_HIDDEN: Final = 4
"""Hidden-size-wide BF16 tensors alive at the activation peak per token (residual, normed input,
attention output, QKV slice): an estimate of the peak that vLLM's `profile_run` measures."""
ACTIVATION_TENSORS_PER_INTERMEDIATE: Final = 3
"""MLP-wide BF16 tensors alive at the peak per token (gate, up and the activated product)."""
SAMPLER_LOGIT_COPIES: Final = 2
"""FP32 vocab-wide rows per sequence in the sampler (logits and probabilities)."""


@dataclass(frozen=True, slots=True)
class KvPlan:
    """How a model lays out in one GPU's memory under vLLM's rules; all sizes in bytes."""

    total_memory_bytes: int
    requested_bytes: int
    """ceil(total x gpu_memory_utilization): what vLLM may use."""
    weight_bytes: int
    reserve_bytes: int
    """Activation peak plus runtime reserve (see `activation_reserve_bytes`)."""
    kv_pool_bytes: int
    """requested - weights - reserve; negative when the model does not fit."""
    kv_bytes_per_token: int
    num_blocks: int
    """Whole 16-token blocks in the pool (0 when it does not fit)."""

    @property
    def block_bytes(self) -> int:
        """Bytes of one KV block across all layers."""
        return BLOCK_SIZE_TOKENS * self.kv_bytes_per_token

    @property
    def capacity_tokens(self) -> int:
        """Tokens the pool holds, rounded down to whole blocks (vLLM's "GPU KV cache size")."""
        return self.num_blocks * BLOCK_SIZE_TOKENS

    @property
    def fits(self) -> bool:
        """True when the weights and reserve fit and at least one KV block remains."""
        return self.num_blocks > 0

    @property
    def shortfall_bytes(self) -> int:
        """Bytes missing for one KV block to fit (0 when it fits)."""
        return 0 if self.fits else self.block_bytes - self.kv_pool_bytes

    def max_concurrent(self, context_tokens: int) -> int:
        """Requests of `context_tokens` (input + output) that fit in the pool at once."""
        return self.num_blocks // blocks_for(context_tokens)


def blocks_for(tokens: int) -> int:
    """KV blocks needed to hold `tokens` tokens of one sequence."""
    return -(-tokens // BLOCK_SIZE_TOKENS)


def weight_bytes(model: ModelSpec, precision: Precision) -> int:
    """Bytes of the model's weights at a precision.

    Quantised checkpoints (FP8, AWQ/GPTQ INT4) keep the embedding table and LM head in BF16, so only
    the remaining parameters take the reduced size. For Llama-3.1-8B this gives 9.1 GB at FP8 and
    5.7 GB at INT4, the sizes of the published checkpoints.
    """
    if precision == "bf16":
        return 2 * model.params
    embedding = model.embedding_params
    return (
        math.ceil((model.params - embedding) * _LINEAR_BYTES_PER_PARAM[precision]) + 2 * embedding
    )


def kv_bytes_per_token(model: ModelSpec, kv_dtype: KvDtype) -> int:
    """2 (K and V) x layers x KV heads x head dim x bytes per element (GQA-aware)."""
    return (
        2 * model.num_layers * model.num_kv_heads * model.head_dim * KV_BYTES_PER_ELEMENT[kv_dtype]
    )


def activation_reserve_bytes(model: ModelSpec, max_batched_tokens: int, max_num_seqs: int) -> int:
    """Memory vLLM keeps out of the KV pool for the forward pass's peak and the runtime.

    Grows with `max_batched_tokens` (the profiling batch) and with `max_num_seqs` (the sampler's
    logits), which is why raising either leaves fewer KV blocks. For Llama-3.1-8B with 8192 batched
    tokens and 256 sequences the activation part is 1.24 GB, near the "activation peak" vLLM logs.
    """
    per_token = 2 * (
        ACTIVATION_TENSORS_PER_HIDDEN * model.hidden_size
        + ACTIVATION_TENSORS_PER_INTERMEDIATE * model.intermediate_size
    )
    sampler = SAMPLER_LOGIT_COPIES * 4 * model.vocab_size * max_num_seqs
    return RUNTIME_RESERVE_BYTES + per_token * max_batched_tokens + sampler


def plan_kv(
    total_memory_bytes: int,
    model: ModelSpec,
    precision: Precision = "bf16",
    kv_dtype: KvDtype = "bf16",
    gpu_memory_utilization: float = 0.9,
    max_batched_tokens: int = 2048,
    max_num_seqs: int = 256,
) -> KvPlan:
    """Size the KV pool as vLLM would on a device with `total_memory_bytes` of memory."""
    if not 0.0 < gpu_memory_utilization <= 1.0:
        raise ValueError(f"gpu_memory_utilization must be in (0, 1], got {gpu_memory_utilization}")
    requested = math.ceil(total_memory_bytes * gpu_memory_utilization)
    weights = weight_bytes(model, precision)
    reserve = activation_reserve_bytes(model, max_batched_tokens, max_num_seqs)
    pool = requested - weights - reserve
    per_token = kv_bytes_per_token(model, kv_dtype)
    blocks = max(0, pool // (BLOCK_SIZE_TOKENS * per_token))
    return KvPlan(
        total_memory_bytes=total_memory_bytes,
        requested_bytes=requested,
        weight_bytes=weights,
        reserve_bytes=reserve,
        kv_pool_bytes=pool,
        kv_bytes_per_token=per_token,
        num_blocks=blocks,
    )
