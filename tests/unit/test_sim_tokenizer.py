"""The sim tokenizer: pure, documented rules, and prompts of an exact length."""

from __future__ import annotations

import zlib

import pytest

from gputui.sim.tokenizer import VOCAB_SIZE, count_tokens, encode, make_prompt


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("   \n\t ", 0),
        ("a", 1),
        ("hello world", 2),
        ("abcdefgh", 1),
        ("abcdefghi", 2),
        ("a" * 16, 2),
        ("a" * 17, 3),
        ("  spaced\tout\nwords  ", 3),
        (" tok017", 1),
    ],
)
def test_count_tokens(text: str, expected: int) -> None:
    assert count_tokens(text) == expected
    assert len(encode(text)) == expected


def test_encode_is_crc32_of_8_char_pieces() -> None:
    assert encode("hi abcdefghij") == [
        zlib.crc32(b"hi") % VOCAB_SIZE,
        zlib.crc32(b"abcdefgh") % VOCAB_SIZE,
        zlib.crc32(b"ij") % VOCAB_SIZE,
    ]
    assert all(0 <= i < 100 for i in encode("some words here", vocab_size=100))


def test_make_prompt_has_exactly_n_tokens() -> None:
    for n in [*range(0, 130), 255, 256, 1000, 4096, 8191]:
        for seed in (0, 1, 7, 12345, 2**40, -3):
            assert count_tokens(make_prompt(n, seed)) == n, (n, seed)


def test_make_prompt_is_deterministic_and_unique_per_seed() -> None:
    assert make_prompt(64, 5) == make_prompt(64, 5)
    first_words = {make_prompt(16, seed).split()[0] for seed in range(200)}
    assert len(first_words) == 200
    assert len({make_prompt(3, seed) for seed in range(200)}) == 200


def test_make_prompt_rejects_negative_length() -> None:
    with pytest.raises(ValueError, match="n_tokens"):
        make_prompt(-1)
