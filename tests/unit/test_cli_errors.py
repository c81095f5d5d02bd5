"""A bad flag is one line under the subcommand's own name, plus where help is; exit 2."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from gputui.cli import build_parser, main

BAD_FLAG = {
    "run": ["--url", "http://127.0.0.1:9", "--concurrency", "-1"],
    "demo": ["--concurrency", "-1"],
    "tui": ["--url", "http://127.0.0.1:9", "--factor", "inf"],
    "kv": ["--model", "llama-3.1-8b", "--context", "0"],
    "gpu": ["--bogus"],
    "metrics": ["--url", "http://127.0.0.1:9/metrics", "--timeout", "0"],
    "vram-check": ["--fraction", "0"],
    "burn": ["--seconds", "soon"],
    "compare": ["x.json", "--headroom", "x"],
    "sessions": ["--bogus"],
    "records": ["x.json", "--bogus"],
    "scenarios": ["--bogus"],
    "sim": ["--itl-ms", "x"],
}
"""One bad flag per subcommand; each must be refused by argparse before anything runs."""


def _culprit(argv: list[str]) -> str:
    """What the error must name: the bad flag (the last one given), or the unknown one."""
    flag = [a for a in argv if a.startswith("--")][-1]
    return f"unrecognized arguments: {flag}" if flag == "--bogus" else f"argument {flag}: "


def _one_line_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1, captured.err
    return captured.err


def test_the_table_covers_every_subcommand() -> None:
    assert set(_subcommands(build_parser())) == set(BAD_FLAG)  # a new one joins the table


def _subcommands(top: argparse.ArgumentParser) -> list[str]:
    return [
        name
        for action in top._actions
        if isinstance(action, argparse._SubParsersAction)
        for name in action.choices
    ]


@pytest.mark.parametrize("command", sorted(BAD_FLAG))
def test_every_subcommand_refuses_a_bad_flag_in_one_line_under_its_name(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _one_line_error([command, *BAD_FLAG[command]], capsys)
    assert err.startswith(f"gputui {command}: error: "), err
    assert err.endswith(f" (see gputui {command} --help)\n"), err
    assert _culprit(BAD_FLAG[command]) in err
    assert "usage:" not in err


def test_an_unknown_subcommand_or_top_level_flag_is_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = _one_line_error(["bogus"], capsys)
    assert err.startswith("gputui: error: argument COMMAND: invalid choice: 'bogus'")
    assert err.endswith(" (see gputui --help)\n")
    assert _one_line_error(["--bogus"], capsys) == (
        "gputui: error: unrecognized arguments: --bogus (see gputui --help)\n"
    )


def test_a_missing_required_flag_and_a_rule_of_run_itself(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _one_line_error(["run"], capsys) == (
        "gputui run: error: the following arguments are required: --url (see gputui run --help)\n"
    )
    err = _one_line_error(["run", "--url", "http://127.0.0.1:9", "--concurrency", "1"], capsys)
    assert err == (
        "gputui run: error: --step-seconds is required (or a --scenario that sets "
        "load.step_seconds) (see gputui run --help)\n"
    )


def test_demo_calls_itself_demo(capsys: pytest.CaptureFixture[str]) -> None:
    err = _one_line_error(["demo", "--concurrency", "-1"], capsys)
    assert err == (
        "gputui demo: error: argument --concurrency: expected levels like 1,2,4,8: "
        "must be >= 1, got -1 (see gputui demo --help)\n"
    )


def test_an_implausible_bare_sla_bound_is_refused_with_a_hint(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["run", "--url", "http://127.0.0.1:9", "--concurrency", "1", "--step-seconds", "1"]
    err = _one_line_error([*argv, "--sla-tpot-p95", "35"], capsys)
    assert err == (
        "gputui run: error: argument --sla-tpot-p95: 35 s per output token is implausible; "
        "did you mean 35ms? Write 35s to insist (see gputui run --help)\n"
    )
    err = _one_line_error(["tui", "--url", "http://127.0.0.1:9", "--sla-ttft-p95", "800"], capsys)
    assert "800 s to the first token is implausible; did you mean 800ms?" in err


def _gputui() -> list[str]:
    """The installed `gputui` script beside this interpreter (else `python -m gputui`)."""
    script = Path(sys.executable).with_name("gputui")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "gputui"]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["run", "--url", "http://127.0.0.1:9", "--concurrency", "1", "--sla-tpot-p95", "7"],
            "gputui run: error: argument --sla-tpot-p95: 7 s per output token is implausible; "
            "did you mean 7ms? Write 7s to insist (see gputui run --help)\n",
        ),
        (
            ["demo", "--concurrency", "-1"],
            "gputui demo: error: argument --concurrency: expected levels like 1,2,4,8: "
            "must be >= 1, got -1 (see gputui demo --help)\n",
        ),
        (
            ["sim", "--port", "99999"],
            "gputui sim: error: argument --port: must be in [0, 65535], got 99999 "
            "(see gputui sim --help)\n",
        ),
    ],
    ids=["run", "demo", "sim"],
)
def test_the_real_entry_point_prints_one_line_and_exits_2(
    argv: list[str], expected: str, tmp_path: Path
) -> None:
    result = subprocess.run(
        [*_gputui(), *argv], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == expected


def _failure(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """A value argparse accepted but the command refuses: one line, exit 2, nothing run."""
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1, captured.err
    return captured.err


RUN = ["run", "--url", "http://127.0.0.1:9", "--concurrency", "1", "--step-seconds", "1"]


def test_a_missing_scenario_file_by_absolute_path_is_named_as_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope.toml"
    err = _failure([*RUN, "--scenario", str(missing)], capsys)
    assert err == f"gputui: {missing}: no such scenario file\n"


def test_a_missing_scenario_name_lists_the_installed_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    err = _failure([*RUN, "--scenario", "nope"], capsys)
    assert err.startswith(
        "gputui: nope: no such scenario file nor scenarios/nope.toml; "
        "installed: chat, decode-heavy, long-context, mixed,"
    )
