"""Settings declared once: run, tui and demo reject the same bad values with the same message."""

from __future__ import annotations

from pathlib import Path

import pytest

from gputui.cli import build_parser
from gputui.cli.options import demo_options, run_options, tui_options
from gputui.frontends.demo import headless_run
from gputui.settings import DEFAULTS, RunOptions, SharedFlags, session_settings

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


def _settings(argv: list[str]) -> SharedFlags:
    args = build_parser().parse_args(argv)
    if args.command == "run":
        return run_options(args).shared
    if args.command == "tui":
        return tui_options(args).shared
    return demo_options(args).tui.shared


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


def test_prompt_flags_are_shared_and_the_demo_passes_them_on() -> None:
    for prefix in PREFIX.values():
        args = _settings([*prefix, "--reuse-prompts", "--token-counter", "server"])
        assert session_settings(args, None).reuse_prompts
        assert args.token_counter == "server" and args.tokenizer is None
        assert not session_settings(_settings(prefix), None).reuse_prompts
    demo = demo_options(
        build_parser().parse_args(["demo", "--reuse-prompts", "--tokenizer", "tok.json"])
    )
    passed = headless_run(demo, "http://127.0.0.1:1", "m").shared
    assert (passed.token_counter, passed.tokenizer, passed.reuse_prompts) == (
        "auto", Path("tok.json"), True
    )  # fmt: skip


def test_the_typed_defaults_are_the_parsers() -> None:
    """A flag not given reads the same from the options as from argparse's default."""
    args = build_parser().parse_args(["run", "--url", "http://127.0.0.1:9"])
    assert run_options(args) == RunOptions(url="http://127.0.0.1:9")


@pytest.mark.parametrize(
    ("demo", "run"),
    [
        ([], ["--step-seconds", "8.0s", "--concurrency", "1,2,4,8,16,32,64"]),
        (["--concurrency", "2,4", "--step-seconds", "3", "--warmup-seconds", "0.5",
          "--sla-ttft-p95", "800ms", "--price-per-hour", "2.5", "--input-tokens", "64",
          "--token-counter", "approximate", "--out", "d.json"],
         ["--step-seconds", "3", "--warmup-seconds", "0.5", "--concurrency", "2,4",
          "--sla-ttft-p95", "0.8s", "--price-per-hour", "2.5", "--input-tokens", "64",
          "--token-counter", "approximate", "--out", "d.json"]),
        (["--sessions", "3", "--turns", "2", "--think-time", "100"],
         ["--step-seconds", "8.0s", "--sessions", "3", "--turns", "2", "--think-time", "100"]),
        (["--trace", "t.jsonl", "--time-scale", "0.5"],
         ["--trace", "t.jsonl", "--time-scale", "0.5"]),
    ],
)  # fmt: skip
def test_the_demo_builds_the_run_that_gputui_run_parses(demo: list[str], run: list[str]) -> None:
    """The headless demo is `gputui run` with the demo's values, built without an argv."""
    url, model = "http://127.0.0.1:9", "sim-model"
    built = headless_run(demo_options(build_parser().parse_args(["demo", *demo])), url, model)
    defaults = ["--input-tokens", "512", "--output-tokens", "128", "--out", "gputui-demo.json"]
    parsed = build_parser().parse_args(
        ["run", "--url", url, "--model", model, *defaults, "--sla-ttft-p95", "1.0s",
         "--sla-tpot-p95", "0.035s", "--label", "demo a100-80gb-pcie llama-3.1-8b",
         "--precision", "bf16", *run]
    )  # fmt: skip
    assert built == run_options(parsed)
    if "--warmup-seconds" not in demo:  # each step settles as in `run` and `tui`, no fixed 2 s
        assert built.plan.warmup_seconds is None
