"""`gputui vram-check` and `gputui burn`: find the device, run, print.

Contract: `gputui.cli.node_flags` declares the flags, read into `VramCheckOptions` and
`BurnOptions`; `run_<cmd>_command(options) -> int` prints the report (or `--json`) to stdout and
returns the exit status: 0 when the check ran (a flagged bandwidth or a power-capped clock is
reported, not failed), 1 when memory or compute errors were found or the device failed mid-check,
2 when there is nothing to run on: no PyTorch/CuPy (`pip install 'gputui[gpu]'`), no CUDA GPU
visible, no such `--gpu`. Errors are one line on stderr, never a traceback.

`--gpu` is the index nvidia-smi shows (NVML's, PCI order) and is matched to the CUDA device by UUID
(or PCI bus id), since CUDA numbers devices fastest-first unless CUDA_DEVICE_ORDER=PCI_BUS_ID.
Without NVML it is the CUDA index. `check_vram(...)` and `burn_gpu(...)` are the same runs without
printing, for the TUI's node screen (which stores `acceptance.acceptance_section(...)`).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gputui.errors import GputuiError

if TYPE_CHECKING:
    from gputui.node.backends import DeviceBackend, DeviceInfo, Runtime
    from gputui.node.burn import BurnResult
    from gputui.node.patterns import PatternName
    from gputui.node.vram_check import VramCheckResult
    from gputui.telemetry.nvml import NvmlModule
    from gputui.telemetry.sampler import GpuPort
    from gputui.telemetry.samples import GpuIdentity

BACKENDS = ("auto", "torch", "cupy", "numpy")


@dataclass(frozen=True, slots=True)
class VramCheckOptions:
    """`gputui vram-check`'s flags."""

    gpu: int = 0
    backend: str = "auto"
    json: bool = False
    fraction: float = 0.95
    patterns: tuple[PatternName, ...] = ("address", "walking1", "walking0", "random")
    seed: int = 0
    chunk_mib: int = 1024
    max_report: int = 32
    expect_gb: float | None = None


@dataclass(frozen=True, slots=True)
class BurnOptions:
    """`gputui burn`'s flags."""

    gpu: int = 0
    backend: str = "auto"
    json: bool = False
    seconds: float = 600.0
    interval: float = 0.5
    size: int = 8192


@dataclass
class NodeTarget:
    """The device to check, opened, with what NVML says about the machine."""

    backend: DeviceBackend
    gpu: int
    name: str
    memory_total_bytes: int
    devices: tuple[DeviceInfo, ...]
    """Every GPU (NVML's list when available)."""
    port: GpuPort | None
    """The telemetry GPU port (NVML or nvidia-smi), or None."""
    telemetry: str

    def close(self) -> None:
        """Release the telemetry port."""
        if self.port is not None:
            self.port.close()
            self.port = None


def open_target(
    choice: str,
    command: str,
    gpu: int,
    *,
    nvml_module: NvmlModule | None = None,
    runtime: Runtime | None = None,
) -> NodeTarget:
    """Find the array library and the device; `NodeUnavailable` (exit 2) when there is none."""
    from gputui.node.backends import DeviceFailure, DeviceInfo, NodeUnavailable
    from gputui.node.runtimes import open_runtime

    rt = open_runtime(choice, command) if runtime is None else runtime
    cuda_devices = rt.devices()
    port: GpuPort | None = None
    if rt.name == "numpy" and nvml_module is None:
        telemetry = "not used: NumPy stand-in"
    else:
        from gputui.telemetry.setup import open_gpu_port

        port, status = open_gpu_port("auto", None, nvml_module)
        telemetry = "unavailable: " + status.split(": ", 1)[-1] if port is None else port.name
    identities = () if port is None or rt.name == "numpy" else port.identities()
    if not identities:
        if gpu >= len(cuda_devices):
            _close(port)
            raise NodeUnavailable(f"no GPU {gpu}: {rt.name} sees {len(cuda_devices)} device(s)")
        cuda_index, name, total, devices = gpu, None, None, tuple(cuda_devices)
    else:
        ident = next((i for i in identities if i.index == gpu), None)
        if ident is None:
            _close(port)
            raise NodeUnavailable(f"no GPU {gpu}: NVML lists {len(identities)}")
        matched = _cuda_index(ident, cuda_devices)
        if matched is None:
            _close(port)
            visible = os.environ.get("CUDA_VISIBLE_DEVICES")
            raise NodeUnavailable(
                f"GPU {gpu} ({ident.name}, {ident.uuid}) is not visible to CUDA"
                + ("" if visible is None else f" (CUDA_VISIBLE_DEVICES={visible!r})")
            )
        cuda_index, name, total = matched, ident.name, ident.memory_total_bytes
        devices = tuple(
            DeviceInfo(i.index, i.name, i.memory_total_bytes or 0, i.uuid, i.pci_bus_id)
            for i in identities
        )
    try:
        backend = rt.open(cuda_index)
    except RuntimeError as exc:
        _close(port)
        raise DeviceFailure(
            f"GPU {gpu}: CUDA device {cuda_index} cannot be opened: {exc}"
        ) from None
    return NodeTarget(
        backend=backend,
        gpu=gpu,
        name=name or backend.device.name,
        memory_total_bytes=total or backend.device.memory_total_bytes,
        devices=devices,
        port=port,
        telemetry=telemetry,
    )


