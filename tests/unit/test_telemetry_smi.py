"""The nvidia-smi CSV fallback on text shaped like reference.md §1.4/§2's captures."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from gputui.errors import TelemetryUnavailable
from gputui.telemetry import smi
from gputui.telemetry.smi import (
    HEALTH_FIELDS,
    IDENTITY_FIELDS,
    LEGACY_SAMPLE_FIELDS,
    SAMPLE_FIELDS,
    SmiSource,
    parse_query_csv,
    sample_from_row,
)

MIB = 1 << 20

# Values as the §1.4 captures report them: the GeForce card prints [N/A] for ECC and MIG and
# reports 434 MiB reserved; the H100 has no fan ([N/A]), ECC on, MIG disabled.
SAMPLE_CSV = (
    "0, GPU-2c4bd1a0-5e6f-7a8b-9c0d-1e2f3a4b5c6d, NVIDIA GeForce RTX 4080 SUPER, 45, 2610, 3105, "
    "11501, 11501, 285.17, 320.00, 99, 14500, 16376, 434, 0x0000000000000004, 0, 4, 16, [N/A], "
    "[N/A], [N/A], P2\n"
    "1, GPU-9f8e7d6c-5b4a-3928-1706-f5e4d3c2b1a0, NVIDIA H100 80GB HBM3, 63, 1980, 1980, 2619, "
    "2619, 631.24, 700.00, 100, 76000, 81559, 573, 0x0000000000000000, [N/A], 5, 16, 0, 0, "
    "Disabled, P0\n"
)
IDENTITY_CSV = (
    "0, GPU-2c4bd1a0-5e6f-7a8b-9c0d-1e2f3a4b5c6d, NVIDIA GeForce RTX 4080 SUPER, 16376, 595.71.05, "
    "320.00, [N/A], [N/A], [N/A], 00000000:01:00.0\n"
)
HEALTH_CSV = (
    "0, [N/A], [N/A], [N/A], [N/A], [N/A], [N/A], [N/A], [N/A], [N/A], [N/A], [N/A]\n"
    "1, Enabled, 0, 0, 0, [N/A], [N/A], [N/A], 0, 0, No, No\n"
)
HEADER = "| NVIDIA-SMI 595.71.05    Driver Version: 595.71.05    CUDA Version: 13.2     |\n"


class FakeSmi:
    """Answers like nvidia-smi for the field sets gputui asks for."""

    def __init__(self, *, legacy_only: bool = False, failure: str | None = None) -> None:
        self.legacy_only = legacy_only
        self.failure = failure
        self.calls: list[list[str]] = []

    def __call__(self, argv: Sequence[str]) -> tuple[int, str]:
        self.calls.append(list(argv))
        if self.failure is not None:
            return 9, self.failure
        if len(argv) == 1:
            return 0, HEADER
        fields = tuple(argv[1].removeprefix("--query-gpu=").split(","))
        assert argv[2] == "--format=csv,noheader,nounits"
        if fields == SAMPLE_FIELDS:
            if self.legacy_only:
                return 2, 'Field "clocks_event_reasons.active" is not a valid field to query.\n'
            return 0, SAMPLE_CSV
        if fields == LEGACY_SAMPLE_FIELDS:
            lines = []
            for line in SAMPLE_CSV.splitlines():
                cells = line.split(", ")
                del cells[SAMPLE_FIELDS.index("memory.reserved")]
                lines.append(", ".join(cells))
            return 0, "\n".join(lines) + "\n"
        if fields == IDENTITY_FIELDS:
            return 0, IDENTITY_CSV
        if fields == HEALTH_FIELDS:
            return 0, HEALTH_CSV
        raise AssertionError(fields)


def test_parse_marks_missing_values_none() -> None:
    rows = parse_query_csv(SAMPLE_CSV, SAMPLE_FIELDS)
    assert len(rows) == 2
    assert rows[0]["ecc.errors.corrected.volatile.total"] is None
    assert rows[1]["fan.speed"] is None
    assert rows[0]["name"] == "NVIDIA GeForce RTX 4080 SUPER"
    for token in ("N/A", "[Not Supported]", "[Requested functionality has been deprecated]"):
        (row,) = parse_query_csv(f"0, {token}", ("index", "fan.speed"))
        assert row["fan.speed"] is None


def test_parse_rejects_a_wrong_field_count() -> None:
    with pytest.raises(ValueError, match="expected 3 fields"):
        parse_query_csv("0, 1\n", ("a", "b", "c"))


def test_rows_become_samples_with_units_converted() -> None:
    geforce, h100 = (sample_from_row(r, 7) for r in parse_query_csv(SAMPLE_CSV, SAMPLE_FIELDS))
    assert geforce.source == "nvidia-smi"
    assert geforce.t_ns == 7
    assert geforce.memory_total_bytes == 16376 * MIB
    assert geforce.memory_reserved_bytes == 434 * MIB
    assert geforce.power_w == pytest.approx(285.17)
    assert geforce.power_limit_w == 320.0
    assert geforce.throttle_reasons == ("sw_power_cap",)
    assert geforce.fan_pct == 0.0
    assert geforce.ecc_volatile_errors is None
    assert geforce.mig_mode is None
    assert geforce.pstate == 2
    assert (geforce.sm_clock_mhz, geforce.sm_clock_max_mhz) == (2610, 3105)
    assert h100.index == 1
    assert h100.fan_pct is None
    assert h100.ecc_volatile_errors == 0
    assert h100.mig_mode is False
    assert h100.throttle_reasons == ()
    assert h100.pcie_gen == 5


def test_source_samples_identities_and_health() -> None:
    fake = FakeSmi()
    source = SmiSource(fake, clock=lambda: 42)
    samples = source.sample()
    assert [s.index for s in samples] == [0, 1]
    (ident,) = source.identities()
    assert ident.driver_version == "595.71.05"
    assert ident.cuda_version == "13.2"
    assert ident.memory_total_bytes == 16376 * MIB
    assert (ident.mig_mode, ident.ecc_mode, ident.serial) == (None, None, None)
    assert source.health(0).ecc_mode is None
    h100 = source.health(1)
    assert h100.ecc_mode is True
    assert h100.remapped_rows_pending is False
    assert h100.retired_pages_sbe is None


def test_pre_535_driver_falls_back_to_legacy_field_names() -> None:
    fake = FakeSmi(legacy_only=True)
    source = SmiSource(fake)
    samples = source.sample()
    assert samples[0].throttle_reasons == ("sw_power_cap",)
    assert samples[0].memory_reserved_bytes is None
    assert "clocks_throttle_reasons.active" in fake.calls[-1][1]


def test_missing_or_failing_nvidia_smi_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(smi, "find_nvidia_smi", lambda: None)
    with pytest.raises(TelemetryUnavailable, match="not found"):
        SmiSource()
    failure = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    with pytest.raises(TelemetryUnavailable, match="couldn't communicate"):
        SmiSource(FakeSmi(failure=failure))
