# ruff: noqa: N802, N815 - the fake mirrors pynvml's camelCase names exactly
"""A fake `pynvml` module that behaves like real NVML, for tests on machines without a GPU.

Injected at the one seam, `NvmlSource(nvml_module=...)`. It mirrors nvidia-ml-py's surface: the
same function names and argument order, `NVMLError` whose constructor maps a return code to the
`NVMLError_<Name>` subclass (as `_extractNVMLErrorsAsClasses` does), the real error codes
(NOT_SUPPORTED = 3, LIBRARY_NOT_FOUND = 12, ...), reference counting of `nvmlInit`, `str` results,
power in mW, memory in bytes, CUDA version as `major*1000 + minor*10`.

Cards (reference.md §1.4): `A100_80GB_PCIE` supports ECC, remapped rows and MIG; as a passively
cooled data-center card it has no fan (`nvmlDeviceGetFanSpeed` -> NotSupported, as L40S/H100 show
`fan.speed [N/A]`), and retired pages are NotSupported on Ampere+ (row remapping replaced them;
N/A even on H100). `RTX_4090` (GeForce) raises NotSupported for ECC, retired pages, remapped rows,
MIG mode, serial and the total-energy counter (as some GeForce drivers do), and reports its fan.
A100 behaviour is inferred from nvml.h, not captured.
"""

from __future__ import annotations

import dataclasses
import string
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, ClassVar, Literal

NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_UNKNOWN = 999

_MESSAGES = {
    NVML_ERROR_UNINITIALIZED: "Uninitialized",
    NVML_ERROR_INVALID_ARGUMENT: "Invalid Argument",
    NVML_ERROR_NOT_SUPPORTED: "Not Supported",
    NVML_ERROR_NO_PERMISSION: "Insufficient Permissions",
    NVML_ERROR_NOT_FOUND: "Not Found",
    NVML_ERROR_DRIVER_NOT_LOADED: "Driver Not Loaded",
    NVML_ERROR_LIBRARY_NOT_FOUND: "NVML Shared Library Not Found",
    NVML_ERROR_FUNCTION_NOT_FOUND: "Function Not Found",
    NVML_ERROR_GPU_IS_LOST: "GPU is lost",
    NVML_ERROR_UNKNOWN: "Unknown Error",
}


class NVMLError(Exception):
    """Real NVML's base error: `NVMLError(code)` returns the matching subclass instance."""

    _value_class: ClassVar[dict[int, type[NVMLError]]] = {}
    value: int

    def __new__(cls, value: int) -> NVMLError:
        if cls is NVMLError:
            cls = NVMLError._value_class.get(value, cls)
        obj = Exception.__new__(cls)
        obj.value = value
        return obj

    def __init__(self, value: int) -> None:
        super().__init__(value)

    def __str__(self) -> str:
        return _MESSAGES.get(self.value, f"NVML Error with code {self.value}")


def _make_error_classes() -> dict[str, type[NVMLError]]:
    classes: dict[str, type[NVMLError]] = {}
    for const, code in list(globals().items()):
        if not const.startswith("NVML_ERROR_"):
            continue
        suffix = string.capwords(const.removeprefix("NVML_ERROR_"), "_").replace("_", "")
        cls = type(f"NVMLError_{suffix}", (NVMLError,), {})
        NVMLError._value_class[code] = cls
        classes[cls.__name__] = cls
    return classes


ERROR_CLASSES = _make_error_classes()
NVMLError_NotSupported = ERROR_CLASSES["NVMLError_NotSupported"]
NVMLError_LibraryNotFound = ERROR_CLASSES["NVMLError_LibraryNotFound"]
NVMLError_GpuIsLost = ERROR_CLASSES["NVMLError_GpuIsLost"]
NVMLError_FunctionNotFound = ERROR_CLASSES["NVMLError_FunctionNotFound"]

_MIB = 1 << 20


