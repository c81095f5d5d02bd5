"""Calibration: which words are one token, what a prompt costs beyond its words, and a check.

Contract (runs in the parent, before the engine starts; blocking I/O through the counter):
1. `usable_words` keeps the pool words that the counter bills as one token after a space, testing
   groups of 64 at once and splitting a group only when it is off (a handful of /tokenize calls).
2. `calibrate` renders a sample request and derives the plan's `overhead` (special tokens, chat
   template, lead words) as measured tokens minus counted words. The measurement comes from the
   server's /tokenize when it can count the request as sent (a chat request with its template);
   otherwise from one usage probe (the server's own bill); otherwise from the counter's view of the
   bare prompt, and the method then says "approximate". With no tokenizer at all, two usage probes
   of different lengths measure tokens per pool word as well (words may be several tokens), so
   even the approximation lands close.
3. `verify` re-counts sample requests built exactly as the run will build them (shortest and
   longest length included) and reports how many match; any mismatch makes the method approximate.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gputui.engine.target import Endpoint, applies_chat_template
from gputui.workloads.counters import (
    METHOD_APPROXIMATE,
    CountFailed,
    Messages,
    ServerCounter,
    TokenCounter,
)
from gputui.workloads.prompts import LEAD, WORDS, BodyText, PromptPlan, make_plan

Probe = Callable[[str, Messages | None], int | None]
"""(prompt, messages) -> the server's usage.prompt_tokens for that request, or None."""

_SAMPLE_WORDS = 48


def usable_words(counter: TokenCounter, words: Sequence[str] = WORDS) -> tuple[str, ...]:
    """The words this counter bills as exactly one token after a space, in pool order."""
    if not counter.exact:
        return tuple(words)
    base = counter.count(LEAD)
    good: set[str] = set()

    def check(group: Sequence[str]) -> None:
        if counter.count(LEAD + " " + " ".join(group)) - base == len(group):
            good.update(group)
        elif len(group) > 1:
            half = len(group) // 2
            check(group[:half])
            check(group[half:])

    for i in range(0, len(words), 64):
        check(words[i : i + 64])
    return tuple(w for w in words if w in good)


@dataclass(frozen=True, slots=True)
class Calibration:
    """The plan to use, and how far its lengths can be trusted."""

    plan: PromptPlan
    method: str
    exact: bool
    chat_form: bool
    """True when the counter counts the request as sent (chat template included)."""
    form_overhead: int
    """Overhead in the form the counter counts (for `verify`)."""
    notes: tuple[str, ...] = ()


def count_form(
    counter: TokenCounter, endpoint: Endpoint, prompt: str, messages: Messages | None
) -> int | None:
    """Tokens of a rendered request as sent (None: a chat request this counter cannot count)."""
    if applies_chat_template(endpoint):
        return counter.count_chat(list(messages or [{"role": "user", "content": prompt}]))
    return counter.count(prompt)


def calibrate(
    counter: TokenCounter,
    endpoint: Endpoint,
    *,
    seed: int,
    unique_prefix: bool,
    shared_prefix_tokens: int,
    probe: Probe | None,
) -> Calibration:
    """Measure the plan's overhead (see the module docstring); raises CountFailed."""
    words = usable_words(counter)
    if len(words) < 16:
        raise CountFailed(f"only {len(words)} pool words are one token each for this tokenizer")
    plan = make_plan(
        endpoint,
        words,
        seed=seed,
        unique_prefix=unique_prefix,
        shared_prefix_tokens=shared_prefix_tokens,
    )
    body = BodyText(words, seed, _SAMPLE_WORDS)
    prompt, messages = plan.render(0, body.slice(0, _SAMPLE_WORDS))
    counted = plan.system_words + plan.prefix_words + _SAMPLE_WORDS
    as_sent = count_form(counter, endpoint, prompt, messages)
    bare = counter.count(_completions_text(plan, prompt))
    chat_form = as_sent is not None
    form_overhead = (as_sent if as_sent is not None else bare) - counted
    notes: list[str] = []
    what = "chat template" if applies_chat_template(endpoint) else "special-token"
    guess = f"{METHOD_APPROXIMATE} (one token per common word assumed"
    tokens_per_word = 1.0
    if isinstance(counter, ServerCounter) and as_sent is not None:
        overhead, method, exact = as_sent - counted, counter.method, True
    elif (billed := probe(prompt, messages) if probe is not None else None) is not None:
        overhead, exact = billed - counted, counter.exact
        if not counter.exact and probe is not None:
            tokens_per_word = _slope(plan, seed, billed, probe)
            overhead = billed - round(counted * tokens_per_word)
            method = f"{METHOD_APPROXIMATE} ({tokens_per_word:.2f} tokens per word and the {what} "
            method += "overhead from two usage probes)"
        elif as_sent == billed:
            method = counter.method
        else:
            method = f"{counter.method.removesuffix(')')}; {what} overhead from a usage probe)"
    elif as_sent is not None:
        overhead, exact = as_sent - counted, counter.exact
        method = counter.method if counter.exact else f"{guess})"
    else:
        overhead, exact = bare - counted, False
        method = f"{METHOD_APPROXIMATE} (chat template not counted)"
        notes.append("the chat template's tokens are not counted: prompts run longer than asked")
    plan = make_plan(
        endpoint,
        words,
        seed=seed,
        unique_prefix=unique_prefix,
        shared_prefix_tokens=shared_prefix_tokens,
        overhead=overhead,
        tokens_per_word=tokens_per_word,
    )
    return Calibration(plan, method, exact, chat_form, form_overhead, tuple(notes))


_LONG_SAMPLE_WORDS = 240


def _slope(plan: PromptPlan, seed: int, billed_short: int, probe: Probe) -> float:
    """Tokens per pool word, from a second, longer probe (1.0 when it cannot be measured)."""
    body = BodyText(plan.words, seed, _LONG_SAMPLE_WORDS)
    prompt, messages = plan.render(0, body.slice(0, _LONG_SAMPLE_WORDS))
    billed_long = probe(prompt, messages)
    if billed_long is None or billed_long <= billed_short:
        return 1.0
    return (billed_long - billed_short) / (_LONG_SAMPLE_WORDS - _SAMPLE_WORDS)


def _completions_text(plan: PromptPlan, prompt: str) -> str:
    """The request as one completions prompt (for a chat plan: system + user)."""
    return (
        f"{plan.system} {prompt}"
        if plan.system and applies_chat_template(plan.endpoint)
        else prompt
    )


@dataclass(frozen=True, slots=True)
class Check:
    """How many calibration prompts counted exactly as planned."""

    matched: int
    total: int
    worst: int
    """The largest |counted - planned| in tokens."""

    @property
    def ok(self) -> bool:
        """Every sample matched."""
        return self.matched == self.total


def verify(
    counter: TokenCounter,
    calibration: Calibration,
    samples: Sequence[tuple[str, Messages | None, int]],
) -> Check | None:
    """Re-count (prompt, messages, planned words) samples; None when the counter is not exact."""
    if not counter.exact:
        return None
    plan = calibration.plan
    matched, worst = 0, 0
    for prompt, messages, n_words in samples:
        try:
            if calibration.chat_form:
                got = count_form(counter, plan.endpoint, prompt, messages)
            else:
                got = counter.count(_completions_text(plan, prompt))
        except CountFailed:
            got = None
        if got is None:
            worst = max(worst, 1)
            continue
        error = abs(got - (calibration.form_overhead + n_words))
        matched += error == 0
        worst = max(worst, error)
    return Check(matched, len(samples), worst)
