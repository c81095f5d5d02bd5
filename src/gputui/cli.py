"""Command line: arguments in, settings out, errors as one line and an exit code.

Each subcommand is one function; the heavy modules are imported inside it, so `gputui --help`
stays fast and importing `gputui` loads no textual, rich or httpx.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from gputui import __version__
from gputui.argtypes import (
    OneLineParser,
    level_list,
    minutes,
    non_negative_int,
    non_negative_seconds,
    positive_float,
    positive_int,
    rate_list,
    seconds,
)
from gputui.errors import GputuiError


def _add_run_arguments(parser: argparse.ArgumentParser) -> None:
    from gputui.settings import (
        add_client_arguments,
        add_precision_arguments,
        add_record_arguments,
        add_sla_arguments,
        add_target_arguments,
        add_workload_arguments,
    )

    add_target_arguments(parser)
    load = parser.add_argument_group("load")
    _add_plan_arguments(load)
    _add_step_arguments(load)
    add_precision_arguments(parser)
    load.add_argument(
        "--seed", type=int, default=None, help="same seed, same requests (default: scenario's, 0)"
    )
    add_workload_arguments(parser)
    _add_shape_arguments(parser.add_argument_group("workload"))
    add_sla_arguments(parser)
    add_client_arguments(parser)
    client = parser.add_argument_group("client")
    client.add_argument("--no-uvloop", action="store_true", help="use asyncio's default loop")
    from gputui.telemetry.setup import add_telemetry_arguments
    from gputui.workloads.sources import add_workload_source_arguments

    add_workload_source_arguments(parser)
    add_telemetry_arguments(parser)
    add_record_arguments(parser)
    _add_output_arguments(parser.add_argument_group("output"))


def _add_plan_arguments(load: argparse._ArgumentGroup) -> None:
    """What to sweep: fixed levels, the auto sweep or a validation hold, and their bounds."""
    levels = load.add_mutually_exclusive_group()
    levels.add_argument("--concurrency", type=level_list, help="closed-loop levels, e.g. 1,2,4,8")
    levels.add_argument("--rate", type=rate_list, help="open-loop requests/s, e.g. 0.5,1,2")
    levels.add_argument(
        "--auto",
        action="store_true",
        help="find the capacity: concurrency ramp x2 until the SLA breaks or throughput stalls, "
        "then bisect; then hold 90%% of its req/s to validate it",
    )
    levels.add_argument(
        "--validate-rate",
        type=positive_float,
        metavar="R",
        help="hold R requests/s (Poisson) for --seconds: does the SLA hold, is the queue bounded?",
    )
    load.add_argument("--max-level", type=positive_int, default=256, help="--auto's ceiling")
    load.add_argument("--max-minutes", type=minutes, default=30.0, help="--auto's budget")
    load.add_argument("--seconds", type=seconds, default=60.0, help="length of the validation hold")
    load.add_argument("--no-validate", action="store_true", help="skip the hold after --auto")


def _add_step_arguments(load: argparse._ArgumentGroup) -> None:
    """Bursts, arrivals, and how long each step runs and warms up; repeats of the plan."""
    load.add_argument(
        "--burst",
        type=positive_int,
        default=None,
        metavar="K",
        help="fire K extra requests at once every --burst-every seconds",
    )
    load.add_argument("--burst-every", type=seconds, default=30.0, metavar="S")
    load.add_argument("--arrival", choices=("poisson", "constant", "gamma"), default=None)
    load.add_argument(
        "--burstiness", type=positive_float, default=None, help="gamma shape (1 = Poisson)"
    )
    load.add_argument("--max-in-flight", type=positive_int, default=1024)
    load.add_argument(
        "--step-seconds",
        type=seconds,
        default=None,
        help="length of each step (required unless the --scenario gives it)",
    )
    load.add_argument(
        "--warmup-seconds",
        type=non_negative_seconds,
        default=None,
        help="a fixed warm-up excluded from each step's statistics (default: each step starts "
        "measuring once the load has settled, at most 30 s)",
    )
    load.add_argument(
        "--repeats",
        type=positive_int,
        default=1,
        metavar="N",
        help="run the whole plan N times on fresh connections (the server's prefix cache reset "
        "where it offers it) and report the spread across runs",
    )


def _add_shape_arguments(work: argparse._ArgumentGroup) -> None:
    """The lengths, dataset and prompt shape of each request, beyond the shared workload flags."""
    work.add_argument(
        "--input-dist",
        default=None,
        metavar="DIST",
        help="input lengths: N, uniform:MIN,MAX, normal:MEAN,STD[,MIN,MAX], "
        "lognormal:mean=M,std=S[,min=..,max=..] or empirical:FILE (a dataset's lengths)",
    )
    work.add_argument("--output-dist", default=None, metavar="DIST", help="as --input-dist")
    work.add_argument(
        "--dataset",
        default=None,
        metavar="FILE",
        help="send a local dataset's prompts: ShareGPT JSON or JSONL of "
        '{"prompt": ..., "output_tokens": N}',
    )
    work.add_argument(
        "--shared-prefix-tokens",
        type=non_negative_int,
        default=None,
        metavar="N",
        help="a system prompt of N tokens shared by every request (prefix caching on purpose)",
    )
    work.add_argument(
        "--unique-prefix",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="begin each prompt with words unique to it, so no prefix cache hits (default on)",
    )
    work.add_argument(
        "--min-tokens",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also send min_tokens = max_tokens (default: to vLLM, SGLang and the simulator)",
    )
    work.add_argument(
        "--extra-body", default=None, metavar="JSON", help="fields to add to requests"
    )


def _add_output_arguments(output: argparse._ArgumentGroup) -> None:
    """Where the snapshot goes, and a measured bandwidth for the roofline."""
    output.add_argument(
        "--out",
        default=None,
        metavar="FILE.json",
        help="the snapshot (default: a new file in --snapshot-dir, named like the TUI's)",
    )
    output.add_argument(
        "--vram-check",
        default=None,
        metavar="FILE.json",
        help="`gputui vram-check --json` output: its measured bandwidth is the roofline's peak "
        "for a card missing from the catalog",
    )


DURATIONS_NOTE = (
    "Durations take a unit: 35ms, 1.5s, 500us, 2m; a bare number is in the flag's own unit "
    "(seconds, or the ms or minutes its name says)."
)


class _Commands:
    """The subcommands' `add_parser`, every one with the durations note under its --help."""

    def __init__(self, action: argparse._SubParsersAction[OneLineParser]) -> None:
        self._action = action

    def add_parser(self, name: str, *, help: str) -> argparse.ArgumentParser:
        return self._action.add_parser(name, help=help, epilog=DURATIONS_NOTE)


