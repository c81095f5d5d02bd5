"""The 4090 48GB after its thermal ramp is `throttled`: the sim's physics, in virtual time.

A live ramp takes about three minutes of full load (time constant 90 s from 37 C towards 92 C,
SW thermal slowdown at 83 C), too long for a test. Here the simulated card runs a closed loop in
virtual time (`sim.virtual`), its /metrics text (dcgm-exporter names) is rendered and parsed after
every chunk exactly as the live telemetry path does, and the windows before and after the ramp
go through the same `gpu_window` and rules as a live step.
"""

from __future__ import annotations

from gputui.diagnosis.window import gpu_window
from gputui.metrics.bottleneck import bottleneck
from gputui.metrics.step_evidence import StepEvidence
from gputui.sim.gpu_metrics import render_metrics
from gputui.sim.gpu_profile import GpuProfileSpec
from gputui.sim.virtual import run_closed_loop
from gputui.telemetry.samples import GpuSample
from gputui.telemetry.server_metrics import read_metrics


def test_the_48gb_card_after_its_ramp_is_throttled() -> None:
    spec = GpuProfileSpec(gpu="rtx4090-48gb", model="llama-3.1-8b")
    device = spec.build_device()
    samples: list[GpuSample] = []
    now_s = 0.0
    while now_s < 400.0:
        now_s += run_closed_loop(device, 32, 256, 64, num_requests=64).duration_s
        view = read_metrics(render_metrics(device, "m", "GPU-test"), round(now_s * 1e9))
        samples.extend(view.gpus)
    boost = float(device.gpu.boost_clock_mhz)
    early = gpu_window(samples, 0, round(30e9), boost)
    late = gpu_window(samples, round(300e9), round(400e9), boost)
    assert early["throttled_share"] == 0.0
    assert late["throttled_share"] > 0.5, late
    assert "sw_thermal_slowdown" in late["throttle_reasons"]
    cool = bottleneck(StepEvidence(level=32, decode_bandwidth_utilization=0.6, **early))
    hot = bottleneck(StepEvidence(level=32, decode_bandwidth_utilization=0.6, **late))
    assert cool["verdict"] == "decode-bandwidth"
    assert hot["verdict"] == "throttled"
    assert hot["throttled"] is True
    assert any("sw_thermal_slowdown" in line for line in hot["evidence"])
