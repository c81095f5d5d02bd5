"""Issue 23 acceptance: a hand-paced session (12 s steps, too short for a P95 verdict) saved
through the Session gives a snapshot whose `gputui compare --format json` shows a capacity,
marked provisional with its reason, and its cost."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gputui.sim.gpu_profile import GpuProfileSpec
from gputui.sim.runner import start_background
from gputui.snapshot.store import load_snapshot


def _gputui(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gputui", *args], capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.timeout(180)
def test_short_steps_save_a_provisional_capacity_and_its_cost(tmp_path: Path) -> None:
    out = tmp_path / "hand.json"
    with start_background(GpuProfileSpec(gpu="a100-80gb-pcie", model="llama-3.1-8b")) as sim:
        run = _gputui(
            "run", "--url", sim.url, "--model", "llama-3.1-8b", "--concurrency", "1,2",
            "--step-seconds", "12", "--warmup-seconds", "1", "--input-tokens", "256",
            "--output-tokens", "128", "--sla-ttft-p95", "1", "--sla-tpot-p95", "0.035",
            "--price-per-hour", "2.5", "--out", str(out), "--snapshot-dir", str(tmp_path),
        )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    snap = load_snapshot(out)
    verdicts = [s.sla_verdict for s in snap.steps]
    assert verdicts == ["inconclusive", "inconclusive"], (verdicts, snap.capacity_reason)
    cap = snap.capacity
    assert cap is not None and cap.provisional is True, snap.capacity_reason
    assert cap.level == 2.0
    n = min(snap.steps[1].ttft_s.n, snap.steps[1].tpot_s.n)
    assert cap.provisional_reason == f"P95 on {n} requests; 59 decide it"
    result = _gputui("compare", str(out), "--format", "json")
    assert result.returncode == 0, result.stderr
    (row,) = json.loads(result.stdout)["rows"]
    print("compare row:", {k: row[k] for k in ("qualified_level", "capacity_provisional",
          "capacity_provisional_reason", "cost_per_million_output_tokens")})  # fmt: skip
    assert row["qualified_level"] == 2.0
    assert row["capacity_provisional"] is True
    assert row["capacity_provisional_reason"] == cap.provisional_reason
    expected = 2.5 / (cap.output_tokens_per_s * 3600) * 1e6
    assert row["cost_per_million_output_tokens"] == pytest.approx(expected, rel=1e-6)
    table = _gputui("compare", str(out))
    assert "concurrency 2 (provisional)" in table.stdout
    assert "provisional capacity, on point estimates (P95 on" in table.stdout
    html = tmp_path / "report.html"
    assert _gputui("compare", str(out), "--format", "html", "--out", str(html)).returncode == 0
    page = html.read_text()
    assert "concurrency 2 (provisional)" in page
    assert "provisional capacity, on point estimates (P95 on" in page
