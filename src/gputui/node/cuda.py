"""The CUDA backends: PyTorch and CuPy, each given its module object by `runtimes.open_runtime`.

Contract: both implement `backends.DeviceBackend` on one device, with 32-bit words (torch.int32,
which torch supports in every operation the checker needs; cupy.uint32), int64 index arithmetic,
comparisons and nonzero() on the device, copies timed with CUDA events, and a GEMM in BF16 where
the device supports it (compute capability 8.0+, PyTorch) or FP16 otherwise. The modules arrive as
a `ModuleType`: gputui never imports torch or cupy itself; the few array methods called here are
spelled out as protocols (`_Tensor`, `_CupyArray`), cast to in one place per backend. Patterns go
in blocks of 2^23 words (32 MiB), and a 512 MiB workspace is left free for their temporaries
(int64 blocks of 64 MiB, a few alive at once while an expression is evaluated).
"""

from __future__ import annotations

import uuid as uuid_module
from types import ModuleType
from typing import Final, Protocol, Self, cast

from gputui.node.backends import GIB, MIB, DeviceInfo, block_mismatches
from gputui.node.patterns import (
    WORD_BYTES,
    BlockMismatches,
    DeviceArray,
    DeviceOutOfMemory,
    IndexArray,
)

WORKSPACE_BYTES: Final = 512 * MIB


class _Tensor(DeviceArray, Protocol):
    """The `torch.Tensor` methods `TorchBackend` calls on its own arrays."""

    def __getitem__(self, key: slice | _Tensor, /) -> Self: ...
    def numel(self) -> int: ...
    def copy_(self, src: DeviceArray, /) -> Self: ...
    def to(self, dtype: object, /) -> Self: ...
    def ne(self, other: DeviceArray, /) -> Self: ...
    def sum(self) -> Self: ...
    def item(self) -> float: ...
    def new_empty(self, size: int, /) -> Self: ...
    def cpu(self) -> Self: ...


def _tensor(array: DeviceArray | IndexArray) -> _Tensor:
    """A `TorchBackend` array handed back by the checker."""
    return cast(_Tensor, array)


class _CupyArray(DeviceArray, Protocol):
    """The `cupy.ndarray` members `CupyBackend` uses on its own arrays."""

    @property
    def size(self) -> int: ...
    def astype(self, dtype: object, /) -> Self: ...
    def __setitem__(self, key: slice, value: DeviceArray, /) -> None: ...


def _cupy_array(array: DeviceArray | IndexArray) -> _CupyArray:
    """A `CupyBackend` array handed back by the checker."""
    return cast(_CupyArray, array)


class _Synchronizing(Protocol):
    """A CuPy device: `CupyGemm` waits on it."""

    def synchronize(self) -> None: ...


def _gpu_uuid(text: str) -> str:
    """NVML's spelling, "GPU-<uuid>", whichever form a library prints."""
    bare = text.strip()
    return bare if bare.upper().startswith(("GPU-", "MIG-")) else f"GPU-{bare}"


def _bus_id(domain: int, bus: int, device: int) -> str:
    """NVML's busId format, "00000000:01:00.0"."""
    return f"{domain:08X}:{bus:02X}:{device:02X}.0"


# --- PyTorch ------------------------------------------------------------------------------------


class TorchGemm:
    """Square GEMMs on one CUDA device."""

    def __init__(
        self, torch: ModuleType, device: object, size: int, bf16: bool, seed: int = 0
    ) -> None:
        self._torch = torch
        self._device = device
        self.size = size
        self.dtype = "bfloat16" if bf16 else "float16"
        dtype = torch.bfloat16 if bf16 else torch.float16
        gen = torch.Generator(device=device)
        gen.manual_seed(seed)
        self._a = torch.randn(size, size, generator=gen, device=device, dtype=dtype)
        self._b = torch.randn(size, size, generator=gen, device=device, dtype=dtype)
        self._ref = torch.empty_like(self._a)
        self._c = torch.empty_like(self._a)
        torch.matmul(self._a, self._b, out=self._ref)

    def run(self, count: int) -> None:
        """Queue `count` products, then wait."""
        for _ in range(count):
            self._torch.matmul(self._a, self._b, out=self._c)
        self._torch.cuda.synchronize(self._device)

    def verify(self) -> bool:
        """Same inputs, same stream: cuBLAS returns the same bits, unless the card erred."""
        return bool(self._torch.equal(self._c, self._ref))


