"""The server's context length (`max_model_len`), read before any load, and the check against it.

Contract: `context_limit(entry, ...)` reads the limit from what preflight already fetched: the
model's entry in /v1/models (`max_model_len`: vLLM, SGLang, the simulator; `meta.n_ctx`:
llama-server) and the server's own identity (engine.identity: llama.cpp /props `n_ctx`, TGI /info
`max_total_tokens` and `max_input_tokens`, SGLang /server_info `context_length` and
`max_req_input_len`). It returns None where no server says.
`check_context(limit, need)` raises `ContextTooLong` (one line, exit 2) when the longest request
of the workload (its longest input plus its longest output, the whole history for the last turn
of a conversation) would not fit: vLLM answers such requests HTTP 400 (input too long) or cuts
them short with a 200 (input + max_tokens over the limit), and neither measures what was asked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from gputui.errors import UsageError


class ServerIdentityLike(Protocol):
    """What `context_limit` needs of an `engine.identity.ServerIdentity` (which imports this)."""

    @property
    def context_tokens(self) -> int | None:
        """The total the server states (None: it states an input bound only, or nothing)."""
        ...

    def context_limit(self) -> ContextLimit | None:
        """The limit the server itself states."""
        ...


class ContextTooLong(UsageError):
    """The workload asks for more tokens than the server's context holds."""


@dataclass(frozen=True, slots=True)
class ContextLimit:
    """How many tokens (input + output) one request may hold, and who said so."""

    tokens: int
    source: str
    """e.g. "/v1/models max_model_len", "/props n_ctx"."""
    input_tokens: int | None = None
    """A separate bound on the input alone (TGI `max_input_tokens`, SGLang `max_req_input_len`)."""


@dataclass(frozen=True, slots=True)
class ContextNeed:
    """The longest request a workload sends, in tokens."""

    input_tokens: int
    output_tokens: int
    turns: int = 1
    """Multi-turn: the last turn re-sends every earlier input and answer."""
    what: str = ""
    """Where the lengths come from (e.g. "--input-tokens 4000 --output-tokens 128")."""

    @property
    def total(self) -> int:
        """Tokens the longest request holds: every turn's input and output."""
        return self.turns * (self.input_tokens + self.output_tokens)

    @property
    def longest_input(self) -> int:
        """The input of the longest request: the last turn re-sends every earlier turn."""
        return self.total - self.output_tokens


def _positive_int(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value) if value > 0 else None


def limit_from_entry(entry: Mapping[str, object]) -> ContextLimit | None:
    """The limit a /v1/models entry states (vLLM/SGLang `max_model_len`, llama.cpp `meta.n_ctx`)."""
    tokens = _positive_int(entry.get("max_model_len"))
    if tokens is not None:
        return ContextLimit(tokens, "/v1/models max_model_len")
    meta = entry.get("meta")
    if isinstance(meta, dict):
        tokens = _positive_int(meta.get("n_ctx"))
        if tokens is not None:
            return ContextLimit(tokens, "/v1/models meta.n_ctx")
    return None


def limit_from_props(props: object) -> ContextLimit | None:
    """llama-server's /props: `default_generation_settings.n_ctx` (the context of one slot)."""
    if not isinstance(props, dict):
        return None
    settings = props.get("default_generation_settings")
    tokens = _positive_int(settings.get("n_ctx")) if isinstance(settings, dict) else None
    return ContextLimit(tokens, "/props n_ctx") if tokens is not None else None


def context_limit(
    payload: object, model: str, identity: ServerIdentityLike | None
) -> ContextLimit | None:
    """The served model's context length (see the module contract); None when nobody says.

    The /v1/models entry and the server's own identity may both say: the smaller total counts,
    and an input bound comes from the identity.
    """
    listed: ContextLimit | None = None
    entries = payload.get("data") if isinstance(payload, dict) else None
    for entry in entries if isinstance(entries, list) else ():
        if isinstance(entry, dict) and str(entry.get("id")) == model:
            listed = limit_from_entry(entry)
            if listed is not None:
                break
    own = identity.context_limit() if identity is not None else None
    if listed is None or own is None or identity is None:
        return listed or own
    if identity.context_tokens is not None and own.tokens < listed.tokens:
        return own
    return (
        ContextLimit(listed.tokens, listed.source, own.input_tokens) if own.input_tokens else listed
    )


def check_context(limit: ContextLimit | None, need: ContextNeed | None) -> None:
    """Raise ContextTooLong when the longest request would not fit (nothing known: no check)."""
    if limit is None or need is None:
        return
    turns = f" over {need.turns} turns (each re-sends the history)" if need.turns > 1 else ""
    what = f" ({need.what})" if need.what else ""
    if limit.input_tokens is not None and need.longest_input > limit.input_tokens:
        raise ContextTooLong(
            f"the longest request's input is {need.longest_input} tokens{turns}{what}, over the "
            f"server's input limit of {limit.input_tokens} tokens ({limit.source}); shorten "
            "the input"
        )
    if need.total <= limit.tokens:
        return
    raise ContextTooLong(
        f"the longest request needs {need.total} tokens: input {need.input_tokens} + output "
        f"{need.output_tokens}{turns}{what}, over the server's context of {limit.tokens} tokens "
        f"({limit.source}); shorten the input or the output"
    )
