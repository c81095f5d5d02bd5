"""The simulator's deterministic tokenizer: same text, same tokens, on every machine and run.

Contract: text is split on whitespace; a word of up to `PIECE_CHARS` (8) characters is one token and
a longer word is cut into 8-character pieces, one token each. A token's id is `zlib.crc32(piece) %
vocab_size`. There are no special tokens and no chat template, so `count_tokens` of a text is what
the simulator bills as `prompt_tokens`. It is not a real tokenizer; it only has to be pure, fast and
easy to predict, so that tests and the load generator can build prompts of an exact length
(`make_prompt`) without a model's vocabulary.
"""

from __future__ import annotations

import random
import zlib
from functools import cache
from itertools import product
from typing import Final

VOCAB_SIZE: Final = 32000
PIECE_CHARS: Final = 8

_CONSONANTS: Final = "bcdfghjklmnprstvz"
_VOWELS: Final = "aeiou"


def _pieces(text: str) -> list[str]:
    return [
        word[i : i + PIECE_CHARS] for word in text.split() for i in range(0, len(word), PIECE_CHARS)
    ]


def count_tokens(text: str) -> int:
    """Number of tokens in `text` (what the simulator reports as prompt_tokens)."""
    return sum((len(word) + PIECE_CHARS - 1) // PIECE_CHARS for word in text.split())


def encode(text: str, vocab_size: int = VOCAB_SIZE) -> list[int]:
    """Token ids of `text`, for `/tokenize`."""
    return [zlib.crc32(piece.encode()) % vocab_size for piece in _pieces(text)]


@cache
def _words() -> tuple[str, ...]:
    # 85 two-letter syllables; words of 2-4 syllables are 4-8 characters: always exactly one token.
    syllables = [c + v for c, v in product(_CONSONANTS, _VOWELS)]
    pairs = [a + b for a, b in product(syllables, repeat=2)]
    return tuple(pairs + [p + s for p, s in zip(pairs, syllables * 85, strict=True)])


def make_prompt(n_tokens: int, seed: int = 0) -> str:
    """A text of exactly `n_tokens` tokens whose start differs per `seed`, so no prefix cache hits.

    The first word is `s<seed in hex>` when it fits in `n_tokens`; the rest are pronounceable words
    of one token each, drawn from a `random.Random(seed)` stream.
    """
    if n_tokens < 0:
        raise ValueError(f"n_tokens must be >= 0, got {n_tokens}")
    if n_tokens == 0:
        return ""
    head = f"s{seed:x}" if seed >= 0 else f"n{-seed:x}"
    head_tokens = count_tokens(head)
    words = [head] if head_tokens <= n_tokens else []
    rest = n_tokens - (head_tokens if words else 0)
    words.extend(random.Random(seed).choices(_words(), k=rest))
    return " ".join(words)
