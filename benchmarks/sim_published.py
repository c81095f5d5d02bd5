"""The simulator against published vLLM online-serving tables, per request rate, in virtual time.

For each source below the GPU profile's engine core (KV plan + roofline + scheduler + thermal,
`gputui.sim.open_loop`) serves the source's request count with Poisson arrivals at each published
rate (rate inf: all at t = 0) and the source's lengths, and the script prints sim / published for
the latency columns the source gives. Deterministic: the same table every run, in about a second.
The band the simulator is held to is 0.75-1.35x (issue 31); `tests/unit/test_sim_published.py`
pins every cell that is inside it.

    python benchmarks/sim_published.py [--seed 0]

Only numbers read on the source page are used. What each source is, and what its columns mean:

S1  https://hungchun0201.github.io/agentic-ai-survey/ai-infra-basics/hands-on/week-01.html
    (repository hungchun0201/agentic-ai-survey, ai-infra-basics/hands-on/week-01.html, read whole).
    "Week 1 - First LLM Serving": vLLM (`vllm-continuum`, torch 2.8.0) `benchmark_serving.py
    --backend vllm --dataset-name sharegpt --num-prompts 150 --request-rate {1,4,10,inf}`,
    Llama-3.1-8B-Instruct BF16, max-model-len 4096, gpu-memory-utilization 0.90, on the PACE
    Phoenix cluster: its "NVIDIA H100 80GB HBM3", "NVIDIA A100 80GB PCIe", "NVIDIA H200 141GB"
    and "NVIDIA L40S 48GB" tables (p50 and p99 of TTFT and ITL, output tok/s). Lengths: the page
    gives ShareGPT prompts of "200-512 input tokens"; its throughput at rates 1-10 over the rate is
    118-132 tokens per request, so outputs of 128 tokens are simulated. Its TTFT column is not a
    time to first token: in all 16 rows of its four GPU tables TTFT p50 = 128.0 x ITL p50
    (919 = 128 x 7.18 ...), and at rate inf on the H100 (1094 ms = 128 x 8.55 ms) it leaves no time
    at all to prefill 150 prompts sent at once. It reads as a whole-response time of a 128-token
    answer, so the sim's E2E p50 is printed beside it, and it is left out of the band: only ITL
    p50 is validated from S1.

S2  kvcached (ovg-project/kvcached) PR 331, benchmarks/bench_layout/H100_results.md (commit
    c41e22af024ae4166f175e52f43e070cb148b7c5, read whole; GitHub mirror seen at
    http://172.245.126.119:8080/ovg-project/kvcached/pull/331/files), its "vanilla" rows (no
    kvcached): NVIDIA H100 80GB HBM3, Qwen/Qwen3-0.6B bf16, vLLM 0.19.0, `vllm serve
    --gpu-memory-utilization 0.5 --max-model-len 2048` (defaults otherwise), `vllm bench serve
    --dataset-name random --random-input-len 512 --random-output-len 128 --num-prompts 500
    --request-rate {inf,16}` (run_sweep.sh beside it), seeds 42/99/7, the mean of the three runs'
    mean TTFT, mean TPOT and request throughput. The per-seed result files
    (sweep_results/{A_vanilla_inf,F_vanilla_r16}.seed*.json) give the same means (TTFT 2905.2 /
    38.9 ms, TPOT 5.45 / 2.39 ms, 94.91 / 15.87 req/s) and exactly 256000 input and 64000 output
    tokens per run: every prompt is 512 tokens and every answer 128. The sim runs the same three
    arrival seeds and averages the same way. This is the only published table found with a real
    TTFT per request rate. A 0.6B model exposes what an 8B model's forward pass hides: the engine's
    host work per step (sim.roofline HOST_*: a step is host-bound) and the API server's one CPU
    (sim.frontend: at rate inf it admits requests only as fast as streaming leaves it CPU, so the
    engine never holds all 500). Their four constants come from this source's own figures (two
    median ITLs, the peak one-second output rate, the request rate), each derivation written where
    the constant is defined. Its per-seed files also give mean, median and p99 ITL (rate 16: 2.41,
    2.04, 12.75 ms; rate inf: 5.85, 4.54, 25.06 ms, means of the three seeds), printed beside the
    sim's as evidence, not as band metrics.

    Three mechanisms of vLLM 0.19 that only a host-bound model shows are in the sim, each with its
    source where its constant is defined: a step over the largest CUDA graph (512 tokens) runs
    without one, its layers launched from Python (sim.roofline EAGER_HOST_PER_LAYER_S, sized from
    rate 16's mean ITL; its p99 ITL, not used, comes out 11.8 / 12.75 ms); async scheduling sends a
    step's tokens only after the next step is launched (sim.device.delivery_lag_s); the tokenizer
    admits prompts in micro-batches of up to 32 after a 2 ms window (sim.frontend), so at rate inf
    prompts reach the engine in groups and most steps stay graphed (TPOT 0.66x -> 0.96x). Rate 16's
    TTFT is still out of band, 21.4 against 38.9 ms (0.55x, was 0.17x): the ~17 ms left is not
    explained by anything found. Ruled out: a generic API-server latency (the vLLM CPU build at one
    stream spends about its own CPU time outside queue and prefill), the tokenizer's time on such
    prompts (~1 ms), queueing behind other prefills (~2 ms, modelled), Nagle (asyncio sets
    TCP_NODELAY), the client's TTFT definition, and the client itself: driven by the same client,
    `vllm bench serve`, the HTTP sim reads ~3 ms above its own record, 24.9 ms in all
    (benchmarks/sim_through_vllm_bench.py). Its shape is
    printed too: the published TTFT is ~1.8x the sim's at the median, the spread and the p99 alike
    (35.8 / 19.6, 8.9 / 4.7, 65.5 / 35.2 ms), so what is missing is not one fixed cost per request.
    Not GIL hand-offs between the engine core's busy main thread and its other threads (each hop
    waits for the holder's next release, tens of microseconds in vLLM 0.19's own trace, never the
    5 ms switch interval: benchmarks/gil_handoff.py), and not the API
    server's load (a per-step delivery cost of up to 1.5 ms moves this TTFT by under 2 ms).

Also in S1's figures (not used to fit anything): output tok/s x ITL p50 = the streams decoding at
once (Little's law) = 30.0 at rate inf on all four cards (H100 3514.1 x 8.55 ms = 30.0, A100 30.0,
H200 30.1, L40S 29.9) and 30.4 at rate 10 on the L40S, while the sim holds all 150 at rate inf: the
source's client evidently ran at most 30 requests at a time, though its command line does not say
so. The sim's rate-inf ITL there is therefore that of a larger batch than the source's.
"""

