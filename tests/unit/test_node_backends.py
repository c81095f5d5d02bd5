"""Library detection (torch/cupy absent, no GPU), chunked allocation, copy timing, CuPy code."""

from __future__ import annotations

import uuid
from typing import Any

import numpy as np
import pytest

from gputui.node import runtimes
from gputui.node.backends import (
    MIN_CHUNK_BYTES,
    NodeUnavailable,
    allocate_chunks,
    measure_copy,
)
from gputui.node.cuda import CupyRuntime, _gpu_uuid
from gputui.node.hostmem import NumpyBackend
from gputui.node.patterns import DeviceOutOfMemory, verify_region
from gputui.node.runtimes import open_runtime
from tests.unit.test_node_fakes import FakeCudaCard, FakeCupy, fake_torch

MIB = 1 << 20
UUID_A = f"GPU-{uuid.UUID(int=0xA)}"


def _modules(monkeypatch: pytest.MonkeyPatch, **present: Any) -> None:
    """Make `_import_optional` find exactly the given modules."""

    def fake_import(name: str) -> tuple[Any, str | None]:
        module = present.get(name)
        return (module, None) if module is not None else (None, f"{name} not installed")

    monkeypatch.setattr(runtimes, "_import_optional", fake_import)


def test_neither_library_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    _modules(monkeypatch)
    with pytest.raises(NodeUnavailable) as info:
        open_runtime("auto", "vram-check")
    assert str(info.value) == "vram-check needs PyTorch or CuPy (pip install 'gputui[gpu]')"
    assert info.value.exit_code == 2


def test_named_library_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    _modules(monkeypatch, cupy=FakeCupy([]))
    with pytest.raises(NodeUnavailable, match=r"^burn needs PyTorch \(pip install"):
        open_runtime("torch", "burn")


def test_torch_without_a_cuda_device(monkeypatch: pytest.MonkeyPatch) -> None:
    _modules(monkeypatch, torch=fake_torch(devices=0))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    with pytest.raises(NodeUnavailable) as info:
        open_runtime("auto", "vram-check")
    assert str(info.value) == "no CUDA GPU visible (torch 2.4.1 sees no CUDA device)"
    assert info.value.exit_code == 2


def test_cpu_only_torch_and_hidden_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    _modules(monkeypatch, torch=fake_torch(cuda_build=None))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(NodeUnavailable) as info:
        open_runtime("auto", "burn")
    assert str(info.value) == (
        "no CUDA GPU visible (torch 2.4.1+cpu: a CPU-only build; CUDA_VISIBLE_DEVICES='')"
    )


def test_cupy_whose_driver_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    cp = FakeCupy([])

    def no_device() -> int:
        raise RuntimeError("cudaErrorInsufficientDriver: CUDA driver version is insufficient\nx")

    cp.cuda.runtime.getDeviceCount = no_device
    _modules(monkeypatch, torch=fake_torch(devices=0), cupy=cp)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    with pytest.raises(NodeUnavailable) as info:
        open_runtime("auto", "vram-check")
    assert str(info.value) == (
        "no CUDA GPU visible (torch 2.4.1 sees no CUDA device; cupy 13.3.0: "
        "cudaErrorInsufficientDriver: CUDA driver version is insufficient)"
    )


def test_falls_back_to_cupy_when_torch_sees_no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    cp = FakeCupy([FakeCudaCard("NVIDIA L40S", 46068 * MIB, UUID_A, pci_bus=0x17)])
    _modules(monkeypatch, torch=fake_torch(devices=0), cupy=cp)
    runtime = open_runtime("auto", "vram-check")
    assert runtime.name == "cupy"
    (info,) = runtime.devices()
    assert info.name == "NVIDIA L40S"
    assert info.uuid == UUID_A
    assert info.pci_bus_id == "00000000:17:00.0"


def test_real_import_seam_reports_absence() -> None:
    module, why = runtimes._import_optional("gputui_no_such_module")
    assert module is None
    assert why is not None and "not installed" in why


