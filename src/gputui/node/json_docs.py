"""The `--json` documents of `gputui vram-check` and `gputui burn`, as types.

Contract: TypedDicts only (no behaviour): `vram_check.vram_json`, `burn.burn_json` and
`patterns.Mismatch.to_dict` build them; keys and their order are the ones the issue fixed.
"""

from __future__ import annotations

from typing import TypedDict

from gputui.jsontypes import JsonOutObject


class MismatchJson(TypedDict):
    """`Mismatch.to_dict()`: one mismatching word in a report."""

    offset_bytes: int
    chunk: int
    pattern: str
    expected: int
    found: int
    flipped_bits: int


class TracePointJson(TypedDict):
    """`TracePoint.to_dict()`."""

    t_s: float
    sm_clock_mhz: int | None
    temperature_c: float | None
    power_w: float | None
    utilization_gpu_pct: float | None
    throttle_mask: int | None
    throttle_reasons: list[str]
    clock_event_reasons: list[str] | None


class BurnJson(TypedDict):
    """`burn_json`: the `gputui burn --json` document."""

    gpu: int
    name: str
    seconds: float
    trace: list[TracePointJson]
    first_throttle_s: float | None
    first_throttle_reasons: list[str]
    steady_sm_clock_mhz: float | None
    max_sm_clock_mhz: int | None
    steady_clock_fraction: float | None
    max_temperature_c: float | None
    verdict: str
    backend: str
    dtype: str
    matrix_size: int
    requested_seconds: float
    interrupted: bool
    gemm_count: int
    tflops: float | None
    catalog_name: str | None
    catalog_bf16_tflops: float | None
    compute_checks: int
    compute_mismatches: int
    max_clock_source: str | None
    throttle_share: dict[str, float]
    samples: int
    telemetry: str
    notes: list[str]


class VramJson(TypedDict):
    """`vram_json`: the `gputui vram-check --json` document."""

    gpu: int
    name: str
    memory_total_bytes: int
    checked_bytes: int
    usable_gib: float
    patterns: list[str]
    mismatches: list[MismatchJson]
    mismatch_count: int
    seconds: float
    bandwidth_gbps: float | None
    catalog_bandwidth_gbps: float | None
    bandwidth_ratio: float | None
    bandwidth_flag: bool | None
    devices: list[JsonOutObject]
    device_note: str
    verdict: str
    backend: str
    memory_free_bytes: int
    requested_bytes: int
    fraction: float
    chunks: int
    seed: int
    pattern_seconds: dict[str, float]
    bandwidth_convention: str
    bandwidth_copy_bytes: int | None
    bandwidth_flag_below: float
    catalog_name: str | None
    notes: list[str]
