"""Token counters: the server's /tokenize, a local tokenizer.json, or an approximation.

Contract: a `TokenCounter` counts a prompt as the server will bill it (`count`: a completions
prompt, special tokens included; `count_chat`: chat messages with the template, or None when it
cannot). They are used in the parent before a run (blocking httpx), never on the engine's loop.

- `ServerCounter` speaks the three /tokenize dialects (docs/reference.md §5): vLLM, SGLang and the
  simulator take `{"model", "prompt"}` (or `"messages"`) and answer `{"count", "tokens"}`; llama.cpp
  takes `{"content", "add_special"}` and answers `{"tokens": [...]}`; TGI takes `{"inputs"}` and
  answers a list. `detect_server_counter` tries them in that order and accepts one only if it counts
  "hello world" as at least two tokens (a server that ignores the field would say 0).
- `LocalCounter` reads a tokenizer.json through the optional `tokenizers` package
  (`pip install gputui[tokenizers]`); it knows no chat template.
- `WordCounter` assumes one token per whitespace word: the approximation.
`usage_probe` asks the server itself (one non-streamed request, max_tokens=1) and reads
`usage.prompt_tokens`: the ground truth for a chat template's overhead when no counter knows it.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal, Protocol

import httpx

from gputui.engine.messages_api import ANTHROPIC_VERSION, messages_body
from gputui.engine.messages_api import chat_usage as messages_usage
from gputui.engine.target import Endpoint, Target
from gputui.engine.workload import ChatMessage
from gputui.errors import UsageError

CounterMode = Literal["auto", "server", "tokenizer", "approximate"]
Messages = Sequence[ChatMessage]

METHOD_SERVER = "server /tokenize (exact)"
METHOD_TOKENIZER = "tokenizer.json (exact)"
METHOD_APPROXIMATE = "approximate"


class CountFailed(Exception):
    """A count that could not be made (HTTP error, unexpected reply)."""


class TokenCounter(Protocol):
    """Counts tokens as the server bills them."""

    method: str
    exact: bool

    def count(self, text: str) -> int:
        """Tokens of a completions prompt (special tokens included)."""
        ...

    def count_chat(self, messages: Messages) -> int | None:
        """Tokens of chat messages with the template, or None when this counter cannot."""
        ...


class ServerCounter:
    """The server's own /tokenize."""

    exact = True

    def __init__(self, http: httpx.Client, url: str, dialect: str, model: str) -> None:
        self.method = METHOD_SERVER
        self.dialect = dialect
        self._http = http
        self._url = url
        self._model = model
        self._chat_ok: bool | None = None if dialect == "vllm" else False

    def _post(self, payload: Mapping[str, object]) -> int:
        try:
            response = self._http.post(self._url, json=payload)
        except httpx.HTTPError as exc:
            raise CountFailed(f"{self._url}: {exc}") from None
        if response.status_code != 200:
            raise CountFailed(f"{self._url} answered HTTP {response.status_code}")
        try:
            reply = response.json()
        except ValueError:
            raise CountFailed(f"{self._url} did not answer JSON") from None
        if isinstance(reply, list):
            return len(reply)
        if isinstance(reply, dict):
            count = reply.get("count")
            if isinstance(count, int):
                return count
            tokens = reply.get("tokens")
            if isinstance(tokens, list):
                return len(tokens)
        raise CountFailed(f"{self._url} answered neither a count nor a token list")

    def count(self, text: str) -> int:
        if self.dialect == "llamacpp":
            return self._post({"content": text, "add_special": True})
        if self.dialect == "tgi":
            return self._post({"inputs": text})
        return self._post({"model": self._model, "prompt": text, "add_special_tokens": True})

    def count_chat(self, messages: Messages) -> int | None:
        if self._chat_ok is False:
            return None
        try:
            n = self._post({"model": self._model, "messages": list(messages)})
        except CountFailed:
            self._chat_ok = False
            return None
        self._chat_ok = True
        return n


def detect_server_counter(http: httpx.Client, target: Target, model: str) -> ServerCounter | None:
    """The server's /tokenize in the first dialect that counts sensibly, or None."""
    url = f"{target.base_url}{target.root_prefix}/tokenize"
    for dialect in ("vllm", "llamacpp", "tgi"):
        counter = ServerCounter(http, url, dialect, model)
        try:
            if counter.count("hello world") >= 2:
                return counter
        except CountFailed:
            continue
    return None


class _Encoding(Protocol):
    """What `tokenizers.Tokenizer.encode` returns, as far as counting goes."""

    @property
    def ids(self) -> list[int]: ...