from __future__ import annotations

import argparse
import random
import statistics
from dataclasses import dataclass

from gputui.catalog.specs import get_gpu, get_model
from gputui.sim.device import make_device
from gputui.sim.open_loop import OpenLoopResult, poisson_arrivals, run_open_loop

BAND = (0.75, 1.35)
S1_IN_FLIGHT = 30
"""S1's streams at once at rate inf: its output tok/s x ITL p50 (see the docstring)."""
INF = float("inf")


@dataclass(frozen=True, slots=True)
class PublishedRow:
    """One published rate: p50 TTFT-column and ITL in milliseconds, output tok/s."""

    rate: float
    ttft_col_p50_ms: float
    itl_p50_ms: float
    out_tok_s: float


@dataclass(frozen=True, slots=True)
class Table:
    """A published table and how to reproduce its load."""

    source: str
    gpu: str
    model: str
    num_prompts: int
    prompt_range: tuple[int, int]
    output_tokens: int
    rows: tuple[PublishedRow, ...]


S1_URL = "https://hungchun0201.github.io/agentic-ai-survey/ai-infra-basics/hands-on/week-01.html"
TABLES = (
    Table(
        f"S1 H100 80GB HBM3 ({S1_URL})",
        "h100-sxm",
        "llama-3.1-8b",
        150,
        (200, 512),
        128,
        (
            PublishedRow(1, 919, 7.18, 120.5),
            PublishedRow(4, 946, 7.39, 476.7),
            PublishedRow(10, 975, 7.62, 1229.4),
            PublishedRow(INF, 1094, 8.55, 3514.1),
        ),
    ),
    Table(
        f"S1 A100 80GB PCIe ({S1_URL})",
        "a100-80gb-pcie",
        "llama-3.1-8b",
        150,
        (200, 512),
        128,
        (
            PublishedRow(1, 1579, 12.35, 118.1),
            PublishedRow(4, 1629, 12.73, 529.0),
            PublishedRow(10, 1839, 14.37, 1208.7),
            PublishedRow(INF, 1948, 15.22, 1973.6),
        ),
    ),
    Table(
        f"S1 H200 141GB ({S1_URL})",
        "h200",
        "llama-3.1-8b",
        150,
        (200, 512),
        128,
        (
            PublishedRow(1, 760, 5.94, 126.0),
            PublishedRow(4, 757, 5.92, 474.2),
            PublishedRow(10, 782, 6.11, 1210.7),
            PublishedRow(INF, 909, 7.10, 4245.3),
        ),
    ),
    Table(
        f"S1 L40S 48GB ({S1_URL})",
        "l40s",
        "llama-3.1-8b",
        150,
        (200, 512),
        128,
        (
            PublishedRow(1, 3004, 23.47, 132.8),
            PublishedRow(4, 3141, 24.54, 514.2),
            PublishedRow(10, 3574, 27.93, 1087.7),
            PublishedRow(INF, 3460, 27.03, 1108.0),
        ),
    ),
)


