"""The simulator's calibration against published tables, pinned cell by cell (virtual time).

benchmarks/sim_published.py prints the tables; this pins every cell that is inside the 0.75-1.35x
band (issue 31), so a later change to the roofline, the scheduler or the API-server model cannot
move one out silently. S1 (read whole): hungchun0201/agentic-ai-survey,
ai-infra-basics/hands-on/week-01.html, Llama-3.1-8B-Instruct BF16, `benchmark_serving.py` on 150
ShareGPT prompts (200-512 tokens in), ITL p50 at request rates 1, 4, 10 and inf on four GPUs (its
TTFT column, = 128 x ITL p50 in every row, is not a time to first token). S2: kvcached PR 331's
H100 vanilla runs (Qwen3-0.6B, vLLM 0.19, 500 x 512 in / 128 out): TTFT, TPOT and req/s at rate inf
and TPOT at rate 16 are in the band and pinned, with rate 16's p99 ITL (the eager prefill steps'
check); TTFT at rate 16 is not (0.55x: benchmarks/sim_published.py says what is missing).
"""

from __future__ import annotations

import random
import statistics

import pytest

from gputui.catalog.specs import GPUS, MODELS
from gputui.sim.device import make_device
from gputui.sim.frontend import NO_FRONT_END, FrontEnd, FrontEndCosts
from gputui.sim.open_loop import OpenLoopResult, poisson_arrivals, run_open_loop

BAND = (0.75, 1.35)
INF = float("inf")
LLAMA8 = MODELS["llama-3.1-8b"]


def sharegpt_like(n: int = 150, seed: int = 0) -> list[tuple[int, int]]:
    """The source's load: prompts of 200-512 tokens, 128-token answers."""
    rng = random.Random(seed)
    return [(rng.randint(200, 512), 128) for _ in range(n)]


def serve(gpu: str, rate: float, n: int = 150) -> OpenLoopResult:
    device = make_device(GPUS[gpu], LLAMA8)
    return run_open_loop(device, poisson_arrivals(rate, sharegpt_like(n), seed=0))


S1_ITL_P50_MS = {  # the source's four tables: request rate -> published ITL p50 (ms)
    "h100-sxm": {1.0: 7.18, 4.0: 7.39, 10.0: 7.62, INF: 8.55},
    "a100-80gb-pcie": {1.0: 12.35, 4.0: 12.73, 10.0: 14.37, INF: 15.22},
    "h200": {1.0: 5.94, 4.0: 5.92, 10.0: 6.11, INF: 7.10},
    "l40s": {1.0: 23.47, 4.0: 24.54, 10.0: 27.93, INF: 27.03},
}


@pytest.mark.parametrize("gpu", sorted(S1_ITL_P50_MS))
def test_itl_at_every_published_rate_stays_in_the_band(gpu: str) -> None:
    ratios = {
        rate: statistics.median(serve(gpu, rate).itl_s) * 1e3 / published
        for rate, published in S1_ITL_P50_MS[gpu].items()
    }
    assert all(BAND[0] <= r <= BAND[1] for r in ratios.values()), ratios


def test_the_whole_burst_runs_at_once_at_rate_inf() -> None:
    assert serve("h100-sxm", INF).peak_running == 150  # an 8B model's API server keeps up


def test_poisson_arrivals_have_the_rate_and_inf_sends_all_at_once() -> None:
    lengths = [(100, 10)] * 2000
    at = [a.at_s for a in poisson_arrivals(4.0, lengths, seed=3)]
    assert at == sorted(at) and at[0] == 0.0
    assert at[-1] / (len(at) - 1) == pytest.approx(0.25, rel=0.08)
    assert {a.at_s for a in poisson_arrivals(float("inf"), lengths)} == {0.0}


def test_open_loop_counts_every_token_and_is_deterministic() -> None:
    a = serve("h100-sxm", 10.0, n=40)
    b = serve("h100-sxm", 10.0, n=40)
    assert a == b
    assert a.output_tokens == 40 * 128
    assert len(a.ttft_s) == len(a.e2e_s) == len(a.tpot_s) == 40
    assert len(a.itl_s) == 40 * 127
    assert min(a.ttft_s) >= 0.003  # the API server's overhead is in every TTFT


def test_queueing_shows_in_ttft_when_arrivals_outrun_the_engine() -> None:
    light = serve("h100-sxm", 1.0, n=60)
    burst = serve("h100-sxm", float("inf"), n=60)
    assert statistics.median(burst.ttft_s) > 5 * statistics.median(light.ttft_s)


def s2(rate: float, seed: int = 42, front_end: FrontEndCosts | None = None) -> OpenLoopResult:
    """kvcached PR 331's H100 load: Qwen3-0.6B at 0.5 of the memory, 500 x 512 in / 128 out."""
    device = make_device(GPUS["h100-sxm"], MODELS["qwen3-0.6b"], gpu_memory_utilization=0.5)
    lengths = [(512, 128)] * 500
    return run_open_loop(device, poisson_arrivals(rate, lengths, seed), front_end=front_end)


def test_s2_burst_is_admitted_whole_by_the_engine_alone_so_the_limit_is_the_api_server() -> None:
    # kvcached PR 331's H100 run at rate inf: vLLM's H100 defaults (1024 sequences, 8192 batched
    # tokens) and a pool of ~345k tokens at 0.5 admit all 500 (320k tokens) with no preemption, so
    # an engine without an API server in front ends the burst far faster than the published
    # 94.91 req/s: the real server's limit was its API server (sim.frontend).
    device = make_device(GPUS["h100-sxm"], MODELS["qwen3-0.6b"], gpu_memory_utilization=0.5)
    assert device.scheduler.max_num_seqs == 1024
    assert device.plan.capacity_tokens >= 500 * (512 + 128)
    r = s2(INF, front_end=NO_FRONT_END)
    assert r.peak_running == 500 and r.preemptions == 0
    assert len(r.e2e_s) / r.duration_s > 1.5 * 94.91


