"""The typed sections load every file written before them and re-save it unchanged."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from gputui.snapshot.sections import BurstSection, PlanSection, ValidationSection
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


def test_sections_are_typed_and_keep_unknown_keys() -> None:
    v = ValidationSection.model_validate({"rate": 2, "holds": True, "extra_note": "x"})
    assert (v.rate, v.holds, v.sla_ok) == (2.0, True, None)
    assert v.model_dump() == {"rate": 2.0, "holds": True, "extra_note": "x"}
    burst = BurstSection.model_validate({"at_s": 30.1, "count": 16, "recovery_s": None})
    assert burst.model_dump() == {"at_s": 30.1, "count": 16, "recovery_s": None}
    with pytest.raises(ValueError, match="count"):
        BurstSection.model_validate({"count": "many"})
