"""Does a step measure only its own load, up and down? (issue 28: "a step measures its own load")

One `gputui run` on the simulator (a100-80gb-pcie, llama-3.1-8b, 512 in / 256 out) steps through
the cycle LOW, LOW, HIGH, HIGH (HIGH = 8 x LOW) --repeats times, then LOW, LOW, HIGH, HIGH once
more. Every level then appears both ways:
- a *test* step is followed by the other level: LOW by 8 x LOW (up), HIGH by LOW / 8 (down);
- a *reference* step is the same level followed by itself.
Each test step sits between two reference steps of its level (one before it, one after it),
so a drift of the host or of the simulated card's temperature over the run moves both
references as it moves the test: the test is compared with the mean of the two. A step whose
measured requests finished under the next level's load reads a different P95; an isolated step
reads the same (acceptance: within 5 %); the median over the tests is the figure one host
hiccup (a 20 s step reading +25 %, with fewer requests) does not move. The last step only pads
the run (a run's last step ends into no load).

    python benchmarks/step_isolation.py [--low 16] [--step-seconds 20] [--repeats 2]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gputui.sim.gpu_profile import GpuProfileSpec
from gputui.sim.runner import start_background
from gputui.snapshot.models import Snapshot
from gputui.snapshot.step_models import Step
from gputui.snapshot.store import load_snapshot


def run(url: str, out: Path, levels: list[int], step_s: str) -> float:
    """One headless run over `levels`; returns its wall time."""
    started = time.perf_counter()
    command = [sys.executable, "-m", "gputui", "run", "--url", url, "--model", "llama-3.1-8b"]
    command += ["--input-tokens", "512", "--output-tokens", "256", "--step-seconds", step_s]
    command += ["--concurrency", ",".join(str(v) for v in levels), "--out", str(out)]
    subprocess.run(command, capture_output=True, text=True, check=True)
    return time.perf_counter() - started


def plan(low: int, repeats: int) -> list[int]:
    """LOW LOW HIGH HIGH, repeats + 1 times: each test step has a reference on either side."""
    return [low, low, 8 * low, 8 * low] * (repeats + 1)


def role(levels: list[int], i: int) -> str:
    """'ref' (followed by its own level), 'up' or 'down' (followed by 8x more / less), 'pad'."""
    if i + 1 >= len(levels):
        return "pad"
    nxt = levels[i + 1]
    return "ref" if nxt == levels[i] else ("up" if nxt > levels[i] else "down")


def steps_table(steps: tuple[Step, ...], levels: list[int]) -> list[str]:
    lines = [
        f"{'#':>2} {'level':>5} {'role':>5} {'n':>5} {'P95 TPOT ms':>11} {'P95 E2E s':>9}"
        f" {'hand-over s':>11}"
    ]
    for i, step in enumerate(steps):
        lines.append(
            f"{i:2d} {step.level:5g} {role(levels, i):>5} {step.tpot_s.n:5d}"
            f" {(step.tpot_s.p95 or 0) * 1e3:11.2f} {step.e2e_s.p95 or 0:9.3f}"
            f" {step.handover_s or 0:11.2f}"
        )
    return lines


def pair_lines(steps: tuple[Step, ...], levels: list[int]) -> list[str]:
    """Each test step against the mean of the references before and after it."""
    lines = [
        f"{'test':>4} {'dir':>4} {'refs':>7} {'TPOT test/refs ms':>20} {'dTPOT':>7}"
        f" {'E2E test/refs s':>17} {'dE2E':>7} {'dTPOT vs ref before':>20}"
    ]
    diffs: dict[str, list[tuple[float, float]]] = {"up": [], "down": []}
    for i, step in enumerate(steps):
        direction = role(levels, i)
        if direction not in ("up", "down"):
            continue
        refs = [j for j in (i - 1, i + 3) if 0 <= j < len(steps) and role(levels, j) == "ref"]
        if len(refs) < 2:
            continue
        tpot_ref = statistics.fmean(steps[j].tpot_s.p95 or 0 for j in refs)
        e2e_ref = statistics.fmean(steps[j].e2e_s.p95 or 0 for j in refs)
        d_tpot = ((step.tpot_s.p95 or 0) / tpot_ref - 1) * 100
        d_e2e = ((step.e2e_s.p95 or 0) / e2e_ref - 1) * 100
        before = ((step.tpot_s.p95 or 0) / (steps[refs[0]].tpot_s.p95 or 1) - 1) * 100
        diffs[direction].append((d_tpot, d_e2e))
        lines.append(
            f"{i:4d} {direction:>4} {refs[0]:>3},{refs[1]:<3}"
            f" {(step.tpot_s.p95 or 0) * 1e3:9.2f}/{tpot_ref * 1e3:<10.2f} {d_tpot:+6.1f}%"
            f" {step.e2e_s.p95 or 0:8.3f}/{e2e_ref:<8.3f} {d_e2e:+6.1f}% {before:+19.1f}%"
        )
    lines.append("")
    for direction, found in diffs.items():
        if not found:
            continue
        for name, centre in (("mean", statistics.fmean), ("median", statistics.median)):
            tpot = centre(d for d, _ in found)
            e2e = centre(d for _, d in found)
            verdict = "ok" if abs(tpot) <= 5 and abs(e2e) <= 5 else "OFF"
            lines.append(
                f"{direction:>4}: {name} over {len(found)} tests: P95 TPOT {tpot:+.1f} %,"
                f" P95 E2E {e2e:+.1f} %  {verdict} (within 5 %)"
            )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--low", type=int, default=16)
    parser.add_argument("--step-seconds", default="20")
    parser.add_argument("--repeats", type=int, default=2, help="test steps per direction")
    args = parser.parse_args()
    levels = plan(args.low, args.repeats)
    spec = GpuProfileSpec(gpu="a100-80gb-pcie", model="llama-3.1-8b")
    with tempfile.TemporaryDirectory() as tmp, start_background(spec) as sim:
        out = Path(tmp) / "isolation.json"
        wall_s = run(sim.url, out, levels, args.step_seconds)
        snapshot: Snapshot = load_snapshot(out)
    steps = snapshot.steps
    if len(steps) != len(levels):
        raise SystemExit(f"expected {len(levels)} steps, the run saved {len(steps)}")
    print(f"a100-80gb-pcie sim, llama-3.1-8b, 512/256 tokens, {args.step_seconds} s steps")
    print("\n".join(steps_table(steps, levels)))
    print()
    print("\n".join(pair_lines(steps, levels)))
    print(f"\nwall time {wall_s:.0f} s")


if __name__ == "__main__":
    main()
