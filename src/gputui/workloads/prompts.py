"""Prompts of an exact token length, unique per request, cheap to build on the engine's loop.

Contract: a prompt is `LEAD + run salt + unique prefix + body` (after a shared system prompt, if
any). Every
word is a common English word that the server's tokenizer counts as exactly one token after a
space (calibration keeps only those), and BPE pre-tokenizers split at spaces, so a prompt with `m`
body words costs `base_tokens + m` tokens, where `base_tokens` = overhead (special tokens, chat
template, the lead word) + system words + prefix words, measured once by calibration.

- The unique prefix is `prefix_words` pool words, the digits in base P (pool size) of
  `(mult * request_id + offset) mod P**prefix_words`: an affine bijection, so no two requests of a
  run share it (uniqueness is guaranteed, not likely), consecutive requests differ from the first
  prefix word on, and no prefix cache can serve a prompt for free.
- The run salt (`salt`, `salt_words` pool words from a random number drawn per run, see
  `new_salt`) sits in the first block of every prompt, so no two runs (or TUI sessions) share a
  prefix-cache block even with one seed; "" when prompts are meant to be reused (`--reuse-prompts`,
  or a scenario that shares prefixes on purpose). A conversation's messages all carry the run's
  salt, so each turn still finds its own history cached.
- The body is a slice of one seeded word sequence, starting at a per-request rotation.
- Everything else is a function of (seed, request_id): the same seed sends the same requests.
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass
from typing import Final

import numpy as np

from gputui.engine.target import Endpoint, applies_chat_template
from gputui.engine.workload import ChatMessage

LEAD: Final = "the"
"""The first word of every user prompt (and of the system prompt): its cost is in the overhead."""

_PARAGRAPH: Final = (
    "of and to in is was for on are with as at be by this had not but from or have an they which "
    "one you were all we her she there would their will each about how up out them then many some "
    "so these other into has more two like him see time could no make than first been its who now "
    "people my made over did down only way find use may water long little very after call most "
    "day get come number sound work part take place year live back give good new just name great "
    "help low line turn much mean old same tell boy follow came want show also around form three "
    "small set put end does another well large must big even such because here why ask went men "
    "read need land home us move try kind hand picture again change off play air away animal "
    "house point page letter mother answer found study still learn plant cover food sun four "
    "state keep eye never last let thought city tree cross farm hard start might story saw far "
    "sea draw left late run while press close night real life few north open seem together next "
    "white begin got walk example ease paper group always music those both mark often until mile "
    "river car feet care second book carry took science eat room friend began idea fish "
    "mountain stop once base hear horse cut sure watch color face wood main enough plain girl "
    "usual young ready above ever red list though feel talk bird soon body dog family direct "
    "pose leave song measure door product black short class wind question happen complete ship "
    "area half rock order fire south problem piece told knew pass since top whole king space "
    "heard best hour better true during hundred five remember step early hold west ground "
    "interest reach fast verb sing listen six table travel less morning ten simple several vowel "
    "toward war lay against pattern slow center love person money serve appear road map rain "
    "rule govern pull cold notice voice unit power town fine certain fly fall lead cry dark "
    "machine note wait plan figure star box noun field rest correct able pound done beauty drive "
    "stood contain front teach week final gave green quick develop ocean warm free minute strong "
    "special mind behind clear tail produce fact street inch nothing course stay wheel full force "
    "blue object decide surface deep moon island foot system busy test record boat common gold "
    "possible plane dry wonder laugh thousand ago ran check game shape yes hot miss brought heat "
    "snow tire bring distant fill east paint language among"
)
WORDS: Final = tuple(_PARAGRAPH.split())
"""The candidate pool (441 words, at most 8 letters: one simulator token each)."""


@dataclass(frozen=True, slots=True)
class PromptPlan:
    """How to write request k's prompt; `base_tokens + m` tokens with m body words."""

    endpoint: Endpoint
    words: tuple[str, ...]
    """The calibrated pool: each word is one token after a space."""
    prefix_words: int
    """Unique-prefix length in words (0: no unique prefix, so prefix caching can hit)."""
    overhead: int
    """Tokens not in any counted word: special tokens, chat template, lead words."""
    system: str = ""
    """The shared system prompt ("" for none); completions put it before the prompt."""
    system_words: int = 0
    """Counted words of `system` (its lead word is in `overhead`)."""
    mult: int = 1
    offset: int = 0
    tokens_per_word: float = 1.0
    """1 when calibrated against a tokenizer; measured by two usage probes when approximate."""
    salt: str = ""
    """The run's salt words, right after the lead word ("" when prompts are reused)."""

    @property
    def salt_words(self) -> int:
        """Counted words of the salt."""
        return len(self.salt.split())

    @property
    def base_tokens(self) -> int:
        """Tokens of a prompt with an empty body: the shortest prompt this plan can write."""
        words = self.system_words + self.salt_words + self.prefix_words
        return self.overhead + round(words * self.tokens_per_word)

    def body_words(self, n_tokens: int) -> int:
        """Body words for a prompt of `n_tokens` (at least 0)."""
        extra = n_tokens - self.base_tokens
        if self.tokens_per_word == 1.0:
            return max(extra, 0)
        return max(round(extra / self.tokens_per_word), 0)

    def prefix(self, request_id: int) -> str:
        """Request k's unique words (see the module docstring)."""
        pool = self.words
        size = len(pool)
        x = (self.mult * request_id + self.offset) % size**self.prefix_words
        out = []
        for _ in range(self.prefix_words):
            x, digit = divmod(x, size)
            out.append(pool[digit])
        return " ".join(out)

    def render(self, request_id: int, body: str) -> tuple[str, tuple[ChatMessage, ...] | None]:
        """(prompt, messages): messages only for chat (or responses) with a system prompt."""
        user = LEAD
        if self.salt:
            user += " " + self.salt
        if self.prefix_words:
            user += " " + self.prefix(request_id)
        if body:
            user += " " + body
        if not self.system:
            return user, None
        if applies_chat_template(self.endpoint):
            system: ChatMessage = {"role": "system", "content": self.system}
            return user, (system, {"role": "user", "content": user})
        return f"{self.system} {user}", None


