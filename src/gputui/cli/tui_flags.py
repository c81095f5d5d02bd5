"""The flags of `gputui tui` and `gputui demo` (the TUI's, less --url, plus the simulated card)."""

from __future__ import annotations

import argparse

from gputui.cli.argtypes import (
    level_list,
    non_negative_seconds,
    positive_float,
    positive_int,
    seconds,
)
from gputui.cli.shared_flags import (
    add_client_arguments,
    add_precision_arguments,
    add_record_arguments,
    add_sla_arguments,
    add_target_arguments,
    add_telemetry_arguments,
    add_workload_arguments,
    add_workload_source_arguments,
)


def add_tui_arguments(parser: argparse.ArgumentParser, *, demo: bool = False) -> None:
    """The flags of `gputui tui`; `demo=True` leaves out --url and --model (the demo sets them)."""
    add_target_arguments(parser, url=not demo)
    add_telemetry_arguments(parser)
    load = parser.add_argument_group("load")
    load.add_argument("--start-mode", choices=("concurrency", "rate"), default=None)
    load.add_argument("--start-level", type=positive_float, default=None)
    load.add_argument("--factor", type=positive_float, default=None, help="step factor (2)")
    load.add_argument("--burst-size", type=positive_int, default=None)
    load.add_argument(
        "--warmup-seconds",
        type=non_negative_seconds,
        default=None,
        help="excluded from each step (default: until the load has settled)",
    )
    load.add_argument(
        "--window-seconds",
        type=seconds,
        default=None,
        help="rolling window of the latency table (15)",
    )
    add_workload_arguments(parser)
    add_sla_arguments(parser)
    add_client_arguments(parser)
    add_record_arguments(parser, precision=not demo)
    add_precision_arguments(parser)
    add_workload_source_arguments(parser)
    out = parser.add_argument_group("display")
    out.add_argument("--no-color", action="store_true", help="monochrome")
    out.add_argument("--ascii", action="store_true", help="ASCII charts and borders")


def add_demo_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of `gputui demo`."""
    parser.add_argument("--gpu", default="a100-80gb-pcie", help="simulated GPU (gputui sim --list)")
    parser.add_argument("--model", default="llama-3.1-8b", help="simulated model")
    parser.add_argument("--precision", choices=("bf16", "fp8", "int4"), default="bf16")
    add_tui_arguments(parser, demo=True)
    headless = parser.add_argument_group("headless sweep (instead of the TUI)")
    headless.add_argument("--headless", action="store_true", help="sweep without the TUI")
    headless.add_argument(
        "--concurrency", type=level_list, default=None, help="levels (1,2,4,8,16,32,64)"
    )
    headless.add_argument("--step-seconds", type=seconds, default=8.0)
    headless.add_argument("--out", default="gputui-demo.json", metavar="FILE.json")
