"""Is a burst measured apart from the step it interrupts? (issue 28: "bursts apart")

On the simulator (a100-80gb-pcie, llama-3.1-8b, 512 in / 256 out), 4 streams run a step, then
the TUI's burst (`Session.burst(..., resettle=True)`): the step hands over, the burst fires, and
the same level re-settles after it. The table prints each step's output tok/s with its 95 %
interval and the requests the burst added to it (counted apart), and the burst's own line.

    python benchmarks/burst_apart.py [--burst 32] [--seconds 25]
"""

from __future__ import annotations

import argparse
import time

from gputui.engine.client import ClientConfig
from gputui.engine.load import RequestShape
from gputui.engine.process import EngineConfig
from gputui.engine.target import parse_target
from gputui.metrics.sla import Sla
from gputui.session import Session
from gputui.sim.gpu_profile import GpuProfileSpec
from gputui.sim.runner import start_background


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--burst", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=25.0)
    args = parser.parse_args()
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


if __name__ == "__main__":
    main()
