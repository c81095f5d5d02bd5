"""One function per subcommand: its flags read into typed options once, then its runner called.

Each imports its runner only when it runs, so `gputui --help` loads nothing heavy. A runner never
sees the Namespace (`tests/unit/test_layering.py` checks that argparse stops at `gputui.cli`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from gputui.cli.typed import take


def run(args: argparse.Namespace) -> int:
    from gputui.cli.options import run_options
    from gputui.frontends.run import run_command

    return run_command(run_options(args))


def demo(args: argparse.Namespace) -> int:
    from gputui.cli.options import demo_options
    from gputui.frontends.demo import run_demo

    return run_demo(demo_options(args))


def tui(args: argparse.Namespace) -> int:
    from gputui.cli.options import tui_options
    from gputui.ui.command import run_tui

    return run_tui(tui_options(args))


def kv(args: argparse.Namespace) -> int:
    from gputui.telemetry.commands import KvOptions, run_kv

    return run_kv(take(KvOptions, args))


def gpu(args: argparse.Namespace) -> int:
    from gputui.telemetry.commands import GpuOptions, run_gpu

    return run_gpu(take(GpuOptions, args))


def metrics(args: argparse.Namespace) -> int:
    from gputui.telemetry.commands import MetricsOptions, run_metrics

    return run_metrics(take(MetricsOptions, args))


def vram_check(args: argparse.Namespace) -> int:
    from gputui.node.commands import VramCheckOptions, run_vram_check_command

    return run_vram_check_command(take(VramCheckOptions, args))


def burn(args: argparse.Namespace) -> int:
    from gputui.node.commands import BurnOptions, run_burn_command

    return run_burn_command(take(BurnOptions, args))


def compare(args: argparse.Namespace) -> int:
    from gputui.snapshot.compare_command import CompareOptions, run_compare

    given = take(CompareOptions, args, snapshots=tuple(args.snapshots), price=tuple(args.price))
    return run_compare(given)


def sessions(args: argparse.Namespace) -> int:
    from gputui.snapshot.compare_command import SessionsOptions, run_sessions

    return run_sessions(take(SessionsOptions, args))


def records(args: argparse.Namespace) -> int:
    from gputui.snapshot.records_export import RecordsOptions, run_records

    return run_records(take(RecordsOptions, args))


def scenarios(args: argparse.Namespace) -> int:
    from gputui.workloads.command import ScenariosOptions, run_scenarios

    return run_scenarios(take(ScenariosOptions, args, places=tuple(args.places)))


def sim(args: argparse.Namespace) -> int:
    from gputui.sim.command import SimOptions, run_sim_command

    return run_sim_command(take(SimOptions, args))


SUBCOMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "run": run,
    "demo": demo,
    "tui": tui,
    "kv": kv,
    "gpu": gpu,
    "metrics": metrics,
    "vram-check": vram_check,
    "burn": burn,
    "compare": compare,
    "sessions": sessions,
    "records": records,
    "scenarios": scenarios,
    "sim": sim,
}
"""Each subcommand's function, by the name it is called with."""