@dataclass(frozen=True)
class FakeCard:
    """One GPU's readings and the NVML functions it does not support."""

    name: str
    uuid: str
    memory_total_bytes: int
    memory_used_bytes: int
    memory_reserved_bytes: int
    temperature_c: int
    sm_clock_mhz: int
    sm_clock_max_mhz: int
    mem_clock_mhz: int
    mem_clock_max_mhz: int
    power_mw: int
    power_limit_mw: int
    utilization_gpu_pct: int
    throttle_mask: int
    fan_pct: int
    pcie_gen: int
    pcie_width: int
    pstate: int
    serial: str
    pci_bus_id: str
    ecc_volatile: tuple[int, int] = (0, 0)
    """(corrected, uncorrected)."""
    ecc_aggregate: tuple[int, int] = (0, 0)
    remapped_rows: tuple[int, int, int, int] = (0, 0, 0, 0)
    mig_mode: tuple[int, int] = (0, 0)
    energy_mj: int = 0
    """nvmlDeviceGetTotalEnergyConsumption: mJ since the driver loaded (Volta+)."""
    not_supported: frozenset[str] = frozenset()


GEFORCE_NOT_SUPPORTED = frozenset(
    {
        "nvmlDeviceGetTotalEccErrors",
        "nvmlDeviceGetEccMode",
        "nvmlDeviceGetRetiredPages",
        "nvmlDeviceGetRetiredPagesPendingStatus",
        "nvmlDeviceGetRemappedRows",
        "nvmlDeviceGetMigMode",
        "nvmlDeviceGetSerial",
        # Issue 29: GeForce drivers that answer NotSupported for the counter (integrate power).
        "nvmlDeviceGetTotalEnergyConsumption",
    }
)

A100_80GB_PCIE = FakeCard(
    name="NVIDIA A100 80GB PCIe",
    uuid="GPU-a100a100-0000-4000-8000-000000000001",
    memory_total_bytes=81920 * _MIB,
    memory_used_bytes=73728 * _MIB,
    memory_reserved_bytes=594 * _MIB,
    temperature_c=61,
    sm_clock_mhz=1410,
    sm_clock_max_mhz=1410,
    mem_clock_mhz=1512,
    mem_clock_max_mhz=1512,
    power_mw=251_430,
    power_limit_mw=300_000,
    utilization_gpu_pct=97,
    throttle_mask=0x4,  # SW power cap under load
    fan_pct=0,
    pcie_gen=4,
    pcie_width=16,
    pstate=0,
    serial="1324021012345",
    pci_bus_id="00000000:17:00.0",
    ecc_volatile=(2, 0),
    ecc_aggregate=(5, 0),
    mig_mode=(0, 0),
    not_supported=frozenset(
        {
            "nvmlDeviceGetFanSpeed",
            "nvmlDeviceGetRetiredPages",
            "nvmlDeviceGetRetiredPagesPendingStatus",
        }
    ),
)

RTX_4090 = FakeCard(
    name="NVIDIA GeForce RTX 4090",
    uuid="GPU-40904090-0000-4000-8000-000000000002",
    memory_total_bytes=24564 * _MIB,
    memory_used_bytes=22100 * _MIB,
    memory_reserved_bytes=434 * _MIB,
    temperature_c=84,
    sm_clock_mhz=2310,
    sm_clock_max_mhz=3120,
    mem_clock_mhz=10501,
    mem_clock_max_mhz=10501,
    power_mw=438_120,
    power_limit_mw=450_000,
    utilization_gpu_pct=100,
    throttle_mask=0x24,  # SW power cap + SW thermal slowdown
    fan_pct=78,
    pcie_gen=4,
    pcie_width=16,
    pstate=2,
    serial="",
    pci_bus_id="00000000:01:00.0",
    not_supported=GEFORCE_NOT_SUPPORTED,
)

Mode = Literal["ok", "no_library", "no_driver", "no_gpu"]


