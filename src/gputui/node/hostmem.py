"""The NumPy stand-in: host memory playing a small device, for tests and `--backend numpy`.

Contract: `NumpyBackend` implements the same `DeviceBackend` protocol as the CUDA backends with
NumPy arrays (uint32 words), timed with the host's monotonic clock. It checks the checker, never a
GPU: its "device" is `total_bytes` of host memory (64 MiB by default) and its name says so.
`allocate` raises `DeviceOutOfMemory` past `total_bytes`, so the chunk allocator's fallback is
exercised too.
"""

from __future__ import annotations

import time
from typing import cast

import numpy as np
import numpy.typing as npt

from gputui.node.backends import (
    HOST_STANDIN_BYTES,
    MIB,
    DeviceInfo,
    block_mismatches,
)
from gputui.node.patterns import (
    WORD_BYTES,
    BlockMismatches,
    DeviceArray,
    DeviceOutOfMemory,
    IndexArray,
)

HOST_NAME = "host memory (NumPy stand-in, not a GPU)"


def _host(array: DeviceArray) -> npt.NDArray[np.uint32]:
    """This backend's own words, handed back by the checker as a `DeviceArray`."""
    return cast(npt.NDArray[np.uint32], array)


class NumpyGemm:
    """float32 GEMMs on the CPU."""

    dtype = "float32"

    def __init__(self, size: int, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        self.size = size
        self._a = rng.standard_normal((size, size), dtype=np.float32)
        self._b = rng.standard_normal((size, size), dtype=np.float32)
        self._c = np.empty_like(self._a)
        self._ref = self._a @ self._b

    def run(self, count: int) -> None:
        """Run `count` products into the output buffer."""
        for _ in range(count):
            np.matmul(self._a, self._b, out=self._c)

    def verify(self) -> bool:
        """Whether the last product matches the reference bit for bit."""
        return bool(np.array_equal(self._c, self._ref))


class NumpyBackend:
    """Host memory as a pretend device (see the module docstring)."""

    name = "numpy"
    workspace_bytes = 0
    max_copy_bytes = 16 * MIB
    block_words = 1 << 20

    def __init__(self, total_bytes: int = HOST_STANDIN_BYTES) -> None:
        self.device = DeviceInfo(index=0, name=HOST_NAME, memory_total_bytes=total_bytes)
        self._used = 0

    def free_bytes(self) -> int:
        """Bytes of the pretend device not yet handed out."""
        return self.device.memory_total_bytes - self._used

    def allocate(self, n_bytes: int) -> DeviceArray:
        """uint32 words, failing like a device when the pretend memory is used up."""
        if n_bytes > self.free_bytes():
            raise DeviceOutOfMemory(f"{n_bytes} bytes requested, {self.free_bytes()} free")
        self._used += n_bytes
        return np.empty(n_bytes // WORD_BYTES, dtype=np.uint32)

    def indices(self, start: int, count: int) -> IndexArray:
        """int64 word indices."""
        return np.arange(start, start + count, dtype=np.int64)

    def to_words(self, values: IndexArray) -> DeviceArray:
        """int64 in [0, 2^32) to uint32."""
        return cast(npt.NDArray[np.int64], values).astype(np.uint32)

    def write(self, buf: DeviceArray, offset: int, words: DeviceArray) -> None:
        """Store a block."""
        host_words = _host(words)
        _host(buf)[offset : offset + len(host_words)] = host_words

    def compare(
        self, buf: DeviceArray, offset: int, expected: DeviceArray, limit: int
    ) -> BlockMismatches:
        """Count and locate mismatches, as the device does."""
        want = _host(expected)
        got = _host(buf)[offset : offset + len(want)]
        bad = got != want
        count = int(np.count_nonzero(bad))
        positions = np.flatnonzero(bad)[:limit] if count else np.empty(0, dtype=np.int64)
        return block_mismatches(count, positions, want[positions], got[positions])

    def copy_seconds(self, src: DeviceArray, dst: DeviceArray, repeats: int) -> float:
        """Host-timed copies."""
        source, target = _host(src), _host(dst)
        start = time.perf_counter_ns()
        for _ in range(repeats):
            np.copyto(target, source)
        return (time.perf_counter_ns() - start) / 1e9

    def synchronize(self) -> None:
        """Nothing is queued on the host."""

    def make_gemm(self, size: int) -> NumpyGemm:
        """float32 matrices, at most 512 x 512 (the CPU is shared)."""
        return NumpyGemm(min(size, 512))

    def release(self) -> None:
        """Forget the pretend allocations."""
        self._used = 0


class NumpyRuntime:
    """The stand-in library: one pretend device."""

    name = "numpy"

    def __init__(self, total_bytes: int = HOST_STANDIN_BYTES) -> None:
        self.version = np.__version__
        self._total = total_bytes

    def devices(self) -> tuple[DeviceInfo, ...]:
        """The one pretend device."""
        return (DeviceInfo(index=0, name=HOST_NAME, memory_total_bytes=self._total),)

    def open(self, index: int) -> NumpyBackend:
        """The pretend device (index 0 only)."""
        if index != 0:
            raise ValueError(f"the NumPy stand-in has one device, not {index}")
        return NumpyBackend(self._total)
