"""The typed options each subcommand is read into keep argparse's defaults, flag for flag."""

from __future__ import annotations

from typing import Any

import pytest

from gputui.cli import build_parser
from gputui.cli.options import demo_options, tui_options
from gputui.cli.typed import take
from gputui.node.commands import BurnOptions, VramCheckOptions
from gputui.settings import DemoOptions, TuiOptions
from gputui.sim.command import SimOptions
from gputui.snapshot.compare_command import SessionsOptions
from gputui.telemetry.commands import GpuOptions, KvOptions, MetricsOptions
from gputui.workloads.command import ScenariosOptions


@pytest.mark.parametrize(
    ("argv", "cls", "required"),
    [
        (["kv", "--model", "m"], KvOptions, {"model": "m"}),
        (["gpu"], GpuOptions, {}),
        (["metrics", "--url", "u"], MetricsOptions, {"url": "u"}),
        (["vram-check"], VramCheckOptions, {}),
        (["burn"], BurnOptions, {}),
        (["sessions"], SessionsOptions, {}),
        (["scenarios"], ScenariosOptions, {}),
        (["sim"], SimOptions, {}),
    ],
)
def test_a_flag_not_given_reads_as_its_default(
    argv: list[str], cls: type[Any], required: dict[str, Any]
) -> None:
    args = build_parser().parse_args(argv)
    given = {"places": tuple(args.places)} if cls is ScenariosOptions else {}
    assert take(cls, args, **given) == cls(**required)


def test_tui_and_demo_defaults() -> None:
    assert tui_options(build_parser().parse_args(["tui", "--url", "u"])) == TuiOptions(url="u")
    demo = demo_options(build_parser().parse_args(["demo"]))
    assert demo == DemoOptions(tui=TuiOptions(model="llama-3.1-8b", shared=demo.tui.shared))
    assert demo.tui.shared.precision == "bf16"  # the simulated weights, recorded
