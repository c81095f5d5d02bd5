"""Energy in the live screen (issue 29): the steps table's J/out column, the GPU panel's line."""

from __future__ import annotations

from pathlib import Path

from gputui.ui.render.gpu import gpu_lines
from gputui.ui.render.spans import texts
from gputui.ui.render.steps import steps_lines
from gputui.ui.replay import load_views

FIXTURE = Path(__file__).parent / "fixtures" / "sweep-a100.json"


def test_the_steps_table_has_joules_per_output_token_in_76_cells() -> None:
    view = load_views(FIXTURE)[-1]  # the steps panel of a 160-column screen, the detail at 80
    lines = texts(steps_lines(view, 76, 12))
    assert "J/out" in lines[0] and all(len(line) == 76 for line in lines)
    first = lines[1].split()
    energy = view.steps[0].energy
    assert energy is not None and energy["joules_per_output_token"] is not None
    # 1 stream: about 3.1 J per output token (the A100 at ~270 W, 87 tok/s)
    assert first[4] == f"{energy['joules_per_output_token']:.3g}" == "3.11"
    assert lines[1][56:65] == " pass    "  # the SLA column narrowed to make room (9 cells)


def test_the_gpu_panel_shows_live_watts_and_joules_per_output_token() -> None:
    view = load_views(FIXTURE)[-1]
    assert view.telemetry is not None and view.frame is not None
    watts = sum(s.power_w or 0.0 for s in view.telemetry.gpus)
    rate = view.frame.window.output_tokens_per_s
    lines = texts(gpu_lines(view, 60, 12))
    energy = next(line for line in lines if line.startswith("energy"))
    assert f"{watts:.0f} W" in energy and f"{watts / rate:.3g} J/out tok" in energy
