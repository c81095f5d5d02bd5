"""Energy over a step's window (issue 29): the counter, the integrated fallback, the summary.

The recorded power trace comes from the simulator's power model (`sim.thermal`) sampled at 4 Hz
the way NVML reports it (power averaged over about a second, the energy counter in mJ), through
the fake NVML at the one seam: the A100 answers the counter, the GeForce card NotSupported.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from gputui.catalog.specs import GPUS
from gputui.metrics.energy import (
    energy_cost_per_million_output_tokens,
    joules_cell,
    step_energy,
)
from gputui.sim.gpu_metrics import render_metrics
from gputui.sim.gpu_profile import GpuProfileSpec
from gputui.sim.thermal import ThermalModel
from gputui.sim.virtual import run_closed_loop
from gputui.telemetry.energy import counter_joules, integrated_joules, sample_hz
from gputui.telemetry.nvml import NvmlSource
from gputui.telemetry.samples import GpuSample
from gputui.telemetry.server_metrics import read_metrics
from gputui.telemetry.step_telemetry import WindowEnergy, summarize_window
from tests.fakes.fake_nvml import A100_80GB_PCIE, RTX_4090, FakeCard, FakeNvml

S = 1_000_000_000


def recorded_trace(card: FakeCard, gpu: str, seconds: float = 60.0) -> list[GpuSample]:
    """4 Hz NVML samples of a simulated card under a fluctuating decode load (seeded)."""
    rng = random.Random(29)
    model = ThermalModel(GPUS[gpu])
    fake = FakeNvml(cards=(card,))
    t_ns = 0
    source = NvmlSource(fake, clock=lambda: t_ns)
    samples: list[GpuSample] = []
    for tick in range(int(seconds * 4)):
        busy = 0.0 if tick < 20 else rng.uniform(0.55, 1.0)  # idle 5 s, then load
        for _ in range(5):
            model.advance(0.05, busy, compute_share=rng.uniform(0.0, 0.3))
        t_ns = round((tick + 1) * 0.25 * S)
        fake.set_card(
            0,
            power_mw=round(model.power_w * 1e3),
            energy_mj=round(model.energy_j * 1e3),
            utilization_gpu_pct=round(model.util_frac * 100),
            sm_clock_mhz=round(model.sm_clock_mhz),
            throttle_mask=model.throttle_reasons,
        )
        samples.extend(source.sample())
    return samples


def test_integrated_energy_agrees_with_the_counter_within_two_percent() -> None:
    samples = recorded_trace(A100_80GB_PCIE, "a100-80gb-pcie")
    lo, hi = 10 * S, 50 * S
    counter = summarize_window(samples, (), lo, hi)
    assert counter.energy is not None and counter.energy.method == "counter"
    integrated = integrated_joules([(s.t_ns, s.power_w or 0.0) for s in samples], lo, hi)
    assert integrated is not None
    assert counter.energy.joules > 40 * 100  # 40 s under load: well above idle power
    assert integrated == pytest.approx(counter.energy.joules, rel=0.02)
    assert counter.energy.sample_hz == pytest.approx(4.0, abs=0.05)


def test_a_geforce_card_without_the_counter_falls_back_to_integrating_power() -> None:
    samples = recorded_trace(RTX_4090, "rtx4090-48gb")
    assert all(s.energy_mj is None for s in samples)  # NotSupported -> n/a
    summary = summarize_window(samples, (), 10 * S, 50 * S)
    energy = summary.energy
    assert energy is not None and energy.method == "integrated" and energy.gpus == 1
    assert energy.sample_hz == pytest.approx(4.0, abs=0.05)
    assert energy.mean_power_w == pytest.approx(summary.power_mean_w, rel=0.02)
    assert 100 < energy.mean_power_w <= 450  # the 4090's power limit holds


def test_counter_reads_the_window_ends_by_interpolation() -> None:
    points = [(0, 0.0), (2 * S, 600_000.0), (4 * S, 1_000_000.0)]  # mJ: 300 W, then 200 W
    assert counter_joules(points, 1 * S, 3 * S) == pytest.approx(500.0)  # 300 J + 200 J
    assert counter_joules(points, 3 * S, 5 * S) == pytest.approx(400.0)  # extrapolated at 200 W
    assert counter_joules([(0, 5.0), (S, 1.0)], 0, S) is None  # went backwards: driver reload
    assert counter_joules(points[:1], 0, S) is None
    assert integrated_joules([(0, 100.0), (2 * S, 300.0)], 0, 2 * S) == pytest.approx(400.0)
    assert integrated_joules([(S, 100.0)], 0, 2 * S) == pytest.approx(200.0)  # held at the ends
    assert sample_hz([0, S // 2, S], 0, S) == pytest.approx(3.0)


def gpu(index: int, t_s: float, **fields: Any) -> GpuSample:
    return GpuSample(
        index=index, uuid=f"GPU-{index}", name="NVIDIA H100", t_ns=round(t_s * S), **fields
    )


def test_a_multi_gpu_node_sums_the_gpus_serving_the_model() -> None:
    total = 80 << 30
    samples = []
    for t in range(11):
        for index, (power, used, util) in enumerate(
            ((600.0, 70, 90), (580.0, 70, 85), (60.0, 1, 0))
        ):
            samples.append(
                gpu(
                    index,
                    t,
                    power_w=power,
                    energy_mj=power * t * 1e3,
                    memory_used_bytes=used << 30,
                    memory_total_bytes=total,
                    utilization_gpu_pct=float(util),
                    sm_clock_mhz=1980 if index else 1500,
                    sm_clock_max_mhz=1980,
                    throttle_mask=0x4 if index == 0 else 0,
                    temperature_c=70.0 + index,
                )
            )
    summary = summarize_window(samples, (), 0, 10 * S)
    assert summary.gpus == 2  # the idle third card does not serve the model
    energy = summary.energy
    assert energy is not None and (energy.gpus, energy.method) == (2, "counter")
    assert energy.joules == pytest.approx(11_800.0) and energy.mean_power_w == pytest.approx(1180)
    assert summary.power_mean_w == pytest.approx(1180.0)
    assert summary.throttled_share == 1.0 and summary.throttle_reasons == ("sw_power_cap",)
    assert summary.vram_peak_bytes == 70 << 30 and summary.temperature_max_c == 71.0
    assert summary.sm_clock_min_mhz == 1500


def test_step_energy_figures_and_their_cost() -> None:
    window = WindowEnergy(joules=3000.0, mean_power_w=300.0, gpus=1, method="counter", sample_hz=4)
    energy = step_energy(
        window,
        10.0,
        output_tokens_per_s=600.0,
        input_tokens_per_s=2400.0,
        good_output_tokens_per_s=500.0,
    )
    assert energy["joules_per_output_token"] == pytest.approx(0.5)
    assert energy["joules_per_token"] == pytest.approx(0.1)
    assert energy["output_tokens_per_joule"] == pytest.approx(2.0)
    assert energy["joules_per_good_output_token"] == pytest.approx(0.6)
    # 0.6 J x 1e6 / 3.6e6 = 0.1667 kWh per M tokens, x 0.30 per kWh x PUE 1.2 = 0.06
    assert energy_cost_per_million_output_tokens(0.6, 0.30, 1.2) == pytest.approx(0.06)
    with pytest.raises(ValueError, match="pue"):
        energy_cost_per_million_output_tokens(0.6, 0.30, 0.5)
    # The table cell `run` and the TUI's steps table both show (three significant digits).
    assert joules_cell(energy) == "0.5"
    assert joules_cell({**energy, "joules_per_output_token": 12.345}) == "12.3"
    assert joules_cell(None) == "-"


def joules_per_output_token(gpu_name: str, streams: int) -> tuple[float, str]:
    """A closed loop on the simulated card in virtual time, telemetry read from its /metrics."""
    device = GpuProfileSpec(gpu=gpu_name, model="llama-3.1-8b").build_device()
    samples: list[GpuSample] = []
    now_s, tokens = 0.0, 0
    while now_s < 20.0:
        result = run_closed_loop(device, streams, 256, 64, num_requests=streams * 2)
        now_s += result.duration_s
        tokens += result.output_tokens
        samples.extend(read_metrics(render_metrics(device, "m", "GPU-x"), round(now_s * 1e9)).gpus)
    energy = summarize_window(samples, (), 0, round(now_s * 1e9)).energy
    assert energy is not None
    return energy.joules / tokens, energy.method


@pytest.mark.parametrize(
    ("gpu_name", "method"), [("a100-80gb-pcie", "counter"), ("rtx4090-48gb", "integrated")]
)
def test_joules_per_output_token_fall_with_batch_on_the_simulator(
    gpu_name: str, method: str
) -> None:
    figures = [joules_per_output_token(gpu_name, n) for n in (1, 8, 32)]
    assert {m for _, m in figures} == {method}
    one, eight, thirty_two = (j for j, _ in figures)
    assert one > 3 * eight > 3 * thirty_two / 2 and eight > thirty_two
