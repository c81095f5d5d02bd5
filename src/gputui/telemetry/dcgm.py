"""GPU samples from a dcgm-exporter endpoint, for nodes where NVML cannot be touched directly.

Contract: `gpu_samples(index, t_ns)` turns the `DCGM_FI_*` series of one scrape into one
`GpuSample` per `gpu` label, in the units of reference.md §3 (framebuffer MiB -> bytes, power W,
clocks MHz). Both label spellings (`UUID`, and `uuid` under `--use-old-namespace`) and the 1.x
lower-case names (`dcgm_gpu_temp`...) are read. Values at or above DCGM's blank sentinel are None.
With MIG, instance-level series (`GPU_I_ID` label) are not device readings: they only set
`mig_mode`. The same parser reads the simulator's /metrics, which carries dcgm-exporter's names.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

import httpx

from gputui.errors import MetricsUnavailable
from gputui.telemetry.prom import DEFAULT_TIMEOUT_S, PromIndex, PromSample, fetch, parse
from gputui.telemetry.samples import GpuHealth, GpuIdentity, GpuSample
from gputui.telemetry.throttle import BLANK_MIN, decode

_MIB: Final = 1 << 20

FIELDS: Final[dict[str, tuple[str, ...]]] = {
    "sm_clock_mhz": ("DCGM_FI_DEV_SM_CLOCK", "dcgm_sm_clock"),
    "sm_clock_max_mhz": ("DCGM_FI_DEV_MAX_SM_CLOCK",),
    "mem_clock_mhz": ("DCGM_FI_DEV_MEM_CLOCK", "dcgm_memory_clock"),
    "mem_clock_max_mhz": ("DCGM_FI_DEV_MAX_MEM_CLOCK",),
    "temperature_c": ("DCGM_FI_DEV_GPU_TEMP", "dcgm_gpu_temp"),
    "power_w": ("DCGM_FI_DEV_POWER_USAGE", "dcgm_power_usage"),
    "power_limit_w": ("DCGM_FI_DEV_ENFORCED_POWER_LIMIT", "DCGM_FI_DEV_POWER_MGMT_LIMIT"),
    "energy_mj": ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",),
    "utilization_gpu_pct": ("DCGM_FI_DEV_GPU_UTIL", "dcgm_gpu_utilization"),
    "fb_used_mib": ("DCGM_FI_DEV_FB_USED", "dcgm_fb_used"),
    "fb_free_mib": ("DCGM_FI_DEV_FB_FREE", "dcgm_fb_free"),
    "fb_reserved_mib": ("DCGM_FI_DEV_FB_RESERVED",),
    "fb_total_mib": ("DCGM_FI_DEV_FB_TOTAL",),
    "throttle_mask": ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"),
    "fan_pct": ("DCGM_FI_DEV_FAN_SPEED",),
    "pcie_gen": ("DCGM_FI_DEV_PCIE_LINK_GEN",),
    "pcie_width": ("DCGM_FI_DEV_PCIE_LINK_WIDTH",),
    "ecc_sbe": ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",),
    "ecc_dbe": ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",),
    "pstate": ("DCGM_FI_DEV_PSTATE",),
}
"""Sample field -> DCGM names, preferred first. Only the default-counters set (§3) is on by
default; the others appear when the operator's counters CSV enables them."""

_KNOWN_NAMES: Final = frozenset(name for names in FIELDS.values() for name in names)


def has_dcgm(index: PromIndex) -> bool:
    """True when the scrape carries any DCGM GPU series."""
    return not _KNOWN_NAMES.isdisjoint(index.names)


def _gpu_key(sample: PromSample) -> int | None:
    try:
        return int(sample.labels.get("gpu", "0"))
    except ValueError:
        return None


def gpu_samples(index: PromIndex, t_ns: int) -> tuple[GpuSample, ...]:
    """One GpuSample per `gpu` label in the scrape (empty when it has no DCGM series)."""
    readings: dict[int, dict[str, float]] = {}
    labels: dict[int, dict[str, str]] = {}
    mig: set[int] = set()
    for field, names in FIELDS.items():
        for name in reversed(names):  # preferred name last, so it wins
            for sample in index.get(name):
                gpu = _gpu_key(sample)
                if gpu is None:
                    continue
                if "GPU_I_ID" in sample.labels:
                    mig.add(gpu)
                    continue
                labels.setdefault(gpu, dict(sample.labels))
                if 0 <= sample.value < float(BLANK_MIN):  # NaN and blank sentinels drop out
                    readings.setdefault(gpu, {})[field] = sample.value
    out = []
    for gpu in sorted(set(readings) | set(labels)):
        r = readings.get(gpu, {})
        lab = labels.get(gpu, {})
        out.append(_sample(gpu, lab, r, t_ns, gpu in mig))
    return tuple(out)


