"""Does `gputui run --auto` find the capacity a dense manual sweep finds? (issue 6 acceptance)

Against the simulator (a100-80gb-pcie, llama-3.1-8b, 1024 in / 256 out, SLA P95 TTFT <= 1 s and
P95 TPOT <= 35 ms), this runs the automatic sweep and a dense manual sweep, each through the real
CLI, and prints both tables, the two capacities and the wall time of each.

    python benchmarks/auto_vs_manual.py [--step-seconds 20] [--dense 8,12,16,...]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gputui.sim.gpu_profile import GpuProfileSpec
from gputui.sim.runner import start_background
from gputui.snapshot.store import load_snapshot

COMMON = [
    "--input-tokens",
    "1024",
    "--output-tokens",
    "256",
    "--sla-ttft-p95",
    "1",
    "--sla-tpot-p95",
    "0.035",
    "--max-error-rate",
    "0.01",
]


def run(url: str, out: Path, extra: list[str]) -> tuple[float, str]:
    started = time.perf_counter()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "gputui",
            "run",
            "--url",
            url,
            "--model",
            "llama-3.1-8b",
            *COMMON,
            *extra,
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return time.perf_counter() - started, result.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--step-seconds", default="20")
    parser.add_argument("--warmup-seconds", default="5")
    parser.add_argument("--dense", default="1,2,4,8,12,16,18,20,22,24,26,28,32,40")
    args = parser.parse_args()
    steps = ["--step-seconds", args.step_seconds, "--warmup-seconds", args.warmup_seconds]
    spec = GpuProfileSpec(gpu="a100-80gb-pcie", model="llama-3.1-8b")
    with tempfile.TemporaryDirectory() as tmp:
        with start_background(spec) as sim:
            auto_s, auto_out = run(
                sim.url,
                Path(tmp) / "auto.json",
                ["--auto", "--max-level", "128", "--no-validate", *steps],
            )
        with start_background(spec) as sim:
            dense_s, dense_out = run(
                sim.url, Path(tmp) / "dense.json", ["--concurrency", args.dense, *steps]
            )
        auto = load_snapshot(Path(tmp) / "auto.json")
        dense = load_snapshot(Path(tmp) / "dense.json")
    for name, text, seconds in (("auto", auto_out, auto_s), ("dense manual", dense_out, dense_s)):
        table = text[text.index("step mode") :]
        print(f"== {name} sweep ({seconds:.0f} s wall)\n{table}")
    a = auto.capacity.level if auto.capacity else None
    d = dense.capacity.level if dense.capacity else None
    print(f"capacity: auto {a}, dense manual {d}")


if __name__ == "__main__":
    main()
