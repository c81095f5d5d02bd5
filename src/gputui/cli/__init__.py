"""Command line: arguments in, typed settings out, errors as one line and an exit code.

The only package that reads argparse: `build_parser` declares every flag (the `*_flags` modules),
and each subcommand is one function (`cli.commands`) that turns its Namespace into typed options
once (`cli.options`, `cli.typed`). Heavy modules are imported inside those functions, so
`gputui --help` stays fast and importing `gputui` loads no textual, rich or httpx. A `FlagError`
from past the CLI (a bad combination of flags) is printed through the subcommand's parser, as
argparse's own errors are: one line, exit 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from gputui import __version__
from gputui.cli.argtypes import OneLineParser
from gputui.cli.commands import SUBCOMMANDS
from gputui.cli.run_flags import add_run_arguments
from gputui.cli.tui_flags import add_demo_arguments, add_tui_arguments
from gputui.errors import FlagError, GputuiError

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
    add_run_arguments(run)
    demo = commands.add_parser(
        "demo", help="the live TUI on the built-in simulated GPU server (default)"
    )
    add_demo_arguments(demo)
    add_tui_arguments(commands.add_parser("tui", help="the live TUI against a server"))
    from gputui.cli.tool_flags import (
        add_compare_arguments,
        add_gpu_arguments,
        add_kv_arguments,
        add_metrics_arguments,
        add_records_arguments,
        add_scenarios_arguments,
        add_sessions_arguments,
    )

    add_kv_arguments(commands.add_parser("kv", help="KV-cache and VRAM plan of a model on a GPU"))
    add_gpu_arguments(commands.add_parser("gpu", help="acceptance view of this node's NVIDIA GPUs"))
    add_metrics_arguments(commands.add_parser("metrics", help="scrape a /metrics endpoint once"))
    from gputui.cli.node_flags import add_burn_arguments, add_vram_check_arguments

    add_vram_check_arguments(
        commands.add_parser("vram-check", help="write and verify VRAM; measure its bandwidth")
    )
    add_burn_arguments(
        commands.add_parser("burn", help="sustained GEMMs while sampling clocks and throttling")
    )
    add_compare_arguments(
        commands.add_parser("compare", help="qualified capacity table and cost of snapshots")
    )
    add_sessions_arguments(commands.add_parser("sessions", help="list saved sessions"))
    add_records_arguments(
        commands.add_parser("records", help="a saved session's per-request records (JSON Lines)")
    )
    add_scenarios_arguments(
        commands.add_parser("scenarios", help="list (and validate) the scenario files")
    )
    sim = commands.add_parser("sim", help="the built-in simulated inference server")
    from gputui.cli.sim_flags import add_sim_arguments

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
        return SUBCOMMANDS[args.command](args)
    except FlagError as exc:  # a bad combination of flags reads like argparse's own errors
        parser.error(str(exc))
    except GputuiError as exc:
        sys.stderr.write(f"gputui: {exc}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("gputui: interrupted\n")
        return 130
