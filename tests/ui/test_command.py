"""`gputui tui` / `gputui demo` flags: parsing stays light, scenarios and flags combine."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gputui.cli import build_parser
from gputui.cli.options import tui_options
from gputui.engine.target import parse_target
from gputui.sim.runner import SimProcess
from gputui.ui.command import _prepared_workload, live_controller, resolve

ROOT = Path(__file__).resolve().parents[2]


def test_building_the_cli_loads_no_ui_toolkit() -> None:
    code = (
        "import sys; from gputui.cli import build_parser; build_parser(); "
        "sys.exit(1 if 'textual' in sys.modules or 'rich' in sys.modules else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0


def test_tui_flags_and_defaults(tmp_path: Path) -> None:
    args = build_parser().parse_args(
        ["tui", "--url", "http://127.0.0.1:8000", "--model", "m", "--snapshot-dir", str(tmp_path),
         "--factor", "3", "--ascii"]
    )  # fmt: skip
    values = resolve(tui_options(args))
    assert values["factor"] == 3.0
    assert values["snapshot_dir"] == tmp_path
    assert (values["input_tokens"], values["output_tokens"]) == (512, 128)
    assert (values["sla_ttft_p95"], values["sla_tpot_p95"]) == (1.0, 0.035)
    assert args.ascii and not args.no_color


@pytest.mark.parametrize(
    ("flags", "target", "max_step_s"),
    [([], 0.05, None), (["--target-precision", "0.2", "--max-step-seconds", "7"], 0.2, 7.0)],
)
def test_the_tui_honours_the_step_flags(
    tmp_path: Path, flags: list[str], target: float, max_step_s: float | None
) -> None:
    """`--target-precision` and `--max-step-seconds` reach the hold and the auto sweep."""
    args = build_parser().parse_args(
        ["tui", "--url", "http://127.0.0.1:9", "--model", "m", "--snapshot-dir", str(tmp_path),
         "--gpu-telemetry", "none", *flags]
    )  # fmt: skip
    controller, _values = live_controller(tui_options(args))
    assert controller.settings.target_precision == target
    assert controller.settings.max_step_s == max_step_s


def test_default_snapshot_dir_is_the_user_data_dir() -> None:
    args = build_parser().parse_args(["tui", "--url", "http://x:1", "--model", "m"])
    assert resolve(tui_options(args))["snapshot_dir"].parts[-2:] == ("gputui", "sessions")


def test_scenario_then_flags() -> None:
    args = build_parser().parse_args(
        ["tui", "--url", "http://x:1", "--model", "m", "--scenario",
         str(ROOT / "scenarios" / "chat.toml"), "--output-tokens", "64"]
    )  # fmt: skip
    values = resolve(tui_options(args))
    assert values["endpoint"] == "chat"
    assert values["input_tokens"] == 1024
    assert values["output_tokens"] == 64  # the flag wins
    assert values["max_error_rate"] == 0.01
    assert values["label"] == "chat"


def _dist_scenario(tmp_path: Path) -> Path:
    scenario = tmp_path / "dist.toml"
    scenario.write_text(
        'name = "d"\n[workload]\ninput = { kind = "uniform", min = 10, max = 20 }\n'
        'output = { kind = "fixed", tokens = 8 }\n'
    )
    return scenario


def test_a_length_distribution_scenario_is_prepared_against_the_server(
    tmp_path: Path, fixed_sim: SimProcess
) -> None:
    args = build_parser().parse_args(["tui", "--url", fixed_sim.url, "--model", "sim",
                                      "--scenario", str(_dist_scenario(tmp_path))])  # fmt: skip
    values = resolve(tui_options(args))
    assert values["input_tokens"] == 15  # the nominal (mean) length, for the header
    prepared = _prepared_workload(
        tui_options(args).shared, parse_target(fixed_sim.url), "sim", values, None
    )
    assert prepared is not None
    source = prepared.spec.build()
    lengths = {source.next(i).input_tokens for i in range(200)}
    assert lengths <= set(range(10, 21))
    assert len(lengths) > 5  # drawn from the distribution, not one fixed length


def test_without_the_server_the_prompts_are_approximate_and_say_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = build_parser().parse_args(["tui", "--url", "http://127.0.0.1:9", "--model", "m",
                                      "--scenario", str(_dist_scenario(tmp_path))])  # fmt: skip
    target = parse_target("http://127.0.0.1:9")
    prepared = _prepared_workload(
        tui_options(args).shared, target, "m", resolve(tui_options(args)), None
    )
    assert prepared is not None and not prepared.exact
    assert "approximate" in capsys.readouterr().err


def test_demo_opens_the_tui_unless_given_sweep_levels() -> None:
    parser = build_parser()
    tui = parser.parse_args(["demo", "--gpu", "rtx4090-48gb", "--model", "qwen2.5-14b"])
    assert not tui.headless and tui.concurrency is None
    assert tui.snapshot_dir is None and tui.label is None  # every tui flag but --url
    headless = parser.parse_args(["demo", "--concurrency", "1,8", "--out", "x.json"])
    assert headless.concurrency == [1, 8]
    with pytest.raises(SystemExit):
        parser.parse_args(["demo", "--url", "http://x:1"])