@dataclass(frozen=True, slots=True)
class Means:
    """One rate's figures as `vllm bench serve` prints them, each the mean over the seeds' runs:
    TTFT and TPOT means, requests/s, then ITL mean/median/p99 and TTFT median/std/p99 (ms)."""

    ttft_ms: float
    tpot_ms: float
    req_s: float
    itl_mean_ms: float
    itl_median_ms: float
    itl_p99_ms: float
    ttft_median_ms: float
    ttft_std_ms: float
    ttft_p99_ms: float


@dataclass(frozen=True, slots=True)
class MeanRow:
    """One published rate and its published figures."""

    rate: float
    published: Means


@dataclass(frozen=True, slots=True)
class MeanTable:
    """A published table of means over seeds, fixed lengths (vLLM bench's random dataset)."""

    source: str
    gpu: str
    model: str
    gpu_memory_utilization: float
    num_prompts: int
    prompt_tokens: int
    output_tokens: int
    seeds: tuple[int, ...]
    rows: tuple[MeanRow, ...]


S2_URL = (
    "https://github.com/ovg-project/kvcached/pull/331, benchmarks/bench_layout/H100_results.md "
    "at c41e22af024ae4166f175e52f43e070cb148b7c5"
)
MEAN_TABLES = (
    MeanTable(
        f"S2 H100 80GB HBM3, kvcached PR 331 vanilla rows ({S2_URL})",
        "h100-sxm",
        "qwen3-0.6b",
        0.5,
        500,
        512,
        128,
        (42, 99, 7),
        (
            MeanRow(16, Means(38.9, 2.39, 15.87, 2.408, 2.038, 12.75, 35.84, 8.89, 65.53)),
            MeanRow(INF, Means(2905, 5.45, 94.91, 5.845, 4.543, 25.06, 2890.6, 1134.1, 4758.7)),
        ),
    ),
)


def p99(values: list[float]) -> float:
    """The 99th percentile with linear interpolation (numpy's default, as `vllm bench serve`)."""
    return statistics.quantiles(values, n=100, method="inclusive")[98]


