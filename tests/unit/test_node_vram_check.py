"""vram-check on the NumPy stand-in: result fields, catalog matching, one card or two, JSON keys."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from gputui.node.backends import DeviceFailure, DeviceInfo
from gputui.node.hostmem import NumpyBackend
from gputui.node.vram_check import (
    device_note,
    match_catalog,
    run_vram_check,
    vram_json,
    vram_report,
)

MIB = 1 << 20
GIB = 1 << 30
R4090 = "NVIDIA GeForce RTX 4090"
VRAM_KEYS = {
    "gpu",
    "name",
    "memory_total_bytes",
    "checked_bytes",
    "usable_gib",
    "patterns",
    "mismatches",
    "mismatch_count",
    "seconds",
    "bandwidth_gbps",
    "catalog_bandwidth_gbps",
    "bandwidth_ratio",
    "bandwidth_flag",
    "devices",
}


class TimedCopy(NumpyBackend):
    """A stand-in whose copies take as long as a card with `gbps` (2 x bytes) would."""

    def __init__(self, total: int, gbps: float) -> None:
        super().__init__(total)
        self.gbps = gbps

    def copy_seconds(self, src: Any, dst: Any, repeats: int) -> float:
        return float(2 * src.nbytes * repeats / (self.gbps * 1e9))


def _run(backend: NumpyBackend, **kw: Any) -> Any:
    defaults: dict[str, Any] = {
        "gpu": 0,
        "devices": (DeviceInfo(0, R4090, 49140 * MIB),),
        "fraction": 0.5,
        "chunk_bytes": 2 * MIB,
    }
    return run_vram_check(backend, **(defaults | kw))


def _catalog(name: str, memory: int | None) -> str | None:
    spec = match_catalog(name, memory)
    return None if spec is None else spec.name


def test_match_catalog_by_name_and_memory() -> None:
    assert _catalog(R4090, 49140 * MIB) == "rtx4090-48gb"
    assert _catalog(R4090, 24564 * MIB) == "rtx4090-24gb"
    assert _catalog("nvidia  geforce rtx 4090 ", 48 * GIB) == "rtx4090-48gb"
    assert _catalog("NVIDIA H200", None) == "h200"
    assert _catalog("NVIDIA GeForce RTX 4090 D", 48 * GIB) is None


def test_one_card_two_cards_or_not_enough() -> None:
    one48 = [DeviceInfo(0, R4090, 49140 * MIB)]
    two24 = [DeviceInfo(0, R4090, 24564 * MIB), DeviceInfo(1, R4090, 24564 * MIB)]
    assert device_note(one48, 0, None) == "1 device: one card holds all 48.0 GiB"
    assert device_note(one48, 0, 48).endswith("the 48 GB is on one card (GPU 0)")
    note = device_note(two24, 0, 48)
    assert note.startswith("2 GPUs, each its own address space (memory does not pool): ")
    assert "checking GPU 0 only" in note
    assert "the 48 GB spans 2 devices (24.0 + 24.0 GiB)" in note
    assert "one process sees at most 24.0 GiB on a device" in note
    assert "only 24.0 GiB in all" in device_note(two24[:1], 0, 48)
    assert "memory does not pool" in device_note(two24, 1, None)


def test_clean_run_fields_and_json_keys() -> None:
    backend = TimedCopy(16 * MIB, gbps=900.0)
    result = _run(backend, reported_name=R4090, reported_total_bytes=49140 * MIB)
    assert result.requested_bytes == 8 * MIB
    assert result.checked_bytes == 8 * MIB
    assert result.chunk_count == 4
    assert result.mismatch_count == 0
    assert result.usable_bytes == 8 * MIB
    assert result.catalog_name == "rtx4090-48gb"
    assert result.bandwidth_gbps == pytest.approx(900.0)
    assert result.bandwidth_ratio == pytest.approx(900 / 1008)
    assert result.bandwidth_flag is False
    assert result.verdict == "pass"
    doc = vram_json(result)
    assert set(doc) >= VRAM_KEYS
    assert doc["usable_gib"] == round(8 / 1024, 3)
    assert doc["mismatches"] == [] and doc["bandwidth_flag"] is False
    assert doc["memory_total_bytes"] == 49140 * MIB
    assert doc["devices"] == [
        {"index": 0, "name": R4090, "memory_total_bytes": 49140 * MIB, "uuid": None}
    ]
    text = vram_report(result)
    assert "memory    OK" in text and "= 0.89 of the catalog 1008 GB/s (rtx4090-48gb)" in text
    assert backend.free_bytes() == 16 * MIB  # everything handed back


def test_slow_memory_is_flagged() -> None:
    result = _run(TimedCopy(16 * MIB, gbps=600.0), reported_name=R4090)
    assert result.bandwidth_ratio == pytest.approx(600 / 1008)
    assert result.bandwidth_flag is True
    assert result.verdict == "warn"
    assert "FLAGGED: below 0.7" in vram_report(result)


def test_unknown_card_has_no_ratio() -> None:
    result = _run(NumpyBackend(16 * MIB))
    assert result.catalog_bandwidth_gbps is None and result.bandwidth_ratio is None
    assert result.bandwidth_flag is None
    assert any("no catalog bandwidth" in n for n in result.notes)


def test_mismatches_are_reported_with_offsets() -> None:
    def flip(pattern: str, chunks: Sequence[Any]) -> None:
        chunks[2][10] ^= np.uint32(0x10)
        chunks[3][0] ^= np.uint32(0x1)

    result = _run(NumpyBackend(16 * MIB), patterns=("address",), after_write=flip)
    first = 2 * 2 * MIB + 40
    assert [m.offset_bytes for m in result.mismatches] == [first, 3 * 2 * MIB]
    assert [m.chunk for m in result.mismatches] == [2, 3]
    assert result.usable_bytes == first
    assert result.verdict == "fail"
    doc = vram_json(result)
    assert doc["mismatch_count"] == 2
    assert doc["mismatches"][0] == {
        "offset_bytes": first,
        "chunk": 2,
        "pattern": "address",
        "expected": (first // 4),
        "found": (first // 4) ^ 0x10,
        "flipped_bits": 0x10,
    }
    text = vram_report(result)
    assert f"FAIL: 2 mismatching words; first at offset {first}" in text
    assert "0x0010000a 0x0010001a 0x00000010" in text


def test_workspace_is_left_free() -> None:
    backend = NumpyBackend(16 * MIB)
    backend.workspace_bytes = 12 * MIB
    result = _run(backend, fraction=1.0)
    assert result.requested_bytes == 4 * MIB


class Crashing(NumpyBackend):
    """A device that dies on the third block write (a CUDA error: RuntimeError)."""

    writes = 0

    def write(self, buf: Any, offset: int, words: Any) -> None:
        self.writes += 1
        if self.writes == 3:
            raise RuntimeError("CUDA error: an illegal memory access was encountered\nmore")
        super().write(buf, offset, words)


def test_device_failure_is_one_line_with_progress() -> None:
    backend = Crashing(16 * MIB)
    with pytest.raises(DeviceFailure) as info:
        _run(backend)
    assert str(info.value) == (
        "GPU 0 failed while writing and verifying with 0.01 GiB allocated: "
        "CUDA error: an illegal memory access was encountered"
    )
    assert info.value.exit_code == 1
    assert backend.free_bytes() == 16 * MIB  # released on the way out


def test_nothing_checked_is_not_a_pass() -> None:
    backend = NumpyBackend(16 * MIB)
    backend.workspace_bytes = 32 * MIB
    result = _run(backend)
    assert result.checked_bytes == 0
    assert result.verdict == "warn"
    assert result.notes[0] == "nothing checked: 16 MiB free, the pattern workspace needs 32 MiB"
