"""The nvidia-smi fallback: the same GPU samples when the NVML library cannot be loaded from Python.

Contract: `SmiSource()` finds `nvidia-smi` and probes it once, raising `TelemetryUnavailable` with
the tool's own one-line complaint when it is missing or fails (no driver, no GPU). `sample()` runs
`nvidia-smi --query-gpu=<fields> --format=csv,noheader,nounits` (reference.md §2) and parses it with
`parse_query_csv`; `[N/A]`, `N/A`, `[Not Supported]` and `[Requested functionality has been
deprecated]` become None. Memory is MiB and power W in that format. Drivers older than 535 call the
event-reason field `clocks_throttle_reasons.active` and may lack `memory.reserved`: when the first
field set is refused the source falls back to the legacy one. Each call spawns a process (10-20 ms,
§1.5), so poll it at 1 Hz, not 4.
"""

from __future__ import annotations

import csv
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from typing import Final

from gputui.errors import TelemetryUnavailable
from gputui.telemetry.samples import GpuHealth, GpuIdentity, GpuSample
from gputui.telemetry.throttle import decode, parse_mask

_MIB: Final = 1 << 20
_TIMEOUT_S: Final = 5.0
_FORMAT: Final = ("--format=csv,noheader,nounits",)

SAMPLE_FIELDS: Final = (
    "index",
    "uuid",
    "name",
    "temperature.gpu",
    "clocks.sm",
    "clocks.max.sm",
    "clocks.mem",
    "clocks.max.mem",
    "power.draw",
    "enforced.power.limit",
    "utilization.gpu",
    "memory.used",
    "memory.total",
    "memory.reserved",
    "clocks_event_reasons.active",
    "fan.speed",
    "pcie.link.gen.current",
    "pcie.link.width.current",
    "ecc.errors.corrected.volatile.total",
    "ecc.errors.uncorrected.volatile.total",
    "mig.mode.current",
    "pstate",
)
LEGACY_SAMPLE_FIELDS: Final = tuple(
    "clocks_throttle_reasons.active" if f == "clocks_event_reasons.active" else f
    for f in SAMPLE_FIELDS
    if f != "memory.reserved"
)
IDENTITY_FIELDS: Final = (
    "index",
    "uuid",
    "name",
    "memory.total",
    "driver_version",
    "enforced.power.limit",
    "mig.mode.current",
    "ecc.mode.current",
    "serial",
    "pci.bus_id",
)
HEALTH_FIELDS: Final = (
    "index",
    "ecc.mode.current",
    "ecc.errors.corrected.volatile.total",
    "ecc.errors.uncorrected.volatile.total",
    "ecc.errors.uncorrected.aggregate.total",
    "retired_pages.sbe",
    "retired_pages.dbe",
    "retired_pages.pending",
    "remapped_rows.correctable",
    "remapped_rows.uncorrectable",
    "remapped_rows.pending",
    "remapped_rows.failure",
)

Row = dict[str, str | None]
Runner = Callable[[Sequence[str]], tuple[int, str]]
"""Runs a command line; returns (exit status, stdout + stderr)."""


def _missing(value: str) -> bool:
    text = value.strip()
    return not text or text.startswith("[") or text in ("N/A", "-")


def parse_query_csv(text: str, fields: Sequence[str]) -> list[Row]:
    """Rows of `--format=csv,noheader,nounits` output as {field: value or None}."""
    rows: list[Row] = []
    for cells in csv.reader(text.splitlines(), skipinitialspace=True):
        if not cells or not "".join(cells).strip():
            continue
        if len(cells) != len(fields):
            raise ValueError(f"expected {len(fields)} fields, got {len(cells)}: {cells!r}")
        rows.append(
            {f: None if _missing(c) else c.strip() for f, c in zip(fields, cells, strict=True)}
        )
    return rows


def _int(row: Row, field: str) -> int | None:
    value = row.get(field)
    if value is None:
        return None
    try:
        return round(float(value))
    except ValueError:
        return None


def _float(row: Row, field: str) -> float | None:
    value = row.get(field)
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return None


def _mib(row: Row, field: str) -> int | None:
    value = _float(row, field)
    return None if value is None else round(value * _MIB)


def _flag(row: Row, field: str) -> bool | None:
    value = row.get(field)
    if value is None:
        return None
    return value.strip().lower() in ("enabled", "yes", "active", "1")


def _pstate(row: Row) -> int | None:
    value = row.get("pstate")
    if value is None or not value.upper().startswith("P"):
        return None
    try:
        return int(value[1:])
    except ValueError:
        return None


def sample_from_row(row: Row, t_ns: int) -> GpuSample:
    """One GpuSample from a parsed `SAMPLE_FIELDS` (or legacy) row."""
    reasons = row.get("clocks_event_reasons.active") or row.get("clocks_throttle_reasons.active")
    mask = None if reasons is None else parse_mask(reasons)
    ecc = [_int(row, f"ecc.errors.{kind}.volatile.total") for kind in ("corrected", "uncorrected")]
    known = [c for c in ecc if c is not None]
    index = _int(row, "index")
    return GpuSample(
        index=0 if index is None else index,
        uuid=row.get("uuid") or f"GPU-index-{index}",
        name=row.get("name") or "unknown NVIDIA GPU",
        t_ns=t_ns,
        temperature_c=_float(row, "temperature.gpu"),
        sm_clock_mhz=_int(row, "clocks.sm"),
        sm_clock_max_mhz=_int(row, "clocks.max.sm"),
        mem_clock_mhz=_int(row, "clocks.mem"),
        mem_clock_max_mhz=_int(row, "clocks.max.mem"),
        power_w=_float(row, "power.draw"),
        power_limit_w=_float(row, "enforced.power.limit"),
        utilization_gpu_pct=_float(row, "utilization.gpu"),
        memory_used_bytes=_mib(row, "memory.used"),
        memory_total_bytes=_mib(row, "memory.total"),
        memory_reserved_bytes=_mib(row, "memory.reserved"),
        throttle_reasons=None if mask is None else decode(mask),
        throttle_mask=mask,
        fan_pct=_float(row, "fan.speed"),
        pcie_gen=_int(row, "pcie.link.gen.current"),
        pcie_width=_int(row, "pcie.link.width.current"),
        ecc_volatile_errors=sum(known) if known else None,
        mig_mode=_flag(row, "mig.mode.current"),
        pstate=_pstate(row),
        source="nvidia-smi",
    )


