"""Roofline timing of one engine iteration (one forward pass over a continuous batch).

Contract: `Roofline.iteration(...)` turns what an iteration processes (prompt tokens being
prefilled, sequences decoding, the KV each of them reads) into seconds:

    duration = max(FLOPs / (peak x clock ratio x COMPUTE_EFFICIENCY),
                   bytes / (bandwidth x MEMORY_EFFICIENCY))
               + ITERATION_OVERHEAD_S + PER_SEQUENCE_OVERHEAD_S x sequences

    FLOPs = 2 x params x tokens + attention (4 x layers x heads x head_dim per query-key pair)
    bytes = weights (read once per iteration, whatever the batch) + KV read by every sequence

Why this shape: decode at small batch reads every weight to emit one token per sequence, so it is
bandwidth-bound and batching amortises the read; the KV read and the FLOPs grow with the batch until
compute or KV traffic dominates, which is where the knee comes from (domain.md §1). The SM clock
scales compute only: memory bandwidth follows the memory clock, which thermal slowdown leaves alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from gputui.catalog.memory import kv_bytes_per_token, weight_bytes
from gputui.catalog.specs import GpuSpec, KvDtype, ModelSpec, Precision

MEMORY_EFFICIENCY: Final = 0.82
"""Fraction of datasheet DRAM bandwidth a decode step achieves. Memory-bound GEMV kernels in vLLM
reach roughly 70-85 % of peak (STREAM-like copies reach ~90 %; batch-1 decode benchmarks of 7-8B
models land at 75-85 % of bandwidth / weight bytes once the fixed overhead is taken out)."""

COMPUTE_EFFICIENCY: Final = 0.55
"""Fraction of dense tensor peak that prefill GEMMs plus attention achieve end to end: cuBLAS
reaches 70-80 % on large square GEMMs, but a transformer layer's mix of GEMMs, norms and
attention kernels lands nearer 50-60 % (MLPerf-class prefill throughput on A100/H100)."""

ITERATION_OVERHEAD_S: Final = 1.0e-3
"""Fixed CPU and launch cost per engine step with CUDA graphs: scheduling, input preparation,
sampling and output processing in vLLM V1 are of the order of a millisecond per step."""

PER_SEQUENCE_OVERHEAD_S: Final = 3e-6
"""CPU cost per scheduled sequence per step that is *not* hidden behind the GPU (block-table
update, sampler metadata). vLLM V1 detokenises and streams in its API process and prepares inputs
while the previous step runs, so most of the tens of microseconds per sequence seen in profiles
overlap the forward pass. 15 µs (all of it on the critical path) put a batch of 150 at 12.2 ms per
token on an H100 against a published 8.55 ms (benchmarks/sim_published.py); 3 µs gives 10.4 ms,
with the KV read and the fixed step cost making up the rest of the growth over batch 1."""

ATTENTION_FLOPS_PER_PAIR_PER_LAYER_HEAD_DIM: Final = 4
"""QK^T and PV: two multiply-adds (4 FLOPs) per query-key pair per head dimension per layer."""


@dataclass(frozen=True, slots=True)
class IterationCost:
    """How long an iteration takes and what bound it."""

    duration_s: float
    compute_s: float
    """Time the FLOPs alone would take at the current clock."""
    memory_s: float
    """Time the bytes alone would take."""

    @property
    def compute_share(self) -> float:
        """0..1: how close to compute-bound the iteration is (drives power draw)."""
        bound = max(self.compute_s, self.memory_s)
        return self.compute_s / bound if bound > 0.0 else 0.0


class Roofline:
    """Per-(GPU, model, precision) constants, precomputed so an iteration costs a few multiplies."""

    __slots__ = (
        "_attn_flops_per_pair",
        "_compute_flops_per_s",
        "_flops_per_token",
        "_mem_bytes_per_s",
        "kv_bytes_per_token",
        "weight_bytes",
    )

    def __init__(
        self, gpu: GpuSpec, model: ModelSpec, precision: Precision, kv_dtype: KvDtype
    ) -> None:
        self.weight_bytes = weight_bytes(model, precision)
        self.kv_bytes_per_token = kv_bytes_per_token(model, kv_dtype)
        self._flops_per_token = 2.0 * model.params
        self._attn_flops_per_pair = float(
            ATTENTION_FLOPS_PER_PAIR_PER_LAYER_HEAD_DIM
            * model.num_layers
            * model.num_attention_heads
            * model.head_dim
        )
        # FP8 weights run on FP8 tensor cores (W8A8) where the GPU has them; INT4 and FP8-on-Ampere
        # are weight-only formats whose GEMMs dequantise to BF16, so they run at the BF16 rate.
        tflops = gpu.fp8_tflops if precision == "fp8" and gpu.fp8_tflops else gpu.bf16_tflops
        self._compute_flops_per_s = tflops * 1e12 * COMPUTE_EFFICIENCY
        self._mem_bytes_per_s = gpu.mem_bandwidth_bytes_per_s * MEMORY_EFFICIENCY

    def iteration(
        self,
        tokens: int,
        sequences: int,
        attention_pairs: int,
        kv_tokens_read: int,
        clock_ratio: float = 1.0,
    ) -> IterationCost:
        """Cost of one forward pass.

        Args:
            tokens: query tokens computed (prefill chunk tokens + one per decoding sequence).
            sequences: sequences in the batch (for the per-sequence CPU overhead).
            attention_pairs: query-key pairs attended over, summed over sequences.
            kv_tokens_read: KV-cache tokens read (or written), summed over sequences.
            clock_ratio: current SM clock / boost clock (thermal or power throttling).
        """
        flops = self._flops_per_token * tokens + self._attn_flops_per_pair * attention_pairs
        compute_s = flops / (self._compute_flops_per_s * clock_ratio)
        memory_s = (self.weight_bytes + self.kv_bytes_per_token * kv_tokens_read) / (
            self._mem_bytes_per_s
        )
        duration_s = (
            (compute_s if compute_s > memory_s else memory_s)
            + ITERATION_OVERHEAD_S
            + PER_SEQUENCE_OVERHEAD_S * sequences
        )
        return IterationCost(duration_s, compute_s, memory_s)

    def decode_bandwidth_roofline_tok_s(self) -> float:
        """Single-stream decode ceiling: bandwidth / weight bytes (tokens per second)."""
        return self._mem_bytes_per_s / MEMORY_EFFICIENCY / self.weight_bytes