def simulate_means(table: MeanTable, rate: float) -> Means:
    """Mean over `table.seeds` of the sim's per-run means (and ITL percentiles), as published."""
    runs: list[tuple[float, ...]] = []
    lengths = [(table.prompt_tokens, table.output_tokens)] * table.num_prompts
    for seed in table.seeds:
        device = make_device(
            get_gpu(table.gpu),
            get_model(table.model),
            gpu_memory_utilization=table.gpu_memory_utilization,
        )
        r = run_open_loop(device, poisson_arrivals(rate, lengths, seed))
        itl, ttft = r.itl_s, r.ttft_s
        runs.append((
            statistics.mean(ttft) * 1e3, statistics.mean(r.tpot_s) * 1e3,
            len(r.e2e_s) / r.duration_s, statistics.mean(itl) * 1e3,
            statistics.median(itl) * 1e3, p99(itl) * 1e3, statistics.median(ttft) * 1e3,
            statistics.pstdev(ttft) * 1e3, p99(ttft) * 1e3,
        ))  # fmt: skip
    return Means(*(statistics.mean(column) for column in zip(*runs, strict=True)))


def prefill_step_excess_ms(itl_mean_ms: float, itl_median_ms: float, rate: float) -> float:
    """How much longer than a decode step a prefill step lasts, from the ITLs at a light load.

    A request streaming at the median ITL sees every other request's prefill step as one longer
    gap: over a second of its decoding it has 1000 / mean ITL gaps and `rate` such steps, so
    (mean - median) x (1000 / mean) / rate ms is each prefill step's excess (S2 rate 16: 9.6 ms).
    """
    return (itl_mean_ms - itl_median_ms) * (1e3 / itl_mean_ms) / rate


def print_mean_table(t: MeanTable) -> None:
    """sim / published for each rate of a table of means."""
    lo, hi = BAND
    print(f"\n{t.source}\n{t.model} bf16 on {t.gpu}, gpu-memory-utilization "
          f"{t.gpu_memory_utilization:g}, {t.num_prompts} prompts of {t.prompt_tokens} in / "
          f"{t.output_tokens} out, mean of seeds {', '.join(map(str, t.seeds))}")  # fmt: skip
    print(f"{'rate':>5} {'TTFT mean ms':>12} {'pub':>7} {'ratio':>6} {'ok':>3} | "
          f"{'TPOT mean ms':>12} {'pub':>5} {'ratio':>6} {'ok':>3} | "
          f"{'req/s':>6} {'pub':>6}")  # fmt: skip
    sims = [simulate_means(t, row.rate) for row in t.rows]
    for row, m in zip(t.rows, sims, strict=True):
        pub = row.published
        r_ttft, r_tpot = m.ttft_ms / pub.ttft_ms, m.tpot_ms / pub.tpot_ms
        ok_ttft = "yes" if lo <= r_ttft <= hi else "NO"
        ok_tpot = "yes" if lo <= r_tpot <= hi else "NO"
        print(f"{row.rate:>5g} {m.ttft_ms:>12.1f} {pub.ttft_ms:>7.1f} {r_ttft:>5.2f}x "
              f"{ok_ttft:>3} | "
              f"{m.tpot_ms:>12.2f} {pub.tpot_ms:>5.2f} {r_tpot:>5.2f}x {ok_tpot:>3} | "
              f"{m.req_s:>6.1f} {pub.req_s:>6.2f}")  # fmt: skip
    print("  ITL (and rate 16's TTFT spread) in ms, sim / published (evidence, not band metrics):")
    for row, m in zip(t.rows, sims, strict=True):
        pub = row.published
        line = (f"  {row.rate:>5g}  mean {m.itl_mean_ms:.2f} / {pub.itl_mean_ms:.2f}  median "
                f"{m.itl_median_ms:.2f} / {pub.itl_median_ms:.2f}  p99 {m.itl_p99_ms:.2f} / "
                f"{pub.itl_p99_ms:.2f}")  # fmt: skip
        if row.rate != INF:
            sim_x = prefill_step_excess_ms(m.itl_mean_ms, m.itl_median_ms, row.rate)
            pub_x = prefill_step_excess_ms(pub.itl_mean_ms, pub.itl_median_ms, row.rate)
            line += f"  excess per prefill step {sim_x:.1f} / {pub_x:.1f}"
            line += (f"\n         TTFT median {m.ttft_median_ms:.1f} / {pub.ttft_median_ms:.1f}"
                     f"  std {m.ttft_std_ms:.1f} / {pub.ttft_std_ms:.1f}  p99 "
                     f"{m.ttft_p99_ms:.1f} / {pub.ttft_p99_ms:.1f}")  # fmt: skip
        print(line)


