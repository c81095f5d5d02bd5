"""The causes past the knee (metrics.saturation), on numbers: every loaded step names a bound."""

from __future__ import annotations

from typing import Any

from gputui.metrics.bottleneck import bottleneck, verdict_line
from gputui.metrics.json_read import number
from gputui.metrics.step_evidence import StepEvidence
from gputui.metrics.ttft_breakdown import ttft_breakdown


def _breakdown(ttft: float, rtt: float, queue: float, prefill: float) -> dict[str, Any]:
    found = ttft_breakdown(ttft, rtt, queue, prefill)
    assert found is not None
    return found


# The A100 simulator at 32 streams, 512 in / 128 out: what `gputui run` measured in a 12 s step.
A100_32 = StepEvidence(
    level=32,
    ttft_mean_s=0.32,
    tpot_p50_s=0.0228,
    breakdown=_breakdown(0.320, 0.0002, 0.138, 0.182),
    decode_bandwidth_utilization=0.37,
    prefill_compute_utilization=0.28,
    waiting_max=4,
    waiting_mean=1.2,
    kv_usage_max=0.04,
    running_mean=30.5,
    running_max=32,
    running_at_max_share=0.9,
    preemptions=0,
    gpu_util_mean_pct=99.0,
    previous_level=8,
    previous_ttft_mean_s=0.22,
    previous_tpot_p50_s=0.0131,
    itl_p50_s=0.0132,
    itl_p95_s=0.150,
    output_tokens_per_s=1203.7,
    previous_output_tokens_per_s=543.3,
    sla_failed=True,
)


def test_prefill_chunks_stalling_decode_are_named_with_their_numbers() -> None:
    found = bottleneck(A100_32)
    assert found["verdict"] == "prefill-interference"
    assert found["evidence"][0].startswith("ITL P95 150 ms is 11x its median 13 ms")
    assert "prefill at 28% of peak FLOP/s" in found["evidence"][0]
    assert found["low_confidence"] is False
    # A failing step that also reads decode-bandwidth: the ITL tail, not the bytes, broke it.
    banded = bottleneck(_replace(A100_32, decode_bandwidth_utilization=0.63))
    assert banded["verdict"] == "prefill-interference"
    slow = _replace(A100_32, decode_bandwidth_utilization=0.63, previous_tpot_p50_s=0.02)
    assert bottleneck(_replace(slow, sla_failed=False))["verdict"] == "decode-bandwidth"


def _replace(e: StepEvidence, **changes: Any) -> StepEvidence:
    from dataclasses import replace

    return replace(e, **changes)


def test_the_closed_loops_own_plateau_is_not_the_schedulers_limit() -> None:
    # 128 streams: running holds at 125-128 because the client keeps 128 in flight; 3 wait.
    client_plateau = _replace(A100_32, level=128, running_max=128, waiting_mean=3.0, itl_p95_s=0.02)
    found = bottleneck(client_plateau)
    assert found["verdict"] == "scheduler-limit"  # its queue is 43 % of TTFT: the token budget
    assert found["evidence"][0].startswith("token budget, likely: queue 43% of TTFT with 3 waiting")
    assert "max_num_batched_tokens" in found["evidence"][0]
    assert found["low_confidence"] is True  # no tokens per engine step to confirm it
    # With them: steps of 1 token per running request are decode only, no budget taken.
    decode_only = bottleneck(_replace(client_plateau, tokens_per_engine_step=31.0))
    assert "token budget" not in decode_only["evidence"][0]
    chunked = bottleneck(_replace(client_plateau, tokens_per_engine_step=2048.0))
    assert chunked["verdict"] == "scheduler-limit" and chunked["low_confidence"] is False
    assert chunked["evidence"][0].startswith(
        "token budget: engine steps carried 2048 tokens on average for 30 running"
    )
    # max_num_seqs 32 at 64 streams: 32 run, 32 wait, KV has room.
    capped = _replace(A100_32, level=64, waiting_max=33, waiting_mean=31.0, itl_p95_s=0.02)
    capped = _replace(capped, closed_loop_streams=64.0)
    # 8 streams, 8 running, one just arrived waiting: the client's plateau, not a limit.
    small = _replace(capped, level=8, closed_loop_streams=8.0, running_max=8, waiting_mean=1.0)
    assert "running held" not in bottleneck(small)["evidence"][0]
    found = bottleneck(capped)
    assert found["verdict"] == "scheduler-limit"
    assert found["evidence"][0].startswith(
        "sequence limit: running held at 32 in 90% of the samples with requests waiting, 31 waiting"
    )
    assert "max_num_seqs" in found["evidence"][0]


def test_kv_capacity_refines_the_queue() -> None:
    found = bottleneck(
        StepEvidence(
            level=128, kv_usage_max=1.0, kv_room_requests=0.2, waiting_max=73, waiting_mean=56.0,
            running_mean=72.0, preemptions=2, sla_failed=True,
        )
    )  # fmt: skip
    assert found["verdict"] == "kv-capacity"
    assert found["evidence"][0] == (
        "KV cache full 100%, no room for another request, 2 preemptions, 56 waiting on average "
        "(at most 73): requests wait for KV blocks"
    )


