"""`gputui kv`, `gputui gpu` and `gputui metrics`: run them from their typed options.

Contract: `gputui.cli.tool_flags` declares a subcommand's flags, read into `KvOptions`,
`GpuOptions` or `MetricsOptions`; `run_<cmd>(options) -> int`
prints a plain-text report (or `--json`) to stdout and returns the exit status. Errors are one line
on stderr, `gputui: <reason>`, with the error's exit code: 2 for usage errors (an unknown model or
GPU name, listing the valid ones; a bad URL), 1 when a source is unavailable (no GPU, endpoint
unreachable or 404). Heavy modules (httpx, prometheus-client, pynvml) load inside the run
functions. The `nvml_module` keyword lets tests
inject the fake NVML.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gputui.errors import GputuiError, TelemetryUnavailable, UsageError

if TYPE_CHECKING:
    from gputui.catalog.specs import KvDtype, ModelSpec, Precision
    from gputui.telemetry.nvml import NvmlModule
    from gputui.telemetry.samples import GpuSample
    from gputui.telemetry.server_metrics import MetricsView
    from gputui.telemetry.setup import GpuChoice


def _print_json(doc: object) -> None:
    sys.stdout.write(json.dumps(doc, indent=2) + "\n")


def _fail(exc: GputuiError) -> int:
    sys.stderr.write(f"gputui: {exc}\n")
    return exc.exit_code


@dataclass(frozen=True, slots=True)
class KvOptions:
    """`gputui kv`'s flags."""

    model: str | None = None
    model_config: Path | None = None
    gpu: str = "all"
    context: int = 8192
    precision: Precision = "bf16"
    kv_dtype: KvDtype = "bf16"
    gpu_memory_utilization: float = 0.9
    max_num_seqs: int | None = None
    max_batched_tokens: int | None = None
    json: bool = False


@dataclass(frozen=True, slots=True)
class GpuOptions:
    """`gputui gpu`'s flags."""

    source: GpuChoice = "auto"
    json: bool = False


@dataclass(frozen=True, slots=True)
class MetricsOptions:
    """`gputui metrics`'s flags."""

    url: str
    dcgm_url: str | None = None
    local_gpu: bool = True
    timeout: float = 2.0
    model: str | None = None
    model_config: Path | None = None
    context: int | None = None
    json: bool = False


def _model(options: KvOptions | MetricsOptions) -> ModelSpec | None:
    from gputui.catalog.specs import CatalogError, get_model
    from gputui.telemetry.model_config import load_model_config

    if options.model_config is not None:
        return load_model_config(options.model_config)
    if options.model is None:
        return None
    try:
        return get_model(options.model)
    except CatalogError as exc:
        raise UsageError(str(exc)) from None


# --- gputui kv ----------------------------------------------------------------------------------


def run_kv(options: KvOptions, *, nvml_module: NvmlModule | None = None) -> int:
    """Print the KV/VRAM plan of a model on one GPU or a table over several."""
    from gputui.catalog.specs import GPUS
    from gputui.telemetry.kvplan import KvRow, format_row, format_table, kv_row

    try:
        model = _model(options)
        assert model is not None  # the CLI requires --model or --model-config here
        devices = _kv_devices(options.gpu, nvml_module)
    except GputuiError as exc:
        return _fail(exc)
    rows: list[KvRow] = [
        kv_row(
            gpu=label,
            gpu_name=name,
            memory_total_bytes=memory,
            memory_source=source,
            model=model,
            precision=options.precision,
            kv_dtype=options.kv_dtype,
            context_tokens=options.context,
            gpu_memory_utilization=options.gpu_memory_utilization,
            max_num_seqs=options.max_num_seqs,
            max_batched_tokens=options.max_batched_tokens,
        )
        for label, name, memory, source in devices
    ]
    single = options.gpu in GPUS
    if options.json:
        _print_json(rows[0].to_dict() if single else [r.to_dict() for r in rows])
    elif single or len(rows) == 1:
        sys.stdout.write("\n\n".join(format_row(r) for r in rows) + "\n")
    else:
        sys.stdout.write(format_table(rows) + "\n")
    return 0