def identity_from_row(row: Row, cuda_version: str | None) -> GpuIdentity:
    """One GpuIdentity from a parsed `IDENTITY_FIELDS` row."""
    index = _int(row, "index")
    return GpuIdentity(
        index=0 if index is None else index,
        uuid=row.get("uuid") or f"GPU-index-{index}",
        name=row.get("name") or "unknown NVIDIA GPU",
        memory_total_bytes=_mib(row, "memory.total"),
        driver_version=row.get("driver_version"),
        cuda_version=cuda_version,
        power_limit_w=_float(row, "enforced.power.limit"),
        mig_mode=_flag(row, "mig.mode.current"),
        ecc_mode=_flag(row, "ecc.mode.current"),
        serial=row.get("serial") or None,
        pci_bus_id=row.get("pci.bus_id"),
    )


def health_from_row(row: Row) -> GpuHealth:
    """One GpuHealth from a parsed `HEALTH_FIELDS` row."""
    return GpuHealth(
        ecc_mode=_flag(row, "ecc.mode.current"),
        ecc_volatile_corrected=_int(row, "ecc.errors.corrected.volatile.total"),
        ecc_volatile_uncorrected=_int(row, "ecc.errors.uncorrected.volatile.total"),
        ecc_aggregate_uncorrected=_int(row, "ecc.errors.uncorrected.aggregate.total"),
        retired_pages_sbe=_int(row, "retired_pages.sbe"),
        retired_pages_dbe=_int(row, "retired_pages.dbe"),
        retired_pages_pending=_flag(row, "retired_pages.pending"),
        remapped_rows_correctable=_int(row, "remapped_rows.correctable"),
        remapped_rows_uncorrectable=_int(row, "remapped_rows.uncorrectable"),
        remapped_rows_pending=_flag(row, "remapped_rows.pending"),
        remapped_rows_failure=_flag(row, "remapped_rows.failure"),
    )


_CUDA_RE: Final = re.compile(r"CUDA Version:\s*([0-9.]+)")


def find_nvidia_smi() -> str | None:
    """The nvidia-smi executable on PATH, if any (a seam for tests)."""
    return shutil.which("nvidia-smi")


def _subprocess_runner(argv: Sequence[str]) -> tuple[int, str]:
    try:
        done = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 127, str(exc)
    return done.returncode, done.stdout + done.stderr


class SmiSource:
    """GPU samples from the nvidia-smi command (see the module docstring)."""

    name = "nvidia-smi"

    def __init__(
        self,
        runner: Runner | None = None,
        *,
        executable: str | None = None,
        clock: Callable[[], int] = time.perf_counter_ns,
    ) -> None:
        if runner is None:
            found = executable or find_nvidia_smi()
            if found is None:
                raise TelemetryUnavailable("nvidia-smi not found on PATH")
            executable = found
            runner = _subprocess_runner
        self._exe = executable or "nvidia-smi"
        self._run = runner
        self._clock = clock
        self._fields: tuple[str, ...] = SAMPLE_FIELDS
        if not self.sample():
            raise TelemetryUnavailable("nvidia-smi lists no NVIDIA GPU")

    def _query(self, fields: Sequence[str]) -> list[Row]:
        status, out = self._run([self._exe, f"--query-gpu={','.join(fields)}", *_FORMAT])
        if status != 0:
            line = out.strip().splitlines()[0] if out.strip() else f"exit status {status}"
            raise TelemetryUnavailable(f"nvidia-smi failed: {line}")
        try:
            return parse_query_csv(out, fields)
        except ValueError as exc:
            raise TelemetryUnavailable(f"nvidia-smi printed unexpected output: {exc}") from None

    def sample(self) -> tuple[GpuSample, ...]:
        """One sample per GPU; falls back to the pre-535 field names once if refused."""
        t_ns = self._clock()
        try:
            rows = self._query(self._fields)
        except TelemetryUnavailable as exc:
            if self._fields == LEGACY_SAMPLE_FIELDS or "not a valid field" not in str(exc):
                raise
            self._fields = LEGACY_SAMPLE_FIELDS
            rows = self._query(self._fields)
        return tuple(sample_from_row(row, t_ns) for row in rows)

    def identities(self) -> tuple[GpuIdentity, ...]:
        """Identity of each GPU; the CUDA version comes from the plain `nvidia-smi` header."""
        _, header = self._run([self._exe])
        match = _CUDA_RE.search(header)
        cuda = match.group(1) if match else None
        return tuple(identity_from_row(row, cuda) for row in self._query(IDENTITY_FIELDS))

    def health(self, index: int) -> GpuHealth:
        """ECC, retired pages and remapped rows of one GPU (all None if the driver refuses)."""
        try:
            rows = self._query(HEALTH_FIELDS)
        except TelemetryUnavailable:
            return GpuHealth()
        for row in rows:
            if _int(row, "index") == index:
                return health_from_row(row)
        return GpuHealth()

    def close(self) -> None:
        """Nothing to release (each sample is its own process)."""
