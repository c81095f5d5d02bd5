"""Prometheus text for a simulated GPU server: vLLM's metric names and dcgm-exporter's.

Contract: `render_metrics(device, served_model_name, uuid)` is a pure function of the device's
current state. vLLM series carry `engine` and `model_name` as vLLM 0.32 labels them (reference.md
§4.1; KV usage `vllm:kv_cache_usage_perc` is a 0..1 fraction, counters end in `_total`, the
waiting requests are also split `vllm:num_requests_waiting_by_reason` {capacity, deferred});
DCGM series carry `gpu`, `UUID`, `pci_bus_id`, `device` and `modelName` like dcgm-exporter's
template (§3; framebuffer in MiB, power in W, clocks in MHz, the total-energy counter in mJ, left
out for a GeForce card, whose driver answers NotSupported, so readers fall back to integrating
the power). One server
exposing both lets a client test its vLLM and its DCGM parsers against a single endpoint.
"""

from __future__ import annotations

import uuid as uuid_lib
from functools import partial
from typing import Final

from gputui.catalog.memory import BLOCK_SIZE_TOKENS
from gputui.sim.device import SimDevice
from gputui.sim.scheduler import ITERATION_BOUNDS

_MIB: Final = 1 << 20
_UUID_NAMESPACE: Final = uuid_lib.UUID("8a6f3c55-9a2e-4c1b-9a57-1f0b1e2c3d4e")


def simulated_uuid(gpu_name: str, seed: int) -> str:
    """A stable NVML-style UUID for a simulated card, derived from its name and the seed."""
    return "GPU-" + str(uuid_lib.uuid5(_UUID_NAMESPACE, f"gputui-sim/{gpu_name}/{seed}"))


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(pairs: dict[str, str]) -> str:
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in pairs.items()) + "}"


def _family(out: list[str], name: str, kind: str, help_text: str) -> None:
    out.append(f"# HELP {name} {help_text}")
    out.append(f"# TYPE {name} {kind}")


def render_metrics(device: SimDevice, served_model_name: str, uuid: str) -> str:
    """The whole /metrics body for the device's current state."""
    out: list[str] = []
    _queue_metrics(out, device, served_model_name)
    _token_counters(out, device, served_model_name)
    _iteration_tokens(out, device, served_model_name)
    _cache_config(out, device)
    _dcgm_metrics(out, device, uuid)
    return "\n".join(out) + "\n"


def _vllm_sample(
    out: list[str], model: str, name: str, kind: str, help_text: str, value: float
) -> None:
    """One vLLM family with its single sample, labelled with the engine and model."""
    _family(out, name, kind, help_text)
    out.append(f"{name}{model} {float(value)!r}")


def _queue_metrics(out: list[str], device: SimDevice, served_model_name: str) -> None:
    """Running and waiting requests (waiting by reason too) and the KV cache's usage."""
    sched = device.scheduler
    model = _labels({"engine": "0", "model_name": served_model_name})
    vllm = partial(_vllm_sample, out, model)
    vllm(
        "vllm:num_requests_running",
        "gauge",
        "Number of requests in model execution batches.",
        len(sched.running),
    )
    vllm(
        "vllm:num_requests_waiting",
        "gauge",
        "Number of requests waiting to be processed.",
        len(sched.waiting),
    )
    _family(
        out,
        "vllm:num_requests_waiting_by_reason",
        "gauge",
        "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for scheduling "
        "capacity; 'deferred' = deferred by transient constraints (LoRA budget, KV transfer, "
        "blocked status). Sum of all reasons equals vllm:num_requests_waiting.",
    )
    for reason, count in (("capacity", len(sched.waiting)), ("deferred", 0)):
        labels = _labels({"engine": "0", "model_name": served_model_name, "reason": reason})
        out.append(f"vllm:num_requests_waiting_by_reason{labels} {float(count)!r}")
    vllm(
        "vllm:kv_cache_usage_perc",
        "gauge",
        "KV-cache usage. 1 means 100 percent usage.",
        sched.kv_usage,
    )