def test_decode_compute_when_tpot_grows_with_a_busy_gpu_and_bandwidth_to_spare() -> None:
    found = bottleneck(
        StepEvidence(
            level=256, tpot_p50_s=0.060, previous_level=128, previous_tpot_p50_s=0.040,
            gpu_util_mean_pct=98.0, decode_bandwidth_utilization=0.35,
            decode_compute_utilization=0.31, itl_p50_s=0.058, itl_p95_s=0.07, sla_failed=True,
        )
    )  # fmt: skip
    assert found["verdict"] == "decode-compute"
    assert found["evidence"][0].startswith("TPOT +50% per doubling, GPU busy 98 %")
    assert "decode FLOPs at 31% of peak" in found["evidence"][0]


def test_a_failing_step_with_thin_evidence_gets_its_likely_cause() -> None:
    # No server telemetry at all: only the client's latencies, TPOT growing with the load.
    thin = StepEvidence(
        level=64, ttft_mean_s=0.30, tpot_p50_s=0.050, previous_level=32,
        previous_ttft_mean_s=0.28, previous_tpot_p50_s=0.030, sla_failed=True,
    )  # fmt: skip
    found = bottleneck(thin)
    assert found["verdict"] == "decode-compute"
    assert found["low_confidence"] is True
    assert "likely: the evidence is thin" in verdict_line(found)
    # A breakdown that leans on the queue.
    leaning = bottleneck(
        StepEvidence(level=64, breakdown=_breakdown(0.9, 0.0003, 0.4, 0.3), sla_failed=True)
    )
    assert leaning["verdict"] == "queue" and leaning["low_confidence"] is True
    assert leaning["evidence"][0].startswith("most likely: queue 44% of TTFT")
    # Saturated (throughput flat) though passing: a bound too.
    flat = _replace(thin, sla_failed=False, output_tokens_per_s=1010.0)
    flat = _replace(flat, previous_output_tokens_per_s=1000.0)
    assert bottleneck(flat)["verdict"] != "none"
    # Neither failing nor saturated: more load would still be served.
    assert bottleneck(_replace(thin, sla_failed=False))["verdict"] == "none"


def test_a_far_network_is_a_likely_bound_of_a_failing_step() -> None:
    found = bottleneck(
        StepEvidence(level=4, breakdown=_breakdown(0.2, 0.06, 0.05, 0.06), sla_failed=True)
    )
    assert found["verdict"] == "network" and found["low_confidence"] is True


def test_the_simulators_large_batch_decode_reads_decode_compute() -> None:
    # Virtual time (sim.virtual): 32-token prompts, 256-token answers on the A100 simulator. From
    # 128 to 256 streams tok/s stops growing and TPOT doubles while the bytes read per second fall:
    # the batch's FLOPs set the step time (the roofline's compute term passes its memory term).
    from gputui.catalog.specs import GPUS, MODELS
    from gputui.metrics.roofline_use import roofline_use
    from gputui.sim.device import make_device
    from gputui.sim.virtual import run_closed_loop

    gpu, model = GPUS["a100-80gb-pcie"], MODELS["llama-3.1-8b"]
    found: dict[int, tuple[str, float, float]] = {}
    previous = None
    for streams in (64, 128, 256):
        device = make_device(gpu, model, max_num_seqs=512)
        run = run_closed_loop(device, streams, 32, 256, num_requests=3 * streams)
        use = roofline_use(
            gpu, model, output_tokens_per_s=run.steady_output_tok_s,
            input_tokens_per_s=run.steady_output_tok_s / 256 * 32, mean_batch=float(streams),
            mean_context_tokens=32 + 128,
        )  # fmt: skip
        assert use is not None
        evidence = StepEvidence(
            level=streams, tpot_p50_s=run.mean_tpot_s, itl_p50_s=run.mean_tpot_s,
            itl_p95_s=run.mean_tpot_s * 1.2, gpu_util_mean_pct=100.0,
            decode_bandwidth_utilization=number(use, "decode_bandwidth_utilization"),
            prefill_compute_utilization=number(use, "prefill_compute_utilization"),
            decode_compute_utilization=number(use, "decode_compute_utilization"),
            output_tokens_per_s=run.steady_output_tok_s, closed_loop_streams=float(streams),
            previous_level=previous[0] if previous else None,
            previous_tpot_p50_s=previous[1] if previous else None,
            previous_output_tokens_per_s=previous[2] if previous else None,
        )  # fmt: skip
        found[streams] = (
            bottleneck(evidence)["verdict"],
            run.mean_tpot_s,
            number(use, "decode_bandwidth_utilization") or 0.0,
        )
        previous = (streams, run.mean_tpot_s, run.steady_output_tok_s)
    assert found[64][0] == found[128][0] == "decode-bandwidth", found
    assert found[256][0] == "decode-compute", found
    assert found[256][1] > 1.8 * found[128][1]  # TPOT ~doubles per doubling of the batch


def test_one_stream_has_no_prefill_interference() -> None:
    # vLLM (CPU) at one stream on a shared host: ITL P95 28 ms, 6x its 4.5 ms median, from the
    # host's pauses; no other request's prompt was prefilled beside it (1 running at most).
    one = StepEvidence(
        level=1, closed_loop_streams=1, running_max=1, itl_p50_s=0.0045, itl_p95_s=0.028
    )
    assert bottleneck(one)["verdict"] == "none"
    assert (
        bottleneck(_replace(one, level=4, closed_loop_streams=4, running_max=4))["verdict"]
        == "prefill-interference"
    )
