"""Plain-text and JSON renderings of GPUs and server metrics for `gputui gpu` and `gputui metrics`.

Contract: pure functions from samples to strings or JSON-ready dicts. None is printed as "n/a",
GiB and GB are labelled, throttle reasons are names. `gpu_report` is the acceptance view of
domain.md §6 (identity, health, throttle reasons now, MIG); `metrics_report` is one scrape.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gputui.jsontypes import JsonObject, JsonValue
from gputui.telemetry.headroom import Headroom
from gputui.telemetry.samples import GpuHealth, GpuIdentity, GpuSample, ServerSample
from gputui.telemetry.throttle import throttling

NA = "n/a"


def _v(value: object, fmt: str = "{}", unit: str = "") -> str:
    if value is None:
        return NA
    return fmt.format(value) + unit


def _mem(n_bytes: int | None) -> str:
    if n_bytes is None:
        return NA
    return f"{n_bytes / 2**30:.1f} GiB ({n_bytes / 1e9:.1f} GB)"


def _flag(value: bool | None, yes: str = "enabled", no: str = "disabled") -> str:
    return NA if value is None else (yes if value else no)


def _reasons(sample: GpuSample | None) -> str:
    if sample is None or sample.throttle_reasons is None:
        return NA
    if not sample.throttle_reasons:
        return "none"
    held = throttling(sample.throttle_mask)
    names = ", ".join(sample.throttle_reasons)
    return f"{names}" + (" (clocks held down)" if held else "")


def gpu_lines(sample: GpuSample) -> list[str]:
    """The live readings of one GPU."""
    clock = _v(sample.sm_clock_mhz, unit=" MHz")
    if sample.sm_clock_max_mhz is not None:
        clock += f" of {sample.sm_clock_max_mhz} MHz max"
    power = _v(sample.power_w, "{:.0f}", " W")
    if sample.power_limit_w is not None:
        power += f" of {sample.power_limit_w:.0f} W limit"
    used, total = sample.memory_used_bytes, sample.memory_total_bytes
    memory = f"{_mem(used)} of {_mem(total)}" if total is not None else _mem(used)
    return [
        f"  temperature     {_v(sample.temperature_c, '{:.0f}', ' C')}",
        f"  SM clock        {clock}",
        f"  memory clock    {_v(sample.mem_clock_mhz, unit=' MHz')}",
        f"  power           {power}",
        f"  utilization     {_v(sample.utilization_gpu_pct, '{:.0f}', ' %')}",
        f"  memory used     {memory}",
        f"  throttle now    {_reasons(sample)}",
        f"  fan             {_v(sample.fan_pct, '{:.0f}', ' %')}",
        f"  P-state         {_v(sample.pstate, 'P{}')}",
        f"  PCIe link       gen {_v(sample.pcie_gen)} x{_v(sample.pcie_width)}",
    ]


def gpu_report(
    identities: Sequence[GpuIdentity],
    samples: Sequence[GpuSample],
    health: Sequence[GpuHealth],
    source: str,
) -> str:
    """The `gputui gpu` acceptance view."""
    first = identities[0] if identities else None
    lines = [
        f"{len(identities)} NVIDIA GPU(s) via {source}; driver "
        f"{_v(first.driver_version if first else None)}, CUDA "
        f"{_v(first.cuda_version if first else None)}"
    ]
    by_index = {s.index: s for s in samples}
    for ident, h in zip(identities, health, strict=True):
        lines += [
            "",
            f"GPU {ident.index}: {ident.name}",
            f"  UUID            {ident.uuid}",
            f"  PCI bus id      {_v(ident.pci_bus_id)}",
            f"  serial          {_v(ident.serial)}",
            f"  memory total    {_mem(ident.memory_total_bytes)}",
            f"  power limit     {_v(ident.power_limit_w, '{:.0f}', ' W')}",
            f"  MIG mode        {_flag(ident.mig_mode)}",
            f"  ECC mode        {_flag(h.ecc_mode)}",
            f"  ECC errors      volatile corrected {_v(h.ecc_volatile_corrected)}, "
            f"uncorrected {_v(h.ecc_volatile_uncorrected)}; aggregate uncorrected "
            f"{_v(h.ecc_aggregate_uncorrected)}",
            f"  retired pages   single-bit {_v(h.retired_pages_sbe)}, double-bit "
            f"{_v(h.retired_pages_dbe)}, pending {_flag(h.retired_pages_pending, 'yes', 'no')}",
            f"  remapped rows   correctable {_v(h.remapped_rows_correctable)}, uncorrectable "
            f"{_v(h.remapped_rows_uncorrectable)}, pending "
            f"{_flag(h.remapped_rows_pending, 'yes', 'no')}, failure "
            f"{_flag(h.remapped_rows_failure, 'yes', 'no')}",
        ]
        sample = by_index.get(ident.index)
        if sample is not None:
            lines += gpu_lines(sample)
    if len(identities) > 1:
        lines += [
            "",
            "note: separate GPUs do not pool memory; a model must fit one card unless the server "
            "shards it (tensor parallelism)",
        ]
    return "\n".join(lines)


def gpu_json(
    identities: Sequence[GpuIdentity],
    samples: Sequence[GpuSample],
    health: Sequence[GpuHealth],
    source: str,
    nvml_status: str,
) -> JsonObject:
    """The `gputui gpu --json` document."""
    by_index = {s.index: s for s in samples}
    gpus: list[JsonValue] = []
    for ident, h in zip(identities, health, strict=True):
        sample = by_index.get(ident.index)
        reasons: list[JsonValue] | None = list(sample.throttle_reasons or ()) if sample else None
        gpus.append(
            {
                **ident.to_dict(),
                "health": h.to_dict(),
                "sample": sample.to_dict() if sample else None,
                "throttle_reasons": reasons,
            }
        )
    first = identities[0] if identities else None
    return {
        "source": source,
        "nvml": nvml_status,
        "driver_version": first.driver_version if first else None,
        "cuda_version": first.cuda_version if first else None,
        "gpus": gpus,
    }


def metrics_json(
    url: str,
    backend: str | None,
    server: ServerSample | None,
    gpus: Sequence[GpuSample],
    gpu_source: str | None,
    headroom: Headroom | None,
) -> dict[str, Any]:
    """The `gputui metrics --json` document."""
    base = server.to_dict() if server is not None else {}
    base.pop("t_ns", None)
    base.pop("backend", None)
    doc: dict[str, Any] = {
        "url": url,
        "backend": backend,
        "requests_running": base.pop("requests_running", None),
        "requests_waiting": base.pop("requests_waiting", None),
        "kv_cache_usage": base.pop("kv_cache_usage", None),
        "preemptions_total": base.pop("preemptions_total", None),
        **base,
        "gpu_source": gpu_source,
        "gpus": [{k: v for k, v in g.to_dict().items() if k != "t_ns"} for g in gpus],
    }
    if headroom is not None:
        doc["headroom"] = {
            "method": headroom.method,
            "detail": headroom.detail,
            "kv_free_tokens": headroom.kv_free_tokens,
            "kv_capacity_tokens": headroom.kv_capacity_tokens,
            "vram_free_bytes": headroom.vram_free_bytes,
        }
    return doc


def metrics_report(doc: dict[str, Any]) -> str:
    """Plain text of a `metrics_json` document."""
    usage = doc["kv_cache_usage"]
    lines = [
        f"{doc['url']}: backend {doc['backend'] or 'not recognised'}",
        f"  requests        running {_v(doc['requests_running'])}, waiting "
        f"{_v(doc['requests_waiting'])}",
        f"  KV cache usage  {NA if usage is None else f'{100 * usage:.1f} %'}",
        f"  KV blocks       {_v(doc.get('kv_blocks_total'))} x {_v(doc.get('kv_block_size'))} "
        f"tokens (capacity {_v(doc.get('kv_capacity_tokens'))} tokens)",
        f"  preemptions     {_v(doc['preemptions_total'])}",
        f"  tokens          prompt {_v(doc.get('prompt_tokens_total'))}, generated "
        f"{_v(doc.get('generation_tokens_total'))}",
    ]
    if doc.get("spec_accept_rate") is not None:
        length = doc.get("spec_accept_length")
        lines.append(
            f"  spec decoding   acceptance {100 * doc['spec_accept_rate']:.1f} %"
            + (f", {length:.2f} tokens per step" if length is not None else "")
        )
    head = doc.get("headroom")
    if head is not None:
        lines.append(f"  headroom        {head['method']}: {head['detail']}")
    if not doc["gpus"]:
        lines.append("  GPUs            none reported (no DCGM series, no local NVIDIA GPU)")
    for g in doc["gpus"]:
        sample = GpuSample(t_ns=0, **{k: _tuple(v) for k, v in g.items()})
        lines += ["", f"GPU {g['index']}: {g['name']} ({doc['gpu_source']})", *gpu_lines(sample)]
    return "\n".join(lines)


def _tuple(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value
