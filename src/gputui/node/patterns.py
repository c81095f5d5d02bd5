"""Memory test patterns and their verification, written once for NumPy, CuPy and PyTorch arrays.

Contract: memory is checked as 32-bit words. `pattern_values(name, seed, idx)` turns an int64 array
of global word indices into int64 values in [0, 2^32) using only Python operators (`^ >> << * & +`),
which NumPy, CuPy and torch tensors all implement, so the same expression runs on the device and,
in tests, on the CPU. Nothing is kept on the host: verification regenerates the expected block on
the device from the indices and compares there, and only the first few mismatches travel back.

`verify_region(backend, chunks, patterns)` writes each pattern over every chunk, then reads every
chunk back (all writes before any read, so an address that aliases another chunk shows as a
mismatch in the chunk written first). A mismatch is reported with its byte offset from the start
of the checked region (the chunks laid end to end in allocation order), the chunk index, expected
and found values. Patterns:

- address: the word's index XOR the seed (index bits above 32 folded in with an odd multiplier),
  so a stuck or aliased address line reads back another word's value;
- walking1 / walking0: one bit set (or clear) per word, rotating through the 32 bit positions from
  word to word, so every data line is driven alone high (low) once every 32 words;
- random: a bijective 32-bit integer hash of the address pattern: pseudo-random data regenerated
  from (index, seed) on the device, never stored on the host.

Bandwidth convention: a device-to-device copy of N bytes reads N and writes N, so it moves 2 x N
bytes (the STREAM "copy" convention, the one datasheet bandwidth is compared against).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal, Protocol, Self, TypeVar

if TYPE_CHECKING:
    from gputui.node.json_docs import MismatchJson

PatternName = Literal["address", "walking1", "walking0", "random"]
PATTERN_NAMES: Final[tuple[PatternName, ...]] = ("address", "walking1", "walking0", "random")

WORD_BYTES: Final = 4
MASK32: Final = 0xFFFFFFFF
_FOLD: Final = 0x9E3779B1
"""Odd multiplier folding index bits 32+ into the word, so 16 GiB-apart words still differ."""
_HASH_1: Final = 0x7FEB352D
_HASH_2: Final = 0x2C1B3C6D
"""Odd hash multipliers below 2^31: (x < 2^32) x C stays below 2^63, so int64 never overflows."""

BANDWIDTH_FLAG_RATIO: Final = 0.7
"""Flag a card whose device copy reaches less than this fraction of its catalog bandwidth. A healthy
card's copy reaches about 80-90 % of the datasheet figure (DRAM refresh, page switches, copy-kernel
overheads), so 0.7 leaves room for a noisy measurement while a card with memory clocked a quarter
slower (a modified board with slower or down-clocked chips) still falls below it."""


class DeviceOutOfMemory(Exception):
    """An allocation the device could not satisfy (the chunk allocator then tries smaller)."""


@dataclass(frozen=True, slots=True)
class BlockMismatches:
    """What one block's on-device comparison sends back to the host."""

    count: int
    """Mismatching words in the block."""
    positions: tuple[int, ...]
    """Word positions within the block, ascending, at most the requested limit."""
    expected: tuple[int, ...]
    found: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Mismatch:
    """One word that did not read back as written."""

    offset_bytes: int
    """From the start of the checked region (chunks laid end to end in allocation order)."""
    chunk: int
    pattern: PatternName
    expected: int
    found: int

    @property
    def flipped_bits(self) -> int:
        """The bits that differ (expected XOR found)."""
        return self.expected ^ self.found

    def to_dict(self) -> MismatchJson:
        """JSON form."""
        return {
            "offset_bytes": self.offset_bytes,
            "chunk": self.chunk,
            "pattern": self.pattern,
            "expected": self.expected,
            "found": self.found,
            "flipped_bits": self.flipped_bits,
        }


class Words(Protocol):
    """Integers the pattern arithmetic runs on: a Python int (one word, on the host) or an array."""

    def __and__(self, other: Self | int, /) -> Self: ...
    def __xor__(self, other: Self | int, /) -> Self: ...
    def __rshift__(self, other: Self | int, /) -> Self: ...
    def __lshift__(self, other: Self | int, /) -> Self: ...
    def __mul__(self, other: Self | int, /) -> Self: ...
    def __add__(self, other: Self | int, /) -> Self: ...
    def __sub__(self, other: Self | int, /) -> Self: ...


