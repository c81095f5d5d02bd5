"""Does a step measure only its own load? (issue 28: "a step measures exactly its own load")

One `gputui run` on the simulator (a100-80gb-pcie, llama-3.1-8b, 512 in / 256 out) steps through
LOW, LOW, HIGH, HIGH, LOW streams (HIGH = 8 x LOW). Each level is seen twice: followed by itself
(the reference) and followed by a level 8x higher (LOW) or 8x lower (HIGH). A step whose measured
requests finish under the next level's load reads a different P95; an isolated step reads the
same. The table prints P95 TPOT and P95 E2E of each pair and their difference (acceptance: within
5 %), and each step's hand-over time (the old load running on, unmeasured, after the step closed).

    python benchmarks/step_isolation.py [--low 16] [--step-seconds 20]
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
from gputui.snapshot.models import Snapshot
from gputui.snapshot.store import load_snapshot


def run(url: str, out: Path, levels: list[int], step_s: str) -> float:
    """One headless run over `levels`; returns its wall time."""
    started = time.perf_counter()
    command = [sys.executable, "-m", "gputui", "run", "--url", url, "--model", "llama-3.1-8b"]
    command += ["--input-tokens", "512", "--output-tokens", "256", "--step-seconds", step_s]
    command += ["--concurrency", ",".join(str(v) for v in levels), "--out", str(out)]
    subprocess.run(command, capture_output=True, text=True, check=True)
    return time.perf_counter() - started


def table(snapshot: Snapshot, low: int) -> list[str]:
    """The two pairs: LOW followed by LOW vs by 8 x LOW, and 8 x LOW by itself vs by LOW."""
    steps = snapshot.steps
    lines = [
        f"{'level':>6} {'followed by':>11} {'n':>5} {'P95 TPOT ms':>12} {'P95 E2E s':>10}"
        f" {'hand-over s':>11}"
    ]
    for step, after in zip(steps, [*steps[1:], None], strict=True):
        handover = getattr(step, "handover_s", None)
        lines.append(
            f"{step.level:6.0f} {after.level if after else float('nan'):11.0f}"
            f" {step.tpot_s.n:5d} {step.tpot_s.p95 * 1e3:12.2f} {step.e2e_s.p95:10.3f}"
            f" {'-' if handover is None else f'{handover:.2f}':>11}"
        )
    pairs = [(1, 0, f"{low} then {8 * low} vs {low} then {low}")]
    pairs.append((3, 2, f"{8 * low} then {low} vs {8 * low} then {8 * low}"))
    lines.append("")
    for test, ref, label in pairs:
        a, b = steps[test], steps[ref]
        tpot = (a.tpot_s.p95 / b.tpot_s.p95 - 1) * 100
        e2e = (a.e2e_s.p95 / b.e2e_s.p95 - 1) * 100
        verdict = "ok" if abs(tpot) <= 5 and abs(e2e) <= 5 else "OFF"
        lines.append(f"{label:32}  P95 TPOT {tpot:+6.1f} %  P95 E2E {e2e:+6.1f} %  {verdict}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--low", type=int, default=16)
    parser.add_argument("--step-seconds", default="20")
    args = parser.parse_args()
    low = args.low
    # steps: 0 LOW->LOW (ref), 1 LOW->HIGH, 2 HIGH->HIGH (ref), 3 HIGH->LOW, 4 LOW (last)
    levels = [low, low, 8 * low, 8 * low, low]
    spec = GpuProfileSpec(gpu="a100-80gb-pcie", model="llama-3.1-8b")
    with tempfile.TemporaryDirectory() as tmp, start_background(spec) as sim:
        out = Path(tmp) / "isolation.json"
        wall_s = run(sim.url, out, levels, args.step_seconds)
        snapshot = load_snapshot(out)
    print(f"a100-80gb-pcie sim, llama-3.1-8b, 512/256 tokens, {args.step_seconds} s steps")
    print("\n".join(table(snapshot, low)))
    print(f"\nwall time {wall_s:.0f} s")


if __name__ == "__main__":
    main()