class TorchBackend:
    """PyTorch on one CUDA device."""

    name = "torch"
    workspace_bytes = WORKSPACE_BYTES
    max_copy_bytes = GIB
    block_words = 1 << 23

    def __init__(self, torch: ModuleType, info: DeviceInfo) -> None:
        self._t = torch
        self.device = info
        self._dev = torch.device("cuda", info.index)
        torch.cuda.set_device(self._dev)

    def free_bytes(self) -> int:
        """Free memory as the driver reports it (cudaMemGetInfo)."""
        return int(self._t.cuda.mem_get_info(self._dev)[0])

    def allocate(self, n_bytes: int) -> DeviceArray:
        """n_bytes / 4 int32 words."""
        try:
            words = self._t.empty(n_bytes // WORD_BYTES, dtype=self._t.int32, device=self._dev)
        except self._t.cuda.OutOfMemoryError as exc:
            raise DeviceOutOfMemory(str(exc).splitlines()[0]) from None
        return cast(DeviceArray, words)

    def indices(self, start: int, count: int) -> IndexArray:
        """int64 word indices on the device."""
        return cast(
            IndexArray,
            self._t.arange(start, start + count, dtype=self._t.int64, device=self._dev),
        )

    def to_words(self, values: IndexArray) -> DeviceArray:
        """[0, 2^32) into int32 with the same bits (shifted into the signed range first)."""
        return _tensor(values - ((values >> 31) << 32)).to(self._t.int32)

    def write(self, buf: DeviceArray, offset: int, words: DeviceArray) -> None:
        """Store a block."""
        _tensor(buf[offset : offset + _tensor(words).numel()]).copy_(words)

    def compare(
        self, buf: DeviceArray, offset: int, expected: DeviceArray, limit: int
    ) -> BlockMismatches:
        """Count on the device; only the first `limit` positions and values come back."""
        want = _tensor(expected)
        got = _tensor(buf)[offset : offset + want.numel()]
        bad = got.ne(want)
        count = int(bad.sum().item())
        pos = self._t.nonzero(bad).flatten()[:limit] if count and limit else bad.new_empty(0)
        pos = pos.to(self._t.int64)
        return block_mismatches(count, pos.cpu(), want[pos].cpu(), got[pos].cpu())

    def copy_seconds(self, src: DeviceArray, dst: DeviceArray, repeats: int) -> float:
        """Copies timed between two CUDA events."""
        target = _tensor(dst)
        start = self._t.cuda.Event(enable_timing=True)
        end = self._t.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(repeats):
            target.copy_(src)
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end)) / 1e3

    def synchronize(self) -> None:
        """Wait for the device."""
        self._t.cuda.synchronize(self._dev)

    def make_gemm(self, size: int) -> TorchGemm:
        """BF16 on compute capability 8.0+ (Ampere and later), FP16 before."""
        major = int(self._t.cuda.get_device_capability(self._dev)[0])
        return TorchGemm(self._t, self._dev, size, bf16=major >= 8)

    def release(self) -> None:
        """Hand the caching allocator's blocks back to the driver."""
        self._t.cuda.empty_cache()


class TorchRuntime:
    """PyTorch as found at run time."""

    name = "torch"

    def __init__(self, torch: object) -> None:
        self._t = cast(ModuleType, torch)  # the one narrowing: torch, or a test's stand-in
        self.version = str(self._t.__version__)

    def devices(self) -> tuple[DeviceInfo, ...]:
        """The CUDA devices PyTorch sees; RuntimeError says why there are none."""
        if getattr(self._t.version, "cuda", None) is None:
            raise RuntimeError("a CPU-only build")
        if not self._t.cuda.is_available():
            return ()
        return tuple(self._info(i) for i in range(int(self._t.cuda.device_count())))

    def _info(self, index: int) -> DeviceInfo:
        p = self._t.cuda.get_device_properties(index)
        raw_uuid = getattr(p, "uuid", None)
        bus = getattr(p, "pci_bus_id", None)
        return DeviceInfo(
            index=index,
            name=str(p.name),
            memory_total_bytes=int(p.total_memory),
            uuid=None if raw_uuid is None else _gpu_uuid(str(raw_uuid)),
            pci_bus_id=None
            if bus is None
            else _bus_id(
                int(getattr(p, "pci_domain_id", 0)), int(bus), int(getattr(p, "pci_device_id", 0))
            ),
        )

    def open(self, index: int) -> TorchBackend:
        """Bind to CUDA device `index`."""
        return TorchBackend(self._t, self._info(index))


# --- CuPy ---------------------------------------------------------------------------------------


