"""Automatic prefix caching as vLLM (V1) does it: hashed full blocks, shared and LRU-evicted.

Contract: `block_hashes(ids)` chains a hash over each full 16-token block of a prompt (block k's
hash covers blocks 0..k, so equal hashes mean equal prefixes). `BlockPool` owns the KV pool's block
accounting for the scheduler: `free` counts empty blocks plus cached blocks no request uses
(evictable, oldest first); `take(n)` hands out n blocks, evicting least recently used cached ones
when no empty block is left. A request that holds a cached block references it (a refcount); when
the last reference goes, the block stays cached but becomes evictable. With caching off, no block is
ever cached and the pool is a plain counter. Only prompt blocks are hashed: the simulator does not
know the ids of the tokens it generates, so a previous answer re-sent in a later turn is computed
again (vLLM would hit it too when the text re-tokenizes identically: ours is a lower bound).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Final

from gputui.catalog.memory import BLOCK_SIZE_TOKENS

_ROOT: Final = 0x5EED


def block_hashes(ids: Sequence[int], block: int = BLOCK_SIZE_TOKENS) -> tuple[int, ...]:
    """The chained hash of every full block of `ids` (a partial last block has none)."""
    out: list[int] = []
    parent = _ROOT
    for start in range(0, len(ids) - block + 1, block):
        parent = hash((parent, tuple(ids[start : start + block])))
        out.append(parent)
    return tuple(out)


class BlockPool:
    """Free, cached and referenced KV blocks (see the module docstring)."""

    __slots__ = ("_evictable", "_refs", "caching", "free", "hit_tokens_total", "query_tokens_total")

    def __init__(self, num_blocks: int, *, caching: bool = True) -> None:
        self.caching = caching
        self.free = num_blocks
        """Empty blocks plus evictable cached ones: what an allocation may use."""
        self._evictable: OrderedDict[int, None] = OrderedDict()
        """Cached blocks no request references, least recently used first."""
        self._refs: dict[int, int] = {}
        """Cached blocks in use: hash -> number of requests referencing it."""
        self.query_tokens_total = 0
        """vllm:prefix_cache_queries_total: prompt tokens looked up."""
        self.hit_tokens_total = 0
        """vllm:prefix_cache_hits_total: prompt tokens found cached."""

    @property
    def cached_blocks(self) -> int:
        """Blocks holding a cached prefix (referenced or evictable)."""
        return len(self._refs) + len(self._evictable)

    def reset_cache(self) -> bool:
        """Forget every cached prefix, as vLLM's `POST /reset_prefix_cache`.

        Like vLLM it refuses (False, nothing changed) while a request still references cached
        blocks; otherwise the evictable blocks (already counted free) are dropped from the cache.
        """
        if self._refs:
            return False
        self._evictable.clear()
        return True

    def lookup(self, hashes: Sequence[int], prompt_tokens: int) -> tuple[int, int]:
        """(cached blocks, of which evictable) of the longest cached prefix; changes nothing.

        As in vLLM, the last prompt token is always computed, so a fully cached prompt hits one
        block less (its logits are needed to sample the first output token).
        """
        if not self.caching:
            return 0, 0
        limit = min(len(hashes), (prompt_tokens - 1) // BLOCK_SIZE_TOKENS)
        hits = evictable = 0
        refs, lru = self._refs, self._evictable
        while hits < limit:
            h = hashes[hits]
            if h in lru:
                evictable += 1
            elif h not in refs:
                break
            hits += 1
        return hits, evictable

    def count_query(self, prompt_tokens: int, hit_blocks: int) -> None:
        """Count one request's lookup in the vLLM counters (tokens queried, tokens hit)."""
        if self.caching:
            self.query_tokens_total += prompt_tokens
            self.hit_tokens_total += hit_blocks * BLOCK_SIZE_TOKENS

    def acquire(self, hashes: Sequence[int]) -> None:
        """Reference these cached blocks (a hit found by `lookup`)."""
        refs, lru = self._refs, self._evictable
        for h in hashes:
            if h in lru:
                del lru[h]
                self.free -= 1
                refs[h] = 1
            else:
                refs[h] += 1

    def take(self, n: int) -> None:
        """Hand out `n` blocks (the caller checked `n <= free`), evicting LRU cached ones."""
        empty = self.free - len(self._evictable)
        lru = self._evictable
        for _ in range(n - empty):
            lru.popitem(last=False)
        self.free -= n

    def register(self, h: int) -> bool:
        """A request computed the full block with hash `h`: cache it (False when already cached)."""
        if not self.caching or h in self._refs or h in self._evictable:
            return False
        self._refs[h] = 1
        return True

    def release(self, hashes: Sequence[int], own_blocks: int) -> None:
        """A request let go of its referenced cached blocks and of `own_blocks` uncached ones."""
        self.free += own_blocks
        refs, lru = self._refs, self._evictable
        for h in reversed(hashes):  # the tail of a prefix is evicted before its head
            count = refs[h] - 1
            if count:
                refs[h] = count
            else:
                del refs[h]
                lru[h] = None
                self.free += 1
