"""Scenario files: the shipped ones are valid, bad ones say file + field path + expectation."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from gputui.cli import build_parser, main
from gputui.cli.options import run_options
from gputui.errors import UsageError
from gputui.settings import RunOptions, run_with_scenario
from gputui.workloads import WorkloadFileError, find_scenarios, load_scenario
from gputui.workloads.config import WorkloadConfig
from gputui.workloads.distributions import FixedDist, LognormalDist
from gputui.workloads.runplan import workload_config
from gputui.workloads.scenario import Scenario

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "scenarios"
REQUIRED = {"chat", "long-context", "prefill-heavy", "decode-heavy", "mixed", "shared-prefix"}


def test_every_shipped_scenario_is_valid() -> None:
    names = {load_scenario(path).name for path in find_scenarios([SCENARIOS])}
    assert names >= REQUIRED


@pytest.mark.parametrize(
    ("name", "endpoint", "tokens_in", "tokens_out"),
    [
        ("chat", "chat", 1024, 256),
        ("long-context", "completions", 4096, 256),
        ("prefill-heavy", "completions", 4096, 64),
        ("decode-heavy", "completions", 128, 1024),
    ],
)
def test_fixed_scenarios_ask_for_their_lengths(
    name: str, endpoint: str, tokens_in: int, tokens_out: int
) -> None:
    scenario = load_scenario(SCENARIOS / f"{name}.toml")
    assert scenario.endpoint == endpoint
    assert scenario.workload.input == FixedDist(tokens=tokens_in)
    assert scenario.workload.output == FixedDist(tokens=tokens_out)
    assert scenario.workload.unique_prefix
    assert scenario.sla.ttft_p95_s is not None


def test_mixed_and_shared_prefix() -> None:
    mixed = load_scenario(SCENARIOS / "mixed.toml")
    assert isinstance(mixed.workload.input, LognormalDist)
    shared = load_scenario(SCENARIOS / "shared-prefix.toml")
    assert shared.workload.shared_prefix_tokens > 0


def test_a_bare_name_is_looked_up_in_scenarios(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    assert load_scenario("chat").path == "scenarios/chat.toml"


def write(tmp_path: Path, text: str, name: str = "bad.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


GOOD = """
name = "x"
[workload]
input = 100
output = 10
"""


@pytest.mark.parametrize(
    ("text", "where", "expected"),
    [
        (
            '[workload]\ninput = {kind = "normal", mean = "wide", std = 1}\noutput = 5\n',
            "workload.input.mean",
            "expected a valid number, unable to parse string as a number, got 'wide'",
        ),
        (
            '[workload]\ninput = {kind = "gauss"}\noutput = 5\n',
            "workload.input.kind",
            "got 'gauss'",
        ),
        ("[workload]\ninput = 10\noutput = 5\ncolour = 1\n", "workload.colour", "unknown field"),
        ("[workload]\noutput = 5\n", "workload", "expected input"),
        (GOOD + "[load]\nlevels = [1, 2.5]\n", "load", "whole concurrency levels"),
        (GOOD + "[sla]\nmax_error_rate = 2\n", "sla.max_error_rate", "less than or equal to 1"),
        (
            'endpoint = "grpc"\n' + GOOD,
            "endpoint",
            "expected 'completions', 'chat', 'responses' or 'messages'",
        ),
        (
            '[workload]\ninput = {kind = "uniform", min = 9, max = 3}\noutput = 5\n',
            "workload.input",
            "expected min <= max",
        ),
        ("[workload\n", "", "not valid TOML"),
        ("name = 'x'\n", "workload", "missing (required)"),
    ],
)
def test_bad_scenarios_say_file_field_and_expectation(
    tmp_path: Path, text: str, where: str, expected: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(WorkloadFileError) as info:
        load_scenario(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ")
    assert f": {where}: " in message if where else True
    assert expected in message
    assert "\n" not in message
    assert info.value.exit_code == 2


def test_missing_scenario_file(tmp_path: Path) -> None:
    with pytest.raises(WorkloadFileError, match="no such scenario file"):
        load_scenario(tmp_path / "nope.toml")


def test_scenarios_command_lists_them(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scenarios", str(SCENARIOS)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split()[:2] == ["name", "endpoint"]
    listed = {line.split()[0] for line in lines[1:]}
    assert listed >= REQUIRED
    assert "fixed 1024" in out
    assert "lognormal 1024±1024 [64..6144]" in out


def test_scenarios_command_json_and_invalid_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path, GOOD, "good.toml")
    write(tmp_path, "[workload]\ninput = -1\noutput = 1\n", "broken.toml")
    assert main(["scenarios", "--json", str(tmp_path)]) == 1
    rows = [orjson.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rows[0]["file"].endswith("broken.toml")
    assert "workload.input.tokens" in rows[0]["error"]
    assert rows[1]["name"] == "x"
    assert rows[1]["input"] == "fixed 100"
    assert main(["scenarios", str(tmp_path)]) == 1
    assert "broken  INVALID: " in capsys.readouterr().out


def run_args(*extra: str) -> RunOptions:
    return run_options(
        build_parser().parse_args(
            ["run", "--url", "http://127.0.0.1:1", "--model", "m", "--out", "x.json", *extra]
        )
    )


def _workload(options: RunOptions, scenario: Scenario | None) -> WorkloadConfig:
    shared = options.shared
    return workload_config(
        options.shape,
        scenario,
        input_tokens=shared.input_tokens,
        output_tokens=shared.output_tokens,
        seed=options.plan.seed or 0,
        ignore_eos=bool(shared.ignore_eos),
    )


def test_flags_win_over_the_scenario() -> None:
    args = run_args(
        "--scenario",
        str(SCENARIOS / "chat.toml"),
        "--rate",
        "3",
        "--output-tokens",
        "8",
        "--sla-ttft-p95",
        "2",
        "--endpoint",
        "completions",
    )
    args, scenario = run_with_scenario(args)
    assert scenario is not None
    assert args.plan.rate == (3.0,)
    assert args.plan.concurrency is None  # a load flag replaces the scenario's whole plan
    assert args.plan.step_seconds == 60
    assert args.shared.sla_ttft_p95 == 2
    assert args.shared.sla_tpot_p95 == 0.035
    assert args.shared.endpoint == "completions"
    work = _workload(args, scenario)
    assert work.input == FixedDist(tokens=1024)
    assert work.output == FixedDist(tokens=8)


def test_scenario_fills_the_unset_flags() -> None:
    args = run_args("--scenario", str(SCENARIOS / "decode-heavy.toml"))
    args, _ = run_with_scenario(args)
    assert args.plan.concurrency == (1, 2, 4, 8, 16, 32, 64, 128)
    assert (args.plan.step_seconds, args.plan.warmup_seconds) == (90, 20)
    assert (args.shared.endpoint, args.shared.ignore_eos, args.plan.seed) == (
        "completions",
        True,
        0,
    )


def test_without_scenario_the_old_flags_and_defaults_hold() -> None:
    args = run_args("--input-tokens", "16", "--output-tokens", "16", "--concurrency", "1")
    args, scenario = run_with_scenario(args)
    assert scenario is None
    assert (
        args.shared.endpoint,
        args.shared.ignore_eos,
        args.plan.seed,
        args.plan.step_seconds,
    ) == (
        "completions",
        True,
        0,
        None,
    )
    work = _workload(args, None)
    assert (work.input, work.output) == (FixedDist(tokens=16), FixedDist(tokens=16))


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        (["--output-tokens", "5"], "--input-tokens is required"),
        (["--input-tokens", "5"], "--output-tokens is required"),
        (["--input-tokens", "5", "--input-dist", "6", "--output-tokens", "1"], "not both"),
        (["--dataset", "d.jsonl", "--input-tokens", "5"], "--dataset sends the dataset's"),
    ],
)
def test_workload_flag_errors(extra: list[str], fragment: str) -> None:
    args = run_args(*extra)
    args, _ = run_with_scenario(args)
    with pytest.raises(UsageError, match=fragment):
        _workload(args, None)
