"""Give a replay fixture's steps the energy the simulator's power model draws at their load.

Usage: python scripts/fixture_energy.py tests/ui/fixtures/sweep-a100.json [--gpu a100-80gb-pcie]

For each step, a fresh simulated card (`sim.gpu_profile`, Llama-3.1-8B) runs a closed loop at the
step's concurrency in virtual time (`sim.virtual`); its mean power over the loop (the thermal
model's energy counter over the virtual seconds) times the step's measured window gives the
step's joules, and `telemetry.step_telemetry` / `metrics.energy` give the saved objects, exactly
as a live step's. Steps of a fixture recorded before issue 29 then show energy on replay.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import orjson

from gputui.metrics.energy import step_energy
from gputui.sim.gpu_profile import GpuProfileSpec
from gputui.sim.virtual import run_closed_loop
from gputui.telemetry.step_telemetry import StepTelemetry, WindowEnergy


def mean_power_w(gpu: str, streams: int, prompt: int, output: int) -> float:
    """The card's mean power over a closed loop of `streams` in virtual time."""
    device = GpuProfileSpec(gpu=gpu, model="llama-3.1-8b").build_device()
    run_closed_loop(device, streams, prompt, output, num_requests=streams)  # warm up
    start_j, seconds = device.thermal.energy_j, 0.0
    while seconds < 10.0:
        seconds += run_closed_loop(device, streams, prompt, output, num_requests=streams).duration_s
    return (device.thermal.energy_j - start_j) / seconds


def main() -> None:
    """Rewrite the fixture with each step's `telemetry` energy and `energy` object."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("fixture", type=Path)
    parser.add_argument("--gpu", default="a100-80gb-pcie")
    args = parser.parse_args()
    data = orjson.loads(args.fixture.read_bytes())
    prompt, output = data["workload"]["input_tokens"], data["workload"]["output_tokens"]
    for step in data["steps"]:
        watts = mean_power_w(args.gpu, max(round(step["level"]), 1), prompt, output)
        window = WindowEnergy(watts * step["duration_s"], watts, 1, "counter", 1.0)
        summary = StepTelemetry(
            window_s=step["duration_s"], gpus=1, power_mean_w=watts, energy=window
        )
        step["telemetry"] = summary.to_dict()
        step["energy"] = dict(
            step_energy(
                window,
                step["duration_s"],
                output_tokens_per_s=step["output_tokens_per_s"],
                input_tokens_per_s=step["input_tokens_per_s"],
                good_output_tokens_per_s=step["goodput_output_tokens_per_s"],
            )
        )
        sys.stdout.write(f"level {step['level']:g}: {watts:.0f} W\n")
    args.fixture.write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n")


if __name__ == "__main__":
    main()
