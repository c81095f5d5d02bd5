"""Array backends for the node checks: PyTorch or CuPy on a CUDA device, NumPy as a host stand-in.

Contract: `runtimes.open_runtime(choice, command)` finds the library at run time (PyTorch first,
then CuPy, or the one `choice` names) and returns a `Runtime` that lists the CUDA devices it sees
and opens one as an `ArrayBackend` (see `patterns.py`) that also runs GEMMs for `burn`. When
neither library is installed, or none sees a GPU, it raises `NodeUnavailable` (exit status 2) with
one line saying what is missing. Neither library is imported by gputui itself:
`runtimes._import_optional` is the one seam, through `importlib`, so tests can make them absent
and mypy checks the same code whether or not they are installed (both arrive as a `ModuleType`).

Allocation goes in chunks (`allocate_chunks`): one huge allocation fails on fragmentation long
before memory is full, and the caching allocators round small ones up. On out-of-memory the chunk
size halves, down to `MIN_CHUNK_BYTES` (32 MiB), then allocation stops: what was allocated is the
region checked, and the report says how much of the request the device refused. `measure_copy`
times device-to-device copies with device events (host clock for NumPy) after one warm-up copy.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from gputui.errors import GputuiError
from gputui.jsontypes import JsonOutObject
from gputui.node.patterns import (
    WORD_BYTES,
    ArrayBackend,
    BlockMismatches,
    DeviceArray,
    DeviceOutOfMemory,
)

GIB: Final = 1 << 30
MIB: Final = 1 << 20
MIN_CHUNK_BYTES: Final = 32 * MIB
INSTALL_HINT: Final = "pip install 'gputui[gpu]'"
HOST_STANDIN_BYTES: Final = 64 * MIB
"""The NumPy stand-in's pretend device size: enough to exercise chunking, small enough for CI."""


class NodeUnavailable(GputuiError):
    """No GPU array library, or no CUDA device visible to it: nothing to run the check on."""

    exit_code = 2


class DeviceFailure(GputuiError):
    """The device failed during a check (a driver or CUDA error, an exit near full memory)."""


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    """A device as the array library sees it."""

    index: int
    name: str
    memory_total_bytes: int
    uuid: str | None = None
    """"GPU-..." as NVML prints it, when the library exposes it."""
    pci_bus_id: str | None = None

    def to_dict(self) -> JsonOutObject:
        """JSON form."""
        return {
            "index": self.index,
            "name": self.name,
            "memory_total_bytes": self.memory_total_bytes,
            "uuid": self.uuid,
        }


class Gemm(Protocol):
    """Square matrix multiplications held on the device, for `burn`."""

    dtype: str
    size: int

    def run(self, count: int) -> None:
        """Run `count` GEMMs and wait for them."""
        ...

    def verify(self) -> bool:
        """Whether the last product equals the first one bit for bit (same inputs, same stream)."""
        ...


class DeviceBackend(ArrayBackend, Protocol):
    """An `ArrayBackend` bound to one device, with its memory figures and a GEMM factory."""

    device: DeviceInfo
    workspace_bytes: int
    """Memory to leave free for the pattern temporaries."""
    max_copy_bytes: int
    block_words: int
    """Words generated and compared per step: bounds the temporaries within the workspace."""

    def free_bytes(self) -> int:
        """Free device memory now."""
        ...

    def make_gemm(self, size: int) -> Gemm:
        """Allocate the matrices for `burn`."""
        ...

    def release(self) -> None:
        """Return cached memory to the driver (after the caller dropped its arrays)."""
        ...


class Runtime(Protocol):
    """An array library as found at run time."""

    name: str
    version: str

    def devices(self) -> tuple[DeviceInfo, ...]:
        """Every CUDA device the library sees (after CUDA_VISIBLE_DEVICES)."""
        ...

    def open(self, index: int) -> DeviceBackend:
        """Bind to one device."""
        ...


def allocate_chunks(
    backend: ArrayBackend, target_bytes: int, chunk_bytes: int
) -> tuple[list[DeviceArray], list[int]]:
    """Up to `target_bytes` in chunks of at most `chunk_bytes`: (arrays, words in each)."""
    chunks: list[DeviceArray] = []
    words: list[int] = []
    size = max(chunk_bytes - chunk_bytes % MIB, MIB)
    floor = min(size, MIN_CHUNK_BYTES)
    remaining = target_bytes - target_bytes % WORD_BYTES
    while remaining >= WORD_BYTES:
        want = min(size, remaining)
        try:
            chunks.append(backend.allocate(want))
        except DeviceOutOfMemory:
            if size <= floor:
                break
            size = max(size // 2, floor)
            continue
        words.append(want // WORD_BYTES)
        remaining -= want
    return chunks, words


def measure_copy(
    backend: ArrayBackend,
    chunks: Sequence[DeviceArray],
    chunk_words: Sequence[int],
    max_copy_bytes: int,
) -> tuple[int, int, float] | None:
    """(bytes per copy, repeats, seconds) copying within the allocated chunks; None if too small."""
    if len(chunks) >= 2:
        n = min(chunk_words[0], chunk_words[1])
        src, dst = chunks[0][:n], chunks[1][:n]
    elif chunks:
        n = chunk_words[0] // 2
        src, dst = chunks[0][:n], chunks[0][n : 2 * n]
    else:
        return None
    n = min(n, max_copy_bytes // WORD_BYTES)
    if n < MIB // WORD_BYTES:
        return None
    src, dst = src[:n], dst[:n]
    one = backend.copy_seconds(src, dst, 1)  # warm-up, and a first estimate of one copy's time
    repeats = int(min(max(0.25 / max(one, 1e-6), 3), 200))
    return n * WORD_BYTES, repeats, backend.copy_seconds(src, dst, repeats)


def host_seconds(start_ns: int) -> float:
    """Seconds since `start_ns` on the monotonic clock."""
    return (time.perf_counter_ns() - start_ns) / 1e9


def mismatch_lists(
    positions: DeviceArray, expected: DeviceArray, found: DeviceArray
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """Host lists from on-device index/value arrays, values as unsigned 32-bit."""
    return (
        tuple(int(p) for p in positions.tolist()),
        tuple(int(v) & 0xFFFFFFFF for v in expected.tolist()),
        tuple(int(v) & 0xFFFFFFFF for v in found.tolist()),
    )


def block_mismatches(
    count: int, positions: DeviceArray, expected: DeviceArray, found: DeviceArray
) -> BlockMismatches:
    """A `BlockMismatches` from the device arrays of one comparison."""
    pos, exp, got = mismatch_lists(positions, expected, found)
    return BlockMismatches(count=count, positions=pos, expected=exp, found=got)
