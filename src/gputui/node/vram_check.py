"""`gputui vram-check`: does the whole memory hold data, how fast is it, and is it one card?

Contract: `run_vram_check(backend, ...)` allocates `fraction` of the device's free memory (less the
backend's workspace) in chunks, writes and verifies each pattern on the device (`patterns.py`),
measures a device-to-device copy's bandwidth in the same memory, frees everything, and returns a
`VramCheckResult`. The bandwidth is compared with the catalog figure of the card, matched by the
reported name and the nearest memory size (an "NVIDIA GeForce RTX 4090" with 48 GB is the modified
`rtx4090-48gb`), and flagged below `BANDWIDTH_FLAG_RATIO`. `device_note` answers domain.md §6's
"is the 48GB one card or two": devices never pool memory, so a capacity that needs two of them is
said plainly. A CUDA error during the check becomes `DeviceFailure` with how far it got, because
a card that fails near full occupancy is itself the finding. Results are plain data;
`vram_json` / `vram_report` render them.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from gputui.catalog.specs import GPUS, GpuSpec
from gputui.node.backends import (
    GIB,
    DeviceBackend,
    DeviceFailure,
    DeviceInfo,
    allocate_chunks,
    measure_copy,
)
from gputui.node.json_docs import VramJson
from gputui.node.patterns import (
    BANDWIDTH_FLAG_RATIO,
    AfterWrite,
    DeviceArray,
    Mismatch,
    PatternName,
    Progress,
    bandwidth_flag,
    bandwidth_ratio,
    copy_bandwidth_gbps,
    verify_region,
)

EXPECT_TOLERANCE = 0.95
"""A card "has" N GB when it reports at least 95 % of N x 10^9 bytes (product names round)."""


@dataclass(frozen=True, slots=True)
class VramCheckResult:
    """Everything `gputui vram-check` found on one device."""

    gpu: int
    name: str
    backend: str
    memory_total_bytes: int
    memory_free_bytes: int
    fraction: float
    requested_bytes: int
    checked_bytes: int
    chunk_count: int
    patterns: tuple[PatternName, ...]
    seed: int
    mismatches: tuple[Mismatch, ...]
    mismatch_count: int
    seconds: float
    pattern_seconds: dict[str, float]
    bandwidth_gbps: float | None
    bandwidth_copy_bytes: int | None
    catalog_name: str | None
    catalog_bandwidth_gbps: float | None
    devices: tuple[DeviceInfo, ...]
    device_note: str
    notes: tuple[str, ...] = field(default=())

    @property
    def bandwidth_ratio(self) -> float | None:
        """Measured / catalog bandwidth."""
        return bandwidth_ratio(self.bandwidth_gbps, self.catalog_bandwidth_gbps)

    @property
    def bandwidth_flag(self) -> bool | None:
        """Well below the catalog figure (None: no figure to compare with)."""
        return bandwidth_flag(self.bandwidth_ratio)

    @property
    def usable_bytes(self) -> int:
        """Memory that held every pattern: the checked bytes up to the first failing word."""
        first = min((m.offset_bytes for m in self.mismatches), default=None)
        return self.checked_bytes if first is None else first

    @property
    def verdict(self) -> str:
        """Fail on memory errors; warn on flagged bandwidth or too little checked; else pass."""
        if self.mismatch_count:
            return "fail"
        if (
            self.bandwidth_flag
            or self.checked_bytes == 0
            or self.checked_bytes < self.requested_bytes * 0.9
        ):
            return "warn"
        return "pass"


def match_catalog(name: str, memory_total_bytes: int | None) -> GpuSpec | None:
    """The catalog GPU reported under `name`, the nearest in memory size when several are."""
    wanted = " ".join(name.split()).lower()
    candidates = [g for g in GPUS.values() if g.nvml_name.lower() == wanted]
    if not candidates:
        return None
    if memory_total_bytes is None:
        return candidates[0]
    return min(candidates, key=lambda g: abs(g.memory_bytes - memory_total_bytes))


def device_note(devices: Sequence[DeviceInfo], selected: int, expect_gb: float | None) -> str:
    """One line: how many devices, and whether the expected capacity is one card or several."""
    gib = [f"{d.index}: {d.name} {d.memory_total_bytes / GIB:.1f} GiB" for d in devices]
    own = next((d for d in devices if d.index == selected), None)
    if len(devices) <= 1:
        head = "1 device" if devices else "no device list"
    else:
        head = (
            f"{len(devices)} GPUs, each its own address space (memory does not pool): "
            + ", ".join(gib)
            + f"; checking GPU {selected} only"
        )
    if expect_gb is None or own is None:
        if len(devices) == 1 and own is not None:
            return f"{head}: one card holds all {own.memory_total_bytes / GIB:.1f} GiB"
        return head
    want = expect_gb * 1e9 * EXPECT_TOLERANCE
    if own.memory_total_bytes >= want:
        return f"{head}; the {expect_gb:g} GB is on one card (GPU {selected})"
    sizes = sorted((d.memory_total_bytes for d in devices), reverse=True)
    total = 0
    for needed, size in enumerate(sizes, start=1):
        total += size
        if total >= want:
            parts = " + ".join(f"{s / GIB:.1f}" for s in sizes[:needed])
            return (
                f"{head}; the {expect_gb:g} GB spans {needed} devices ({parts} GiB): separate "
                f"cards, no pooled address space - one process sees at most "
                f"{max(sizes) / GIB:.1f} GiB on a device"
            )
    return f"{head}; only {total / GIB:.1f} GiB in all, less than the {expect_gb:g} GB expected"


def run_vram_check(
    backend: DeviceBackend,
    *,
    gpu: int,
    devices: Sequence[DeviceInfo],
    fraction: float = 0.95,
    patterns: Sequence[PatternName] = ("address", "walking1", "walking0", "random"),
    seed: int = 0,
    chunk_bytes: int = GIB,
    max_report: int = 32,
    expect_gb: float | None = None,
    reported_name: str | None = None,
    reported_total_bytes: int | None = None,
    after_write: AfterWrite | None = None,
    progress: Progress | None = None,
) -> VramCheckResult:
    """Allocate, write, verify, measure, free (see the module docstring)."""
    info = backend.device
    memory_total = reported_total_bytes or info.memory_total_bytes
    start_ns = time.perf_counter_ns()
    free = backend.free_bytes()
    requested = int(min(free * fraction, free - backend.workspace_bytes))
    notes: list[str] = []
    if requested <= 0:
        notes.append(
            f"nothing checked: {free / 2**20:.0f} MiB free, the pattern workspace needs "
            f"{backend.workspace_bytes / 2**20:.0f} MiB"
        )
    chunks: list[DeviceArray] = []
    checked = 0
    stage = "allocating"
    try:
        chunks, words = allocate_chunks(backend, max(requested, 0), chunk_bytes)
        checked = 4 * sum(words)
        if checked < requested:
            notes.append(
                f"allocated {checked / GIB:.2f} of {requested / GIB:.2f} GiB requested: the "
                "device refused more"
            )
        stage = "writing and verifying"
        region = verify_region(
            backend,
            chunks,
            words,
            patterns,
            seed=seed,
            block_words=backend.block_words,
            max_report=max_report,
            after_write=after_write,
            progress=progress,
        )
        stage = "measuring bandwidth"
        copy = measure_copy(backend, chunks, words, backend.max_copy_bytes)
    except (RuntimeError, MemoryError) as exc:  # CUDA errors; CuPy's OOM is a MemoryError
        held = "" if stage == "allocating" else f" with {checked / GIB:.2f} GiB allocated"
        raise DeviceFailure(
            f"GPU {gpu} failed while {stage}{held}: {str(exc).splitlines()[0]}"
        ) from None
    finally:
        chunks.clear()
        backend.release()
    seconds = (time.perf_counter_ns() - start_ns) / 1e9
    name = reported_name or info.name
    spec = match_catalog(name, memory_total)
    measured = None if copy is None else copy_bandwidth_gbps(copy[0], copy[1], copy[2])
    if copy is None:
        notes.append("too little memory checked to measure bandwidth")
    if spec is None:
        notes.append(f"no catalog bandwidth for {name!r}: ratio not computed")
    return VramCheckResult(
        gpu=gpu,
        name=name,
        backend=backend.name,
        memory_total_bytes=memory_total,
        memory_free_bytes=free,
        fraction=fraction,
        requested_bytes=max(requested, 0),
        checked_bytes=checked,
        chunk_count=len(words),
        patterns=tuple(patterns),
        seed=seed,
        mismatches=region.mismatches,
        mismatch_count=region.mismatch_count,
        seconds=seconds,
        pattern_seconds=region.seconds,
        bandwidth_gbps=measured,
        bandwidth_copy_bytes=None if copy is None else copy[0],
        catalog_name=None if spec is None else spec.name,
        catalog_bandwidth_gbps=None if spec is None else spec.mem_bandwidth_bytes_per_s / 1e9,
        devices=tuple(devices),
        device_note=device_note(devices, gpu, expect_gb),
        notes=tuple(notes),
    )


def vram_json(r: VramCheckResult) -> VramJson:
    """The `--json` document (keys fixed by the issue; extras after them)."""
    return {
        "gpu": r.gpu,
        "name": r.name,
        "memory_total_bytes": r.memory_total_bytes,
        "checked_bytes": r.checked_bytes,
        "usable_gib": round(r.usable_bytes / GIB, 3),
        "patterns": list(r.patterns),
        "mismatches": [m.to_dict() for m in r.mismatches],
        "mismatch_count": r.mismatch_count,
        "seconds": round(r.seconds, 3),
        "bandwidth_gbps": _round(r.bandwidth_gbps, 1),
        "catalog_bandwidth_gbps": _round(r.catalog_bandwidth_gbps, 1),
        "bandwidth_ratio": _round(r.bandwidth_ratio, 3),
        "bandwidth_flag": r.bandwidth_flag,
        "devices": [d.to_dict() for d in r.devices],
        "device_note": r.device_note,
        "verdict": r.verdict,
        "backend": r.backend,
        "memory_free_bytes": r.memory_free_bytes,
        "requested_bytes": r.requested_bytes,
        "fraction": r.fraction,
        "chunks": r.chunk_count,
        "seed": r.seed,
        "pattern_seconds": {k: round(v, 3) for k, v in r.pattern_seconds.items()},
        "bandwidth_convention": "2 x bytes copied / time (read + write), GB = 10^9 B",
        "bandwidth_copy_bytes": r.bandwidth_copy_bytes,
        "bandwidth_flag_below": BANDWIDTH_FLAG_RATIO,
        "catalog_name": r.catalog_name,
        "notes": list(r.notes),
    }


def vram_report(r: VramCheckResult) -> str:
    """The plain-text report."""
    lines = [
        f"GPU {r.gpu}  {r.name}  {r.memory_total_bytes / GIB:.1f} GiB  (via {r.backend})",
        f"devices   {r.device_note}",
        f"checked   {r.checked_bytes / GIB:.2f} GiB of {r.memory_free_bytes / GIB:.2f} GiB free "
        f"(fraction {r.fraction:g}) in {r.chunk_count} chunks",
        f"patterns  {', '.join(r.patterns)} (seed {r.seed})  {r.seconds:.1f} s",
    ]
    if r.mismatch_count == 0:
        lines.append(
            f"memory    OK: every word read back as written; usable {_gib(r.usable_bytes)}"
        )
    else:
        first = r.usable_bytes
        lines.append(
            f"memory    FAIL: {r.mismatch_count} mismatching words; first at offset {first} "
            f"({_gib(first)}); usable before it {_gib(first)}"
        )
        lines.append(
            f"  {'offset_bytes':>14} {'GiB':>9} {'chunk':>5} {'pattern':<9} "
            f"{'expected':>10} {'found':>10} {'flipped':>10}"
        )
        lines += [
            f"  {m.offset_bytes:>14} {m.offset_bytes / GIB:>9.4f} {m.chunk:>5} {m.pattern:<9} "
            f"{m.expected:#010x} {m.found:#010x} {m.flipped_bits:#010x}"
            for m in r.mismatches
        ]
        if r.mismatch_count > len(r.mismatches):
            lines.append(f"  ... {r.mismatch_count - len(r.mismatches)} more not listed")
    lines.append(f"bandwidth {_bandwidth_line(r)}")
    lines += [f"note      {n}" for n in r.notes]
    lines.append(f"verdict   {r.verdict}")
    return "\n".join(lines)


def _bandwidth_line(r: VramCheckResult) -> str:
    if r.bandwidth_gbps is None:
        return "not measured"
    text = f"{r.bandwidth_gbps:.0f} GB/s device copy (2 x bytes copied / time)"
    if r.bandwidth_ratio is None or r.catalog_bandwidth_gbps is None:
        return text + "; no catalog figure to compare"
    text += (
        f" = {r.bandwidth_ratio:.2f} of the catalog {r.catalog_bandwidth_gbps:.0f} GB/s "
        f"({r.catalog_name})"
    )
    if r.bandwidth_flag:
        text += (
            f"  FLAGGED: below {BANDWIDTH_FLAG_RATIO:g} (healthy cards reach ~0.8-0.9): "
            "slower memory than the catalog card"
        )
    return text


def _gib(n: int) -> str:
    return f"{n / GIB:.2f} GiB"


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)
