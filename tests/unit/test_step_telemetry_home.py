"""A step's one telemetry summary (issue 29): attached where it finishes, saved, compared."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from gputui.metrics.sla import Sla
from gputui.metrics.step import StepSpec
from gputui.session.ledger import StepLedger
from gputui.snapshot.compare import NamedSnapshot, build_comparison
from gputui.snapshot.compare_format import table
from gputui.snapshot.compare_records import json_text
from gputui.snapshot.models import Snapshot, StepEnergyModel, StepTelemetryModel, step_from_result
from gputui.snapshot.store import load_snapshot
from gputui.telemetry.step_telemetry import StepTelemetry, WindowEnergy
from tests.support.records import ns, rec

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "snapshots"
ENERGY_KEYS = {
    "joules",
    "joules_per_output_token",
    "joules_per_token",
    "output_tokens_per_joule",
    "joules_per_good_output_token",
    "mean_power_w",
    "gpus",
    "method",
    "sample_hz",
}


def finished_with_telemetry() -> tuple[StepLedger, list[tuple[int, int]]]:
    ledger = StepLedger()
    windows: list[tuple[int, int]] = []

    def summarize(lo_ns: int, hi_ns: int) -> StepTelemetry:
        windows.append((lo_ns, hi_ns))
        energy = WindowEnergy(
            joules=400.0, mean_power_w=200.0, gpus=1, method="counter", sample_hz=4
        )
        return StepTelemetry(window_s=(hi_ns - lo_ns) / 1e9, gpus=1, energy=energy)

    ledger.window_telemetry = summarize
    # Rates over W itself (a closed loop reads them over whole cycles: test_rate_window).
    ledger.open(StepSpec(0, "rate", 2, ns(0), ns(100), -1), hidden=False)
    records = [
        rec(
            sent_ms=200, end_ms=1900, tokens_ms=[400 + 100 * i for i in range(15)], input_tokens=100
        )
    ]
    ledger.add_records(records)
    ledger.close_current(ns(2100))
    return ledger, windows


def test_the_ledger_attaches_the_measured_windows_summary_where_the_step_finishes() -> None:
    ledger, windows = finished_with_telemetry()
    (result,) = ledger.finish_ready(None, Sla(1.0, 0.5), force=True)
    assert windows == [(ns(100), ns(2100))]  # the measured window, warm-up left out
    energy = result.energy
    assert energy is not None
    # 15 tokens arrived in the 2 s window: 400 J / 15; 100 input tokens on top for J/token
    assert energy["joules_per_output_token"] == pytest.approx(400 / 15)
    assert energy["joules_per_token"] == pytest.approx(400 / 115)
    assert energy["output_tokens_per_joule"] == pytest.approx(15 / 400)


def test_the_snapshot_saves_it_once_with_the_issues_names() -> None:
    ledger, _ = finished_with_telemetry()
    (result,) = ledger.finish_ready(None, Sla(1.0, 0.5), force=True)
    saved = orjson.loads(orjson.dumps(step_from_result(result).model_dump(mode="json")))
    assert set(saved["energy"]) == ENERGY_KEYS
    assert saved["energy"]["method"] == "counter" and saved["energy"]["gpus"] == 1
    assert saved["telemetry"]["energy"]["joules"] == 400.0
    back = StepTelemetryModel.model_validate(saved["telemetry"]).to_summary()
    assert back == result.telemetry


def with_energy(path: Path, joules_per_good: float, method: str) -> NamedSnapshot:
    snapshot = load_snapshot(path)
    cap = snapshot.capacity
    assert cap is not None
    energy = StepEnergyModel(
        joules=1000.0,
        joules_per_output_token=joules_per_good * 0.9,
        joules_per_token=joules_per_good / 5,
        output_tokens_per_joule=1 / (joules_per_good * 0.9),
        joules_per_good_output_token=joules_per_good,
        mean_power_w=300.0,
        gpus=1,
        method=method,
        sample_hz=1.0,
    )
    steps = tuple(
        s.model_copy(update={"energy": energy}) if s.level == cap.level else s
        for s in snapshot.steps
    )
    updated = Snapshot.model_validate(snapshot.model_copy(update={"steps": steps}).model_dump())
    return NamedSnapshot(path.stem, updated, path)


def test_compare_shows_energy_per_good_token_and_its_cost_beside_the_hourly_one() -> None:
    named = [
        with_energy(FIXTURES / "a100-80gb-pcie.json", 0.36, "counter"),
        with_energy(FIXTURES / "rtx4090-48gb.json", 0.9, "integrated"),
    ]
    cmp = build_comparison(named, energy_price_per_kwh=0.30, pue=1.2)
    rows = orjson.loads(json_text(cmp))["rows"]
    a100, rtx = rows
    assert a100["joules_per_output_token"] == pytest.approx(0.36)
    assert a100["output_tokens_per_joule"] == pytest.approx(1 / 0.36)
    # 0.36 J x 1e6 / 3.6e6 x 0.30 x 1.2 = 0.036 per million good output tokens
    assert a100["energy_cost_per_million_output_tokens"] == pytest.approx(0.036)
    assert rtx["energy_cost_per_million_output_tokens"] == pytest.approx(0.09)
    hourly = a100["cost_per_million_output_tokens"]
    assert hourly is not None  # never folded in: the hourly cost is unchanged, the total beside
    assert a100["total_cost_per_million_output_tokens"] == pytest.approx(hourly + 0.036)
    assert rtx["energy_method"] == "integrated"
    text = table(cmp)
    assert "out tok/J" in text and "energy per M out tok" in text and "2.78" in text