def _sample(gpu: int, lab: dict[str, str], r: dict[str, float], t_ns: int, mig: bool) -> GpuSample:
    def num(field: str) -> int | None:
        value = r.get(field)
        return None if value is None else round(value)

    used, free, reserved, total = (
        r.get(f"fb_{k}_mib") for k in ("used", "free", "reserved", "total")
    )
    if total is None and used is not None and free is not None:
        total = used + free + (reserved or 0.0)
    mask = num("throttle_mask")
    ecc = [v for v in (num("ecc_sbe"), num("ecc_dbe")) if v is not None]
    return GpuSample(
        index=gpu,
        uuid=lab.get("UUID") or lab.get("uuid") or f"GPU-index-{gpu}",
        name=lab.get("modelName") or "unknown NVIDIA GPU",
        t_ns=t_ns,
        temperature_c=r.get("temperature_c"),
        sm_clock_mhz=num("sm_clock_mhz"),
        sm_clock_max_mhz=num("sm_clock_max_mhz"),
        mem_clock_mhz=num("mem_clock_mhz"),
        mem_clock_max_mhz=num("mem_clock_max_mhz"),
        power_w=r.get("power_w"),
        power_limit_w=r.get("power_limit_w"),
        energy_mj=r.get("energy_mj"),
        utilization_gpu_pct=r.get("utilization_gpu_pct"),
        memory_used_bytes=None if used is None else round(used * _MIB),
        memory_total_bytes=None if total is None else round(total * _MIB),
        memory_reserved_bytes=None if reserved is None else round(reserved * _MIB),
        throttle_reasons=None if mask is None else decode(mask),
        throttle_mask=mask,
        fan_pct=r.get("fan_pct"),
        pcie_gen=num("pcie_gen"),
        pcie_width=num("pcie_width"),
        ecc_volatile_errors=sum(ecc) if ecc else None,
        mig_mode=True if mig else None,
        pstate=num("pstate"),
        source="dcgm",
    )


def identities(index: PromIndex, samples: tuple[GpuSample, ...]) -> tuple[GpuIdentity, ...]:
    """GPU identities from DCGM labels (driver from the `DCGM_FI_DRIVER_VERSION` label if set)."""
    driver = None
    for name in ("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_FB_USED"):
        for sample in index.get(name):
            driver = driver or sample.labels.get("DCGM_FI_DRIVER_VERSION")
    return tuple(
        GpuIdentity(
            index=s.index,
            uuid=s.uuid,
            name=s.name,
            memory_total_bytes=s.memory_total_bytes,
            driver_version=driver,
            power_limit_w=s.power_limit_w,
            mig_mode=s.mig_mode,
            pci_bus_id=next(
                (p.labels.get("pci_bus_id") for p in index.get("DCGM_FI_DEV_GPU_TEMP")), None
            ),
        )
        for s in samples
    )


class DcgmSource:
    """Scrapes a dcgm-exporter endpoint (default :9400/metrics) into GPU samples."""

    name = "dcgm"

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        clock: Callable[[], int] = time.perf_counter_ns,
        client: httpx.Client | None = None,
    ) -> None:
        self.url = url
        self._timeout_s = timeout_s
        self._clock = clock
        self._client = client if client is not None else httpx.Client(timeout=timeout_s)
        self._last: tuple[PromIndex, tuple[GpuSample, ...]] | None = None

    def sample(self) -> tuple[GpuSample, ...]:
        """Scrape once; `MetricsUnavailable` when the endpoint fails or has no DCGM series."""
        t_ns = self._clock()
        index = parse(fetch(self.url, self._client, self._timeout_s))
        if not has_dcgm(index):
            raise MetricsUnavailable(f"{self.url}: no DCGM_FI_* series (is it dcgm-exporter?)")
        samples = gpu_samples(index, t_ns)
        self._last = (index, samples)
        return samples

    def identities(self) -> tuple[GpuIdentity, ...]:
        """Identities from the latest scrape (scrapes once if there is none yet)."""
        if self._last is None:
            self.sample()
        assert self._last is not None
        return identities(*self._last)

    def health(self, index: int) -> GpuHealth:
        """Volatile ECC counts when the exporter's counters include them; the rest is n/a."""
        if self._last is None:
            self.sample()
        assert self._last is not None
        index_, _ = self._last
        sbe = [s.value for s in index_.get("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL") if _gpu_key(s) == index]
        dbe = [s.value for s in index_.get("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL") if _gpu_key(s) == index]
        return GpuHealth(
            ecc_volatile_corrected=round(sbe[0]) if sbe else None,
            ecc_volatile_uncorrected=round(dbe[0]) if dbe else None,
        )

    def close(self) -> None:
        """Close the HTTP connection."""
        self._client.close()
