"""The one normalized telemetry model every source produces: GPU, server, host samples and identity.

Contract: frozen, slotted dataclasses with the unit in every field name. Identity fields (index,
uuid, name) are always present; every measured field may be None, which means "this source or this
card does not report it" (NVML's NotSupported on GeForce, a metric a server does not expose) and is
shown as n/a. Nothing here guesses a value. Every sample carries `t_ns` from
`time.perf_counter_ns()` (CLOCK_MONOTONIC), the load engine's clock, so traces line up with steps.
`to_dict` gives the JSON form used by `--json` output and snapshots.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gputui.jsontypes import JsonObject

if TYPE_CHECKING:
    from _typeshed import DataclassInstance


@dataclass(frozen=True, slots=True)
class GpuSample:
    """One GPU at one instant, from NVML, nvidia-smi or dcgm-exporter."""

    index: int
    uuid: str
    name: str
    t_ns: int
    temperature_c: float | None = None
    sm_clock_mhz: int | None = None
    sm_clock_max_mhz: int | None = None
    mem_clock_mhz: int | None = None
    mem_clock_max_mhz: int | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    """The enforced limit (the minimum over all limiters), not the configured one."""
    energy_mj: float | None = None
    """Total energy since the driver loaded, mJ (NVML's counter, dcgm-exporter's
    `DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`); None where the card or source has none."""
    utilization_gpu_pct: float | None = None
    memory_used_bytes: int | None = None
    """As the source reports it (NVML's v2 call counts the driver-reserved memory as used)."""
    memory_total_bytes: int | None = None
    memory_reserved_bytes: int | None = None
    throttle_reasons: tuple[str, ...] | None = None
    """Decoded clock-event reasons (see `telemetry.throttle`), idle included."""
    throttle_mask: int | None = None
    fan_pct: float | None = None
    pcie_gen: int | None = None
    pcie_width: int | None = None
    ecc_volatile_errors: int | None = None
    """Corrected + uncorrected ECC errors since the driver loaded."""
    mig_mode: bool | None = None
    pstate: int | None = None
    """Performance state 0..15 (P0 = maximum performance)."""
    source: str = "nvml"
    """Which port produced it: "nvml", "nvidia-smi" or "dcgm"."""

    def to_dict(self) -> JsonObject:
        """JSON-ready form (tuples become lists)."""
        return _plain(self)


@dataclass(frozen=True, slots=True)
class GpuHealth:
    """The slow-changing health counters of `gputui gpu` (domain.md §6); None = not reported."""

    ecc_mode: bool | None = None
    ecc_volatile_corrected: int | None = None
    ecc_volatile_uncorrected: int | None = None
    ecc_aggregate_uncorrected: int | None = None
    retired_pages_sbe: int | None = None
    retired_pages_dbe: int | None = None
    retired_pages_pending: bool | None = None
    remapped_rows_correctable: int | None = None
    remapped_rows_uncorrectable: int | None = None
    remapped_rows_pending: bool | None = None
    remapped_rows_failure: bool | None = None

    def to_dict(self) -> JsonObject:
        """JSON-ready form."""
        return _plain(self)


@dataclass(frozen=True, slots=True)
class GpuIdentity:
    """What a GPU is, read once: enough to tell a modified 48 GB card from two 24 GB ones."""

    index: int
    uuid: str
    name: str
    memory_total_bytes: int | None = None
    driver_version: str | None = None
    cuda_version: str | None = None
    """The driver's CUDA version, e.g. "12.4"."""
    power_limit_w: float | None = None
    mig_mode: bool | None = None
    ecc_mode: bool | None = None
    serial: str | None = None
    pci_bus_id: str | None = None

    def to_dict(self) -> JsonObject:
        """JSON-ready form."""
        return _plain(self)


@dataclass(frozen=True, slots=True)
class ServerSample:
    """The inference server's own view of its load, normalized across backends."""

    t_ns: int
    backend: str | None
    """"vllm", "sglang", "tgi", "llamacpp", "trtllm", or None when not recognised."""
    requests_running: int | None = None
    requests_waiting: int | None = None
    kv_cache_usage: float | None = None
    """Fraction 0..1 of the KV cache in use."""
    preemptions_total: int | None = None
    prompt_tokens_total: int | None = None
    generation_tokens_total: int | None = None
    kv_blocks_total: int | None = None
    kv_block_size: int | None = None
    """Tokens per KV block."""
    kv_capacity_tokens: int | None = None
    """Tokens the KV cache holds when full (blocks x block size, or the server's own figure)."""
    engine_steps_total: int | None = None
    """Engine steps so far (vLLM's `iteration_tokens_total` histogram's count)."""
    step_tokens_total: int | None = None
    """Tokens those steps carried (its sum): per step, the batch-token budget in use."""
    spec_drafts_total: int | None = None
    """Speculative decoding (see telemetry.spec_decode): decode steps that drafted."""
    spec_draft_tokens_total: int | None = None
    spec_accepted_tokens_total: int | None = None
    spec_accept_rate: float | None = None
    """Accepted / draft tokens since the server started (SGLang: its own gauge)."""
    spec_accept_length: float | None = None
    """Tokens per decode step: 1 + accepted drafts per step."""
    prefix_cache_queries_total: int | None = None
    """Prompt tokens looked up in the prefix cache (vLLM; SGLang: its prompt tokens)."""
    prefix_cache_hits_total: int | None = None
    """Prompt tokens found there (vLLM's hits; SGLang's `cached_tokens_total`)."""

    def to_dict(self) -> JsonObject:
        """JSON-ready form."""
        return _plain(self)


@dataclass(frozen=True, slots=True)
class HostSample:
    """The machine gputui runs on: a starved CPU or a swapping host caps throughput too."""

    t_ns: int
    cpu_pct: float | None = None
    """All cores, 0..100, over the interval since the previous sample."""
    cpu_busiest_core_pct: float | None = None
    """The busiest single core, 0..100: a single-threaded server loop pegs one core."""
    cpu_count: int | None = None
    mem_used_bytes: int | None = None
    """Total minus available (page cache that can be dropped is not "used")."""
    mem_total_bytes: int | None = None
    swap_used_bytes: int | None = None
    swap_total_bytes: int | None = None
    swap_in_pages_per_s: float | None = None
    swap_out_pages_per_s: float | None = None

    def to_dict(self) -> JsonObject:
        """JSON-ready form."""
        return _plain(self)


def _plain(obj: DataclassInstance) -> JsonObject:
    out: JsonObject = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        out[f.name] = list(value) if isinstance(value, tuple) else value
    return out