class CupyGemm:
    """Square FP16 GEMMs on the current CuPy device."""

    dtype = "float16"

    def __init__(self, cp: ModuleType, device: _Synchronizing, size: int, seed: int = 0) -> None:
        self._cp = cp
        self._device = device
        self.size = size
        rs = cp.random.RandomState(seed)
        self._a = rs.standard_normal((size, size)).astype(cp.float16)
        self._b = rs.standard_normal((size, size)).astype(cp.float16)
        self._ref = cp.matmul(self._a, self._b)
        self._c = cp.empty_like(self._ref)

    def run(self, count: int) -> None:
        """Queue `count` products, then wait."""
        for _ in range(count):
            self._cp.matmul(self._a, self._b, out=self._c)
        self._device.synchronize()

    def verify(self) -> bool:
        """Whether the last product equals the first one bit for bit."""
        return bool(self._cp.array_equal(self._c, self._ref))


class CupyBackend:
    """CuPy on one CUDA device (made current for this thread)."""

    name = "cupy"
    workspace_bytes = WORKSPACE_BYTES
    max_copy_bytes = GIB
    block_words = 1 << 23

    def __init__(self, cp: ModuleType, info: DeviceInfo) -> None:
        self._cp = cp
        self.device = info
        self._dev = cp.cuda.Device(info.index)
        self._dev.use()

    def free_bytes(self) -> int:
        """Free memory as the driver reports it."""
        return int(self._dev.mem_info[0])

    def allocate(self, n_bytes: int) -> DeviceArray:
        """n_bytes / 4 uint32 words."""
        try:
            words = self._cp.empty(n_bytes // WORD_BYTES, dtype=self._cp.uint32)
        except self._cp.cuda.memory.OutOfMemoryError as exc:
            raise DeviceOutOfMemory(str(exc).splitlines()[0]) from None
        return cast(DeviceArray, words)

    def indices(self, start: int, count: int) -> IndexArray:
        """int64 word indices on the device."""
        return cast(IndexArray, self._cp.arange(start, start + count, dtype=self._cp.int64))

    def to_words(self, values: IndexArray) -> DeviceArray:
        """[0, 2^32) into uint32."""
        return _cupy_array(values).astype(self._cp.uint32)

    def write(self, buf: DeviceArray, offset: int, words: DeviceArray) -> None:
        """Store a block."""
        _cupy_array(buf)[offset : offset + _cupy_array(words).size] = words

    def compare(
        self, buf: DeviceArray, offset: int, expected: DeviceArray, limit: int
    ) -> BlockMismatches:
        """Count on the device; only the first `limit` positions and values come back."""
        cp = self._cp
        got = buf[offset : offset + _cupy_array(expected).size]
        bad = got != expected
        count = int(cp.count_nonzero(bad))
        pos = cp.flatnonzero(bad)[:limit] if count and limit else cp.empty(0, dtype=cp.int64)
        return block_mismatches(count, pos, expected[pos], got[pos])

    def copy_seconds(self, src: DeviceArray, dst: DeviceArray, repeats: int) -> float:
        """Copies timed between two CUDA events."""
        cp = self._cp
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        for _ in range(repeats):
            cp.copyto(dst, src)
        end.record()
        end.synchronize()
        return float(cp.cuda.get_elapsed_time(start, end)) / 1e3

    def synchronize(self) -> None:
        """Wait for the device."""
        self._dev.synchronize()

    def make_gemm(self, size: int) -> CupyGemm:
        """FP16 (CuPy has no BF16 type)."""
        return CupyGemm(self._cp, self._dev, size)

    def release(self) -> None:
        """Hand the memory pool's blocks back to the driver."""
        self._cp.get_default_memory_pool().free_all_blocks()


class CupyRuntime:
    """CuPy as found at run time."""

    name = "cupy"

    def __init__(self, cp: object) -> None:
        self._cp = cast(ModuleType, cp)  # the one narrowing: cupy, or a test's stand-in
        self.version = str(self._cp.__version__)

    def devices(self) -> tuple[DeviceInfo, ...]:
        """The CUDA devices CuPy sees; its CUDARuntimeError (a RuntimeError) says why none."""
        count = int(self._cp.cuda.runtime.getDeviceCount())
        return tuple(self._info(i) for i in range(count))

    def _info(self, index: int) -> DeviceInfo:
        p = self._cp.cuda.runtime.getDeviceProperties(index)
        name = p.get("name", b"unknown CUDA device")
        raw = p.get("uuid")
        return DeviceInfo(
            index=index,
            name=name.decode(errors="replace") if isinstance(name, bytes) else str(name),
            memory_total_bytes=int(p.get("totalGlobalMem", 0)),
            uuid=_gpu_uuid(str(uuid_module.UUID(bytes=bytes(raw[:16])))) if raw else None,
            pci_bus_id=_bus_id(p.get("pciDomainID", 0), p["pciBusID"], p.get("pciDeviceID", 0))
            if "pciBusID" in p
            else None,
        )

    def open(self, index: int) -> CupyBackend:
        """Bind to CUDA device `index`."""
        return CupyBackend(self._cp, self._info(index))
