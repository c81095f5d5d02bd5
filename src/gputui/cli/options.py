"""Parsed flags turned into the typed options, once per subcommand: no Namespace goes further.

Contract: `run_options(args)`, `tui_options(args)` and `demo_options(args)` read every flag of
their subcommand into the frozen `gputui.settings` tree (each flag group by its field names, so a
field of a group is the flag of that name); lists of levels become tuples.
"""

from __future__ import annotations

import argparse
from typing import TypeVar

from gputui.cli.typed import take
from gputui.settings import (
    DemoOptions,
    LoadPlanFlags,
    RunOptions,
    SharedFlags,
    TuiOptions,
)
from gputui.telemetry.setup import TelemetryFlags
from gputui.workloads.runplan import ShapeFlags
from gputui.workloads.sources import SourceFlags

_Level = TypeVar("_Level", int, float)


def _levels(values: list[_Level] | None) -> tuple[_Level, ...] | None:
    return None if values is None else tuple(values)


def run_options(args: argparse.Namespace) -> RunOptions:
    """`gputui run`'s flags."""
    plan = take(LoadPlanFlags, args, concurrency=_levels(args.concurrency), rate=_levels(args.rate))
    return RunOptions(
        url=args.url,
        model=args.model,
        shared=take(SharedFlags, args),
        plan=plan,
        shape=take(ShapeFlags, args),
        source=take(SourceFlags, args),
        telemetry=take(TelemetryFlags, args),
        extra_body=args.extra_body,
        no_uvloop=args.no_uvloop,
        out=args.out,
        vram_check=args.vram_check,
    )


def tui_options(args: argparse.Namespace) -> TuiOptions:
    """`gputui tui`'s flags (and the TUI part of `gputui demo`'s)."""
    return take(
        TuiOptions,
        args,
        shared=take(SharedFlags, args),
        source=take(SourceFlags, args),
        telemetry=take(TelemetryFlags, args),
    )


def demo_options(args: argparse.Namespace) -> DemoOptions:
    """`gputui demo`'s flags."""
    return take(DemoOptions, args, tui=tui_options(args), concurrency=_levels(args.concurrency))
