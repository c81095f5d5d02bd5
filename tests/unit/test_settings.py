"""Settings declared once: run, tui and demo reject the same bad values with the same message."""

from __future__ import annotations

import argparse

import pytest

from gputui.cli import build_parser
from gputui.settings import DEFAULTS, session_settings

PREFIX = {
    "run": ["run", "--url", "http://127.0.0.1:9", "--concurrency", "1", "--step-seconds", "1"],
    "tui": ["tui", "--url", "http://127.0.0.1:9"],
    "demo": ["demo"],
}
BAD = [
    ("--input-tokens", "0"),
    ("--input-tokens", "x"),
    ("--output-tokens", "-3"),
    ("--sla-ttft-p95", "nan"),
    ("--sla-ttft-p95", "0"),
    ("--sla-tpot-p95", "inf"),
    ("--max-error-rate", "7"),
    ("--max-error-rate", "nan"),
    ("--warmup-seconds", "-1"),
    ("--request-timeout", "0"),
    ("--connect-timeout", "-1"),
    ("--stall-timeout", "nan"),
    ("--workers", "0"),
    ("--price-per-hour", "-1"),
    ("--price-per-hour", "inf"),
    ("--endpoint", "embeddings"),
    ("--gpu-telemetry", "cuda"),
    ("--sessions", "0"),
    ("--turns", "x"),
    ("--time-scale", "0"),
    ("--time-scale", "nan"),
    ("--trace-format", "parquet"),
    ("--dataset-order", "random"),
]


def _error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err  # one line, no usage screen
    prog = f"gputui {argv[0]}"
    assert err.startswith(f"{prog}: error: ")
    assert err.endswith(f" (see {prog} --help)\n")
    return err.split(": error: ", 1)[1].removesuffix(f" (see {prog} --help)\n")


@pytest.mark.parametrize(("flag", "value"), BAD)
def test_every_front_end_rejects_a_bad_shared_flag_alike(
    flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    messages = {name: _error([*prefix, flag, value], capsys) for name, prefix in PREFIX.items()}
    assert len(set(messages.values())) == 1, messages
    assert messages["run"].startswith(f"argument {flag}: ")


def test_the_tui_step_factor_must_be_finite(capsys: pytest.CaptureFixture[str]) -> None:
    assert "finite" in _error([*PREFIX["tui"], "--factor", "inf"], capsys)


def _settings(argv: list[str]) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def test_run_and_tui_share_the_defaults() -> None:
    run = session_settings(_settings(PREFIX["run"]), None)
    tui = session_settings(_settings(PREFIX["tui"]), None)
    assert run == tui
    assert (run.input_tokens, run.output_tokens) == (512, 128)
    assert (run.sla.ttft_p95_s, run.sla.tpot_p95_s) == (1.0, 0.035)
    assert run.request_timeout == DEFAULTS["request_timeout"] == 600.0
    assert run.snapshot_dir.parts[-2:] == ("gputui", "sessions")


def test_flags_win_over_the_defaults() -> None:
    args = _settings(
        [*PREFIX["run"], "--price-per-hour", "7", "--precision", "fp8", "--workers", "2"]
    )
    settings = session_settings(args, None)
    assert (settings.price_per_hour, settings.precision, settings.workers) == (7.0, "fp8", 2)
