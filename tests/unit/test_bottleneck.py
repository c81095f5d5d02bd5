"""The bottleneck rules, the TTFT breakdown and the roofline use, on numbers (no I/O)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gputui.catalog.specs import GPUS, MODELS
from gputui.diagnosis.window import ClientFrame, client_window, gpu_window
from gputui.errors import UsageError
from gputui.metrics.bottleneck import VERDICTS, bottleneck, verdict_line
from gputui.metrics.json_read import number
from gputui.metrics.roofline_use import (
    bandwidth_from_vram_check,
    catalog_gpu,
    catalog_model,
    precision_of,
    roofline_use,
)
from gputui.metrics.step_evidence import StepEvidence
from gputui.metrics.ttft_breakdown import e2e_breakdown, ttft_breakdown
from gputui.sim.thermal import SW_POWER_CAP, SW_THERMAL_SLOWDOWN
from gputui.telemetry.samples import GpuSample


def _breakdown(ttft: float, rtt: float, queue: float, prefill: float) -> dict[str, Any]:
    found = ttft_breakdown(ttft, rtt, queue, prefill)
    assert found is not None
    return found


def test_breakdown_without_a_server_ttft_says_what_it_could_not_split() -> None:
    b = _breakdown(0.620, 0.003, 0.410, 0.180)
    assert b["network_s"] + b["queue_s"] + b["prefill_s"] + b["client_s"] == pytest.approx(0.620)
    assert b["client_s"] == pytest.approx(0.027)  # client and the server's rest, together
    assert b["server_other_s"] is None and b["server_ttft_s"] is None
    assert b["unsplit"] is not None and "no TTFT" in b["unsplit"]
    assert b["queue_share"] == pytest.approx(0.410 / 0.620, abs=1e-4)
    assert b["explained_share"] == pytest.approx(0.593 / 0.620, abs=1e-4)
    assert "client+server 27 ms" in " ".join(bottleneck(StepEvidence(1, breakdown=b))["evidence"])
    assert ttft_breakdown(0.5, 0.001, None, 0.2) is None  # no server histograms: no breakdown


def test_breakdown_splits_the_servers_own_overhead_from_the_clients() -> None:
    # The real vLLM at one stream: client TTFT 48.7 ms, vLLM's TTFT histogram 46.9 ms.
    b = ttft_breakdown(0.0487, 0.0002, 0.00001, 0.038, 0.0, server_ttft_mean_s=0.0469)
    assert b is not None
    assert b["server_other_s"] == pytest.approx(0.0469 - 0.00001 - 0.038)
    assert b["client_s"] == pytest.approx(0.0487 - 0.0469 - 0.0002)  # 1.6 ms, not 10.5 ms
    parts = ("network_s", "queue_s", "prefill_s", "server_other_s", "client_s")
    assert sum(number(b, k) or 0.0 for k in parts) == pytest.approx(0.0487, abs=1e-6)
    assert b["unsplit"] is None and b["server_ttft_s"] == pytest.approx(0.0469)
    assert b["explained_share"] == pytest.approx((0.0469 + 0.0002) / 0.0487, abs=1e-4)
    evidence = bottleneck(StepEvidence(1, breakdown=b))["evidence"]
    assert "server other 8.9 ms" in evidence[0] and "client 1.6 ms" in evidence[0]
    assert not any("caught other requests" in line for line in evidence)
    # The client's own overhead dominating: the hint names the client, not the server's window.
    slow = ttft_breakdown(0.100, 0.0002, 0.00001, 0.038, None, server_ttft_mean_s=0.0469)
    assert slow is not None
    hint = bottleneck(StepEvidence(1, breakdown=slow))["evidence"][0]
    assert "is the client's" in hint and "caught other requests" not in hint
    e2e = e2e_breakdown(2.0, 0.003, 0.4, 0.2, 1.3)
    assert e2e is not None
    assert e2e["decode_share"] == pytest.approx(0.65)
    assert e2e["client_s"] == pytest.approx(0.097)
    assert e2e["server_other_s"] is None and e2e["unsplit"] is not None
    split = e2e_breakdown(2.0, 0.003, 0.4, 0.2, 1.3, server_e2e_mean_s=1.99)
    assert split is not None
    assert split["server_other_s"] == pytest.approx(0.09)  # 1.99 - 0.4 - 0.2 - 1.3
    assert split["client_s"] == pytest.approx(2.0 - 1.99 - 0.003) and split["unsplit"] is None


def test_roofline_matches_the_worked_example() -> None:
    # domain.md section 9: 8B BF16 (16.06 GB) at 89 tok/s, batch 1, on 1,935 GB/s = 74 %.
    use = roofline_use(
        GPUS["a100-80gb-pcie"],
        MODELS["llama-3.1-8b"],
        output_tokens_per_s=89.0,
        input_tokens_per_s=0.0,
        mean_batch=1.0,
        mean_context_tokens=0.0,
    )
    assert use is not None
    assert use["weight_bytes"] == pytest.approx(16.06e9, rel=1e-3)
    assert use["decode_bandwidth_utilization"] == pytest.approx(0.74, abs=0.005)
    assert "formula" in use
    # KV read grows with the batch's context; prefill FLOPs with input tok/s.
    busy = roofline_use(
        GPUS["a100-80gb-pcie"],
        MODELS["llama-3.1-8b"],
        output_tokens_per_s=1000.0,
        input_tokens_per_s=10_000.0,
        mean_batch=16.0,
        mean_context_tokens=1000.0,
    )
    assert busy is not None
    kv = 16 * 1000 * 131072
    assert busy["decode_bytes_per_s"] == pytest.approx((16.06e9 + kv) * 1000 / 16, rel=1e-3)
    assert busy["prefill_compute_utilization"] == pytest.approx(
        2 * 8.03e9 * 10_000 / 312e12, rel=1e-3
    )


def test_unknown_card_uses_the_vram_check_bandwidth() -> None:
    use = roofline_use(
        None,
        MODELS["llama-3.1-8b"],
        output_tokens_per_s=50.0,
        input_tokens_per_s=0.0,
        mean_batch=1.0,
        mean_context_tokens=0.0,
        measured_bandwidth_bytes_per_s=1000e9,
    )
    assert use is not None
    assert use["decode_bandwidth_utilization"] == pytest.approx(16.06 * 50 / 1000, rel=1e-3)
    assert use["prefill_compute_utilization"] is None
    assert "vram-check" in str(use["bandwidth_source"])


def test_catalog_matching() -> None:
    assert catalog_gpu("NVIDIA GeForce RTX 4090", 49140 * 2**20) is GPUS["rtx4090-48gb"]
    assert catalog_gpu("NVIDIA GeForce RTX 4090", 24564 * 2**20) is GPUS["rtx4090-24gb"]
    assert catalog_gpu("Some Other GPU", None) is None
    assert catalog_model("meta-llama/Llama-3.1-8B-Instruct") is MODELS["llama-3.1-8b"]
    assert catalog_model("llama-3.1-8b") is MODELS["llama-3.1-8b"]
    assert precision_of("neuralmagic/Llama-3.1-8B-Instruct-FP8") == "fp8"


def test_client_verdict_marks_the_step_suspect() -> None:
    # One worker at 512 streams against ITL 1 ms pegs its core and its loop runs late.
    frames = [ClientFrame(t, 99.0 if t == 2 else 60.0, 35.0) for t in (1, 2, 3)]
    health = client_window(frames, [], 0, 10)
    evidence = StepEvidence(
        level=512,
        breakdown=_breakdown(0.030, 0.0003, 0.0, 0.001),
        decode_bandwidth_utilization=0.9,
        **health,
    )
    found = bottleneck(evidence)
    assert found["verdict"] == "client"
    assert found["suspect"] is True
    assert any("client CPU 99 %" in line for line in found["evidence"])
    assert "SUSPECT" in verdict_line(found)


def _gpu(t: int, clock: int, mask: int, util: float = 100.0) -> GpuSample:
    names = ("sw_thermal_slowdown",) if mask & SW_THERMAL_SLOWDOWN else ()
    return GpuSample(
        index=0,
        uuid="GPU-x",
        name="NVIDIA GeForce RTX 4090",
        t_ns=t,
        sm_clock_mhz=clock,
        utilization_gpu_pct=util,
        throttle_mask=mask,
        throttle_reasons=names,
    )


def test_throttled_after_the_thermal_ramp() -> None:
    # The 48GB card after its ramp: clocks binned down with SW thermal slowdown active.
    boost = GPUS["rtx4090-48gb"].boost_clock_mhz
    ramp = [_gpu(t, boost, 0) for t in range(0, 10)]
    hot = [_gpu(t, int(boost * 0.8), SW_THERMAL_SLOWDOWN) for t in range(10, 40)]
    cool_window = gpu_window(ramp + hot, 0, 9, boost)
    assert cool_window["throttled_share"] == 0.0
    window = gpu_window(ramp + hot, 10, 39, boost)
    assert window["throttled_share"] == 1.0
    assert window["clock_ratio_min"] == pytest.approx(0.8, abs=0.01)
    found = bottleneck(StepEvidence(level=8, decode_bandwidth_utilization=0.7, **window))
    assert found["verdict"] == "throttled"
    assert found["throttled"] is True
    assert "measured while throttled" in verdict_line(found)
    # A power cap at full clock is the firmware holding the limit, not a slowdown.
    capped = gpu_window([_gpu(t, boost, SW_POWER_CAP) for t in range(5)], 0, 5, boost)
    assert capped["throttled_share"] == 0.0


def test_network_queue_bandwidth_prefill_none() -> None:
    far = bottleneck(StepEvidence(level=1, breakdown=_breakdown(0.055, 0.040, 0.0003, 0.012)))
    assert far["verdict"] == "network"
    queued = bottleneck(
        StepEvidence(
            level=48,
            breakdown=_breakdown(9.0, 0.0003, 7.5, 1.4),
            kv_usage_max=0.99,
            waiting_max=41,
            waiting_growth=3,
            preemptions=24,
        )
    )
    assert queued["verdict"] == "kv-capacity"  # the queue's cause: KV full, preemptions
    assert "KV cache full 99%, 41 waiting (+3), 24 preemptions" in queued["evidence"]
    assert queued["evidence"][0].endswith("requests wait for KV blocks")
    single = bottleneck(
        StepEvidence(
            level=1,
            breakdown=_breakdown(0.05, 0.0003, 0.0003, 0.049),
            decode_bandwidth_utilization=0.72,
            prefill_compute_utilization=0.02,
        )
    )
    assert single["verdict"] == "decode-bandwidth"
    prefill = bottleneck(
        StepEvidence(
            level=4,
            breakdown=_breakdown(0.5, 0.0003, 0.01, 0.48),
            prefill_compute_utilization=0.5,
            decode_bandwidth_utilization=0.2,
        )
    )
    assert prefill["verdict"] == "prefill-compute"
    idle = bottleneck(
        StepEvidence(
            level=8,
            tpot_p50_s=0.03,
            previous_level=4,
            previous_tpot_p50_s=0.02,
            gpu_util_mean_pct=20.0,
            decode_bandwidth_utilization=0.1,
        )
    )
    assert idle["verdict"] == "server-overhead"
    assert bottleneck(StepEvidence(level=1))["verdict"] == "none"
    assert set(VERDICTS) == {
        "errors",
        "client",
        "host-contended",
        "network",
        "queue",
        "decode-bandwidth",
        "prefill-compute",
        "throttled",
        "server-overhead",
        "kv-capacity",
        "scheduler-limit",
        "prefill-interference",
        "decode-compute",
        "none",
    }


def test_an_inconsistent_breakdown_does_not_decide_queue() -> None:
    # The server's window caught the previous level's queue: its parts overshoot TTFT 3x.
    found = bottleneck(StepEvidence(level=64, breakdown=_breakdown(0.27, 0.0003, 0.9, 0.2)))
    assert found["verdict"] == "none"
    assert any("add up to" in line for line in found["evidence"])


def test_a_queueing_server_outranks_a_busy_client_but_the_step_stays_suspect() -> None:
    found = bottleneck(
        StepEvidence(
            level=48,
            kv_usage_max=0.95,
            kv_room_requests=0.6,
            waiting_max=47,
            running_mean=4.0,
            client_cpu_max_pct=97.0,
        )
    )
    assert found["verdict"] == "kv-capacity"
    assert found["suspect"] is True
    assert any("client CPU" in line for line in found["evidence"])


def test_vram_check_json_gives_the_measured_bandwidth(tmp_path: Path) -> None:
    good = tmp_path / "vram.json"
    good.write_text('{"gpu": 0, "bandwidth_gbps": 812.5, "verdict": "pass"}')
    assert bandwidth_from_vram_check(str(good)) == 812.5
    assert bandwidth_from_vram_check(None) is None
    bad = tmp_path / "bad.json"
    bad.write_text('{"bandwidth_gbps": null}')
    for path, words in ((bad, "no measured"), (tmp_path / "none.json", "cannot read")):
        with pytest.raises(UsageError, match=words):
            bandwidth_from_vram_check(str(path))
