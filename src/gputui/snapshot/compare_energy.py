"""Energy at the qualified level, for `gputui compare` (issue 29; domain.md §10).

Contract: `energy_at(step, price_per_kwh, pue)` reads the qualified step's saved `energy` object
(`steps[].energy`, built once where the step finished) and returns compare's figures over the
good output there: J per good output token (`joules_per_output_token`), its inverse
(`output_tokens_per_joule`), J per token (input + output), mean power, the GPUs summed and the
method, and, with a price per kWh, `energy_cost_per_million_output_tokens` (`metrics.energy`).
The energy cost is shown beside the hourly cost, never folded into it; `total_cost` adds the two
only where both are known, and says so by its name. None without an energy figure.
"""

from __future__ import annotations

from dataclasses import dataclass

from gputui.metrics.energy import energy_cost_per_million_output_tokens
from gputui.snapshot.models import Snapshot, Step


@dataclass(frozen=True, slots=True)
class EnergyAtCapacity:
    """The qualified step's energy figures (module contract)."""

    joules_per_output_token: float | None
    """Over the good output (J per good output token)."""
    output_tokens_per_joule: float | None
    joules_per_token: float | None
    mean_power_w: float
    gpus: int
    method: str
    sample_hz: float | None
    energy_cost_per_million_output_tokens: float | None = None


def energy_at(
    step: Step | None, price_per_kwh: float | None, pue: float
) -> EnergyAtCapacity | None:
    """The step's energy figures and, with a price, their cost (module contract)."""
    energy = step.energy if step is not None else None
    if energy is None:
        return None
    per_token = energy.joules_per_good_output_token or energy.joules_per_output_token
    cost = (
        energy_cost_per_million_output_tokens(per_token, price_per_kwh, pue)
        if per_token is not None and price_per_kwh is not None
        else None
    )
    return EnergyAtCapacity(
        joules_per_output_token=per_token,
        output_tokens_per_joule=1.0 / per_token if per_token else None,
        joules_per_token=energy.joules_per_token,
        mean_power_w=energy.mean_power_w,
        gpus=energy.gpus,
        method=energy.method,
        sample_hz=energy.sample_hz,
        energy_cost_per_million_output_tokens=cost,
    )


def energy_terms(
    snapshot: Snapshot, price_per_kwh: float | None, pue: float | None
) -> tuple[float | None, float]:
    """The price per kWh and PUE to use: the flags', else those saved with the run, else 1.0."""
    price = price_per_kwh if price_per_kwh is not None else snapshot.energy_price_per_kwh
    used_pue = pue if pue is not None else snapshot.pue
    return price, used_pue if used_pue is not None and used_pue >= 1.0 else 1.0


def total_cost(hourly: float | None, energy: EnergyAtCapacity | None) -> float | None:
    """Hourly cost + energy cost per million output tokens, where both are known."""
    if hourly is None or energy is None or energy.energy_cost_per_million_output_tokens is None:
        return None
    return hourly + energy.energy_cost_per_million_output_tokens


TITLE = "Energy at the qualified level (over the good output)"


def energy_cells(
    energy: EnergyAtCapacity | None, price_per_kwh: float | None, pue: float
) -> list[str]:
    """One row's cells under `energy_headers`: J/out tok, out tok/J, J/tok, W, how, price."""
    if energy is None:
        return ["n/a"] * 6
    per = energy.joules_per_output_token
    how = f"{energy.method}, {energy.gpus} GPU{'s' if energy.gpus != 1 else ''}"
    if energy.method == "integrated" and energy.sample_hz is not None:
        how += f", {energy.sample_hz:.1f} Hz"
    price = "n/a" if price_per_kwh is None else f"{price_per_kwh:g}/kWh"
    return [
        "n/a" if per is None else f"{per:.3f}",
        "n/a" if not per else f"{1.0 / per:.2f}",
        "n/a" if energy.joules_per_token is None else f"{energy.joules_per_token:.3f}",
        f"{energy.mean_power_w:.0f} W",
        how,
        price + (f" x PUE {pue:g}" if pue != 1.0 and price_per_kwh is not None else ""),
    ]


def energy_headers() -> list[str]:
    """The energy block's headers (after the snapshot's label)."""
    return ["J/out tok", "out tok/J", "J/tok (in+out)", "mean power", "measured", "energy price"]