class DeviceArray(Protocol):
    """A 1-D array of 32-bit words held by the array library (NumPy, CuPy or torch).

    The checker only slices and lists them; a backend casts back to its own library's array type
    where it needs more (NumPy's arrays match this protocol as they are).
    """

    def __len__(self) -> int: ...
    def __getitem__(self, key: slice, /) -> DeviceArray: ...
    def tolist(self) -> list[int]:
        """The values as Python ints (host lists of the few mismatches)."""
        ...


class IndexArray(Words, Protocol):
    """An int64 array of word indices, or of pattern values computed from them, on the device."""


W = TypeVar("W", bound=Words)


class ArrayBackend(Protocol):
    """What the checker needs from an array library bound to one device."""

    name: str
    """"torch", "cupy" or "numpy"."""

    def allocate(self, n_bytes: int) -> DeviceArray:
        """An uninitialised array of n_bytes / 4 32-bit words; raises `DeviceOutOfMemory`."""
        ...

    def indices(self, start: int, count: int) -> IndexArray:
        """int64 array [start, start + count) on the device."""
        ...

    def to_words(self, values: IndexArray) -> DeviceArray:
        """int64 values in [0, 2^32) as the 32-bit storage type, same bits."""
        ...

    def write(self, buf: DeviceArray, offset: int, words: DeviceArray) -> None:
        """Store `words` at word `offset` of `buf`."""
        ...

    def compare(
        self, buf: DeviceArray, offset: int, expected: DeviceArray, limit: int
    ) -> BlockMismatches:
        """Compare on the device; return the count and the first `limit` mismatches."""
        ...

    def copy_seconds(self, src: DeviceArray, dst: DeviceArray, repeats: int) -> float:
        """Seconds for `repeats` device-to-device copies src -> dst, timed on the device."""
        ...

    def synchronize(self) -> None:
        """Wait for queued device work."""
        ...


def pattern_values(name: PatternName, seed: int, idx: W) -> W:
    """The pattern's int64 values in [0, 2^32) for global word indices `idx` (int64 array)."""
    seed32 = seed & MASK32
    if name in ("walking1", "walking0"):
        one = (idx & 0) + 1
        walking = one << ((idx + seed32) & 31)
        return walking if name == "walking1" else walking ^ MASK32
    address = (idx & MASK32) ^ (((idx >> 32) * _FOLD) & MASK32) ^ seed32
    if name == "address":
        return address
    if name == "random":
        return _hash32(address ^ _hash32_int(seed32 ^ 0x5BD1E995))
    raise ValueError(f"unknown pattern {name!r}")


def _hash32(x: W) -> W:
    """A bijective 32-bit mix (xorshift-multiply), on arrays holding values in [0, 2^32)."""
    x = x ^ (x >> 16)
    x = (x * _HASH_1) & MASK32
    x = x ^ (x >> 15)
    x = (x * _HASH_2) & MASK32
    return x ^ (x >> 16)


def _hash32_int(x: int) -> int:
    return _hash32(x)


def pattern_value(name: PatternName, seed: int, index: int) -> int:
    """One word's expected value, computed on the host with Python ints (for tests and reports)."""
    return int(pattern_values(name, seed, index))


@dataclass(frozen=True, slots=True)
class RegionResult:
    """The outcome of writing and verifying every pattern over a region."""

    mismatches: tuple[Mismatch, ...]
    """At most `max_report` per pattern, each pattern's in ascending offset order."""
    mismatch_count: int
    """All mismatching words, over every pattern."""
    counts: dict[str, int]
    """Mismatching words per pattern."""
    seconds: dict[str, float]
    """Write + verify time per pattern."""

    @property
    def first_bad_offset(self) -> int | None:
        """The lowest offset that failed any pattern."""
        return min((m.offset_bytes for m in self.mismatches), default=None)


