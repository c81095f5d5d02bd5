"""Roofline timing of one engine iteration (one forward pass over a continuous batch).

Contract: `Roofline.iteration(...)` turns what an iteration processes (prompt tokens being
prefilled, sequences decoding, the KV each of them reads) into seconds:

    duration = max(GPU, host) + ITERATION_OVERHEAD_S
    GPU      = max(FLOPs / (peak x clock ratio x COMPUTE_EFFICIENCY),
                   bytes / (bandwidth x MEMORY_EFFICIENCY))
    host     = HOST_STEP_S + HOST_PER_SEQUENCE_S x sequences
               + EAGER_HOST_PER_LAYER_S x layers   (a step over the largest CUDA graph only)

    FLOPs = 2 x params x tokens + attention (4 x layers x heads x head_dim per query-key pair)
    bytes = weights (read once per iteration, whatever the batch) + KV read by every sequence

Why this shape: decode at small batch reads every weight to emit one token per sequence, so it is
bandwidth-bound and batching amortises the read; the KV read and the FLOPs grow with the batch until
compute or KV traffic dominates, which is where the knee comes from (domain.md §1). The SM clock
scales compute only: memory bandwidth follows the memory clock, which thermal slowdown leaves alone.
The engine's host work (scheduling, input preparation, output processing: Python, per step and per
sequence) runs while the GPU computes, so a step lasts the longer of the two: behind an 8B model's
forward pass it is hidden, a 0.6B model's steps are host-bound (issue 31; the constants below).
A step with more tokens than vLLM's largest CUDA graph (`cudagraph_max_tokens`) runs without one:
every kernel of every layer is launched from Python, which only a large forward pass hides
(EAGER_HOST_PER_LAYER_S).
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

HOST_STEP_S: Final = 0.84e-3
"""Engine host time per step that overlaps the GPU's (vLLM V1 prepares and schedules while the
forward pass runs). With HOST_PER_SEQUENCE_S, from the two median ITLs of a host-bound 0.6B model
on an H100 (kvcached PR 331, vLLM 0.19, benchmarks/sim_published.py S2): 2.04 ms with 4.9 sequences
streaming (rate 16) and 4.54 ms with 66.2 (rate inf; sequences = output tok/s x mean TPOT, Little's
law); the GPU's own time there is 0.45 ms and 2.0 ms, under the host's. Per sequence: (4.54 - 2.04)
/ (66.2 - 4.9) = 40.8 us; fixed: 2.04 - ITERATION_OVERHEAD_S - 4.9 x 40.8 us = 0.84 ms."""

HOST_PER_SEQUENCE_S: Final = 40.8e-6
"""Engine host time per scheduled sequence per step (scheduler, block tables, sampler metadata,
output building), overlapping the GPU (see HOST_STEP_S). It replaces a 3 us cost that was added to
every step: hidden behind an 8B model's ~6-9 ms H100 step, it cannot move S1's ITL at saturation,
which is why it could not be seen there."""

EAGER_HOST_PER_LAYER_S: Final = 0.343e-3
"""Engine host time per model layer of a step that runs without a CUDA graph, overlapping the GPU.

Why: vLLM 0.19 captures CUDA graphs for steps of up to `max_cudagraph_capture_size` tokens,
min(2 x max_num_seqs, 512) capped at max_num_batched_tokens (vllm/config/vllm.py, VllmConfig
._set_cudagraph_sizes, lines 1392-1403 of the 0.19.0 wheel); a larger step (a 512-token prompt
plus the running decodes) runs the compiled model without one, each layer's ~12 kernels launched
from Python. kvcached PR 331's nsys trace of the same server (benchmarks/bench_layout/nsys_runs/
layout_true.sqlite at 4a8176e: H100, Qwen3-0.6B, vLLM 0.19) shows it: a decode step launches one
graph and 13-16 kernels in 1.3-1.6 ms of CPU; every step over 512 tokens launches 350 kernels
(12.5 a layer) and no graph, and its CPU time (18.7-25 ms; 0.55-0.65 ms a layer in steady layers,
under the tracer's own per-call cost) exceeds its GPU time (5-6 ms for 1.5-2k tokens): host-bound.
Size, from S2's untraced rate-16 run (benchmarks/sim_published.py), where every prefill step is
one 512-token prompt plus ~5 decodes: mean ITL 2.40 ms against a median of 2.03 ms is 0.37 ms a
gap, 47 ms over a request's 127 gaps, during which 16 req/s x 0.305 s = 4.9 other prompts are
prefilled: each prefill step lasts 47 / 4.9 = 9.6 ms longer than a decode step, 9.6 / 28 layers =
0.343 ms a layer. Check, not fitted: that step then lasts ~11.6 ms, and its gap is the published
p99 ITL's 12.7 ms region (3.9 % of gaps are such steps). Behind an 8B model's large prefill steps
(tens of ms on the GPU) it is hidden."""

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
    host_s: float = 0.0
    """The engine's host time for the step (scheduling and launching it)."""

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
        "_eager_host_s",
        "_flops_per_token",
        "_mem_bytes_per_s",
        "cudagraph_max_tokens",
        "kv_bytes_per_token",
        "weight_bytes",
    )

    def __init__(
        self,
        gpu: GpuSpec,
        model: ModelSpec,
        precision: Precision,
        kv_dtype: KvDtype,
        cudagraph_max_tokens: int = 512,
    ) -> None:
        self.cudagraph_max_tokens = cudagraph_max_tokens
        """Largest step (tokens) that runs as a CUDA graph (see EAGER_HOST_PER_LAYER_S)."""
        self._eager_host_s = EAGER_HOST_PER_LAYER_S * model.num_layers
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
            sequences: sequences in the batch (for the engine's host time).
            attention_pairs: query-key pairs attended over, summed over sequences.
            kv_tokens_read: KV-cache tokens read (or written), summed over sequences.
            clock_ratio: current SM clock / boost clock (thermal or power throttling).
        """
        flops = self._flops_per_token * tokens + self._attn_flops_per_pair * attention_pairs
        compute_s = flops / (self._compute_flops_per_s * clock_ratio)
        memory_s = (self.weight_bytes + self.kv_bytes_per_token * kv_tokens_read) / (
            self._mem_bytes_per_s
        )
        gpu_s = compute_s if compute_s > memory_s else memory_s
        host_s = HOST_STEP_S + HOST_PER_SEQUENCE_S * sequences
        if tokens > self.cudagraph_max_tokens:
            host_s += self._eager_host_s
        duration_s = (gpu_s if gpu_s > host_s else host_s) + ITERATION_OVERHEAD_S
        return IterationCost(duration_s, compute_s, memory_s, host_s)

    def decode_bandwidth_roofline_tok_s(self) -> float:
        """Single-stream decode ceiling: bandwidth / weight bytes (tokens per second)."""
        return self._mem_bytes_per_s / MEMORY_EFFICIENCY / self.weight_bytes
