"""Local GPUs through NVML (nvidia-ml-py): the only module that imports `pynvml`.

Contract: `NvmlSource(nvml_module=None)` initialises NVML and finds the GPUs, or raises
`NvmlUnavailable` with a one-line reason (library not installed or not found, driver not loaded, no
GPU) - never a traceback. Tests inject a fake module at that one seam. Every per-device call goes
through `_query`, which turns any `NVMLError` (NotSupported on GeForce, NoPermission, GpuIsLost...)
into None, as nvitop's `nvmlQuery` does (reference.md §1.6), so a field the card does not support
shows as n/a and a lost GPU yields a sample of Nones rather than a dead thread. When a newer wrapper
is missing from an older driver (FunctionNotFound) the call falls back to the older spelling.

Cost (reference.md §1.5): NVML calls serialise on the driver's lock, so `sample()` reads only the
fast-changing set each time (temperature, clocks, power, the energy counter, utilisation, memory,
clock-event reasons, P-state) and re-reads the slow set (max clocks, power limit, fan, PCIe link,
ECC, MIG) every `slow_interval_s`. Call it from a worker thread, never from an event loop.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Callable, Sequence, Sized
from dataclasses import dataclass
from typing import Final, Protocol, SupportsFloat, SupportsInt, cast

from gputui.errors import NvmlUnavailable
from gputui.telemetry.samples import GpuHealth, GpuIdentity, GpuSample
from gputui.telemetry.throttle import decode

# NVML constants (nvml.h), used when the module object does not define them.
_CLOCK_SM: Final = 1
_CLOCK_MEM: Final = 2
_TEMPERATURE_GPU: Final = 0
_ERROR_FUNCTION_NOT_FOUND: Final = 13
_ERROR_LIBRARY_NOT_FOUND: Final = 12
_ERROR_DRIVER_NOT_LOADED: Final = 9
_ERROR_NO_PERMISSION: Final = 4
_CORRECTED: Final = 0
_UNCORRECTED: Final = 1
_VOLATILE: Final = 0
_AGGREGATE: Final = 1
_MEMORY_V2: Final = 0x02000028

Attempt = tuple[str, tuple[object, ...], dict[str, object]]
"""(NVML function name, its arguments, its keyword arguments)."""


class NvmlModule(Protocol):
    """What `NvmlSource` calls on pynvml (or a test's stand-in) by attribute.

    Every per-device call goes through `NvmlSource._query` by name: an older driver may lack it.
    """

    @property
    def NVMLError(self) -> type[Exception]:  # noqa: N802 - pynvml's spelling
        """The base of every NVML error."""
        ...

    def nvmlInit(self) -> None: ...  # noqa: N802
    def nvmlShutdown(self) -> None: ...  # noqa: N802
    def nvmlDeviceGetCount(self) -> int: ...  # noqa: N802


class _Utilization(Protocol):
    """nvmlUtilization_t."""

    gpu: int


class _MemoryInfo(Protocol):
    """nvmlMemory_t (v2 adds `reserved`, read with getattr)."""

    total: int
    used: int


def load_pynvml() -> NvmlModule:
    """Import nvidia-ml-py, or fail with the install hint (never at gputui import time)."""
    try:
        with warnings.catch_warnings():
            # The deprecated `pynvml` wheel shadows nvidia-ml-py and warns on import (§1.1).
            warnings.simplefilter("ignore", FutureWarning)
            import pynvml
    except ImportError as exc:
        raise NvmlUnavailable(
            f"nvidia-ml-py is not installed ({exc}); pip install nvidia-ml-py"
        ) from None
    return cast(NvmlModule, pynvml)


@dataclass(slots=True)
class _Slow:
    t_ns: int
    sm_clock_max_mhz: int | None
    mem_clock_max_mhz: int | None
    power_limit_w: float | None
    fan_pct: float | None
    pcie_gen: int | None
    pcie_width: int | None
    ecc_volatile_errors: int | None
    mig_mode: bool | None


class NvmlSource:
    """The GPUs of this machine through NVML (see the module docstring)."""

    name = "nvml"

    def __init__(
        self,
        nvml_module: NvmlModule | None = None,
        *,
        slow_interval_s: float = 5.0,
        clock: Callable[[], int] = time.perf_counter_ns,
    ) -> None:
        nvml = load_pynvml() if nvml_module is None else nvml_module
        self._nvml = nvml
        self._error: type[Exception] = nvml.NVMLError
        self._clock = clock
        self._slow_interval_ns = int(slow_interval_s * 1e9)
        self._slow: dict[int, _Slow] = {}
        self.errors: dict[str, str] = {}
        """Last NVML error per function name, for diagnostics (e.g. "Not Supported")."""
        try:
            nvml.nvmlInit()
        except self._error as exc:
            raise NvmlUnavailable(_init_reason(exc)) from None
        except OSError as exc:
            raise NvmlUnavailable(f"NVML could not be loaded: {exc}") from None
        try:
            count = int(nvml.nvmlDeviceGetCount())
        except self._error as exc:
            self._shutdown()
            raise NvmlUnavailable(f"NVML cannot count GPUs: {exc}") from None
        self._handles: dict[int, object] = {}
        """NVML's opaque device handles, only ever passed back to NVML."""
        for index in range(count):
            handle = self._query(("nvmlDeviceGetHandleByIndex", (index,), {}))
            if handle is not None:
                self._handles[index] = handle
        if not self._handles:
            self._shutdown()
            raise NvmlUnavailable("no NVIDIA GPU found (NVML reports none that can be opened)")
        self.driver_version: str | None = _text(self._query(("nvmlSystemGetDriverVersion", (), {})))
        self.cuda_version: str | None = _cuda_version(
            self._query(
                ("nvmlSystemGetCudaDriverVersion_v2", (), {}),
                ("nvmlSystemGetCudaDriverVersion", (), {}),
            )
        )
        self._identity: dict[int, tuple[str, str]] = {
            index: (
                _text(self._query(("nvmlDeviceGetUUID", (h,), {}))) or f"GPU-index-{index}",
                _text(self._query(("nvmlDeviceGetName", (h,), {}))) or "unknown NVIDIA GPU",
            )
            for index, h in self._handles.items()
        }

    @property
    def indices(self) -> tuple[int, ...]:
        """The GPU indices this source reads."""
        return tuple(self._handles)

    def close(self) -> None:
        """Release NVML (safe to call twice)."""
        if self._handles:
            self._handles = {}
            self._shutdown()

    def _shutdown(self) -> None:
        with contextlib.suppress(self._error):
            self._nvml.nvmlShutdown()

    def _const(self, name: str, default: int) -> int:
        value = getattr(self._nvml, name, default)
        return int(value)

    def _query(self, *attempts: Attempt) -> object:
        """The first attempt's result; None on any NVMLError (n/a); skips past missing calls."""
        for fn_name, args, kwargs in attempts:
            fn = getattr(self._nvml, fn_name, None)
            if fn is None:
                continue
            try:
                return fn(*args, **kwargs)
            except TypeError:
                continue  # an older nvidia-ml-py without this keyword (e.g. memory `version=`)
            except self._error as exc:
                self.errors[fn_name] = str(exc)
                if getattr(exc, "value", None) == _ERROR_FUNCTION_NOT_FOUND:
                    continue
                return None
        return None

    def identities(self) -> tuple[GpuIdentity, ...]:
        """Name, UUID, memory, driver, power limit, MIG and ECC mode of each GPU."""
        out = []
        for index, h in self._handles.items():
            uuid, name = self._identity[index]
            memory = self._memory(h)
            limit = self._query(("nvmlDeviceGetEnforcedPowerLimit", (h,), {}))
            out.append(
                GpuIdentity(
                    index=index,
                    uuid=uuid,
                    name=name,
                    memory_total_bytes=memory[1],
                    driver_version=self.driver_version,
                    cuda_version=self.cuda_version,
                    power_limit_w=_watts(limit),
                    mig_mode=self._mig(h),
                    ecc_mode=self._ecc_mode(h),
                    serial=_text(self._query(("nvmlDeviceGetSerial", (h,), {}))),
                    pci_bus_id=_text(
                        getattr(self._query(("nvmlDeviceGetPciInfo", (h,), {})), "busId", None)
                    ),
                )
            )
        return tuple(out)

    def health(self, index: int) -> GpuHealth:
        """ECC counters, retired pages (pre-Ampere) and remapped rows (Ampere+) of one GPU."""
        h = self._handles[index]
        q = self._query

        def ecc(kind: int, counter: int) -> int | None:
            return _int(q(("nvmlDeviceGetTotalEccErrors", (h, kind, counter), {})))

        sbe = q(("nvmlDeviceGetRetiredPages", (h, 0), {}))
        dbe = q(("nvmlDeviceGetRetiredPages", (h, 1), {}))
        pending = q(("nvmlDeviceGetRetiredPagesPendingStatus", (h,), {}))
        rows = q(("nvmlDeviceGetRemappedRows", (h,), {}))
        return GpuHealth(
            ecc_mode=self._ecc_mode(h),
            ecc_volatile_corrected=ecc(_CORRECTED, _VOLATILE),
            ecc_volatile_uncorrected=ecc(_UNCORRECTED, _VOLATILE),
            ecc_aggregate_uncorrected=ecc(_UNCORRECTED, _AGGREGATE),
            retired_pages_sbe=None if sbe is None else len(cast("Sized", sbe)),
            retired_pages_dbe=None if dbe is None else len(cast("Sized", dbe)),
            retired_pages_pending=None if pending is None else bool(pending),
            remapped_rows_correctable=None if rows is None else _int_of(_item(rows, 0)),
            remapped_rows_uncorrectable=None if rows is None else _int_of(_item(rows, 1)),
            remapped_rows_pending=None if rows is None else bool(_item(rows, 2)),
            remapped_rows_failure=None if rows is None else bool(_item(rows, 3)),
        )

    def sample(self) -> tuple[GpuSample, ...]:
        """One sample per GPU, stamped with the engine's monotonic clock."""
        return tuple(self._sample_one(index, h) for index, h in self._handles.items())

    def _sample_one(self, index: int, h: object) -> GpuSample:
        q = self._query
        t_ns = self._clock()
        slow = self._slow.get(index)
        if slow is None or t_ns - slow.t_ns >= self._slow_interval_ns:
            slow = self._read_slow(h, t_ns)
            self._slow[index] = slow
        sensor = self._const("NVML_TEMPERATURE_GPU", _TEMPERATURE_GPU)
        temperature = q(
            ("nvmlDeviceGetTemperatureV", (h, sensor), {}),
            ("nvmlDeviceGetTemperature", (h, sensor), {}),
        )
        power_mw = q(("nvmlDeviceGetPowerUsage", (h,), {}))
        energy_mj = q(("nvmlDeviceGetTotalEnergyConsumption", (h,), {}))  # Volta+; GeForce: n/a
        util = q(("nvmlDeviceGetUtilizationRates", (h,), {}))
        mask = q(
            ("nvmlDeviceGetCurrentClocksEventReasons", (h,), {}),
            ("nvmlDeviceGetCurrentClocksThrottleReasons", (h,), {}),
        )
        pstate = q(("nvmlDeviceGetPerformanceState", (h,), {}))
        used, total, reserved = self._memory(h)
        uuid, name = self._identity[index]
        return GpuSample(
            index=index,
            uuid=uuid,
            name=name,
            t_ns=t_ns,
            temperature_c=_float(temperature),
            sm_clock_mhz=_int(q(("nvmlDeviceGetClockInfo", (h, self._clock_sm), {}))),
            sm_clock_max_mhz=slow.sm_clock_max_mhz,
            mem_clock_mhz=_int(q(("nvmlDeviceGetClockInfo", (h, self._clock_mem), {}))),
            mem_clock_max_mhz=slow.mem_clock_max_mhz,
            power_w=_watts(power_mw),
            power_limit_w=slow.power_limit_w,
            energy_mj=_float(energy_mj),
            utilization_gpu_pct=None if util is None else float(cast(_Utilization, util).gpu),
            memory_used_bytes=used,
            memory_total_bytes=total,
            memory_reserved_bytes=reserved,
            throttle_reasons=None if mask is None else decode(_int_of(mask)),
            throttle_mask=_int(mask),
            fan_pct=slow.fan_pct,
            pcie_gen=slow.pcie_gen,
            pcie_width=slow.pcie_width,
            ecc_volatile_errors=slow.ecc_volatile_errors,
            mig_mode=slow.mig_mode,
            pstate=None if pstate is None or _int_of(pstate) > 15 else _int(pstate),  # 32 = unknown
            source="nvml",
        )

    @property
    def _clock_sm(self) -> int:
        return self._const("NVML_CLOCK_SM", _CLOCK_SM)

    @property
    def _clock_mem(self) -> int:
        return self._const("NVML_CLOCK_MEM", _CLOCK_MEM)

    def _read_slow(self, h: object, t_ns: int) -> _Slow:
        q = self._query
        limit_mw = q(("nvmlDeviceGetEnforcedPowerLimit", (h,), {}))
        fan = q(("nvmlDeviceGetFanSpeed", (h,), {}))
        counts = [
            q(("nvmlDeviceGetTotalEccErrors", (h, kind, _VOLATILE), {}))
            for kind in (_CORRECTED, _UNCORRECTED)
        ]
        known = [_int_of(c) for c in counts if c is not None]
        return _Slow(
            t_ns=t_ns,
            sm_clock_max_mhz=_int(q(("nvmlDeviceGetMaxClockInfo", (h, self._clock_sm), {}))),
            mem_clock_max_mhz=_int(q(("nvmlDeviceGetMaxClockInfo", (h, self._clock_mem), {}))),
            power_limit_w=_watts(limit_mw),
            fan_pct=_float(fan),
            pcie_gen=_int(q(("nvmlDeviceGetCurrPcieLinkGeneration", (h,), {}))),
            pcie_width=_int(q(("nvmlDeviceGetCurrPcieLinkWidth", (h,), {}))),
            ecc_volatile_errors=sum(known) if known else None,
            mig_mode=self._mig(h),
        )

    def _memory(self, h: object) -> tuple[int | None, int | None, int | None]:
        """(used, total, reserved) bytes; v2 first because it separates reserved memory."""
        version = self._const("nvmlMemory_v2", _MEMORY_V2)
        found = self._query(
            ("nvmlDeviceGetMemoryInfo", (h,), {"version": version}),
            ("nvmlDeviceGetMemoryInfo", (h,), {}),
        )
        if found is None:
            return None, None, None
        mem = cast(_MemoryInfo, found)
        if not int(mem.total):
            return None, None, None  # total 0: unified memory (e.g. DGX Spark), not a VRAM figure
        reserved = getattr(mem, "reserved", None)
        return int(mem.used), int(mem.total), _int(reserved)

    def _mig(self, h: object) -> bool | None:
        modes = self._query(("nvmlDeviceGetMigMode", (h,), {}))
        return None if modes is None else bool(_item(modes, 0))

    def _ecc_mode(self, h: object) -> bool | None:
        modes = self._query(("nvmlDeviceGetEccMode", (h,), {}))
        return None if modes is None else bool(_item(modes, 0))


def _init_reason(exc: Exception) -> str:
    code = getattr(exc, "value", None)
    if code == _ERROR_LIBRARY_NOT_FOUND:
        return "NVML library (libnvidia-ml.so.1) not found: no NVIDIA driver on this machine"
    if code == _ERROR_DRIVER_NOT_LOADED:
        return "the NVIDIA driver is not loaded"
    if code == _ERROR_NO_PERMISSION:
        return "no permission to use NVML"
    return f"NVML failed to initialise: {exc}"


def _text(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return str(value)


def _int_of(value: object) -> int:
    """An NVML number (a Python int, or a ctypes value that converts) as an int."""
    return int(cast(SupportsInt, value))


def _int(value: object) -> int | None:
    return None if value is None else _int_of(value)


def _float(value: object) -> float | None:
    return None if value is None else float(cast(SupportsFloat, value))


def _watts(milliwatts: object) -> float | None:
    """NVML's milliwatts as watts."""
    return None if milliwatts is None else float(cast(SupportsFloat, milliwatts)) / 1000.0


def _item(values: object, index: int) -> object:
    """One element of an NVML tuple result (e.g. MIG mode: current, pending)."""
    return cast("Sequence[object]", values)[index]


def _cuda_version(value: object) -> str | None:
    """NVML's `major*1000 + minor*10` (12040) as "12.4"."""
    if value is None:
        return None
    number = _int_of(value)
    return f"{number // 1000}.{number % 1000 // 10}"