def _token_counters(out: list[str], device: SimDevice, served_model_name: str) -> None:
    """Preemptions, prompt and generation tokens, prefix cache queries and hits, successes."""
    sched = device.scheduler
    model = _labels({"engine": "0", "model_name": served_model_name})
    vllm = partial(_vllm_sample, out, model)
    vllm(
        "vllm:num_preemptions_total",
        "counter",
        "Cumulative number of preemption from the engine.",
        sched.num_preemptions_total,
    )
    vllm(
        "vllm:prompt_tokens_total",
        "counter",
        "Number of prefill tokens processed.",
        sched.prompt_tokens_total,
    )
    vllm(
        "vllm:prefix_cache_queries_total",
        "counter",
        "Prefix cache queries, in terms of number of queried tokens.",
        sched.pool.query_tokens_total,
    )
    vllm(
        "vllm:prefix_cache_hits_total",
        "counter",
        "Prefix cache hits, in terms of number of cached tokens.",
        sched.pool.hit_tokens_total,
    )
    vllm(
        "vllm:generation_tokens_total",
        "counter",
        "Number of generation tokens processed.",
        sched.generation_tokens_total,
    )
    _family(
        out,
        "vllm:request_success_total",
        "counter",
        "Count of successfully processed requests.",
    )
    for reason, count in sched.finished_total.items():
        labels = _labels(
            {"engine": "0", "finished_reason": reason, "model_name": served_model_name}
        )
        out.append(f"vllm:request_success_total{labels} {float(count)!r}")


def _iteration_tokens(out: list[str], device: SimDevice, served_model_name: str) -> None:
    """Tokens per engine step, as vLLM's histogram (the token budget in use per step)."""
    sched = device.scheduler
    name = "vllm:iteration_tokens_total"
    _family(out, name, "histogram", "Histogram of number of tokens per engine_step.")
    labels = f'engine="0",model_name="{_escape(served_model_name)}"'
    cumulative = 0
    bounds = [f"{float(b)!r}" for b in ITERATION_BOUNDS] + ["+Inf"]
    for le, count in zip(bounds, sched.iteration_counts, strict=True):
        cumulative += count
        bucket = f'engine="0",le="{le}",model_name="{_escape(served_model_name)}"'
        out.append(f"{name}_bucket{{{bucket}}} {float(cumulative)!r}")
    out.append(f"{name}_count{{{labels}}} {float(cumulative)!r}")
    out.append(f"{name}_sum{{{labels}}} {float(sched.iteration_tokens_sum)!r}")


def _cache_config(out: list[str], device: SimDevice) -> None:
    """VLLM's cache configuration info gauge (block size, dtype, blocks, prefix caching)."""
    sched = device.scheduler
    plan = device.plan
    _family(out, "vllm:cache_config_info", "gauge", "Information of the LLMEngine CacheConfig")
    cache = _labels(
        {
            "block_size": str(BLOCK_SIZE_TOKENS),
            "cache_dtype": "auto" if device.kv_dtype == "bf16" else "fp8",
            "enable_prefix_caching": str(sched.pool.caching),
            "gpu_memory_utilization": str(device.gpu_memory_utilization),
            "num_cpu_blocks": "0",
            "num_gpu_blocks": str(plan.num_blocks),
        }
    )
    out.append(f"vllm:cache_config_info{cache} 1.0")


def _dcgm_metrics(out: list[str], device: SimDevice, uuid: str) -> None:
    """The DCGM exporter's gauges for the card: clocks, temperature, power, memory, throttling."""
    gpu = device.gpu
    thermal = device.thermal
    plan = device.plan
    dcgm = _labels(
        {
            "gpu": "0",
            "UUID": uuid,
            "pci_bus_id": "00000000:01:00.0",
            "device": "nvidia0",
            "modelName": gpu.nvml_name,
        }
    )
    # vLLM preallocates its whole budget at start-up, so used memory is flat under any load.
    used_mib = plan.requested_bytes // _MIB
    total_mib = gpu.memory_bytes // _MIB
    dcgm_values: tuple[tuple[str, str, str], ...] = (
        ("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", str(round(thermal.sm_clock_mhz))),
        ("DCGM_FI_DEV_MEM_CLOCK", "Memory clock frequency (in MHz).", str(gpu.mem_clock_mhz)),
        ("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", str(round(thermal.temp_c))),
        ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", f"{thermal.power_w:.3f}"),
        ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", str(round(100 * thermal.util_frac))),
        ("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", str(total_mib - used_mib)),
        ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", str(used_mib)),
        (
            "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
            "Current clock throttle reasons (NVML bitmask).",
            str(thermal.throttle_reasons),
        ),
    )
    for name, help_text, value in dcgm_values:
        _family(out, name, "gauge", help_text)
        out.append(f"{name}{dcgm} {value}")
    if has_energy_counter(gpu.nvml_name):
        name = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
        _family(out, name, "counter", "Total energy consumption since boot (in mJ).")
        out.append(f"{name}{dcgm} {round(thermal.energy_j * 1e3)}")


def has_energy_counter(nvml_name: str) -> bool:
    """Whether the simulated card answers the total-energy counter (GeForce: NotSupported)."""
    return "GeForce" not in nvml_name
