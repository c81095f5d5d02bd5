"""`gputui compare` and `gputui sessions` as users run them, on the acceptance snapshots and on a
short real sweep of the simulator (bounded by step count and subprocess timeouts)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gputui.sim.runner import SimProcess
from gputui.snapshot.store import load_snapshot

GPUTUI = [sys.executable, "-m", "gputui"]
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "snapshots"
RTX, A100 = FIXTURES / "rtx4090-48gb.json", FIXTURES / "a100-80gb-pcie.json"


def gputui(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*GPUTUI, *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("fmt", ["table", "md", "csv", "json", "html"])
def test_every_format_of_the_acceptance_pair(fmt: str, tmp_path: Path) -> None:
    out = tmp_path / f"cmp.{fmt}"
    result = gputui(
        "compare", str(RTX), str(A100), "--format", fmt, "--out", str(out),
        "--demand-rpm", "90", "--mean-output-tokens", "240", "--at-output-tokens-per-s", "250",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert result.stderr == f"gputui compare: written to {out}\n"
    text = out.read_text()
    assert "rtx4090-48gb" in text and "a100-80gb-pcie" in text
    if fmt == "json":
        rows = json.loads(text)["rows"]
        assert [r["servers_needed"] for r in rows] == [2, 1]


def test_non_comparable_runs_warn_on_stderr_and_in_json(tmp_path: Path) -> None:
    other = tmp_path / "other.json"
    data = json.loads(A100.read_text())
    data["target"]["model"] = "qwen2.5-7b"
    data["label"] = "qwen"
    other.write_text(json.dumps(data))
    table = gputui("compare", str(RTX), str(other))
    assert table.returncode == 0
    assert (
        "gputui compare: warning: not comparable: different model "
        "(rtx4090-48gb: llama-3.1-8b; qwen: qwen2.5-7b)\n"
    ) in table.stderr
    as_json = gputui("compare", str(RTX), str(other), "--format", "json")
    assert as_json.stderr == ""
    assert json.loads(as_json.stdout)["warnings"][0].startswith("not comparable: different model")
    html = gputui("compare", str(RTX), str(other), "--format", "html")
    assert '<div class="banner" role="alert">' in html.stdout


def test_price_flag_overrides_and_bad_flags_are_usage_errors() -> None:
    result = gputui("compare", str(RTX), str(A100), "--price", "rtx4090-48gb=8", "--format", "csv")
    assert result.returncode == 0, result.stderr
    assert ",8,USD," not in result.stdout and ",8,," in result.stdout
    unknown = gputui("compare", str(RTX), "--price", "h100=9")
    assert unknown.returncode == 2
    assert "no snapshot is named 'h100' (names: rtx4090-48gb)" in unknown.stderr
    half = gputui("compare", str(RTX), "--demand-rpm", "90")
    assert half.returncode == 2
    assert "--demand-rpm and --mean-output-tokens go together" in half.stderr


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"schema_version": 1, "label": "x", ', "not valid JSON (truncated or corrupt?)"),
        (
            '{"schema_version": 2}',
            "written by a newer gputui: schema_version 2, this gputui reads 1",
        ),
        ("[1, 2]", "not a gputui snapshot: top level is list, not an object"),
        ('{"schema_version": 1, "complete": true}', "target: Field required (and 2 more)"),
    ],
)
def test_bad_snapshot_is_one_line_naming_the_file(
    content: str, message: str, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    result = gputui("compare", str(RTX), str(bad))
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.startswith(f"gputui: {bad}: ")
    assert message in result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


def test_sessions_lists_and_reports_unreadable_files(tmp_path: Path) -> None:
    shutil.copy(RTX, tmp_path / "rtx.json")
    shutil.copy(A100, tmp_path / "a100.json")
    (tmp_path / "broken.json").write_text("{")
    result = gputui("sessions", "--dir", str(tmp_path))
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert len(lines) == 4
    assert "a100-80gb-pcie" in lines[2] and "NVIDIA A100 80GB PCIe" in lines[2]
    assert "816.0 good out tok/s at concurrency 16" in lines[2] and "concurrency 64" in lines[2]
    assert result.stderr.startswith(f"gputui sessions: skipped {tmp_path / 'broken.json'}: ")
    as_json = json.loads(gputui("sessions", "--json", "--dir", str(tmp_path)).stdout)
    assert [s["label"] for s in as_json["sessions"]] == ["a100-80gb-pcie", "rtx4090-48gb"]
    assert as_json["skipped"][0]["file"] == str(tmp_path / "broken.json")
    empty = gputui("sessions", "--dir", str(tmp_path / "missing"))
    assert empty.returncode == 2 and "no such folder" in empty.stderr


def test_a_real_short_sweep_then_compare(fixed_sim: SimProcess, tmp_path: Path) -> None:
    outs = []
    for label, price in (("cheap", "4"), ("dear", "7")):
        out = tmp_path / f"{label}.json"
        run = gputui(
            "run", "--url", fixed_sim.url, "--model", "sim", "--concurrency", "1,4",
            "--step-seconds", "1.5", "--warmup-seconds", "0.3", "--input-tokens", "16",
            "--output-tokens", "16", "--sla-ttft-p95", "0.5", "--sla-tpot-p95", "0.05",
            "--price-per-hour", price, "--label", label, "--out", str(out),
        timeout=60)  # fmt: skip
        assert run.returncode == 0, run.stderr
        assert load_snapshot(out).price_per_hour == float(price)
        outs.append(out)
    result = gputui("compare", *map(str, outs), "--format", "json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["warnings"] == [
        "cheap: qualified at the highest level tested (concurrency 4): the true capacity may be"
        " higher, so its cost per token is an upper bound",
        "dear: qualified at the highest level tested (concurrency 4): the true capacity may be"
        " higher, so its cost per token is an upper bound",
    ]
    for row, hourly in zip(doc["rows"], (4, 7), strict=True):
        assert row["price_per_hour"] == hourly
        tok_s = row["qualified_output_tokens_per_s"]
        assert tok_s > 100  # 4 streams of 16 tokens every ~95 ms
        assert row["cost_per_million_output_tokens"] == pytest.approx(hourly / (tok_s * 3600) * 1e6)