def _kv_devices(gpu: str, nvml_module: NvmlModule | None) -> list[tuple[str, str, int, str]]:
    """(label, reported name, memory bytes, memory source) of each device to plan for."""
    from gputui.catalog.specs import GPUS, CatalogError, get_gpu

    if gpu == "all":
        return [(g.name, g.nvml_name, g.memory_bytes, "catalog") for g in GPUS.values()]
    if gpu == "local":
        from gputui.telemetry.setup import open_gpu_port

        port, status = open_gpu_port("auto", None, nvml_module)
        if port is None:
            raise TelemetryUnavailable(f"no local NVIDIA GPU: {status.split(': ', 1)[-1]}")
        try:
            found = [
                (f"local{i.index}", i.name, i.memory_total_bytes, port.name)
                for i in port.identities()
                if i.memory_total_bytes
            ]
        finally:
            port.close()
        if not found:
            raise TelemetryUnavailable("the local GPUs report no memory size")
        return found
    try:
        spec = get_gpu(gpu)
    except CatalogError as exc:
        raise UsageError(f"{exc}, all, local") from None
    return [(spec.name, spec.nvml_name, spec.memory_bytes, "catalog")]


# --- gputui gpu ---------------------------------------------------------------------------------


def run_gpu(options: GpuOptions, *, nvml_module: NvmlModule | None = None) -> int:
    """Print the acceptance view of the local GPUs, or say plainly that there is none."""
    from gputui.telemetry.setup import open_gpu_port
    from gputui.telemetry.views import gpu_json, gpu_report

    port, status = open_gpu_port(options.source, None, nvml_module)
    if port is None:
        reason = status.split(": ", 1)[-1]
        if options.json:
            _print_json({"source": None, "nvml": status, "gpus": []})
        return _fail(TelemetryUnavailable(f"no NVIDIA GPU found here ({reason})"))
    try:
        identities = port.identities()
        samples = port.sample()
        health = [port.health(i.index) for i in identities]
    except TelemetryUnavailable as exc:
        return _fail(exc)
    finally:
        port.close()
    if options.json:
        _print_json(gpu_json(identities, samples, health, port.name, status))
    else:
        sys.stdout.write(gpu_report(identities, samples, health, port.name) + "\n")
    return 0


# --- gputui metrics -----------------------------------------------------------------------------


def run_metrics(options: MetricsOptions, *, nvml_module: NvmlModule | None = None) -> int:
    """Scrape once and print the normalized server and GPU view."""
    from gputui.telemetry import prom
    from gputui.telemetry.headroom import live_headroom
    from gputui.telemetry.views import metrics_json, metrics_report

    try:
        url = prom.metrics_url(options.url)
        dcgm_url = (
            None if options.dcgm_url is None else prom.metrics_url(options.dcgm_url, "--dcgm-url")
        )
        model = _model(options)
        view = _scrape(url, options.timeout)
        gpus, gpu_source = view.gpus, "dcgm (same endpoint)" if view.gpus else None
        if dcgm_url is not None:
            from gputui.telemetry.dcgm import DcgmSource

            dcgm = DcgmSource(dcgm_url, timeout_s=options.timeout)
            try:
                gpus, gpu_source = dcgm.sample(), "dcgm"
            finally:
                dcgm.close()
        elif not gpus and options.local_gpu:
            gpus, gpu_source = _local_gpus(nvml_module)
    except GputuiError as exc:
        return _fail(exc)
    headroom = None
    if view.server is not None:
        headroom = live_headroom(view.server, gpus, model=model, context_tokens=options.context)
    doc = metrics_json(url, view.backend, view.server, gpus, gpu_source, headroom)
    if options.json:
        _print_json(doc)
    else:
        sys.stdout.write(metrics_report(doc) + "\n")
    if view.server is None and not gpus:
        sys.stderr.write(f"gputui: {url} has no known inference-server or DCGM metrics\n")
    return 0


def _scrape(url: str, timeout_s: float) -> MetricsView:
    from gputui.telemetry.server_metrics import ServerMetricsSource

    source = ServerMetricsSource(url, timeout_s=timeout_s)
    try:
        return source.scrape()
    finally:
        source.close()


def _local_gpus(nvml_module: NvmlModule | None) -> tuple[tuple[GpuSample, ...], str | None]:
    from gputui.telemetry.setup import open_gpu_port

    port, _ = open_gpu_port("auto", None, nvml_module)
    if port is None:
        return (), None
    try:
        return port.sample(), port.name
    except TelemetryUnavailable:
        return (), None
    finally:
        port.close()
