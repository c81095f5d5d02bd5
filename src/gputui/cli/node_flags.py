"""The flags of `gputui vram-check` and `gputui burn` (also `python -m gputui.node`).

Declaring them imports nothing heavy: a fresh node with only PyTorch can parse them.
"""

from __future__ import annotations

import argparse

from gputui.cli.argtypes import bounded, open_fraction, positive_float, seconds
from gputui.cli.typed import take
from gputui.node.commands import (
    BACKENDS,
    BurnOptions,
    VramCheckOptions,
    run_burn_command,
    run_vram_check_command,
)


def _patterns(text: str) -> tuple[str, ...]:
    from gputui.node.patterns import parse_patterns

    try:
        return parse_patterns(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--gpu",
        type=bounded(int, low=0),
        default=0,
        metavar="INDEX",
        help="GPU index as nvidia-smi shows it (matched to the CUDA device by UUID)",
    )
    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        default="auto",
        help="array library: PyTorch, else CuPy (auto); numpy = a 64 MiB host-memory stand-in "
        "that tests gputui itself, not a GPU",
    )
    parser.add_argument("--json", action="store_true", help="JSON output")


def add_vram_check_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare `gputui vram-check`'s flags."""
    _add_common(parser)
    parser.add_argument(
        "--fraction",
        type=open_fraction,
        default=0.95,
        metavar="F",
        help="share of the free memory to check (default 0.95; 512 MiB always stays free)",
    )
    parser.add_argument(
        "--patterns",
        type=_patterns,
        default=("address", "walking1", "walking0", "random"),
        metavar="LIST",
        help="comma list of address, walking1, walking0, random, or all (default all)",
    )
    parser.add_argument("--seed", type=bounded(int, low=0), default=0, help="pattern seed")
    parser.add_argument(
        "--chunk-mib",
        type=bounded(int, low=32),
        default=1024,
        metavar="MIB",
        help="allocation chunk",
    )
    parser.add_argument(
        "--max-report",
        type=bounded(int, low=0),
        default=32,
        metavar="N",
        help="mismatches listed per pattern (all are counted)",
    )
    parser.add_argument(
        "--expect-gb",
        type=positive_float,
        default=None,
        metavar="GB",
        help="the capacity the node was sold with (e.g. 48): says if it is one card or several",
    )


def add_burn_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare `gputui burn`'s flags."""
    _add_common(parser)
    parser.add_argument("--seconds", type=seconds, default=600.0, help="burn length (default 600)")
    parser.add_argument(
        "--interval",
        type=seconds,
        default=0.5,
        metavar="S",
        help="GPU sampling interval (default 0.5)",
    )
    parser.add_argument(
        "--size", type=bounded(int, low=256), default=8192, metavar="N", help="matrix size N x N"
    )


def node_main(argv: list[str] | None = None, *, description: str | None = None) -> int:
    """`python -m gputui.node`: parse and run one node check."""
    parser = argparse.ArgumentParser(prog="python -m gputui.node", description=description)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    add_vram_check_arguments(commands.add_parser("vram-check", help="write and verify VRAM"))
    add_burn_arguments(commands.add_parser("burn", help="sustained GEMMs while sampling NVML"))
    args = parser.parse_args(argv)
    try:
        if args.command == "vram-check":
            return run_vram_check_command(take(VramCheckOptions, args))
        return run_burn_command(take(BurnOptions, args))
    except KeyboardInterrupt:
        return 130
