"""`gputui demo` (and bare `gputui`): the built-in simulated GPU server, driven by gputui.

The simulator runs in its own process on 127.0.0.1 (an ephemeral port), so a fresh machine without
a GPU gets the whole experience: a concurrency sweep that finds the knee, then the snapshot.
"""

from __future__ import annotations

import argparse
import sys

from gputui.errors import UsageError


def add_demo_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of `gputui demo`."""
    parser.add_argument("--gpu", default="a100-80gb-pcie", help="simulated GPU (gputui sim --list)")
    parser.add_argument("--model", default="llama-3.1-8b", help="simulated model")
    parser.add_argument("--precision", choices=("bf16", "fp8", "int4"), default="bf16")
    parser.add_argument("--concurrency", default="1,2,4,8,16,32,64", help="levels to sweep")
    parser.add_argument("--step-seconds", default="8")
    parser.add_argument("--warmup-seconds", default="2")
    parser.add_argument("--input-tokens", default="512")
    parser.add_argument("--output-tokens", default="128")
    parser.add_argument("--sla-ttft-p95", default="1.0", metavar="SECONDS")
    parser.add_argument("--sla-tpot-p95", default="0.035", metavar="SECONDS")
    parser.add_argument("--out", default="gputui-demo.json", metavar="FILE.json")


def run_demo(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Start the simulator, sweep it headless, write the snapshot."""
    from gputui.cli import build_parser
    from gputui.headless import run_command
    from gputui.sim.device import ModelDoesNotFit
    from gputui.sim.gpu_profile import GpuProfileSpec
    from gputui.sim.runner import start_background

    spec = GpuProfileSpec(gpu=args.gpu, model=args.model, precision=args.precision)
    try:
        spec.build_device()
    except (ModelDoesNotFit, KeyError) as exc:
        raise UsageError(str(exc.args[0] if exc.args else exc)) from None
    sys.stdout.write(f"gputui demo: simulated {args.gpu} serving {args.model} ({args.precision})\n")
    with start_background(spec) as sim:
        run_parser = build_parser()
        run_args = run_parser.parse_args(
            [
                "run",
                "--url",
                sim.url,
                "--model",
                spec.served_model_name or args.model,
                "--concurrency",
                args.concurrency,
                "--step-seconds",
                args.step_seconds,
                "--warmup-seconds",
                args.warmup_seconds,
                "--input-tokens",
                args.input_tokens,
                "--output-tokens",
                args.output_tokens,
                "--sla-ttft-p95",
                args.sla_ttft_p95,
                "--sla-tpot-p95",
                args.sla_tpot_p95,
                "--label",
                f"demo {args.gpu} {args.model}",
                "--out",
                args.out,
            ]
        )
        return run_command(run_args, parser)
