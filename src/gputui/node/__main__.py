"""`python -m gputui.node vram-check|burn`: the node checks with only their own dependencies.

The full `gputui` CLI also declares the load-test commands, which need httptools and orjson; a
freshly rented node with only PyTorch (and nvidia-ml-py) can still run its acceptance checks here.
"""

from __future__ import annotations

import argparse

from gputui.node.commands import (
    add_burn_arguments,
    add_vram_check_arguments,
    run_burn_command,
    run_vram_check_command,
)


def main(argv: list[str] | None = None) -> int:
    """Parse and run one node check."""
    parser = argparse.ArgumentParser(prog="python -m gputui.node", description=__doc__)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    add_vram_check_arguments(commands.add_parser("vram-check", help="write and verify VRAM"))
    add_burn_arguments(commands.add_parser("burn", help="sustained GEMMs while sampling NVML"))
    args = parser.parse_args(argv)
    try:
        if args.command == "vram-check":
            return run_vram_check_command(args)
        return run_burn_command(args)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
