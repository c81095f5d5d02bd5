"""Energy per token and its cost (domain.md §10): a step's `energy` object and compare's figures.

Contract:
- `step_energy(energy, window_s, output_tokens_per_s, input_tokens_per_s, good_output_tokens_per_s)`
  turns the window's energy (`telemetry.step_telemetry.WindowEnergy`) and the step's token rates
  over the same window into the snapshot's `steps[].energy` keys: `joules`,
  `joules_per_output_token`, `joules_per_token` (input + output), `output_tokens_per_joule`,
  `mean_power_w`, `gpus`, `method` ("counter" or "integrated"), `sample_hz`, and
  `joules_per_good_output_token` (over the good output: `goodput_output_tokens_per_s` until
  issue 31's good-token figure lands). A per-token figure is None when no such token arrived.
- `energy_cost_per_million_output_tokens(j_per_token, price_per_kwh, pue)` = J per good output
  token x 1e6 / 3.6e6 x price x PUE. A renter's hourly price already includes the energy, so it
  is shown beside the hourly cost and never folded into it.
"""

from __future__ import annotations

import math
from typing import Final, TypedDict

from gputui.telemetry.step_telemetry import WindowEnergy

_JOULES_PER_KWH: Final = 3.6e6
_PER_MILLION: Final = 1e6


class StepEnergy(TypedDict):
    """A step's `energy` object (names kept exactly: issue 29)."""

    joules: float
    joules_per_output_token: float | None
    joules_per_token: float | None
    output_tokens_per_joule: float | None
    joules_per_good_output_token: float | None
    mean_power_w: float
    gpus: int
    method: str
    sample_hz: float | None


def step_energy(
    energy: WindowEnergy,
    window_s: float,
    *,
    output_tokens_per_s: float,
    input_tokens_per_s: float,
    good_output_tokens_per_s: float,
) -> StepEnergy:
    """The step's energy figures (module contract)."""
    output = output_tokens_per_s * window_s
    total = output + input_tokens_per_s * window_s
    good = good_output_tokens_per_s * window_s
    joules = energy.joules
    return StepEnergy(
        joules=joules,
        joules_per_output_token=joules / output if output > 0 else None,
        joules_per_token=joules / total if total > 0 else None,
        output_tokens_per_joule=output / joules if joules > 0 and output > 0 else None,
        joules_per_good_output_token=joules / good if good > 0 else None,
        mean_power_w=energy.mean_power_w,
        gpus=energy.gpus,
        method=energy.method,
        sample_hz=energy.sample_hz,
    )


def energy_cost_per_million_output_tokens(
    joules_per_output_token: float, price_per_kwh: float, pue: float = 1.0
) -> float:
    """What the energy of a million (good) output tokens costs at this price and PUE."""
    if not math.isfinite(price_per_kwh) or price_per_kwh < 0:
        raise ValueError(f"price_per_kwh must be a finite number >= 0, got {price_per_kwh}")
    if not math.isfinite(pue) or pue < 1.0:
        raise ValueError(f"pue must be a finite number >= 1, got {pue}")
    if not math.isfinite(joules_per_output_token) or joules_per_output_token < 0:
        raise ValueError(f"joules_per_output_token must be >= 0, got {joules_per_output_token}")
    return joules_per_output_token * _PER_MILLION / _JOULES_PER_KWH * price_per_kwh * pue


def joules_cell(energy: StepEnergy | None) -> str:
    """A step's J per output token for a table cell: '0.431', '8.47', '12.3' ('-' without one)."""
    per = energy["joules_per_output_token"] if energy is not None else None
    return "-" if per is None else f"{per:.3g}"


def energy_line(energy: StepEnergy, price_per_kwh: float | None = None, pue: float = 1.0) -> str:
    """'energy 2001 J, 246 W mean (1 GPU, counter): 3.13 J/out tok, ...' for `run` and the TUI."""
    how = f"{energy['gpus']} GPU{'s' if energy['gpus'] != 1 else ''}, {energy['method']}"
    if energy["method"] == "integrated" and energy["sample_hz"] is not None:
        how += f" at {energy['sample_hz']:.1f} Hz"
    parts = [f"energy {energy['joules']:.0f} J, {energy['mean_power_w']:.0f} W mean ({how})"]
    figures = []
    if energy["joules_per_output_token"] is not None:
        figures.append(f"{energy['joules_per_output_token']:.3g} J/out tok")
    if energy["joules_per_token"] is not None:
        figures.append(f"{energy['joules_per_token']:.3g} J/tok")
    if energy["output_tokens_per_joule"] is not None:
        figures.append(f"{energy['output_tokens_per_joule']:.3g} out tok/J")
    good = energy["joules_per_good_output_token"]
    if good is not None:
        figures.append(f"{good:.3g} J/good out tok")
        if price_per_kwh is not None:
            cost = energy_cost_per_million_output_tokens(good, price_per_kwh, pue)
            figures.append(f"energy cost {cost:.3g} per M good out tok")
    return ": ".join([parts[0], ", ".join(figures)]) if figures else parts[0]
