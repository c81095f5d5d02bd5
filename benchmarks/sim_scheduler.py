"""Simulated decode throughput versus concurrency, and the scheduler's own CPU cost per token.

Runs the GPU profile's engine core (KV plan + roofline + continuous-batching scheduler + thermal
model) in virtual time with a closed-loop load, for each GPU and concurrency level, and prints:
steady output tok/s (while the concurrency is held), per-stream decode speed (1 / mean TPOT), mean
TTFT, the gain over the previous level (the knee is where it falls below 15 %), preemptions, the
card's temperature and SM clock at the end, and the CPU time the simulation itself spent per
emitted token. The server must stream >= 20,000 tokens/s on one core including its HTTP writes, so
the scheduler's share should stay well under 10 µs per token.

    python benchmarks/sim_scheduler.py [--gpus a100-80gb-pcie,rtx4090-48gb] [--model llama-3.1-8b]
        [--prompt 1024] [--output 256] [--levels 1,2,4,8,16,32,64,128] [--requests-per-level 4]
"""

from __future__ import annotations

import argparse
import time

from gputui.catalog.specs import get_gpu, get_model
from gputui.sim.device import make_device
from gputui.sim.virtual import run_closed_loop

KNEE_GAIN = 0.15


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", default="a100-80gb-pcie,rtx4090-48gb")
    parser.add_argument("--model", default="llama-3.1-8b")
    parser.add_argument("--prompt", type=int, default=1024)
    parser.add_argument("--output", type=int, default=256)
    parser.add_argument("--levels", default="1,2,4,8,16,32,64,128")
    parser.add_argument(
        "--requests-per-level", type=int, default=4, help="requests = this x concurrency (min 8)"
    )
    args = parser.parse_args()
    model = get_model(args.model)
    levels = [int(x) for x in args.levels.split(",")]
    print(
        f"{model.name} bf16, {args.prompt} in / {args.output} out, closed loop, virtual time; "
        f"knee = first level whose doubling gains < {KNEE_GAIN:.0%}"
    )
    total_cpu_ns = total_tokens = 0
    for gpu_name in args.gpus.split(","):
        gpu = get_gpu(gpu_name)
        probe = make_device(gpu, model)
        roof = probe.roofline.decode_bandwidth_roofline_tok_s()
        print(
            f"\n{gpu.name}: KV pool {probe.plan.kv_pool_bytes / 1e9:.1f} GB = "
            f"{probe.plan.capacity_tokens} tokens; bandwidth roofline {roof:.1f} tok/s/stream"
        )
        print(
            f"{'conc':>5} {'out tok/s':>10} {'gain':>6} {'stream tok/s':>12} {'% roof':>7} "
            f"{'TTFT ms':>8} {'preempt':>7} {'temp C':>6} {'SM MHz':>6} {'µs/token':>8}"
        )
        previous = None
        knee = None
        for c in levels:
            device = make_device(gpu, model)
            cpu0 = time.process_time_ns()
            r = run_closed_loop(
                device, c, args.prompt, args.output, max(args.requests_per_level * c, 8)
            )
            cpu_ns = time.process_time_ns() - cpu0
            total_cpu_ns += cpu_ns
            total_tokens += r.output_tokens
            gain = "" if previous is None else f"{r.steady_output_tok_s / previous - 1:+.0%}"
            if previous is not None and knee is None and r.steady_output_tok_s < previous * 1.15:
                knee = c // 2
            previous = r.steady_output_tok_s
            stream = 1.0 / r.mean_tpot_s
            print(
                f"{c:>5} {r.steady_output_tok_s:>10.1f} {gain:>6} {stream:>12.1f} "
                f"{stream / roof:>7.0%} {r.mean_ttft_s * 1e3:>8.1f} {r.preemptions:>7} "
                f"{device.thermal.temp_c:>6.0f} {device.thermal.sm_clock_mhz:>6.0f} "
                f"{cpu_ns / 1e3 / r.output_tokens:>8.2f}"
            )
        print(f"knee at concurrency {knee}" if knee else "no knee within the levels")
    print(
        f"\nscheduler + roofline + thermal CPU cost: {total_cpu_ns / 1e3 / total_tokens:.2f} µs "
        f"per emitted token over {total_tokens} tokens "
        f"(= {total_tokens / (total_cpu_ns / 1e9):,.0f} tokens/s of one core)"
    )


if __name__ == "__main__":
    main()