def test_s2_burst_through_the_api_server_has_the_published_throughput_and_ttft() -> None:
    # With the API server's one CPU (admission 5.28 us a prompt token, 61.2 us a streamed token,
    # streaming first) the engine's batch grows only as fast as requests are admitted: the
    # published 94.91 req/s and mean TTFT 2905 ms (seed 42 alone: 92.59 req/s, 2996 ms).
    r = s2(INF)
    req_s = len(r.e2e_s) / r.duration_s
    assert 0.9 <= req_s / 94.91 <= 1.1, req_s
    assert r.peak_running < 150  # never the whole burst at once
    ttft_ratio = statistics.mean(r.ttft_s) * 1e3 / 2905
    assert BAND[0] <= ttft_ratio <= BAND[1], ttft_ratio
    # Tokenizer micro-batches bring prompts to the engine in groups, so most steps are decode-only
    # and graphed; admitted one by one, every step would carry a prefill over 512 tokens (3.6x).
    tpot_ratio = statistics.mean(r.tpot_s) * 1e3 / 5.45
    assert BAND[0] <= tpot_ratio <= BAND[1], tpot_ratio


def test_s2_tpot_at_rate_16_is_host_bound_and_in_the_band() -> None:
    # Published mean TPOT 2.39 ms: a 0.6B model's decode step is the engine's host work, not the
    # GPU's 0.45 ms (sim.roofline HOST_STEP_S / HOST_PER_SEQUENCE_S), and each 517-token prefill
    # step runs without a CUDA graph (EAGER_HOST_PER_LAYER_S, sized from the mean ITL). The p99
    # ITL, 12.75 ms published, was not used to size it: those are the gaps across such steps.
    r = s2(16.0)
    ratio = statistics.mean(r.tpot_s) * 1e3 / 2.39
    assert BAND[0] <= ratio <= BAND[1], ratio
    p99 = statistics.quantiles(r.itl_s, n=100, method="inclusive")[98]
    assert BAND[0] <= p99 * 1e3 / 12.75 <= BAND[1], p99


def test_the_api_server_serves_deliveries_before_admissions() -> None:
    fe: FrontEnd[str] = FrontEnd(FrontEndCosts(1e-6, 1e-4, 0.0, 1))
    assert fe.tokenize("a", 100, 0.0) is None  # no batch window: admitted at once
    fe.deliver("d", 3)
    admitted, step, cost = fe.pop() or ((), None, 0.0)
    assert (admitted, step) == ((), "d") and cost == pytest.approx(3e-4)
    assert fe.pop() is None  # busy: one job at a time, never interrupted
    fe.done()
    admitted, step, cost = fe.pop() or ((), None, 0.0)
    assert (admitted, step) == (("a",), None) and cost == pytest.approx(1e-4)


def test_prompts_are_admitted_in_tokenizer_micro_batches() -> None:
    # vLLM's AsyncMicrobatchTokenizer: a batch waits 2 ms after its first prompt, or closes at 32.
    fe: FrontEnd[int] = FrontEnd(FrontEndCosts(1e-6, 0.0, 0.002, 3))
    assert fe.tokenize(1, 100, 5.0) == pytest.approx(5.002)  # opened a batch: close it then
    assert fe.tokenize(2, 100, 5.001) is None
    assert fe.pop() is None  # the window has not ended
    fe.close_batch(fe.batch_id)
    admitted, step, cost = fe.pop() or ((), None, 0.0)
    assert admitted == (1, 2) and step is None and cost == pytest.approx(200e-6)
    fe.done()
    first = fe.batch_id + 1
    for rid in (3, 4, 5):
        fe.tokenize(rid, 10, 6.0)
    fe.close_batch(first)  # the timer of a batch that already closed full changes nothing
    assert (fe.pop() or ((), None, 0.0))[0] == (3, 4, 5) and len(fe) == 0


def test_a_burst_waits_for_admission_and_a_lone_request_does_not() -> None:
    device = make_device(GPUS["h100-sxm"], LLAMA8)
    slow = FrontEndCosts(admit_s_per_prompt_token=20e-6, deliver_s_per_token=0.0)
    alone = run_open_loop(device, poisson_arrivals(INF, [(500, 4)], 0), front_end=slow)
    # the tokenizer's 2 ms window + admit 10 ms + prefill ~13.5 ms + the next step's launch ~1 ms
    assert alone.ttft_s[0] == pytest.approx(0.002 + 0.010 + 0.0135 + 0.001, abs=0.004)
    device = make_device(GPUS["h100-sxm"], LLAMA8)
    burst = run_open_loop(device, poisson_arrivals(INF, [(500, 4)] * 20, 0), front_end=slow)
    assert min(burst.ttft_s) > 20 * 0.010  # one micro-batch: all 20 admitted before any prefill


def test_max_in_flight_holds_the_rest_client_side() -> None:
    # S1's published tok/s x ITL p50 = 30 streams at rate inf on all four cards: a client cap.
    device = make_device(GPUS["h100-sxm"], LLAMA8)
    r = run_open_loop(device, poisson_arrivals(INF, sharegpt_like(), 0), max_in_flight=30)
    assert r.peak_running == 30 and len(r.e2e_s) == 150
    assert max(r.ttft_s) < 0.5  # TTFT counts from the send, not from the held arrival
