"""The continuous-batching scheduler, and the issue's physics acceptance checks in virtual time."""

from __future__ import annotations

import itertools
import random

import pytest

from gputui.catalog.specs import GPUS, MODELS
from gputui.sim.device import SimDevice, make_device
from gputui.sim.profile import SimRequest
from gputui.sim.roofline import Roofline
from gputui.sim.scheduler import EOS_MEAN_TOKENS, Scheduler, stop_length
from gputui.sim.virtual import run_closed_loop

LLAMA8 = MODELS["llama-3.1-8b"]


def req(
    rid: int, prompt: int, max_tokens: int, ignore_eos: bool = True, min_tokens: int = 0
) -> SimRequest:
    return SimRequest(rid, 0, prompt, max_tokens, min_tokens, ignore_eos, False, "m")


def scheduler(
    num_blocks: int = 10_000, max_num_seqs: int = 256, budget: int = 2048, seed: int = 0
) -> Scheduler:
    return Scheduler(
        Roofline(GPUS["h200"], LLAMA8, "bf16", "bf16"), num_blocks, max_num_seqs, budget, seed
    )


def drain(s: Scheduler, limit: int = 100_000) -> dict[int, int]:
    """Run to completion; return output tokens per request."""
    counts: dict[int, int] = {}
    for _ in range(limit):
        it = s.next_iteration()
        if it is None:
            return counts
        for rid, n in s.complete_iteration(it).emitted.items():
            counts[rid] = counts.get(rid, 0) + n
    raise AssertionError("scheduler did not drain")


def device(gpu: str, **kwargs: int) -> SimDevice:
    return make_device(GPUS[gpu], LLAMA8, **kwargs)  # type: ignore[arg-type]


# --- mechanics --------------------------------------------------------------------------------


def test_chunked_prefill_then_first_token_then_one_token_per_decode() -> None:
    s = scheduler()
    s.add(req(1, 5000, 3))
    chunks = []
    emitted = []
    for _ in range(10):
        it = s.next_iteration()
        if it is None:
            break
        chunks.append((it.prefill_chunks(), it.decode_ids()))
        res = s.complete_iteration(it)
        emitted.append((res.emitted, res.finished))
    assert [c for c, _ in chunks[:3]] == [[(1, 2048)], [(1, 2048)], [(1, 904)]]
    assert [e for e, _ in emitted] == [{}, {}, {1: 1}, {1: 1}, {1: 1}]
    assert [d for _, d in chunks[3:]] == [[1], [1]]
    assert emitted[-1][1] == [(1, "length")]
    assert s.prompt_tokens_total == 5000
    assert s.generation_tokens_total == 3
    assert s.free_blocks == s.num_blocks


def test_budget_is_shared_running_first_then_fifo_admission() -> None:
    s = scheduler(budget=100)
    s.add(req(1, 60, 5))
    s.add(req(2, 60, 5))
    s.add(req(3, 10, 5))
    it = s.next_iteration()
    assert it is not None
    assert it.prefill_chunks() == [(1, 60), (2, 40)]  # request 3 waits behind 2 (FIFO)
    s.complete_iteration(it)
    it = s.next_iteration()
    assert it is not None
    assert it.decode_ids() == [1]
    assert it.prefill_chunks() == [(2, 20), (3, 10)]


def test_max_num_seqs_caps_the_batch() -> None:
    s = scheduler(max_num_seqs=3)
    for rid in range(5):
        s.add(req(rid, 10, 4))
    it = s.next_iteration()
    assert it is not None
    assert len(s.running) == 3
    assert len(s.waiting) == 2
    assert drain(s) == dict.fromkeys(range(5), 4)


def test_admission_needs_blocks_and_blocks_head_of_line() -> None:
    s = scheduler(num_blocks=10)  # 160 tokens
    s.add(req(1, 100, 10))  # 7 blocks
    s.add(req(2, 80, 10))  # 5 blocks: does not fit next to request 1
    it = s.next_iteration()
    assert it is not None
    assert it.prefill_chunks() == [(1, 100)]
    assert [q.request_id for q in s.waiting] == [2]


