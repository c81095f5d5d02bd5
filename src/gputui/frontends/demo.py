"""`gputui demo` (and bare `gputui`): the built-in simulated GPU server, driven by gputui.

The simulator runs in its own process on 127.0.0.1 (an ephemeral port), so a fresh machine without
a GPU gets the whole experience: the live TUI on it (every `gputui tui` flag but --url), or with
--concurrency LEVELS (or --headless) the scripted headless sweep that finds the knee. The
conversation and trace flags (`workloads.sources`) work in both.
"""

from __future__ import annotations

import argparse
import sys

from gputui.argtypes import level_list, seconds
from gputui.errors import UsageError


def add_demo_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of `gputui demo`."""
    parser.add_argument("--gpu", default="a100-80gb-pcie", help="simulated GPU (gputui sim --list)")
    parser.add_argument("--model", default="llama-3.1-8b", help="simulated model")
    parser.add_argument("--precision", choices=("bf16", "fp8", "int4"), default="bf16")
    from gputui.ui.command import add_tui_arguments

    add_tui_arguments(parser, demo=True)
    headless = parser.add_argument_group("headless sweep (instead of the TUI)")
    headless.add_argument("--headless", action="store_true", help="sweep without the TUI")
    headless.add_argument(
        "--concurrency", type=level_list, default=None, help="levels (1,2,4,8,16,32,64)"
    )
    headless.add_argument("--step-seconds", type=seconds, default=8.0)
    headless.add_argument("--out", default="gputui-demo.json", metavar="FILE.json")


def run_demo(
    args: argparse.Namespace, parser: argparse.ArgumentParser, top: argparse.ArgumentParser
) -> int:
    """Start the simulator, sweep it headless, write the snapshot.

    `parser` reports errors under the demo's name; `top` (the `gputui` parser) reads the
    headless run's flags, as `gputui run` would.
    """
    from gputui.frontends.run import run_command
    from gputui.sim.device import ModelDoesNotFit
    from gputui.sim.gpu_profile import GpuProfileSpec
    from gputui.sim.runner import start_background
    from gputui.workloads.sources import source_argv

    spec = GpuProfileSpec(gpu=args.gpu, model=args.model, precision=args.precision)
    try:
        spec.build_device()
    except (ModelDoesNotFit, KeyError) as exc:
        raise UsageError(str(exc.args[0] if exc.args else exc)) from None
    if not (args.headless or args.concurrency):
        from gputui.ui.command import run_demo_tui

        return run_demo_tui(args, spec)
    sys.stdout.write(f"gputui demo: simulated {args.gpu} serving {args.model} ({args.precision})\n")
    with start_background(spec) as sim:
        run_args = top.parse_args(
            [
                "run",
                "--url",
                sim.url,
                "--model",
                spec.served_model_name or args.model,
                *_load_argv(args),
                "--input-tokens",
                str(args.input_tokens or 512),
                "--output-tokens",
                str(args.output_tokens or 128),
                "--sla-ttft-p95",
                f"{args.sla_ttft_p95 or 1.0!r}s",  # a unit: re-parsed, never "implausible"
                "--sla-tpot-p95",
                f"{args.sla_tpot_p95 or 0.035!r}s",
                "--label",
                f"demo {args.gpu} {args.model}",
                "--out",
                args.out,
                "--precision",
                args.precision,
                *(["--price-per-hour", str(args.price_per_hour)] if args.price_per_hour else []),
                *source_argv(args),
                *_prompt_argv(args),
            ]
        )
        return run_command(run_args, parser)


def _load_argv(args: argparse.Namespace) -> list[str]:
    """The headless sweep's load: the demo's ramp, or what --sessions or --trace implies."""
    if args.trace is not None:  # one step as long as the trace, every request counted
        return []
    argv = ["--step-seconds", f"{args.step_seconds!r}s"]
    argv += ["--warmup-seconds", str(2.0 if args.warmup_seconds is None else args.warmup_seconds)]
    if args.concurrency or args.sessions is None:
        argv += ["--concurrency", ",".join(map(str, args.concurrency or [1, 2, 4, 8, 16, 32, 64]))]
    return argv


def _prompt_argv(args: argparse.Namespace) -> list[str]:
    """How the headless sweep sizes and isolates its prompts, as the demo was asked."""
    argv = ["--token-counter", args.token_counter]
    argv += ["--tokenizer", str(args.tokenizer)] if args.tokenizer is not None else []
    return argv + (["--reuse-prompts"] if args.reuse_prompts else [])