def simulate(
    table: Table, rate: float, seed: int = 0, max_in_flight: int | None = None
) -> OpenLoopResult:
    """One published rate of `table` through a fresh simulated GPU, in virtual time."""
    rng = random.Random(seed)
    lo, hi = table.prompt_range
    lengths = [(rng.randint(lo, hi), table.output_tokens) for _ in range(table.num_prompts)]
    device = make_device(get_gpu(table.gpu), get_model(table.model))
    arrivals = poisson_arrivals(rate, lengths, seed)
    return run_open_loop(device, arrivals, max_in_flight=max_in_flight)


def itl_ratio(table: Table, row: PublishedRow, seed: int = 0) -> float:
    """sim ITL p50 / published ITL p50 at one rate."""
    r = simulate(table, row.rate, seed)
    return statistics.median(r.itl_s) * 1e3 / row.itl_p50_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    seed = parser.parse_args().seed
    lo, hi = BAND
    print(f"sim / published, Poisson arrivals, virtual time; band {lo}-{hi}x "
          "(S1: ITL p50 validated; S2: TTFT and TPOT means)")  # fmt: skip
    for t in TABLES:
        print(f"\n{t.source}\n{t.model} bf16 on {t.gpu}, {t.num_prompts} prompts of "
              f"{t.prompt_range[0]}-{t.prompt_range[1]} in / {t.output_tokens} out")  # fmt: skip
        print(f"{'rate':>5} {'ITL p50 ms':>10} {'pub':>6} {'ratio':>6} {'ok':>3} | "
              f"{'TTFT p50':>8} {'E2E p50':>8} {'pub TTFT col':>12} {'E2E ratio':>9} | "
              f"{'tok/s':>6} {'pub':>6}")  # fmt: skip
        for row in t.rows:
            r = simulate(t, row.rate, seed)
            itl = statistics.median(r.itl_s) * 1e3
            ratio = itl / row.itl_p50_ms
            ok = "yes" if lo <= ratio <= hi else "NO"
            e2e = statistics.median(r.e2e_s) * 1e3
            print(f"{row.rate:>5g} {itl:>10.2f} {row.itl_p50_ms:>6.2f} {ratio:>5.2f}x {ok:>3} | "
                  f"{statistics.median(r.ttft_s) * 1e3:>8.1f} {e2e:>8.0f} "
                  f"{row.ttft_col_p50_ms:>12.0f} {e2e / row.ttft_col_p50_ms:>8.2f}x | "
                  f"{r.output_tokens / r.duration_s:>6.0f} {row.out_tok_s:>6.0f}")  # fmt: skip
        inf_row = t.rows[-1]
        capped = simulate(t, inf_row.rate, seed, max_in_flight=S1_IN_FLIGHT)
        itl = statistics.median(capped.itl_s) * 1e3
        ratio = itl / inf_row.itl_p50_ms
        print(f"  (inf with at most {S1_IN_FLIGHT} in flight, as the published tok/s x ITL says: "
              f"ITL p50 {itl:.2f} ms, {ratio:.2f}x; not the band's row)")  # fmt: skip

    for mt in MEAN_TABLES:
        print_mean_table(mt)


if __name__ == "__main__":
    main()