Progress = Callable[[float, str], None]
"""(fraction done 0..1, what is running) for a UI or a progress line."""
AfterWrite = Callable[[PatternName, Sequence[DeviceArray]], None]
"""Called between a pattern's writes and its reads (tests flip bits in the chunks here)."""


def verify_region(
    backend: ArrayBackend,
    chunks: Sequence[DeviceArray],
    chunk_words: Sequence[int],
    patterns: Sequence[PatternName],
    *,
    seed: int = 0,
    block_words: int = 1 << 22,
    max_report: int = 32,
    after_write: AfterWrite | None = None,
    progress: Progress | None = None,
) -> RegionResult:
    """Write then verify each pattern over all chunks (see the module docstring)."""
    starts = [sum(chunk_words[:c]) for c in range(len(chunks))]
    total_words = sum(chunk_words)
    steps = 2 * len(patterns) * max(total_words, 1)
    done = 0
    mismatches: list[Mismatch] = []
    counts: dict[str, int] = {}
    seconds: dict[str, float] = {}
    for name in patterns:
        t0 = time.perf_counter_ns()
        for c, buf in enumerate(chunks):
            for off in range(0, chunk_words[c], block_words):
                n = min(block_words, chunk_words[c] - off)
                values = pattern_values(name, seed, backend.indices(starts[c] + off, n))
                backend.write(buf, off, backend.to_words(values))
                done += n
                if progress is not None:
                    progress(done / steps, f"writing {name}")
        backend.synchronize()
        if after_write is not None:
            after_write(name, chunks)
        count = 0
        for c, buf in enumerate(chunks):
            for off in range(0, chunk_words[c], block_words):
                n = min(block_words, chunk_words[c] - off)
                expected = backend.to_words(
                    pattern_values(name, seed, backend.indices(starts[c] + off, n))
                )
                room = max(max_report - sum(1 for m in mismatches if m.pattern == name), 0)
                block = backend.compare(buf, off, expected, room)
                count += block.count
                mismatches += [
                    Mismatch(
                        offset_bytes=(starts[c] + off + pos) * WORD_BYTES,
                        chunk=c,
                        pattern=name,
                        expected=exp,
                        found=got,
                    )
                    for pos, exp, got in zip(
                        block.positions, block.expected, block.found, strict=True
                    )
                ]
                done += n
                if progress is not None:
                    progress(done / steps, f"verifying {name}")
        counts[name] = count
        seconds[name] = (time.perf_counter_ns() - t0) / 1e9
    return RegionResult(
        mismatches=tuple(mismatches),
        mismatch_count=sum(counts.values()),
        counts=counts,
        seconds=seconds,
    )


def copy_bandwidth_gbps(copy_bytes: int, repeats: int, seconds: float) -> float:
    """GB/s (10^9) of `repeats` copies of `copy_bytes`, counting read + write (2 x bytes)."""
    if seconds <= 0:
        raise ValueError("copy time must be positive")
    return 2 * copy_bytes * repeats / seconds / 1e9


def bandwidth_ratio(measured_gbps: float | None, catalog_gbps: float | None) -> float | None:
    """Measured over catalog bandwidth; None when either is unknown."""
    if measured_gbps is None or not catalog_gbps:
        return None
    return measured_gbps / catalog_gbps


def bandwidth_flag(ratio: float | None, threshold: float = BANDWIDTH_FLAG_RATIO) -> bool | None:
    """True when the card is well below its catalog bandwidth; None when there is no figure."""
    return None if ratio is None else ratio < threshold


def parse_patterns(text: str) -> tuple[PatternName, ...]:
    """A comma list of pattern names ("all" = every pattern), in the order given, no repeats."""
    out: list[PatternName] = []
    for part in (p.strip().lower() for p in text.split(",")):
        if not part:
            continue
        names = PATTERN_NAMES if part == "all" else [n for n in PATTERN_NAMES if n == part]
        if not names:
            raise ValueError(
                f"unknown pattern {part!r}; choose from {', '.join(PATTERN_NAMES)} or all"
            )
        out += [n for n in names if n not in out]
    if not out:
        raise ValueError("no pattern given")
    return tuple(out)
