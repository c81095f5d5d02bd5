"""`gputui kv`, `gputui gpu` and `gputui metrics`: declare their flags and run them.

Contract: `add_<cmd>_arguments(parser)` declares a subcommand's flags; `run_<cmd>(args) -> int`
prints a plain-text report (or `--json`) to stdout and returns the exit status. Errors are one line
on stderr, `gputui: <reason>`, with the error's exit code: 2 for usage errors (an unknown model or
GPU name, listing the valid ones; a bad URL), 1 when a source is unavailable (no GPU, endpoint
unreachable or 404). Heavy modules (httpx, prometheus-client, pynvml) load inside the run
functions, so declaring the flags keeps `gputui --help` fast. The `nvml_module` keyword lets tests
inject the fake NVML.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from gputui.argtypes import open_fraction, positive_int, seconds
from gputui.errors import GputuiError, TelemetryUnavailable, UsageError

if TYPE_CHECKING:
    from gputui.catalog.specs import ModelSpec
    from gputui.telemetry.nvml import NvmlModule
    from gputui.telemetry.samples import GpuSample
    from gputui.telemetry.server_metrics import MetricsView


def _print_json(doc: object) -> None:
    sys.stdout.write(json.dumps(doc, indent=2) + "\n")


def _fail(exc: GputuiError) -> int:
    sys.stderr.write(f"gputui: {exc}\n")
    return exc.exit_code


def _add_model_arguments(parser: argparse.ArgumentParser, *, required: bool) -> None:
    group = parser.add_mutually_exclusive_group(required=required)
    group.add_argument("--model", metavar="NAME", help="a model from the built-in catalog")
    group.add_argument(
        "--model-config",
        type=Path,
        metavar="PATH",
        help="a local Hugging Face config.json (or its directory)",
    )


def _model(args: argparse.Namespace) -> ModelSpec | None:
    from gputui.catalog.specs import CatalogError, get_model
    from gputui.telemetry.model_config import load_model_config

    if args.model_config is not None:
        return load_model_config(args.model_config)
    if args.model is None:
        return None
    try:
        return get_model(args.model)
    except CatalogError as exc:
        raise UsageError(str(exc)) from None


# --- gputui kv ----------------------------------------------------------------------------------


def add_kv_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare `gputui kv`'s flags."""
    from gputui.catalog.specs import KV_DTYPES, PRECISIONS

    _add_model_arguments(parser, required=True)
    parser.add_argument(
        "--gpu",
        default="all",
        metavar="NAME",
        help="a catalog GPU, 'all' (a table over the catalog) or 'local' (this machine's GPUs, "
        "memory as NVML reports it); default all",
    )
    parser.add_argument(
        "--context",
        type=positive_int,
        default=8192,
        metavar="TOKENS",
        help="tokens per request, input + output (default 8192)",
    )
    parser.add_argument("--precision", choices=PRECISIONS, default="bf16", help="weights")
    parser.add_argument("--kv-dtype", choices=KV_DTYPES, default="bf16", help="KV-cache elements")
    parser.add_argument(
        "--gpu-memory-utilization",
        type=open_fraction,
        default=0.9,
        metavar="F",
        help="vLLM's budget",
    )
    parser.add_argument("--max-num-seqs", type=positive_int, default=None, metavar="N")
    parser.add_argument("--max-batched-tokens", type=positive_int, default=None, metavar="N")
    parser.add_argument("--json", action="store_true", help="JSON (a list with all/local)")


def run_kv(args: argparse.Namespace, *, nvml_module: NvmlModule | None = None) -> int:
    """Print the KV/VRAM plan of a model on one GPU or a table over several."""
    from gputui.catalog.specs import GPUS
    from gputui.telemetry.kvplan import KvRow, format_row, format_table, kv_row

    try:
        model = _model(args)
        assert model is not None  # argparse requires --model or --model-config here
        devices = _kv_devices(args.gpu, nvml_module)
    except GputuiError as exc:
        return _fail(exc)
    rows: list[KvRow] = [
        kv_row(
            gpu=label,
            gpu_name=name,
            memory_total_bytes=memory,
            memory_source=source,
            model=model,
            precision=args.precision,
            kv_dtype=args.kv_dtype,
            context_tokens=args.context,
            gpu_memory_utilization=args.gpu_memory_utilization,
            max_num_seqs=args.max_num_seqs,
            max_batched_tokens=args.max_batched_tokens,
        )
        for label, name, memory, source in devices
    ]
    single = args.gpu in GPUS
    if args.json:
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


def add_gpu_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare `gputui gpu`'s flags."""
    parser.add_argument(
        "--source",
        choices=("auto", "nvml", "smi"),
        default="auto",
        help="NVML, nvidia-smi, or NVML falling back to nvidia-smi (default)",
    )
    parser.add_argument("--json", action="store_true", help="JSON output")


def run_gpu(args: argparse.Namespace, *, nvml_module: NvmlModule | None = None) -> int:
    """Print the acceptance view of the local GPUs, or say plainly that there is none."""
    from gputui.telemetry.setup import open_gpu_port
    from gputui.telemetry.views import gpu_json, gpu_report

    port, status = open_gpu_port(args.source, None, nvml_module)
    if port is None:
        reason = status.split(": ", 1)[-1]
        if args.json:
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
    if args.json:
        _print_json(gpu_json(identities, samples, health, port.name, status))
    else:
        sys.stdout.write(gpu_report(identities, samples, health, port.name) + "\n")
    return 0


# --- gputui metrics -----------------------------------------------------------------------------


def add_metrics_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare `gputui metrics`'s flags."""
    parser.add_argument(
        "--url", required=True, help="the Prometheus endpoint (a URL with no path gets /metrics)"
    )
    parser.add_argument("--dcgm-url", default=None, help="a dcgm-exporter endpoint for the GPUs")
    parser.add_argument(
        "--local-gpu",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="read this machine's GPUs when the scrape has no DCGM series (default on)",
    )
    parser.add_argument("--timeout", type=seconds, default=2.0, metavar="S")
    _add_model_arguments(parser, required=False)
    parser.add_argument(
        "--context",
        type=positive_int,
        default=None,
        metavar="TOKENS",
        help="request length for the headroom estimate",
    )
    parser.add_argument("--json", action="store_true", help="JSON output")


def run_metrics(args: argparse.Namespace, *, nvml_module: NvmlModule | None = None) -> int:
    """Scrape once and print the normalized server and GPU view."""
    from gputui.telemetry import prom
    from gputui.telemetry.headroom import live_headroom
    from gputui.telemetry.views import metrics_json, metrics_report

    try:
        url = prom.metrics_url(args.url)
        dcgm_url = None if args.dcgm_url is None else prom.metrics_url(args.dcgm_url, "--dcgm-url")
        model = _model(args)
        view = _scrape(url, args.timeout)
        gpus, gpu_source = view.gpus, "dcgm (same endpoint)" if view.gpus else None
        if dcgm_url is not None:
            from gputui.telemetry.dcgm import DcgmSource

            dcgm = DcgmSource(dcgm_url, timeout_s=args.timeout)
            try:
                gpus, gpu_source = dcgm.sample(), "dcgm"
            finally:
                dcgm.close()
        elif not gpus and args.local_gpu:
            gpus, gpu_source = _local_gpus(nvml_module)
    except GputuiError as exc:
        return _fail(exc)
    headroom = None
    if view.server is not None:
        headroom = live_headroom(view.server, gpus, model=model, context_tokens=args.context)
    doc = metrics_json(url, view.backend, view.server, gpus, gpu_source, headroom)
    if args.json:
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
