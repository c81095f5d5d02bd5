"""How much of the card's roofline a step used: decode bandwidth and prefill compute, as fractions.

Contract: `roofline_use(gpu, model, ...)` takes the catalog's card and model and a step's measured
rates and returns `steps[].roofline`:

    decode bytes/s   = (weight bytes + KV bytes read per step) x decode steps/s
        decode steps/s      = output tok/s / mean batch (sequences decoding per step)
        KV bytes per step   = mean batch x mean context (input + output / 2) x KV bytes per token
    decode_bandwidth_utilization = decode bytes/s / peak DRAM bandwidth

    prefill FLOP/s   = 2 x params x input tok/s (the matmuls; attention's share is left out)
    prefill_compute_utilization  = prefill FLOP/s / dense BF16 (or FP8) peak
    decode_compute_utilization   = 2 x params x output tok/s / the same peak

with the formula and every input in the output. domain.md section 9's check: an 8B BF16 model
(16.06 GB) at 89 tok/s, batch 1, on 1,935 GB/s uses 16.06 x 89 / 1935 = 74 %. A card missing
from the catalog can still get a bandwidth figure from `gputui vram-check --json`
(`bandwidth_gbps`, a measured copy bandwidth); with neither, only the bytes/s are given.
`catalog_gpu` / `catalog_model` match what telemetry and the target report (an NVML name plus
the memory size; a served model name or HF id) to catalog entries, None when none matches.
"""

from __future__ import annotations

import re
from pathlib import Path

from gputui.catalog.memory import kv_bytes_per_token, weight_bytes
from gputui.catalog.specs import GPUS, MODELS, GpuSpec, ModelSpec, Precision
from gputui.metrics.step_diagnosis import Flat


def catalog_gpu(name: str | None, memory_total_bytes: int | None) -> GpuSpec | None:
    """The catalog card reported as `name` (NVML name or CLI name), nearest in memory size."""
    if not name:
        return None
    wanted = " ".join(name.split()).lower()
    if wanted in GPUS:
        return GPUS[wanted]
    candidates = [g for g in GPUS.values() if g.nvml_name.lower() == wanted]
    if not candidates:
        return None
    if memory_total_bytes is None:
        return candidates[0]
    return min(candidates, key=lambda g: abs(g.memory_bytes - memory_total_bytes))


def _key(text: str) -> str:
    return re.sub(r"[^a-z0-9.]", "", text.lower().rsplit("/", 1)[-1])


def catalog_model(served_name: str | None) -> ModelSpec | None:
    """The catalog model a served name or HF id stands for (-Instruct and case ignored)."""
    if not served_name:
        return None
    wanted = _key(served_name).removesuffix("instruct")
    for model in MODELS.values():
        if wanted in (_key(model.name), _key(model.hf_id).removesuffix("instruct")):
            return model
    return None


def precision_of(served_name: str | None) -> Precision:
    """The weight precision a model name announces (FP8, AWQ/GPTQ int4), else BF16."""
    text = (served_name or "").lower()
    if "fp8" in text:
        return "fp8"
    if any(tag in text for tag in ("awq", "gptq", "int4", "w4a16")):
        return "int4"
    return "bf16"


def bandwidth_from_vram_check(path: str | None) -> float | None:
    """`bandwidth_gbps` of a saved `gputui vram-check --json` (UsageError if unreadable)."""
    if path is None:
        return None
    import orjson

    from gputui.errors import UsageError

    try:
        data = orjson.loads(Path(path).read_bytes())
    except OSError as exc:
        raise UsageError(f"--vram-check: cannot read {path}: {exc.strerror or exc}") from None
    except orjson.JSONDecodeError:
        raise UsageError(
            f"--vram-check: {path} is not JSON (use `gputui vram-check --json`)"
        ) from None
    value = data.get("bandwidth_gbps") if isinstance(data, dict) else None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise UsageError(f"--vram-check: {path} has no measured bandwidth_gbps")
    return float(value)


def roofline_use(
    gpu: GpuSpec | None,
    model: ModelSpec | None,
    *,
    output_tokens_per_s: float,
    input_tokens_per_s: float,
    mean_batch: float | None,
    mean_context_tokens: float | None,
    precision: Precision = "bf16",
    measured_bandwidth_bytes_per_s: float | None = None,
) -> Flat | None:
    """`steps[].roofline` (see the module docstring); None without a catalog model."""
    if model is None:
        return None
    weights = weight_bytes(model, precision)
    kv_per_token = kv_bytes_per_token(model, "bf16")
    batch = mean_batch if mean_batch and mean_batch > 0 else 1.0
    context = mean_context_tokens or 0.0
    steps_per_s = output_tokens_per_s / batch
    kv_per_step = batch * context * kv_per_token
    decode_bytes_per_s = (weights + kv_per_step) * steps_per_s
    prefill_flops = 2.0 * model.params * input_tokens_per_s
    if gpu is not None:
        peak_bw: float | None = gpu.mem_bandwidth_bytes_per_s
        bw_source = f"catalog {gpu.name}"
        fp8 = precision == "fp8" and gpu.fp8_tflops is not None
        peak_flops: float | None = (gpu.fp8_tflops if fp8 else gpu.bf16_tflops) or 0.0
        peak_flops = peak_flops * 1e12 if peak_flops else None
        flops_source = f"catalog {gpu.name} dense {'FP8' if fp8 else 'BF16'}"
    else:
        peak_bw = measured_bandwidth_bytes_per_s
        bw_source = "gputui vram-check (measured copy bandwidth)" if peak_bw else "unknown card"
        peak_flops, flops_source = None, "unknown card"
    return {
        "decode_bandwidth_utilization": (
            round(decode_bytes_per_s / peak_bw, 4) if peak_bw else None
        ),
        "prefill_compute_utilization": (
            round(prefill_flops / peak_flops, 4) if peak_flops else None
        ),
        "decode_compute_utilization": (
            round(2.0 * model.params * output_tokens_per_s / peak_flops, 4) if peak_flops else None
        ),
        "decode_bytes_per_s": round(decode_bytes_per_s),
        "prefill_flops_per_s": round(prefill_flops),
        "peak_bandwidth_bytes_per_s": peak_bw,
        "peak_flops_per_s": peak_flops,
        "bandwidth_source": bw_source,
        "flops_source": flops_source,
        "gpu": gpu.name if gpu is not None else None,
        "model": model.name,
        "precision": precision,
        "weight_bytes": weights,
        "kv_bytes_per_token": kv_per_token,
        "mean_batch": round(batch, 3),
        "mean_context_tokens": round(context, 1),
        "decode_steps_per_s": round(steps_per_s, 3),
        "formula": (
            "decode B/s = (weight bytes + mean batch x mean context x KV bytes/token) x "
            "(out tok/s / mean batch); prefill FLOP/s = 2 x params x in tok/s; "
            "each over the card's peak"
        ),
    }
