"""One simulated GPU serving one model: KV plan + roofline + scheduler + thermal, in caller time.

Contract: `make_device(...)` validates the configuration (refusing a model that does not fit with
`ModelDoesNotFit`, whose message says by how much) and returns a `SimDevice`. The caller runs
`begin()` -> waits `it.duration_s` (real or virtual) -> `end(it)`, and reports idle gaps with
`idle(dt_s)` so the card cools down. Both the asyncio profile and the virtual-time load runner
drive this same object, so the tests' physics is the server's physics.
"""

from __future__ import annotations

from typing import Final

from gputui.catalog.memory import KvPlan, plan_kv
from gputui.catalog.specs import GpuSpec, KvDtype, ModelSpec, Precision
from gputui.sim.roofline import Roofline
from gputui.sim.scheduler import Iteration, Scheduler, StepResult
from gputui.sim.thermal import ThermalModel

_GIB: Final = 1 << 30
LARGE_GPU_BYTES: Final = 70 * _GIB
"""vLLM V1 raises its serving defaults on cards with >= 70 GiB, except A100s (slower there)."""


CUDAGRAPH_CAPTURE_CAP: Final = 512
"""vLLM's default ceiling on the CUDA-graph capture size (1024 on data-center Blackwell only)."""


class ModelDoesNotFit(ValueError):
    """The model's weights and runtime reserve leave no room for a KV cache on this GPU."""


def default_limits(gpu: GpuSpec) -> tuple[int, int]:
    """The vLLM V1 default (max_num_seqs, max_num_batched_tokens) for its OpenAI server on `gpu`.

    vLLM's `EngineArgs` picks 1024 / 8192 on H100-class cards (>= 70 GiB, not A100) and 256 / 2048
    elsewhere; A100s are excluded because the larger token budget lowered their throughput.
    """
    if gpu.memory_bytes >= LARGE_GPU_BYTES and "a100" not in gpu.name:
        return 1024, 8192
    return 256, 2048


def delivery_lag_s(next_it: Iteration | None) -> float:
    """How long after a step ends its tokens leave the engine core: the next step's host time.

    vLLM's async scheduling (on by default in 0.19: `vllm/config/vllm.py` enables it unless an
    option rules it out) runs the engine core's loop as `step_with_batch_queue`
    (`vllm/v1/engine/core.py`, lines 421-511 of the 0.19.0 wheel): it schedules and launches the
    next step first, and only then blocks on the previous step's result and turns it into outputs.
    So a step's tokens go out once the following step has been launched (its host time in
    sim.roofline); when nothing follows, at once.
    """
    return 0.0 if next_it is None else next_it.host_s


def cudagraph_max_tokens(max_num_seqs: int, max_batched_tokens: int) -> int:
    """The largest CUDA-graph step in tokens: min(2 x max_num_seqs, 512, max_batched_tokens).

    vLLM 0.19's default `max_cudagraph_capture_size` (vllm/config/vllm.py,
    `_set_cudagraph_sizes`); a step with more tokens runs without a graph (sim.roofline).
    """
    return min(2 * max_num_seqs, CUDAGRAPH_CAPTURE_CAP, max_batched_tokens)


def _gb(n_bytes: float) -> str:
    return f"{n_bytes / 1e9:.1f} GB"


def fit_error(gpu: GpuSpec, model: ModelSpec, precision: str, plan: KvPlan, util: float) -> str:
    """The one-line refusal: what the model needs, what the GPU offers, and the shortfall."""
    return (
        f"{model.name} {precision} needs {_gb(plan.weight_bytes)} of weights + "
        f"{_gb(plan.reserve_bytes)} activation/runtime reserve + KV cache, but {gpu.name} has "
        f"{_gb(gpu.memory_bytes)} and gpu_memory_utilization {util:g} allows "
        f"{_gb(plan.requested_bytes)} (short by {_gb(plan.shortfall_bytes)})"
    )


class SimDevice:
    """The simulated engine core (see the module docstring)."""

    __slots__ = (
        "gpu",
        "gpu_memory_utilization",
        "kv_dtype",
        "model",
        "plan",
        "precision",
        "roofline",
        "scheduler",
        "thermal",
    )

    def __init__(
        self,
        gpu: GpuSpec,
        model: ModelSpec,
        precision: Precision,
        kv_dtype: KvDtype,
        gpu_memory_utilization: float,
        plan: KvPlan,
        scheduler: Scheduler,
    ) -> None:
        self.gpu = gpu
        self.model = model
        self.precision = precision
        self.kv_dtype = kv_dtype
        self.gpu_memory_utilization = gpu_memory_utilization
        self.plan = plan
        self.scheduler = scheduler
        self.roofline = scheduler.roofline
        self.thermal = ThermalModel(gpu)

    @property
    def max_model_len(self) -> int:
        """Longest prompt + output one request may have (the model's limit or the whole pool)."""
        return min(self.model.max_position_embeddings, self.plan.capacity_tokens)

    def begin(self) -> Iteration | None:
        """Schedule the next pass at the current clock; None when idle."""
        return self.scheduler.next_iteration(self.thermal.clock_ratio)

    def end(self, it: Iteration) -> StepResult:
        """The pass's duration has elapsed: heat the card and apply the pass."""
        self.thermal.advance(it.duration_s, 1.0, it.compute_share)
        return self.scheduler.complete_iteration(it)

    def idle(self, dt_s: float) -> None:
        """Nothing ran for `dt_s` seconds."""
        if dt_s > 0.0:
            self.thermal.advance(dt_s, 0.0)


def make_device(
    gpu: GpuSpec,
    model: ModelSpec,
    precision: Precision = "bf16",
    kv_dtype: KvDtype = "bf16",
    gpu_memory_utilization: float = 0.9,
    max_num_seqs: int | None = None,
    max_batched_tokens: int | None = None,
    seed: int = 0,
    *,
    prefix_caching: bool = True,
) -> SimDevice:
    """Build a device, with vLLM's defaults for the limits left as None."""
    default_seqs, default_tokens = default_limits(gpu)
    seqs = default_seqs if max_num_seqs is None else max_num_seqs
    tokens = default_tokens if max_batched_tokens is None else max_batched_tokens
    if seqs < 1 or tokens < 1:
        raise ValueError("max_num_seqs and max_batched_tokens must be positive")
    plan = plan_kv(
        gpu.memory_bytes, model, precision, kv_dtype, gpu_memory_utilization, tokens, seqs
    )
    if not plan.fits:
        raise ModelDoesNotFit(fit_error(gpu, model, precision, plan, gpu_memory_utilization))
    roofline = Roofline(gpu, model, precision, kv_dtype, cudagraph_max_tokens(seqs, tokens))
    scheduler = Scheduler(
        roofline, plan.num_blocks, seqs, tokens, seed, prefix_caching=prefix_caching
    )
    return SimDevice(gpu, model, precision, kv_dtype, gpu_memory_utilization, plan, scheduler)
