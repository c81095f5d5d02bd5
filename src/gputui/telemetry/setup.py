"""Choose and open the telemetry sources for a run, each present or absent with a reason.

Contract: `open_gpu_port(...)` returns the GPU port to use, or None with the reason: an explicit
`--dcgm-url` wins (the operator cannot touch NVML there); otherwise NVML, then nvidia-smi when the
NVML library cannot load, then absent ("NVML: ...; nvidia-smi: ..."). `build_sampler(config)` also
opens the server's /metrics (default: the target's `/metrics`) and the host, and returns a
`TelemetrySampler` that has not started. Nothing here raises for a missing GPU or library: absence
is a state the UI shows, never a crash.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal

from gputui.errors import TelemetryUnavailable
from gputui.telemetry.sampler import (
    DEFAULT_GPU_INTERVAL_S,
    DEFAULT_HOST_INTERVAL_S,
    DEFAULT_SERVER_INTERVAL_S,
    GpuPort,
    Kind,
    TelemetrySampler,
)

if TYPE_CHECKING:
    from gputui.telemetry.nvml import NvmlModule

GpuChoice = Literal["auto", "nvml", "smi", "none"]

SLOW_GPU_INTERVAL_S: Final = 1.0
"""Floor for nvidia-smi (a process per sample, 10-20 ms) and dcgm-exporter (which itself
collects every 30 s by default): polling them at 4 Hz costs CPU and shows nothing new."""


@dataclass(frozen=True, slots=True)
class TelemetryConfig:
    """Which sources to open and how often to poll them."""

    gpu: GpuChoice = "auto"
    dcgm_url: str | None = None
    metrics_url: str | None = None
    """The server's Prometheus endpoint; None = no server telemetry."""
    host: bool = True
    gpu_interval_s: float = DEFAULT_GPU_INTERVAL_S
    server_interval_s: float = DEFAULT_SERVER_INTERVAL_S
    host_interval_s: float = DEFAULT_HOST_INTERVAL_S
    nvml_module: NvmlModule | None = None
    """A fake `pynvml` for tests; None imports the real one."""


def default_metrics_url(root_url: str) -> str:
    """The target's `/metrics`, from its root URL (the API URL without `/v1`)."""
    return root_url.rstrip("/") + "/metrics"


def open_gpu_port(
    choice: GpuChoice = "auto",
    dcgm_url: str | None = None,
    nvml_module: NvmlModule | None = None,
) -> tuple[GpuPort | None, str]:
    """The GPU port (or None) and the NVML status: "ok", "not used: ..." or "unavailable: ..."."""
    if dcgm_url is not None:
        from gputui.telemetry.dcgm import DcgmSource

        return DcgmSource(dcgm_url), "not used: GPUs read from dcgm-exporter"
    if choice == "none":
        return None, "not used: GPU telemetry disabled"
    reasons: list[str] = []
    if choice in ("auto", "nvml"):
        from gputui.telemetry.nvml import NvmlSource

        try:
            return NvmlSource(nvml_module), "ok"
        except TelemetryUnavailable as exc:
            reasons.append(f"NVML: {exc}")
    if choice in ("auto", "smi"):
        from gputui.telemetry.smi import SmiSource

        try:
            return SmiSource(), f"unavailable: {reasons[0] if reasons else 'not tried'}"
        except TelemetryUnavailable as exc:
            reasons.append(f"nvidia-smi: {exc}")
    return None, "unavailable: " + "; ".join(reasons)


def build_sampler(config: TelemetryConfig) -> TelemetrySampler:
    """A sampler over the configured sources (not started)."""
    absent: dict[Kind, str] = {}
    gpu, nvml_status = open_gpu_port(config.gpu, config.dcgm_url, config.nvml_module)
    if gpu is None:
        absent["gpu"] = nvml_status.split(": ", 1)[-1]
    server = None
    if config.metrics_url is not None:
        from gputui.telemetry.server_metrics import ServerMetricsSource

        server = ServerMetricsSource(config.metrics_url)
    else:
        absent["server"] = "no metrics URL"
    host = None
    if config.host:
        from gputui.telemetry.host import HostSource

        try:
            host = HostSource()
        except TelemetryUnavailable as exc:
            absent["host"] = str(exc)
    else:
        absent["host"] = "disabled"
    gpu_interval_s = config.gpu_interval_s
    if gpu is not None and gpu.name != "nvml":
        gpu_interval_s = max(gpu_interval_s, SLOW_GPU_INTERVAL_S)
    return TelemetrySampler(
        gpu=gpu,
        server=server,
        host=host,
        absent=absent,
        gpu_interval_s=gpu_interval_s,
        server_interval_s=config.server_interval_s,
        host_interval_s=config.host_interval_s,
        nvml_status=nvml_status,
    )


@dataclass(frozen=True, slots=True)
class TelemetryFlags:
    """The telemetry flags of `gputui run` and the TUI, as given."""

    metrics_url: str | None = None
    no_server_metrics: bool = False
    dcgm_url: str | None = None
    gpu_telemetry: GpuChoice = "auto"
    gpu_hz: float = 4.0
    no_host_telemetry: bool = False


def telemetry_config(flags: TelemetryFlags, root_url: str) -> TelemetryConfig:
    """The TelemetryConfig for the telemetry flags and the target's root URL.

    Raises UsageError for an unusable --metrics-url or --dcgm-url.
    """
    from gputui.telemetry.prom import metrics_url

    server_url = None
    if not flags.no_server_metrics:
        given = flags.metrics_url
        server_url = (
            default_metrics_url(root_url) if given is None else metrics_url(given, "--metrics-url")
        )
    dcgm = None if flags.dcgm_url is None else metrics_url(flags.dcgm_url, "--dcgm-url")
    return TelemetryConfig(
        gpu=flags.gpu_telemetry,
        dcgm_url=dcgm,
        metrics_url=server_url,
        host=not flags.no_host_telemetry,
        gpu_interval_s=1.0 / flags.gpu_hz,
    )
