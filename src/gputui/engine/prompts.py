"""Prompts of a requested length that no prefix cache can serve.

Each prompt starts with a per-request random prefix, then short common English words. Such words
are one token each in the usual BPE vocabularies (with their leading space) and exactly one token
in the simulator's tokenizer, so `input_tokens` is a close approximation here; the snapshot records
what the server measured (usage), which is the figure to trust. Token-exact prompts come with
scenarios.
"""

from __future__ import annotations

import numpy as np

_WORDS = (  # noqa: SIM905 (a paragraph reads better than 200 quoted words)
    "the of and to in is was for on are with as at be by this had not but from or have an they "
    "which one you were all we her she there would their will each about how up out them then many "
    "some so these would other into has more two like him see time could no make than first been "
    "its who now people my made over did down only way find use may water long little very after "
    "call most day get come number sound work part take place year live back give good new just "
    "name great help low line turn much mean old same tell boy follow came want show also around "
    "form three small set put end does another well large must big even such because here why ask "
    "went men read need land different home us move try kind hand picture again change off play "
    "spell air away animal house point page letter mother answer found study still learn plant"
).split()


class PromptFactory:
    """Makes unique prompts of about `n` tokens, reproducibly from a seed."""

    def __init__(self, seed: int = 0) -> None:
        self._rng = np.random.default_rng(seed)
        self._words = np.array(_WORDS)

    def make(self, n_tokens: int, request_id: int) -> str:
        """A prompt of about `n_tokens` tokens, unique to this request."""
        prefix = f"r{request_id:x}x{int(self._rng.integers(0, 2**31)):x}"[:8]
        if n_tokens <= 1:
            return prefix
        picks = self._rng.integers(0, len(self._words), size=n_tokens - 1)
        return prefix + " " + " ".join(self._words[picks].tolist())