def test_decode_out_of_blocks_preempts_newest_and_recomputes() -> None:
    s = scheduler(
        num_blocks=8
    )  # 128 tokens: two requests growing to 80 tokens each cannot share it
    s.add(req(1, 40, 40))  # grows to 80 tokens = 5 blocks
    s.add(req(2, 40, 40))  # grows to 80 tokens: both cannot hold 10 blocks
    counts = drain(s)
    assert counts == {1: 40, 2: 40}  # every token delivered exactly once despite recomputation
    assert s.num_preemptions_total >= 1
    assert s.free_blocks == s.num_blocks
    assert s.generation_tokens_total == 80


def test_preemption_is_reported_in_the_iteration_and_result() -> None:
    s = scheduler(num_blocks=8)
    s.add(req(1, 40, 40))
    s.add(req(2, 40, 40))
    seen = []
    while (it := s.next_iteration()) is not None:
        res = s.complete_iteration(it)
        seen.extend(res.preempted)
    assert seen == [2] * s.num_preemptions_total  # always the newest request


def test_cancel_frees_blocks_even_in_flight() -> None:
    s = scheduler()
    s.add(req(1, 100, 50))
    s.add(req(2, 100, 50))
    it = s.next_iteration()
    assert it is not None
    assert s.cancel(2)
    res = s.complete_iteration(it)
    assert res.emitted == {1: 1}
    assert not s.cancel(2)
    assert s.finished_total["abort"] == 1
    assert drain(s) == {1: 49}
    assert s.free_blocks == s.num_blocks


def test_waiting_request_can_be_cancelled() -> None:
    s = scheduler(max_num_seqs=1)
    s.add(req(1, 10, 5))
    s.add(req(2, 10, 5))
    s.next_iteration()
    assert s.cancel(2)
    assert not s.waiting


def test_rejects_requests_that_could_never_fit() -> None:
    s = scheduler(num_blocks=4)
    with pytest.raises(ValueError, match="KV capacity of 64 tokens"):
        s.add(req(1, 60, 10))
    s.add(req(2, 60, 4))
    with pytest.raises(ValueError, match="already"):
        s.add(req(2, 1, 1))


def test_early_eos_is_seeded_and_respects_min_and_max_tokens() -> None:
    lengths = [
        stop_length(7, req(rid, 10, 256, ignore_eos=False, min_tokens=5)) for rid in range(2000)
    ]
    assert all(5 <= n <= 256 for n, _ in lengths)
    assert all((reason == "length") == (n == 256) for n, reason in lengths)
    early = sum(reason == "stop" for _, reason in lengths) / len(lengths)
    expected = 1 - (1 - 1 / EOS_MEAN_TOKENS) ** 255
    assert early == pytest.approx(expected, abs=0.05)
    again = [
        stop_length(7, req(rid, 10, 256, ignore_eos=False, min_tokens=5)) for rid in range(2000)
    ]
    assert again == lengths
    other = [
        stop_length(8, req(rid, 10, 256, ignore_eos=False, min_tokens=5)) for rid in range(2000)
    ]
    assert other != lengths
    assert stop_length(7, req(1, 10, 256)) == (256, "length")  # ignore_eos


# --- acceptance: physics in virtual time ------------------------------------------------------


@pytest.mark.parametrize("gpu", ["a100-80gb-pcie", "rtx4090-48gb", "h100-sxm"])
def test_single_stream_decode_speed_within_60_to_100_percent_of_roofline(gpu: str) -> None:
    d = device(gpu)
    result = run_closed_loop(d, concurrency=1, prompt_tokens=128, output_tokens=256, num_requests=2)
    ceiling_tok_s = GPUS[gpu].mem_bandwidth_bytes_per_s / d.roofline.weight_bytes
    decode_tok_s = 1.0 / result.mean_tpot_s
    assert 0.6 * ceiling_tok_s <= decode_tok_s <= ceiling_tok_s


def sweep(gpu: str, levels: tuple[int, ...]) -> list[float]:
    return [
        run_closed_loop(device(gpu), c, 1024, 256, num_requests=max(3 * c, 6)).steady_output_tok_s
        for c in levels
    ]


@pytest.mark.parametrize("gpu", ["a100-80gb-pcie", "rtx4090-48gb"])
def test_throughput_rises_with_concurrency_then_flattens(gpu: str) -> None:
    """The knee: the first concurrency whose doubling gains less than 15 % output tok/s."""
    levels = (1, 2, 4, 8, 16, 32, 64, 128)
    tok_s = sweep(gpu, levels)
    gains = [b / a - 1 for a, b in itertools.pairwise(tok_s)]
    assert all(g > 0 for g in gains[:-1]), tok_s  # rises all the way to 64
    assert gains[0] > 0.8  # nearly linear at the bottom: weights read once serve both streams
    assert gains == sorted(gains, reverse=True)  # diminishing returns
    knee = next(c for c, g in zip(levels, gains, strict=False) if g < 0.15)
    assert 16 <= knee <= 64


