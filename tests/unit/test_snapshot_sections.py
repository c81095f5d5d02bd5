"""The typed sections load every file written before them and re-save it unchanged."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from gputui.snapshot.models import Snapshot
from gputui.snapshot.sections import (
    BurstSection,
    HardwareSection,
    PlanSection,
    TelemetrySection,
    ValidationSection,
)
from gputui.snapshot.store import load_snapshot

ROOT = Path(__file__).resolve().parents[1]
FILES = [
    *sorted((ROOT / "fixtures" / "snapshots").glob("*.json")),
    ROOT / "ui" / "fixtures" / "sweep-a100.json",
]
SECTIONS = ("plan", "validation", "bursts", "hardware", "telemetry", "price_per_hour")


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_old_files_load_and_resave_their_sections_unchanged(path: Path) -> None:
    raw = orjson.loads(path.read_bytes())
    snap = load_snapshot(path)
    again = snap.model_dump(mode="json")
    for key in SECTIONS:
        if key in raw:
            assert again[key] == raw[key], key
    if snap.plan is not None:
        assert isinstance(snap.plan, PlanSection)
    if "hardware" in raw and raw["hardware"] is not None:
        assert isinstance(snap.hardware, HardwareSection)
    if "telemetry" in raw and raw["telemetry"] is not None:
        assert isinstance(snap.telemetry, TelemetrySection)


def test_sections_are_typed_and_keep_unknown_keys() -> None:
    v = ValidationSection.model_validate({"rate": 2, "holds": True, "extra_note": "x"})
    assert (v.rate, v.holds, v.sla_ok) == (2.0, True, None)
    assert v.model_dump() == {"rate": 2.0, "holds": True, "extra_note": "x"}
    burst = BurstSection.model_validate({"at_s": 30.1, "count": 16, "recovery_s": None})
    assert burst.model_dump() == {"at_s": 30.1, "count": 16, "recovery_s": None}
    with pytest.raises(ValueError, match="count"):
        BurstSection.model_validate({"count": "many"})


def test_hardware_and_telemetry_are_typed_with_extras() -> None:
    raw = orjson.loads(FILES[0].read_bytes())
    raw["hardware"] = {
        "gpus": [{"index": 0, "name": "RTX 4090", "memory_total_bytes": 24 * 2**30}],
        "acceptance": {"verdict": "pass"},
    }
    raw["telemetry"] = {"gpu": [{"t_s": 0.5, "index": 0}], "spec_decode": {"drafts": 3}}
    snap = Snapshot.model_validate(raw)
    assert snap.hardware is not None and snap.hardware.gpus is not None
    assert snap.hardware.gpus[0].memory_total_bytes == 24 * 2**30
    assert (snap.hardware.model_extra or {})["acceptance"] == {"verdict": "pass"}
    assert snap.telemetry is not None
    assert (snap.telemetry.model_extra or {})["spec_decode"] == {"drafts": 3}
    again = snap.model_dump(mode="json")
    assert (again["hardware"], again["telemetry"]) == (raw["hardware"], raw["telemetry"])


@pytest.mark.parametrize(
    ("key", "bad"),
    [
        ("hardware", {"gpus": "RTX"}),
        ("hardware", {"gpus": [{"name": 5}]}),
        ("hardware", [1, 2]),
        ("telemetry", {"gpu": [7]}),
        ("telemetry", "trace"),
    ],
)
def test_a_malformed_hardware_or_telemetry_section_loads_as_unknown(key: str, bad: object) -> None:
    raw = orjson.loads(FILES[0].read_bytes())
    raw[key] = bad
    snap = Snapshot.model_validate(raw)
    assert getattr(snap, key) is None
    assert len(snap.steps) == len(raw["steps"])
