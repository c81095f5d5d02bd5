"""Automatic prefix caching in the simulator's scheduler: hits, sharing, LRU eviction, counters."""

from __future__ import annotations

from gputui.catalog.specs import GPUS, MODELS
from gputui.sim.prefix_cache import BlockPool, block_hashes
from gputui.sim.profile import SimRequest
from gputui.sim.roofline import Roofline
from gputui.sim.scheduler import Scheduler


def req(rid: int, ids: list[int], max_tokens: int = 4) -> SimRequest:
    return SimRequest(rid, 0, len(ids), max_tokens, 0, True, False, "m", block_hashes(ids))


def scheduler(num_blocks: int = 10_000, *, caching: bool = True) -> Scheduler:
    roofline = Roofline(GPUS["h200"], MODELS["llama-3.1-8b"], "bf16", "bf16")
    return Scheduler(roofline, num_blocks, 256, 2048, prefix_caching=caching)


def run(s: Scheduler) -> tuple[dict[int, int], list[float]]:
    """Drain; the cached tokens each request reported and the duration of every pass."""
    cached: dict[int, int] = {}
    durations: list[float] = []
    while (it := s.next_iteration()) is not None:
        durations.append(it.duration_s)
        cached.update(s.complete_iteration(it).cached)
    return cached, durations


def test_block_hashes_chain_full_blocks_only() -> None:
    a = block_hashes(list(range(40)))
    assert len(a) == 2  # 40 tokens = 2 full blocks + 8
    assert block_hashes(list(range(32)) + [7] * 50)[:2] == a
    other = block_hashes([99, *range(1, 40)])
    assert other[0] != a[0] and other[1] != a[1]  # a different first block changes every hash


def test_second_request_hits_the_shared_prefix_and_prefills_less() -> None:
    s = scheduler()
    history = list(range(1000))
    s.add(req(1, history))
    first, first_passes = run(s)
    s.add(req(2, [*history, *range(5000, 5100)]))  # the next turn: history + 100 new tokens
    second, second_passes = run(s)
    assert first == {1: 0}
    assert second == {2: 992}  # 62 full blocks of the 1000-token history
    assert s.pool.query_tokens_total == 1000 + 1100
    assert s.pool.hit_tokens_total == 992
    assert second_passes[0] < first_passes[0] / 3  # 108 tokens to prefill instead of 1000


def test_a_fully_cached_prompt_still_computes_its_last_token() -> None:
    s = scheduler()
    ids = list(range(64))
    s.add(req(1, ids))
    run(s)
    s.add(req(2, ids))
    cached, _ = run(s)
    assert cached == {2: 48}  # 3 of 4 blocks: the last token's block is recomputed


def test_caching_off_never_hits() -> None:
    s = scheduler(caching=False)
    ids = list(range(500))
    s.add(req(1, ids))
    s.add(req(2, ids))
    run(s)
    s.add(req(3, ids))
    cached, _ = run(s)
    assert cached == {3: 0}
    assert s.pool.hit_tokens_total == 0 and s.pool.query_tokens_total == 0


def test_lru_eviction_keeps_the_pool_bounded_and_frees_everything() -> None:
    s = scheduler(num_blocks=40)
    for rid in range(1, 6):  # 5 distinct 320-token prompts, 20 blocks each: the pool holds 2
        s.add(req(rid, [rid * 10_000 + t for t in range(320)]))
        run(s)
    assert s.pool.cached_blocks <= 40
    assert s.free_blocks == 40  # cached blocks are evictable, so all of the pool is allocatable
    s.add(req(9, [5 * 10_000 + t for t in range(320)]))  # the newest prompt is still cached
    cached, _ = run(s)
    assert cached == {9: 304}
    s.add(req(10, [1 * 10_000 + t for t in range(320)]))  # the oldest was evicted
    cached, _ = run(s)
    assert cached == {10: 0}


def test_shared_blocks_are_referenced_not_copied() -> None:
    pool = BlockPool(10)
    pool.take(3)
    for h in (1, 2, 3):
        assert pool.register(h)
    pool.acquire([1, 2])  # a second request shares the first two blocks
    assert pool.free == 7
    pool.release([1, 2, 3], 0)
    assert pool.free == 8  # block 3 is evictable; 1 and 2 are still referenced
    pool.release([1, 2], 0)
    assert pool.free == 10
    assert pool.lookup([1, 2, 3], 100) == (3, 3)
