"""Pattern generation, verification with injected faults, and the bandwidth arithmetic (NumPy)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from gputui.node.hostmem import NumpyBackend
from gputui.node.patterns import (
    BANDWIDTH_FLAG_RATIO,
    PATTERN_NAMES,
    PatternName,
    bandwidth_flag,
    bandwidth_ratio,
    copy_bandwidth_gbps,
    parse_patterns,
    pattern_value,
    pattern_values,
    verify_region,
)

MIB = 1 << 20


def _region(backend: NumpyBackend, words: Sequence[int]) -> list[Any]:
    return [backend.allocate(4 * n) for n in words]


@pytest.mark.parametrize("name", PATTERN_NAMES)
def test_device_expression_matches_host_ints(name: PatternName) -> None:
    idx = np.array([0, 1, 31, 32, 12345, 2**32 - 1, 2**32, 2**34 + 7], dtype=np.int64)
    got = pattern_values(name, 0xC0FFEE, idx)
    assert got.dtype == np.int64
    assert [int(v) for v in got] == [pattern_value(name, 0xC0FFEE, int(i)) for i in idx]
    assert all(0 <= int(v) <= 0xFFFFFFFF for v in got)


def test_address_pattern_is_index_xor_seed_and_sees_16_gib_aliases() -> None:
    idx = np.arange(1000, dtype=np.int64)
    assert (pattern_values("address", 0xA5A5, idx) == (idx ^ 0xA5A5)).all()
    # Words 2^32 apart (16 GiB) would collide on a plain 32-bit index: the fold keeps them apart.
    assert pattern_value("address", 0, 5) != pattern_value("address", 0, 2**32 + 5)
    assert pattern_value("address", 0, 5) != pattern_value("address", 0, 2 * 2**32 + 5)


def test_walking_ones_and_zeros_rotate_through_32_bits() -> None:
    idx = np.arange(64, dtype=np.int64)
    ones = pattern_values("walking1", 0, idx)
    zeros = pattern_values("walking0", 0, idx)
    assert [int(v) for v in ones[:32]] == [1 << k for k in range(32)]
    assert (ones[32:] == ones[:32]).all()
    assert ((ones ^ zeros) == 0xFFFFFFFF).all()
    assert int(pattern_value("walking1", 3, 0)) == 1 << 3


def test_random_pattern_is_seeded_deterministic_and_unique() -> None:
    idx = np.arange(1 << 16, dtype=np.int64)
    a = pattern_values("random", 1, idx)
    assert (a == pattern_values("random", 1, idx)).all()
    assert len(np.unique(a)) == len(a)  # a bijection of the address pattern
    b = pattern_values("random", 2, idx)
    assert (a != b).mean() > 0.99
    # Roughly half the bits set: it is not the address pattern in disguise.
    bits = np.unpackbits(a.astype(np.uint32).view(np.uint8)).mean()
    assert 0.45 < bits < 0.55


def test_clean_memory_has_no_mismatches() -> None:
    backend = NumpyBackend(4 * MIB)
    words = [1000, 2500]
    result = verify_region(backend, _region(backend, words), words, PATTERN_NAMES, block_words=700)
    assert result.mismatch_count == 0
    assert result.mismatches == ()
    assert set(result.counts) == set(PATTERN_NAMES)
    assert result.first_bad_offset is None


def test_bit_flipped_between_write_and_verify_is_reported_exactly() -> None:
    backend = NumpyBackend(4 * MIB)
    words = [1000, 2500]
    chunks = _region(backend, words)

    def flip(pattern: str, arrays: Sequence[Any]) -> None:
        arrays[1][1234] ^= np.uint32(1 << 5)

    result = verify_region(
        backend, chunks, words, ("address", "random"), seed=7, block_words=700, after_write=flip
    )
    assert result.mismatch_count == 2
    index = 1000 + 1234
    for m, name in zip(result.mismatches, ("address", "random"), strict=True):
        assert m.pattern == name
        assert m.chunk == 1
        assert m.offset_bytes == 4 * index
        assert m.expected == pattern_value(name, 7, index)
        assert m.found == m.expected ^ (1 << 5)
        assert m.flipped_bits == 1 << 5
        assert m.to_dict()["offset_bytes"] == 4 * index


def test_block_edges_and_chunk_start_are_exact() -> None:
    backend = NumpyBackend(4 * MIB)
    words = [1000, 1000]
    chunks = _region(backend, words)
    targets = [(0, 0), (0, 699), (0, 700), (0, 999), (1, 0), (1, 999)]

    def corrupt(pattern: str, arrays: Sequence[Any]) -> None:
        for c, w in targets:
            arrays[c][w] = ~arrays[c][w]

    result = verify_region(
        backend, chunks, words, ("walking0",), block_words=700, after_write=corrupt
    )
    assert [m.offset_bytes for m in result.mismatches] == [4 * (1000 * c + w) for c, w in targets]
    assert [m.chunk for m in result.mismatches] == [c for c, _ in targets]
    assert all(m.found == m.expected ^ 0xFFFFFFFF for m in result.mismatches)


class StuckBitBackend(NumpyBackend):
    """Word `word` of chunk 0 always reads bit `bit` as 1 (a stuck-at-1 cell)."""

    def __init__(self, word: int, bit: int) -> None:
        super().__init__(4 * MIB)
        self.word, self.bit = word, bit
        self.first: Any = None

    def allocate(self, n_bytes: int) -> Any:
        buf = super().allocate(n_bytes)
        if self.first is None:
            self.first = buf
        return buf

    def write(self, buf: Any, offset: int, words: Any) -> None:
        super().write(buf, offset, words)
        if buf is self.first and offset <= self.word < offset + len(words):
            buf[self.word] |= np.uint32(1 << self.bit)


def test_stuck_bit_shows_only_in_patterns_that_write_a_zero_there() -> None:
    backend = StuckBitBackend(word=77, bit=3)
    words = [512]
    result = verify_region(backend, [backend.allocate(4 * 512)], words, PATTERN_NAMES)
    expected_bad = {n for n in PATTERN_NAMES if not pattern_value(n, 0, 77) & (1 << 3)}
    assert {m.pattern for m in result.mismatches} == expected_bad
    assert "walking0" not in expected_bad  # walking0 has bit 3 set at word 77 (77 % 32 = 13)
    assert all(m.offset_bytes == 4 * 77 and m.found & (1 << 3) for m in result.mismatches)


class AliasedBackend(NumpyBackend):
    """Chunk 1 is wired onto chunk 0: a broken address line makes both see the same cells."""

    pair: list[Any]

    def write(self, buf: Any, offset: int, words: Any) -> None:
        super().write(buf, offset, words)
        if buf is self.pair[1]:
            self.pair[0][offset : offset + len(words)] = words


def test_address_pattern_catches_aliased_chunks_that_walking_bits_miss() -> None:
    backend = AliasedBackend(4 * MIB)
    words = [1024, 1024]
    chunks = _region(backend, words)
    backend.pair = chunks
    result = verify_region(backend, chunks, words, PATTERN_NAMES, max_report=4)
    # Walking patterns repeat every 32 words, and 1024 is a multiple: aliasing looks clean to them.
    assert result.counts["walking1"] == result.counts["walking0"] == 0
    assert result.counts["address"] == 1024
    assert result.counts["random"] == 1024
    first = [m for m in result.mismatches if m.pattern == "address"]
    assert [m.offset_bytes for m in first] == [0, 4, 8, 12]
    assert first[0].expected == 0 and first[0].found == 1024  # chunk 1's first word


def test_report_is_limited_but_every_mismatch_counted() -> None:
    backend = NumpyBackend(4 * MIB)
    words = [4096]

    def zero(pattern: str, arrays: Sequence[Any]) -> None:
        arrays[0][100:3100] = 0

    result = verify_region(
        backend, _region(backend, words), words, ("walking1",), max_report=5, after_write=zero
    )
    assert result.mismatch_count == 3000
    assert [m.offset_bytes for m in result.mismatches] == [4 * w for w in range(100, 105)]


def test_copy_bandwidth_counts_read_and_write() -> None:
    # 1 GiB copied 10 times in 25 ms: 2 x 1 GiB x 10 / 0.025 s = 858.99 GB/s.
    assert copy_bandwidth_gbps(1 << 30, 10, 0.025) == pytest.approx(858.993, rel=1e-5)
    with pytest.raises(ValueError, match="positive"):
        copy_bandwidth_gbps(1, 1, 0.0)


def test_bandwidth_ratio_and_flag() -> None:
    assert bandwidth_ratio(900.0, 1008.0) == pytest.approx(0.8929, rel=1e-3)
    assert bandwidth_ratio(None, 1008.0) is None
    assert bandwidth_ratio(900.0, None) is None
    assert BANDWIDTH_FLAG_RATIO == 0.7
    assert bandwidth_flag(0.69) is True
    assert bandwidth_flag(0.7) is False
    assert bandwidth_flag(None) is None


def test_parse_patterns() -> None:
    assert parse_patterns("all") == PATTERN_NAMES
    assert parse_patterns("random, address,random") == ("random", "address")
    with pytest.raises(ValueError, match="unknown pattern 'march'"):
        parse_patterns("address,march")
    with pytest.raises(ValueError, match="no pattern"):
        parse_patterns(" , ")