@dataclass
class FakeNvml:
    """The fake module object: pass it as `NvmlSource(nvml_module=FakeNvml(...))`."""

    cards: tuple[FakeCard, ...] = (A100_80GB_PCIE,)
    mode: Mode = "ok"
    driver_version: str = "570.133.20"
    cuda_driver_version: int = 12080
    function_not_found: frozenset[str] = frozenset()
    """Functions this "driver" lacks (e.g. the v2 memory call on an old driver)."""
    calls: dict[str, int] = field(default_factory=dict)
    lost: set[int] = field(default_factory=set)
    init_count: int = 0

    NVMLError: ClassVar[type[NVMLError]] = NVMLError
    NVML_TEMPERATURE_GPU: ClassVar[int] = 0
    NVML_CLOCK_GRAPHICS: ClassVar[int] = 0
    NVML_CLOCK_SM: ClassVar[int] = 1
    NVML_CLOCK_MEM: ClassVar[int] = 2
    NVML_VOLATILE_ECC: ClassVar[int] = 0
    NVML_AGGREGATE_ECC: ClassVar[int] = 1
    nvmlMemory_v2: ClassVar[int] = 0x02000028

    def __getattr__(self, name: str) -> Any:
        # Module-level attributes such as NVML_ERROR_NOT_SUPPORTED or NVMLError_NotSupported.
        if name in ERROR_CLASSES:
            return ERROR_CLASSES[name]
        if name.startswith("NVML_ERROR_") and name in globals():
            return globals()[name]
        raise AttributeError(name)

    def set_card(self, index: int, **changes: Any) -> None:
        """Change a card's readings between samples."""
        cards = list(self.cards)
        cards[index] = dataclasses.replace(cards[index], **changes)
        self.cards = tuple(cards)

    def _enter(self, fn: str, handle: SimpleNamespace | None = None) -> FakeCard | None:
        self.calls[fn] = self.calls.get(fn, 0) + 1
        if fn in self.function_not_found:
            raise NVMLError(NVML_ERROR_FUNCTION_NOT_FOUND)
        if fn not in ("nvmlInit", "nvmlShutdown") and self.init_count <= 0:
            raise NVMLError(NVML_ERROR_UNINITIALIZED)
        if handle is None:
            return None
        if handle.index in self.lost:
            raise NVMLError(NVML_ERROR_GPU_IS_LOST)
        card: FakeCard = self.cards[int(handle.index)]
        if fn in card.not_supported:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return card

    # --- library -------------------------------------------------------------------------
    def nvmlInit(self) -> None:
        self._enter("nvmlInit")
        if self.mode == "no_library":
            raise NVMLError(NVML_ERROR_LIBRARY_NOT_FOUND)
        if self.mode == "no_driver":
            raise NVMLError(NVML_ERROR_DRIVER_NOT_LOADED)
        self.init_count += 1

    def nvmlShutdown(self) -> None:
        self._enter("nvmlShutdown")
        if self.init_count <= 0:
            raise NVMLError(NVML_ERROR_UNINITIALIZED)
        self.init_count -= 1

    def nvmlSystemGetDriverVersion(self) -> str:
        self._enter("nvmlSystemGetDriverVersion")
        return self.driver_version

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        self._enter("nvmlSystemGetCudaDriverVersion")
        return self.cuda_driver_version

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:
        self._enter("nvmlSystemGetCudaDriverVersion_v2")
        return self.cuda_driver_version

    def nvmlDeviceGetCount(self) -> int:
        self._enter("nvmlDeviceGetCount")
        return 0 if self.mode == "no_gpu" else len(self.cards)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> SimpleNamespace:
        self._enter("nvmlDeviceGetHandleByIndex")
        if self.mode == "no_gpu" or not 0 <= index < len(self.cards):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return SimpleNamespace(index=index)

    # --- identity ------------------------------------------------------------------------
    def nvmlDeviceGetName(self, handle: SimpleNamespace) -> str:
        card = self._card("nvmlDeviceGetName", handle)
        return card.name

    def nvmlDeviceGetUUID(self, handle: SimpleNamespace) -> str:
        return self._card("nvmlDeviceGetUUID", handle).uuid

    def nvmlDeviceGetSerial(self, handle: SimpleNamespace) -> str:
        return self._card("nvmlDeviceGetSerial", handle).serial

    def nvmlDeviceGetPciInfo(self, handle: SimpleNamespace) -> SimpleNamespace:
        return SimpleNamespace(busId=self._card("nvmlDeviceGetPciInfo", handle).pci_bus_id)

    # --- fast set ------------------------------------------------------------------------
    def nvmlDeviceGetMemoryInfo(self, handle: SimpleNamespace, version: int | None = None) -> Any:
        fn = "nvmlDeviceGetMemoryInfo_v2" if version else "nvmlDeviceGetMemoryInfo"
        card = self._card(fn, handle)
        free = card.memory_total_bytes - card.memory_used_bytes
        if version:
            return SimpleNamespace(
                version=version,
                total=card.memory_total_bytes,
                reserved=card.memory_reserved_bytes,
                free=free,
                used=card.memory_used_bytes,
            )
        return SimpleNamespace(
            total=card.memory_total_bytes, free=free, used=card.memory_used_bytes
        )

    def nvmlDeviceGetTemperature(self, handle: SimpleNamespace, sensor: int) -> int:
        self._sensor(sensor)
        return self._card("nvmlDeviceGetTemperature", handle).temperature_c

    def nvmlDeviceGetTemperatureV(self, handle: SimpleNamespace, sensor: int) -> int:
        self._sensor(sensor)
        return self._card("nvmlDeviceGetTemperatureV", handle).temperature_c

    def nvmlDeviceGetClockInfo(self, handle: SimpleNamespace, clock_type: int) -> int:
        card = self._card("nvmlDeviceGetClockInfo", handle)
        return self._by_clock(clock_type, card.sm_clock_mhz, card.mem_clock_mhz)

    def nvmlDeviceGetMaxClockInfo(self, handle: SimpleNamespace, clock_type: int) -> int:
        card = self._card("nvmlDeviceGetMaxClockInfo", handle)
        return self._by_clock(clock_type, card.sm_clock_max_mhz, card.mem_clock_max_mhz)

    def nvmlDeviceGetPowerUsage(self, handle: SimpleNamespace) -> int:
        return self._card("nvmlDeviceGetPowerUsage", handle).power_mw

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: SimpleNamespace) -> int:
        return self._card("nvmlDeviceGetTotalEnergyConsumption", handle).energy_mj

    def nvmlDeviceGetUtilizationRates(self, handle: SimpleNamespace) -> SimpleNamespace:
        card = self._card("nvmlDeviceGetUtilizationRates", handle)
        if card.mig_mode[0]:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)  # not supported on MIG-enabled GPUs
        return SimpleNamespace(gpu=card.utilization_gpu_pct, memory=40)

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: SimpleNamespace) -> int:
        return self._card("nvmlDeviceGetCurrentClocksEventReasons", handle).throttle_mask

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: SimpleNamespace) -> int:
        return self._card("nvmlDeviceGetCurrentClocksThrottleReasons", handle).throttle_mask

    def nvmlDeviceGetPerformanceState(self, handle: SimpleNamespace) -> int:
        return self._card("nvmlDeviceGetPerformanceState", handle).pstate

    # --- slow set and health -------------------------------------------------------------
    def nvmlDeviceGetEnforcedPowerLimit(self, handle: SimpleNamespace) -> int:
        return self._card("nvmlDeviceGetEnforcedPowerLimit", handle).power_limit_mw

    def nvmlDeviceGetFanSpeed(self, handle: SimpleNamespace) -> int:
        return self._card("nvmlDeviceGetFanSpeed", handle).fan_pct

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle: SimpleNamespace) -> int:
        return self._card("nvmlDeviceGetCurrPcieLinkGeneration", handle).pcie_gen

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle: SimpleNamespace) -> int:
        return self._card("nvmlDeviceGetCurrPcieLinkWidth", handle).pcie_width

    def nvmlDeviceGetTotalEccErrors(
        self, handle: SimpleNamespace, error_type: int, counter_type: int
    ) -> int:
        card = self._card("nvmlDeviceGetTotalEccErrors", handle)
        counts = card.ecc_volatile if counter_type == 0 else card.ecc_aggregate
        return counts[error_type]

    def nvmlDeviceGetEccMode(self, handle: SimpleNamespace) -> list[int]:
        self._card("nvmlDeviceGetEccMode", handle)
        return [1, 1]

    def nvmlDeviceGetMigMode(self, handle: SimpleNamespace) -> list[int]:
        return list(self._card("nvmlDeviceGetMigMode", handle).mig_mode)

    def nvmlDeviceGetRetiredPages(self, handle: SimpleNamespace, cause: int) -> list[int]:
        self._card("nvmlDeviceGetRetiredPages", handle)
        return []

    def nvmlDeviceGetRetiredPagesPendingStatus(self, handle: SimpleNamespace) -> int:
        self._card("nvmlDeviceGetRetiredPagesPendingStatus", handle)
        return 0

    def nvmlDeviceGetRemappedRows(self, handle: SimpleNamespace) -> tuple[int, int, int, int]:
        return self._card("nvmlDeviceGetRemappedRows", handle).remapped_rows

    # --- helpers -------------------------------------------------------------------------
    def _card(self, fn: str, handle: SimpleNamespace) -> FakeCard:
        card = self._enter(fn, handle)
        assert card is not None
        return card

    @staticmethod
    def _sensor(sensor: int) -> None:
        if sensor != 0:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)

    @staticmethod
    def _by_clock(clock_type: int, sm: int, mem: int) -> int:
        if clock_type in (0, 1):
            return sm
        if clock_type == 2:
            return mem
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