class _Tokenizer(Protocol):
    """The `tokenizers.Tokenizer` method counting uses (the package is optional, found by name)."""

    def encode(self, text: str, add_special_tokens: bool) -> _Encoding: ...


class LocalCounter:
    """A tokenizer.json read by the `tokenizers` package (no chat template)."""

    exact = True

    def __init__(self, path: Path) -> None:
        try:  # optional: imported by name so that type checking never needs it installed
            tokenizers = importlib.import_module("tokenizers")
        except ImportError:
            raise UsageError(
                "--tokenizer needs the optional tokenizers package: "
                "pip install 'gputui[tokenizers]'"
            ) from None
        try:
            self._tokenizer: _Tokenizer = tokenizers.Tokenizer.from_file(str(path))
        except Exception as exc:  # noqa: BLE001 (tokenizers raises bare Exception subclasses)
            raise UsageError(f"--tokenizer {path}: not a tokenizer.json ({exc})") from None
        self.method = METHOD_TOKENIZER
        self.path = path

    def count(self, text: str) -> int:
        return len(self._tokenizer.encode(text, add_special_tokens=True).ids)

    def count_chat(self, messages: Messages) -> int | None:  # noqa: ARG002 (no template here)
        return None


class WordCounter:
    """One token per whitespace-separated word: an approximation, and said to be one."""

    exact = False
    method = METHOD_APPROXIMATE

    def count(self, text: str) -> int:
        return len(text.split())

    def count_chat(self, messages: Messages) -> int | None:  # noqa: ARG002 (no template here)
        return None


def open_counter(
    mode: CounterMode,
    http: httpx.Client,
    target: Target,
    model: str,
    tokenizer: Path | None,
) -> tuple[TokenCounter, str | None]:
    """The counter to use and, when `auto` fell back, why (one line for the user)."""
    if mode in ("auto", "server"):
        server = detect_server_counter(http, target, model)
        if server is not None:
            return server, None
        if mode == "server":
            raise UsageError(
                f"--token-counter server: {target.base_url} has no usable /tokenize "
                "(tried the vLLM, llama.cpp and TGI request shapes)"
            )
    if mode == "tokenizer" and tokenizer is None:
        raise UsageError("--token-counter tokenizer needs --tokenizer FILE (a tokenizer.json)")
    if tokenizer is not None and mode != "approximate":
        note = (
            None
            if mode == "tokenizer"
            else "the server has no /tokenize: counting with --tokenizer"
        )
        return LocalCounter(tokenizer), note
    if mode == "approximate":
        return WordCounter(), None
    return WordCounter(), (
        "the server has no /tokenize and no --tokenizer was given: input lengths are approximate"
    )


def usage_probe(
    http: httpx.Client,
    target: Target,
    model: str,
    endpoint: Endpoint,
    prompt: str,
    messages: Messages | None,
) -> int | None:
    """`usage.prompt_tokens` of one real, non-streamed request with max_tokens=1 (None if none).

    The Responses API names them `input` and `max_output_tokens`, and `usage.input_tokens`;
    Anthropic's Messages API `usage.input_tokens` plus its cache reads and writes.
    """
    if endpoint == "messages":
        return _messages_usage_probe(http, target, model, prompt, messages)
    body: dict[str, object] = {"model": model, "max_tokens": 1, "stream": False}
    if endpoint == "responses":
        body = {"model": model, "max_output_tokens": 1, "stream": False}
        body["input"] = list(messages) if messages else prompt
    elif endpoint == "chat":
        body["messages"] = list(messages) if messages else [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    try:
        response = http.post(target.base_url + target.endpoint_path(endpoint), json=body)
        usage = response.json().get("usage") if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    key = "input_tokens" if endpoint == "responses" else "prompt_tokens"
    tokens = usage.get(key) if isinstance(usage, dict) else None
    return tokens if isinstance(tokens, int) and tokens > 0 else None


def _messages_usage_probe(
    http: httpx.Client, target: Target, model: str, prompt: str, messages: Messages | None
) -> int | None:
    """The whole input of one non-streamed /v1/messages request (see `usage_probe`)."""
    body = messages_body(model, prompt, 1, messages, ({"stream": False},))
    headers = {"content-type": "application/json", "anthropic-version": ANTHROPIC_VERSION}
    try:
        response = http.post(
            target.base_url + target.endpoint_path("messages"), content=body, headers=headers
        )
        usage = response.json().get("usage") if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    tokens = messages_usage(usage).get("prompt_tokens") if isinstance(usage, dict) else None
    return tokens if isinstance(tokens, int) and tokens > 0 else None