def build_parser() -> OneLineParser:
    """The whole CLI."""
    parser = OneLineParser(
        prog="gputui",
        description="Live LLM serving-load experiments in the terminal.",
        epilog=DURATIONS_NOTE,
    )
    parser.add_argument("--version", action="version", version=f"gputui {__version__}")
    commands = _Commands(parser.add_subparsers(dest="command", metavar="COMMAND"))
    run = commands.add_parser("run", help="headless sweep: one line per step, a snapshot JSON")
    _add_run_arguments(run)
    demo = commands.add_parser(
        "demo", help="the live TUI on the built-in simulated GPU server (default)"
    )
    from gputui.frontends.demo import add_demo_arguments

    add_demo_arguments(demo)
    from gputui.ui.command import add_tui_arguments

    add_tui_arguments(commands.add_parser("tui", help="the live TUI against a server"))
    from gputui.telemetry.commands import (
        add_gpu_arguments,
        add_kv_arguments,
        add_metrics_arguments,
    )

    add_kv_arguments(commands.add_parser("kv", help="KV-cache and VRAM plan of a model on a GPU"))
    add_gpu_arguments(commands.add_parser("gpu", help="acceptance view of this node's NVIDIA GPUs"))
    add_metrics_arguments(commands.add_parser("metrics", help="scrape a /metrics endpoint once"))
    from gputui.node.commands import add_burn_arguments, add_vram_check_arguments

    add_vram_check_arguments(
        commands.add_parser("vram-check", help="write and verify VRAM; measure its bandwidth")
    )
    add_burn_arguments(
        commands.add_parser("burn", help="sustained GEMMs while sampling clocks and throttling")
    )
    from gputui.snapshot.compare_command import add_compare_arguments, add_sessions_arguments

    add_compare_arguments(
        commands.add_parser("compare", help="qualified capacity table and cost of snapshots")
    )
    add_sessions_arguments(commands.add_parser("sessions", help="list saved sessions"))
    from gputui.workloads.command import add_scenarios_arguments

    add_scenarios_arguments(
        commands.add_parser("scenarios", help="list (and validate) the scenario files")
    )
    sim = commands.add_parser("sim", help="the built-in simulated inference server")
    from gputui.sim.command import add_sim_arguments

    add_sim_arguments(sim)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `gputui` script."""
    top = build_parser()
    args = top.parse_args(argv)
    if args.command is None:
        args = top.parse_args(["demo"])
    parser = top.subcommand(args.command) or top  # its errors carry its own name
    try:
        if args.command == "run":
            from gputui.frontends.run import run_command

            return run_command(args, parser)
        if args.command in ("kv", "gpu", "metrics"):
            from gputui.telemetry import commands as telemetry_commands

            run = {
                "kv": telemetry_commands.run_kv,
                "gpu": telemetry_commands.run_gpu,
                "metrics": telemetry_commands.run_metrics,
            }[args.command]
            return run(args)
        if args.command in ("vram-check", "burn"):
            from gputui.node import commands as node_commands

            if args.command == "vram-check":
                return node_commands.run_vram_check_command(args)
            return node_commands.run_burn_command(args)
        if args.command == "tui":
            from gputui.ui.command import run_tui

            return run_tui(args)
        if args.command in ("compare", "sessions"):
            from gputui.snapshot import compare_command

            if args.command == "compare":
                return compare_command.run_compare(args, parser)
            return compare_command.run_sessions(args)
        if args.command == "scenarios":
            from gputui.workloads.command import run_scenarios

            return run_scenarios(args)
        if args.command == "sim":
            from gputui.sim.command import run_sim_command

            return run_sim_command(args)
        from gputui.frontends.demo import run_demo

        return run_demo(args, parser, top)
    except GputuiError as exc:
        sys.stderr.write(f"gputui: {exc}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("gputui: interrupted\n")
        return 130
