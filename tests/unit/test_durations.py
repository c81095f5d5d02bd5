"""Durations with units on every duration flag and in scenario files; implausible bare numbers."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from gputui.cli import build_parser
from gputui.cli.argtypes import duration, milliseconds, minutes, non_negative_seconds, seconds
from gputui.durations import parse_duration
from gputui.workloads import WorkloadFileError, load_scenario


@pytest.mark.parametrize(
    ("text", "unit", "value"),
    [
        ("35ms", "s", 0.035),
        ("1s", "s", 1.0),
        ("500us", "s", 0.0005),
        ("500µs", "s", 0.0005),
        ("2m", "s", 120.0),
        ("1.5h", "s", 5400.0),
        (" 35 ms ", "s", 0.035),
        ("35MS", "s", 0.035),
        ("0.035", "s", 0.035),
        ("1e-3", "s", 0.001),
        (".5s", "s", 0.5),
        ("1s", "ms", 1000.0),
        ("250us", "ms", 0.25),
        ("12", "ms", 12.0),
        ("90s", "min", 1.5),
        ("3", "min", 3.0),
    ],
)
def test_durations_in_a_unit(text: str, unit: str, value: float) -> None:
    assert parse_duration(text, unit) == value  # exact: scaled in decimal


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("35x", "not a duration: '35x' (e.g. 35ms, 1.5s, 2m)"),
        ("ms", "not a duration: 'ms' (e.g. 35ms, 1.5s, 2m)"),
        ("", "not a duration: '' (e.g. 35ms, 1.5s, 2m)"),
        ("1 2s", "not a duration: '1 2s' (e.g. 35ms, 1.5s, 2m)"),
        ("nan", "must be a finite number, got 'nan'"),
        ("-inf", "must be a finite number, got '-inf'"),
    ],
)
def test_what_is_not_a_duration(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("parse", "text", "message"),
    [
        (seconds, "0", "must be > 0, got 0"),
        (seconds, "0ms", "must be > 0, got 0ms"),
        (seconds, "-1s", "must be > 0, got -1s"),
        (non_negative_seconds, "-1", "must be >= 0, got -1"),
        (seconds, "inf", "must be a finite number, got 'inf'"),
        (seconds, "soon", "not a duration: 'soon' (e.g. 35ms, 1.5s, 2m)"),
        (
            duration(implausible_above_s=5, what="per output token"),
            "35",
            "35 s per output token is implausible; did you mean 35ms? Write 35s to insist",
        ),
        (
            duration(implausible_above_s=600, what="to the first token"),
            "1000",
            "1000 s to the first token is implausible; did you mean 1000ms? Write 1000s to insist",
        ),
    ],
)
def test_duration_flags_refuse_in_one_line(parse: object, text: str, message: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as info:
        parse(text)  # type: ignore[operator]
    assert str(info.value) == message


def test_an_explicit_unit_is_taken_at_its_word_and_zero_may_be_allowed() -> None:
    tpot = duration(implausible_above_s=5, what="per output token")
    assert tpot("35s") == 35.0
    assert tpot("5") == 5.0  # the bound itself is plausible
    assert tpot("35ms") == 0.035
    assert non_negative_seconds("0") == 0.0
    assert milliseconds("0") == 0.0
    assert milliseconds("0.5s") == 500.0
    assert minutes("2h") == 120.0


RUN = ["run", "--url", "http://127.0.0.1:9", "--concurrency", "1"]


def test_every_duration_flag_of_run_takes_units() -> None:
    args = build_parser().parse_args(
        [
            *RUN,
            "--step-seconds",
            "1m",
            "--warmup-seconds",
            "500ms",
            "--max-step-seconds",
            "90s",
            "--max-minutes",
            "90s",
            "--seconds",
            "2m",
            "--burst-every",
            "1500ms",
            "--sla-ttft-p95",
            "800ms",
            "--sla-tpot-p95",
            "35ms",
            "--request-timeout",
            "2m",
            "--connect-timeout",
            "500ms",
            "--stall-timeout",
            "1m",
        ]
    )
    assert (args.step_seconds, args.warmup_seconds, args.max_step_seconds) == (60.0, 0.5, 90.0)
    assert (args.max_minutes, args.seconds, args.burst_every) == (1.5, 120.0, 1.5)
    assert (args.sla_ttft_p95, args.sla_tpot_p95) == (0.8, 0.035)
    assert (args.request_timeout, args.connect_timeout, args.stall_timeout) == (120.0, 0.5, 60.0)


def test_bare_numbers_keep_their_unit() -> None:
    args = build_parser().parse_args(
        [*RUN, "--step-seconds", "20", "--sla-tpot-p95", "0.035", "--sla-ttft-p95", "600"]
    )
    assert (args.step_seconds, args.sla_tpot_p95, args.sla_ttft_p95) == (20.0, 0.035, 600.0)
    sim = build_parser().parse_args(["sim", "--itl-ms", "12", "--ttft-ms", "0.1s"])
    assert (sim.itl_ms, sim.ttft_ms) == (12.0, 100.0)


def test_the_other_subcommands_duration_flags_take_units() -> None:
    parser = build_parser()
    tui = parser.parse_args(["tui", "--url", "http://x:1", "--window-seconds", "1m"])
    assert tui.window_seconds == 60.0
    demo = parser.parse_args(["demo", "--step-seconds", "5000ms", "--sla-tpot-p95", "20ms"])
    assert (demo.step_seconds, demo.sla_tpot_p95) == (5.0, 0.02)
    burn = parser.parse_args(["burn", "--seconds", "10m", "--interval", "250ms"])
    assert (burn.seconds, burn.interval) == (600.0, 0.25)
    metrics = parser.parse_args(
        ["metrics", "--url", "http://127.0.0.1:9/metrics", "--timeout", "500ms"]
    )
    assert metrics.timeout == 0.5
    sim = parser.parse_args(["sim", "--die-after", "2m", "--network-delay-ms", "0.02s"])
    assert (sim.die_after, sim.network_delay_ms) == (120.0, 20.0)


SCENARIO = """
name = "units"
[workload]
input = 100
output = 10
[sla]
ttft_p95_s = "800ms"
tpot_p95_s = 0.035
[load]
step_seconds = "2m"
warmup_seconds = "500ms"
"""


def test_scenario_durations_take_units(tmp_path: Path) -> None:
    path = tmp_path / "units.toml"
    path.write_text(SCENARIO)
    scenario = load_scenario(path)
    assert (scenario.sla.ttft_p95_s, scenario.sla.tpot_p95_s) == (0.8, 0.035)
    assert (scenario.load.step_seconds, scenario.load.warmup_seconds) == (120.0, 0.5)


def test_a_bad_scenario_duration_names_its_field(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(SCENARIO.replace('"800ms"', '"soon"'))
    with pytest.raises(WorkloadFileError) as info:
        load_scenario(path)
    assert str(info.value) == (
        f"{path}: sla.ttft_p95_s: expected a duration like 35ms, 1.5s or a number of seconds, "
        "got 'soon'"
    )
    path.write_text(SCENARIO.replace('"2m"', '"0s"'))
    with pytest.raises(WorkloadFileError, match=r"load\.step_seconds: .*greater than 0"):
        load_scenario(path)