def test_a100_pcie_decodes_1_7_to_2_1_times_as_fast_as_4090_48gb_at_concurrency_1() -> None:
    speeds = [
        1.0 / run_closed_loop(device(g), 1, 512, 256, num_requests=2).mean_tpot_s
        for g in ("a100-80gb-pcie", "rtx4090-48gb")
    ]
    assert 1.7 <= speeds[0] / speeds[1] <= 2.1


def test_8k_contexts_concurrency_follows_the_kv_pool() -> None:
    held = {}
    for gpu in ("a100-80gb-pcie", "rtx4090-48gb"):
        # With the 2048-token default budget, admitting 8k prompts (not KV) limits the batch to ~33;
        # a long-context deployment raises the budget, and then the KV pool is what binds.
        d = device(gpu, max_batched_tokens=8192)
        capacity = d.plan.max_concurrent(8192)
        result = run_closed_loop(d, 100, 8192 - 128, 128, num_requests=200)
        # Incremental allocation may admit one more request than fits whole; it is then preempted.
        assert capacity <= result.peak_running <= capacity + 1
        assert result.preemptions >= 0
        held[gpu] = (capacity, d.plan.kv_pool_bytes)
    (a100_n, a100_pool), (rtx_n, rtx_pool) = held["a100-80gb-pcie"], held["rtx4090-48gb"]
    assert a100_n > rtx_n
    assert a100_n / rtx_n == pytest.approx(a100_pool / rtx_pool, rel=0.05)


def test_device_kv_capacity_is_the_formula_to_the_block() -> None:
    d = device("rtx4090-48gb")
    assert d.scheduler.num_blocks == d.plan.num_blocks
    assert d.scheduler.max_model_len == d.plan.capacity_tokens
    assert d.plan.capacity_tokens % 16 == 0


LogEntry = tuple[int, list[tuple[int, int]], list[int], list[int], float, list[tuple[int, str]]]


def run_logged(seed: int) -> tuple[list[LogEntry], dict[int, int]]:
    rng = random.Random(1234)  # the load; the scheduler's seed is separate
    s = scheduler(num_blocks=300, max_num_seqs=16, budget=512, seed=seed)
    log: list[LogEntry] = []
    counts: dict[int, int] = {}
    next_id = 0
    for step in range(3000):
        if step % 3 == 0 and next_id < 120:
            s.add(req(next_id, rng.randint(10, 900), rng.randint(1, 300), ignore_eos=False))
            next_id += 1
        it = s.next_iteration()
        if it is None:
            if next_id >= 120:
                break
            continue
        res = s.complete_iteration(it)
        log.append(
            (
                it.index,
                it.prefill_chunks(),
                it.decode_ids(),
                it.preempted,
                it.duration_s,
                res.finished,
            )
        )
        for rid, n in res.emitted.items():
            counts[rid] = counts.get(rid, 0) + n
    return log, counts


def test_same_seed_and_load_give_identical_decisions_and_counts() -> None:
    log_a, counts_a = run_logged(seed=42)
    log_b, counts_b = run_logged(seed=42)
    assert log_a == log_b
    assert counts_a == counts_b
    assert any(entry[3] for entry in log_a)  # the load does exercise preemption
    _, counts_c = run_logged(seed=43)
    assert counts_c != counts_a  # early-EOS draws depend on the seed


def test_tokens_per_engine_step_are_counted_as_vllm_buckets_them() -> None:
    # A 3000-token prompt under a 2048-token budget: a 2048 chunk, a 952 one, then 7 decode steps.
    s = scheduler(budget=2048)
    s.add(req(1, 3000, 8))
    drain(s)
    assert s.iteration_tokens_sum == 3000 + 7
    assert sum(s.iteration_counts) == 2 + 7
    assert s.iteration_counts[0] == 7  # le 1: the decode steps of one request
    assert s.iteration_counts[9] == 1 and s.iteration_counts[8] == 1  # le 2048, le 1024