def _cuda_index(ident: GpuIdentity, cuda_devices: tuple[DeviceInfo, ...]) -> int | None:
    """The CUDA device with the NVML device's UUID or bus id; by index when neither is known."""
    for d in cuda_devices:
        if d.uuid and ident.uuid and d.uuid.lower() == ident.uuid.lower():
            return int(d.index)
        if d.pci_bus_id and ident.pci_bus_id and d.pci_bus_id.lower() == ident.pci_bus_id.lower():
            return int(d.index)
    if any(d.uuid or d.pci_bus_id for d in cuda_devices):
        return None
    return int(ident.index) if ident.index < len(cuda_devices) else None


def _close(port: GpuPort | None) -> None:
    if port is not None:
        port.close()


def check_vram(
    options: VramCheckOptions,
    *,
    nvml_module: NvmlModule | None = None,
    runtime: Runtime | None = None,
) -> VramCheckResult:
    """Run the vram check as asked; returns a `VramCheckResult`."""
    from gputui.node.vram_check import run_vram_check

    target = open_target(
        options.backend, "vram-check", options.gpu, nvml_module=nvml_module, runtime=runtime
    )
    target.close()  # identity is all vram-check needs from NVML
    return run_vram_check(
        target.backend,
        gpu=target.gpu,
        devices=target.devices,
        fraction=options.fraction,
        patterns=options.patterns,
        seed=options.seed,
        chunk_bytes=options.chunk_mib << 20,
        max_report=options.max_report,
        expect_gb=options.expect_gb,
        reported_name=target.name,
        reported_total_bytes=target.memory_total_bytes,
        progress=_progress_line("vram-check") if _show_progress(options) else None,
    )


def burn_gpu(
    options: BurnOptions,
    *,
    nvml_module: NvmlModule | None = None,
    runtime: Runtime | None = None,
) -> BurnResult:
    """Run the burn as asked; returns a `BurnResult`."""
    from gputui.node.burn import run_burn
    from gputui.node.vram_check import match_catalog

    target = open_target(
        options.backend, "burn", options.gpu, nvml_module=nvml_module, runtime=runtime
    )
    spec = match_catalog(target.name, target.memory_total_bytes)
    try:
        return run_burn(
            target.backend,
            gpu=target.gpu,
            name=target.name,
            port=target.port,
            port_index=target.gpu,
            telemetry=target.telemetry,
            seconds=options.seconds,
            interval_s=options.interval,
            size=options.size,
            catalog_boost_mhz=None if spec is None else spec.boost_clock_mhz,
            catalog_name=None if spec is None else spec.name,
            catalog_bf16_tflops=None if spec is None else spec.bf16_tflops,
        )
    finally:
        target.close()


def run_vram_check_command(
    options: VramCheckOptions,
    *,
    nvml_module: NvmlModule | None = None,
    runtime: Runtime | None = None,
) -> int:
    """`gputui vram-check`: print the report; 1 when memory errors were found."""
    from gputui.node.vram_check import vram_json, vram_report

    try:
        result = check_vram(options, nvml_module=nvml_module, runtime=runtime)
    except GputuiError as exc:
        return _fail(exc)
    _emit(options, vram_json(result), vram_report(result))
    return 1 if result.mismatch_count else 0


def run_burn_command(
    options: BurnOptions,
    *,
    nvml_module: NvmlModule | None = None,
    runtime: Runtime | None = None,
) -> int:
    """`gputui burn`: print the trace summary; 1 when the GEMM results came out wrong."""
    from gputui.node.burn import burn_json, burn_report

    try:
        result = burn_gpu(options, nvml_module=nvml_module, runtime=runtime)
    except GputuiError as exc:
        return _fail(exc)
    _emit(options, burn_json(result), burn_report(result))
    return 1 if result.compute_mismatches else 0


def _emit(options: VramCheckOptions | BurnOptions, doc: Mapping[str, object], text: str) -> None:
    if options.json:
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        sys.stdout.write(text + "\n")


def _fail(exc: GputuiError) -> int:
    sys.stderr.write(f"gputui: {exc}\n")
    return exc.exit_code


def _show_progress(options: VramCheckOptions) -> bool:
    return not options.json and sys.stderr.isatty()


def _progress_line(command: str) -> Callable[[float, str], None]:
    last = [-1]

    def show(done: float, stage: str) -> None:
        pct = int(done * 100)
        if pct != last[0]:
            last[0] = pct
            end = "\n" if pct >= 100 else ""
            sys.stderr.write(f"\r{command}: {pct:3d}% {stage:<20}{end}")
            sys.stderr.flush()

    return show
