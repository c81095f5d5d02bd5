"""Issue 23: past the knee no failing step is "bound by none", on three simulated cards.

Each pair runs `gputui run` (a subprocess, as a user runs it) over a short sweep that goes past
its knee: 3 levels of 4 s after a 2 s warm-up, short requests, so the whole file is bounded.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gputui.sim.gpu_profile import GpuProfileSpec
from gputui.sim.runner import start_background
from gputui.snapshot.store import load_snapshot
from tests.support.saved import saved

PAIRS = [
    ("rtx4090-24gb", "llama-3.1-8b", "8,48,128"),
    ("rtx4090-48gb", "qwen2.5-14b", "4,32,96"),
    ("a100-80gb-pcie", "llama-3.1-8b", "8,64,160"),
]


@pytest.mark.timeout(180)
@pytest.mark.parametrize(("gpu", "model", "levels"), PAIRS)
def test_every_failing_step_names_a_bound(
    gpu: str, model: str, levels: str, tmp_path: Path
) -> None:
    out = tmp_path / "sweep.json"
    with start_background(GpuProfileSpec(gpu=gpu, model=model)) as sim:
        result = subprocess.run(
            [
                sys.executable, "-m", "gputui", "run", "--url", sim.url, "--model", model,
                "--concurrency", levels, "--step-seconds", "4", "--warmup-seconds", "2",
                "--input-tokens", "512", "--output-tokens", "48", "--sla-ttft-p95", "1",
                "--sla-tpot-p95", "0.035", "--request-timeout", "20", "--out", str(out),
                "--snapshot-dir", str(tmp_path),
            ],
            capture_output=True, text=True, timeout=150,
        )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    steps = load_snapshot(out).steps
    table = [
        (s.level, s.sla_verdict, (s.bottleneck or {}).get("verdict"), s.requests_ok) for s in steps
    ]
    print(gpu, model, "level, SLA, bound by, ok:", table)
    failing = [s for s in steps if not s.sla_ok or s.sla_verdict == "fail"]
    assert failing, table  # the sweep went past the knee
    for step in failing:
        verdict = (step.bottleneck or {}).get("verdict")
        assert verdict not in (None, "none"), table
        assert step.bottleneck is not None and step.bottleneck["evidence"], table
    assert result.stdout.count("bound by none") == sum(
        1 for s in steps if (s.bottleneck or {}).get("verdict") == "none"
    )


@pytest.mark.timeout(120)
def test_a_sequence_limit_reads_scheduler_limit(tmp_path: Path) -> None:
    # --max-num-seqs 16 at 48 streams: 16 run, 32 wait, KV nearly empty. vLLM's /metrics does not
    # publish max_num_seqs: the rule reads the held running count and the queue behind it.
    out = tmp_path / "capped.json"
    spec = GpuProfileSpec(gpu="a100-80gb-pcie", model="llama-3.1-8b", max_num_seqs=16)
    with start_background(spec) as sim:
        result = subprocess.run(
            [
                sys.executable, "-m", "gputui", "run", "--url", sim.url, "--concurrency", "8,48",
                "--step-seconds", "5", "--warmup-seconds", "2", "--input-tokens", "256",
                "--output-tokens", "48", "--sla-ttft-p95", "0.5", "--out", str(out),
                "--snapshot-dir", str(tmp_path),
            ],
            capture_output=True, text=True, timeout=100,
        )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    low, high = load_snapshot(out).steps
    assert (low.bottleneck or {}).get("verdict") != "scheduler-limit", low.bottleneck
    assert high.bottleneck is not None and high.bottleneck["verdict"] == "scheduler-limit"
    assert saved(high.bottleneck)["evidence"][0].startswith(
        "sequence limit: running held at 16 in "
    ), high.bottleneck
