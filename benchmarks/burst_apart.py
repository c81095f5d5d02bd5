"""Is a burst measured apart from the step it interrupts? (issue 28: "bursts apart")

On the simulator (a100-80gb-pcie, llama-3.1-8b, 512 in / 256 out), 4 streams run a step, then
the TUI's burst (`Session.burst(..., resettle=True)`): the step hands over, the burst fires, and
the same level re-settles after it. The table prints each step's output tok/s with its 95 %
interval and the requests the burst added to it (counted apart), and the burst's own line.

`--run`: two headless runs on one simulator instead, each one `gputui run --concurrency 4` step
of --seconds: burst-free, then with `--burst 32` firing two thirds into the step (the step
measures from ~3 s, so the burst lands inside its measured window). `run` does not close its
steps at a burst: the step's requests in flight under the burst's load are left out of its
figures. The table adds P95 TPOT with its interval, the step's requests and seconds left out for
the burst, its warm-up and its measured window.

    python benchmarks/burst_apart.py [--burst 32] [--seconds 25] [--run]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gputui.engine.client import ClientConfig
from gputui.engine.load import RequestShape
from gputui.engine.process import EngineConfig
from gputui.engine.target import parse_target
from gputui.metrics.sla import Sla
from gputui.session import Session
from gputui.sim.gpu_profile import GpuProfileSpec
from gputui.sim.runner import start_background
from gputui.snapshot.models import Snapshot
from gputui.snapshot.step_models import Step
from gputui.snapshot.store import load_snapshot


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--burst", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=25.0)
    parser.add_argument("--run", action="store_true", help="a headless `gputui run --burst`")
    args = parser.parse_args()
    if args.run:
        headless(args.burst, args.seconds)
        return
    spec = GpuProfileSpec(gpu="a100-80gb-pcie", model="llama-3.1-8b")
    with start_background(spec) as sim:
        client = ClientConfig(
            target=parse_target(sim.url), model="llama-3.1-8b", extra_body={"ignore_eos": True}
        )
        session = Session(
            EngineConfig(client=client, shape=RequestShape(512, 256)), Sla(), warmup_s=None
        )
        session.start()
        session.set_load("concurrency", 4)
        time.sleep(args.seconds)
        session.burst(args.burst, resettle=True)
        time.sleep(args.seconds + 10.0)  # the hand-over, the burst, the re-settling
        session.stop(cancel=False, drain_timeout_s=60)
    print(f"a100-80gb-pcie sim, llama-3.1-8b, 512/256 tokens, 4 streams, burst of {args.burst}")
    print(f"{'step':>4} {'tok/s':>8} {'95 % CI':>17} {'n':>4} {'burst reqs':>10} {'settle s':>8}")
    for step in session.finished_steps():
        ci = step.output_tokens_per_s_ci
        shown = f"[{ci[0]:.0f}, {ci[1]:.0f}]" if ci and None not in ci else "open"
        print(
            f"{step.index + 1:4d} {step.output_tokens_per_s:8.1f} {shown:>17}"
            f" {step.requests_ok:4d} {step.requests_burst:10d} {step.warmup_s:8.1f}"
        )
    for event in session.events.items():
        if event.text.startswith("burst of"):
            print(event.text)


def headless(burst: int, step_s: float) -> None:
    """Two `gputui run`s of one 4-stream step on one simulator: burst-free, then one burst."""
    spec = GpuProfileSpec(gpu="a100-80gb-pcie", model="llama-3.1-8b")
    print(f"gputui run, a100-80gb-pcie sim, llama-3.1-8b, 512/256, 4 streams, burst of {burst}")
    print(
        f"{'run':>10} {'tok/s':>8} {'95 % CI':>12} {'P95 TPOT ms':>11} {'95 % CI':>15} {'n':>4}"
        f" {'burst':>5} {'left out':>8} {'out s':>6} {'warm-up s':>9} {'window s':>8}"
    )
    with start_background(spec) as sim:
        for label, extra in (
            ("burst-free", []),
            ("burst", ["--burst", str(burst), "--burst-every", f"{2 * step_s / 3:g}s"]),
        ):
            snapshot = _one_run(sim.url, step_s, extra)
            for step in snapshot.steps:
                print(_row(label, step))
            for found in snapshot.bursts:
                print(f"  burst of {found.count} at {found.at_s or 0:.1f} s: {found.recovery_s} s")


def _one_run(url: str, step_s: float, extra: list[str]) -> Snapshot:
    """One `gputui run --concurrency 4` step of `step_s` seconds, with `extra` flags."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.json"
        command = [sys.executable, "-m", "gputui", "run", "--url", url]
        command += ["--model", "llama-3.1-8b", "--input-tokens", "512", "--output-tokens", "256"]
        command += ["--concurrency", "4", "--step-seconds", f"{step_s:g}s", "--out", str(out)]
        done = subprocess.run(command + extra, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(done.stderr.strip()[-2000:])
        return load_snapshot(out)


def _row(label: str, step: Step) -> str:
    tok = step.output_tokens_per_s_ci
    tpot = step.tpot_s
    return (
        f"{label:>10} {step.output_tokens_per_s:8.1f}"
        f" {_ci(tok, 1):>12} {(tpot.p95 or 0) * 1e3:11.3f} {_ci(tpot.p95_ci, 1e3):>15}"
        f" {tpot.n:4d} {step.requests_burst or 0:5d}"
        f" {getattr(step, 'requests_under_burst', None) or 0:8d}"
        f" {getattr(step, 'burst_window_s', None) or 0:6.1f}"
        f" {step.warmup_s or 0:9.1f} {step.duration_s:8.1f}"
    )


def _ci(bounds: tuple[float | None, float | None] | None, scale: float) -> str:
    """An interval as printed ('open' without both ends); ms (scale 1e3) with 3 decimals."""
    if bounds is None or bounds[0] is None or bounds[1] is None:
        return "open"
    digits = 0 if scale == 1 else 3
    return f"[{bounds[0] * scale:.{digits}f}, {bounds[1] * scale:.{digits}f}]"


if __name__ == "__main__":
    main()