def test_gpu_uuid_spelling() -> None:
    assert _gpu_uuid("58c3a3a0-69ae-4a4c-9c3f-000000000001") == (
        "GPU-58c3a3a0-69ae-4a4c-9c3f-000000000001"
    )
    assert _gpu_uuid("GPU-abc") == "GPU-abc"


class Fragmented(NumpyBackend):
    """Refuses any single allocation above `largest` bytes, like a fragmented device."""

    def __init__(self, total: int, largest: int) -> None:
        super().__init__(total)
        self.largest = largest
        self.refused: list[int] = []

    def allocate(self, n_bytes: int) -> Any:
        if n_bytes > self.largest:
            self.refused.append(n_bytes)
            raise DeviceOutOfMemory("fragmented")
        return super().allocate(n_bytes)


def test_chunks_halve_on_out_of_memory() -> None:
    backend = Fragmented(total=200 * MIB, largest=40 * MIB)
    chunks, words = allocate_chunks(backend, 100 * MIB, 128 * MIB)
    assert backend.refused == [100 * MIB, 64 * MIB]
    assert [4 * w for w in words] == [32 * MIB, 32 * MIB, 32 * MIB, 4 * MIB]
    assert [len(c) for c in chunks] == words


def test_chunks_stop_when_even_the_smallest_is_refused() -> None:
    backend = Fragmented(total=200 * MIB, largest=MIN_CHUNK_BYTES - 1)
    assert allocate_chunks(backend, 100 * MIB, 64 * MIB) == ([], [])


def test_chunks_stop_at_the_device_limit() -> None:
    backend = NumpyBackend(total_bytes=70 * MIB)
    _chunks, words = allocate_chunks(backend, 200 * MIB, 32 * MIB)
    assert 4 * sum(words) == 64 * MIB  # two chunks; the third is refused even at the minimum


def test_measure_copy_between_chunks_and_within_one() -> None:
    backend = NumpyBackend(16 * MIB)
    chunks, words = allocate_chunks(backend, 8 * MIB, 4 * MIB)
    copy = measure_copy(backend, chunks, words, max_copy_bytes=2 * MIB)
    assert copy is not None
    n_bytes, repeats, seconds = copy
    assert n_bytes == 2 * MIB and 3 <= repeats <= 200 and seconds > 0
    single = [np.zeros(MIB, dtype=np.uint32)]
    one = measure_copy(backend, single, [MIB], max_copy_bytes=64 * MIB)
    assert one is not None and one[0] == 2 * MIB  # halves of the one chunk
    assert measure_copy(backend, [np.zeros(1000, dtype=np.uint32)], [1000], 64 * MIB) is None


def test_cupy_backend_runs_the_checker_and_reports_exact_offsets() -> None:
    cp = FakeCupy([FakeCudaCard("NVIDIA H200", 143771 * MIB, UUID_A)], limit_bytes=8 * MIB)
    backend = CupyRuntime(cp).open(0)
    assert backend.free_bytes() == 8 * MIB
    chunks, words = allocate_chunks(backend, 6 * MIB, 64 * MIB)
    assert words == [6 * MIB // 4]

    def flip(pattern: str, arrays: Any) -> None:
        arrays[0][4097] ^= np.uint32(0x80000000)

    result = verify_region(backend, chunks, words, ("random",), seed=3, after_write=flip)
    (m,) = result.mismatches
    assert m.offset_bytes == 4 * 4097 and m.flipped_bits == 0x80000000
    copy = measure_copy(backend, chunks, words, backend.max_copy_bytes)
    assert copy is not None and copy[0] == 3 * MIB
    chunks.clear()
    backend.release()
    assert cp.freed_pool == 1
    gemm = backend.make_gemm(64)
    gemm.run(2)
    assert gemm.verify() and gemm.dtype == "float16"


def test_cupy_out_of_memory_becomes_device_out_of_memory() -> None:
    cp = FakeCupy([FakeCudaCard("NVIDIA H200", 143771 * MIB, UUID_A)], limit_bytes=MIB)
    with pytest.raises(DeviceOutOfMemory, match="Out of memory"):
        CupyRuntime(cp).open(0).allocate(2 * MIB)