def make_plan(
    endpoint: Endpoint,
    words: tuple[str, ...],
    *,
    seed: int,
    unique_prefix: bool,
    shared_prefix_tokens: int,
    overhead: int = 0,
    tokens_per_word: float = 1.0,
    salt: int | None = None,
) -> PromptPlan:
    """A plan over a pool, its overhead still to be measured (`overhead`); salt: `new_salt`."""
    if len(words) < 2:
        raise ValueError("the word pool needs at least two one-token words")
    k = 0
    if unique_prefix:
        k = _digits_for(len(words))
    modulus = len(words) ** k
    rng = np.random.default_rng([seed % (1 << 64), 0x9F1])
    mult = int(rng.integers(1, 1 << 62)) % modulus or 1
    while math.gcd(mult, len(words)) != 1:
        mult += 1
    offset = int(rng.integers(0, 1 << 62)) % modulus
    system, n_system = "", 0
    if shared_prefix_tokens > 0:
        n_system = round((shared_prefix_tokens - 1) / tokens_per_word)
        system = " ".join([LEAD, *seeded_words(words, seed, n_system, salt=0x5157)])
    return PromptPlan(
        endpoint=endpoint,
        words=words,
        prefix_words=k,
        overhead=overhead,
        system=system,
        system_words=n_system,
        mult=mult,
        offset=offset,
        tokens_per_word=tokens_per_word,
        salt="" if salt is None else salt_text(words, salt),
    )


def _digits_for(pool_size: int) -> int:
    """Pool words needed for at least 1e9 distinct values."""
    return max(1, math.ceil(9 * math.log(10) / math.log(pool_size)))


def new_salt() -> int:
    """A run's salt: 63 random bits (not from the seed: two runs with one seed must differ)."""
    return secrets.randbits(63)


def salt_text(words: tuple[str, ...], salt: int) -> str:
    """The salt as pool words: its digits in base len(words), >= 1e9 distinct texts."""
    size = len(words)
    x = salt % size ** _digits_for(size)
    out = []
    for _ in range(_digits_for(size)):
        x, digit = divmod(x, size)
        out.append(words[digit])
    return " ".join(out)


def seeded_words(words: tuple[str, ...], seed: int, n: int, *, salt: int) -> list[str]:
    """`n` pool words drawn from (seed, salt)."""
    rng = np.random.default_rng([seed % (1 << 64), salt])
    return [words[i] for i in rng.integers(0, len(words), size=n).tolist()]


ROTATIONS: Final = 61
"""Distinct body start points; request k starts at a rotation picked from (seed, k)."""


class BodyText:
    """One seeded word sequence; `slice(k, m)` is m words of it, starting where request k starts."""

    def __init__(self, words: tuple[str, ...], seed: int, max_words: int) -> None:
        seq = seeded_words(words, seed, max_words + ROTATIONS, salt=0xB0D7)
        self._text = " ".join(seq)
        starts = [0]
        for word in seq:
            starts.append(starts[-1] + len(word) + 1)
        self._starts = starts
        self._seed = seed
        self.max_words = max_words

    def slice(self, request_id: int, m: int) -> str:
        """A substring of `m` words (m <= max_words): no per-word work on the engine's loop."""
        if m <= 0:
            return ""
        start = (request_id * 7919 + self._seed) % ROTATIONS
        return self._text[self._starts[start] : self._starts[start + m] - 1]
