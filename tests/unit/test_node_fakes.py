"""Fakes for the node tests: a CuPy whose arrays are NumPy's, torch stubs, a scripted GPU port.

CuPy mirrors NumPy's API, so `FakeCupy` hands out NumPy for the array calls and fakes only the
`cupy.cuda` surface the backend touches (runtime properties, Device, Event, the OOM error, the
memory pool). That runs `CupyBackend`'s own code on the CPU; the real library runs on a device
machine (scripts/device_check_node.sh).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from gputui.telemetry.samples import GpuIdentity, GpuSample

MIB = 1 << 20


class FakeOutOfMemory(Exception):
    pass


@dataclass
class FakeCudaCard:
    name: str
    total_bytes: int
    uuid: str
    """"GPU-..." as NVML prints it."""
    pci_bus: int = 1


class _Event:
    def __init__(self) -> None:
        self.t_ns = 0

    def record(self) -> None:
        self.t_ns = time.perf_counter_ns()

    def synchronize(self) -> None:
        pass


class FakeCupy:
    """`cupy` with NumPy arrays; `limit_bytes` caps what `empty` hands out per device."""

    __version__ = "13.3.0"

    def __init__(self, cards: Sequence[FakeCudaCard], limit_bytes: int | None = None) -> None:
        self.cards = list(cards)
        self.limit_bytes = limit_bytes
        self.used = 0
        self.current = 0
        self.freed_pool = 0
        fake = self

        class Device:
            def __init__(self, index: int) -> None:
                self.index = index

            def use(self) -> None:
                fake.current = self.index

            @property
            def mem_info(self) -> tuple[int, int]:
                total = fake.limit_bytes or fake.cards[self.index].total_bytes
                return total - fake.used, total

            def synchronize(self) -> None:
                pass

        def properties(index: int) -> dict[str, Any]:
            card = fake.cards[index]
            return {
                "name": card.name.encode(),
                "totalGlobalMem": card.total_bytes,
                "uuid": uuid.UUID(card.uuid.removeprefix("GPU-")).bytes,
                "pciBusID": card.pci_bus,
                "pciDeviceID": 0,
                "pciDomainID": 0,
            }

        self.cuda = SimpleNamespace(
            runtime=SimpleNamespace(
                getDeviceCount=lambda: len(fake.cards), getDeviceProperties=properties
            ),
            Device=Device,
            Event=_Event,
            get_elapsed_time=lambda a, b: (b.t_ns - a.t_ns) / 1e6,
            memory=SimpleNamespace(OutOfMemoryError=FakeOutOfMemory),
        )

    def __getattr__(self, name: str) -> Any:
        return getattr(np, name)

    def empty(self, shape: Any, dtype: Any = float) -> Any:
        n = int(np.prod(shape)) * np.dtype(dtype).itemsize
        if self.limit_bytes is not None and self.used + n > self.limit_bytes:
            raise FakeOutOfMemory(f"Out of memory allocating {n:,} bytes")
        self.used += n
        return np.empty(shape, dtype=dtype)

    def get_default_memory_pool(self) -> Any:
        def free_all_blocks() -> None:
            self.freed_pool += 1
            self.used = 0

        return SimpleNamespace(free_all_blocks=free_all_blocks)


def fake_torch(*, cuda_build: str | None = "12.4", devices: int = 0) -> SimpleNamespace:
    """Enough of `torch` for detection: a CPU-only build, or CUDA with `devices` GPUs."""
    return SimpleNamespace(
        __version__="2.4.1" if cuda_build else "2.4.1+cpu",
        version=SimpleNamespace(cuda=cuda_build),
        cuda=SimpleNamespace(is_available=lambda: devices > 0, device_count=lambda: devices),
    )


@dataclass
class ScriptedPort:
    """A GPU port replaying `samples(i)` for the i-th call: (sm MHz, temp C, power W, mask)."""

    index: int = 0
    script: list[tuple[int, float, float, int]] = field(default_factory=list)
    name: str = "nvml"
    max_clock_mhz: int | None = 3120
    calls: int = 0
    closed: bool = False

    def sample(self) -> tuple[GpuSample, ...]:
        sm, temp, power, mask = self.script[min(self.calls, len(self.script) - 1)]
        self.calls += 1
        return (
            GpuSample(
                index=self.index,
                uuid="GPU-x",
                name="NVIDIA GeForce RTX 4090",
                t_ns=time.perf_counter_ns(),
                sm_clock_mhz=sm,
                sm_clock_max_mhz=self.max_clock_mhz,
                temperature_c=temp,
                power_w=power,
                throttle_mask=mask,
            ),
        )

    def identities(self) -> tuple[GpuIdentity, ...]:
        return ()

    def close(self) -> None:
        self.closed = True


def test_fake_cupy_refuses_past_its_limit() -> None:
    cp = FakeCupy([FakeCudaCard("NVIDIA H200", 64 * MIB, f"GPU-{uuid.UUID(int=1)}")], 6 * MIB)
    cp.empty(MIB, dtype=np.uint32)  # 4 MiB
    with pytest.raises(FakeOutOfMemory):
        cp.empty(MIB, dtype=np.uint32)
    assert cp.cuda.Device(0).mem_info == (2 * MIB, 6 * MIB)
