"""How many tokens each SSE event carried, decided once a request has finished (never per event).

Why: speculative decoding (EAGLE, MTP), `--stream-interval` and some engines put several tokens in
one event (docs/domain.md section 7). One stamp per event then makes ITL per chunk. The reader keeps
each token event's stamp and, cheaply, what is needed to count it later; `event_counts` decides,
in this order (the method is recorded on the request as `event_tokens_method`):

- `continuous_usage`: the server put a running `usage.completion_tokens` on every token event
  (vLLM's `stream_options.continuous_usage_stats`); an event's tokens are the difference from the
  previous one. An event the count did not move (text held back by the detokenizer) is merged into
  the next one: its stamp is dropped.
- `events`: one token per event, when the usage total equals the number of events (then exact) or
  when nothing can count them (then the step says so through this method).
- `tokenizer`: the event texts are counted by the server's /tokenize (8 at a time for the whole
  client) or a local tokenizer.json, after the request finished and before its record is handed
  on; the load controller counts on a task of its own, so a closed-loop user's next request does
  not wait for it (it did before: Messages at 4 streams read 171 output tok/s against chat's 254
  on vLLM's CPU build), but the /tokenize calls still load the server, which is why continuous
  usage is asked for where the server honours it. Each distinct text is sent once (a bounded
  cache; a text already on its way is waited for, not sent again); the counts are then
  reconciled with the usage total (the tokens beyond one per event are shared in proportion to what
  the tokenizer found), since a text cut at an event boundary can tokenize differently.
- `usage_spread`: the usage total says some events carried several tokens but nothing can count
  them (no continuous usage, no /tokenize, no --tokenizer, or the counter failed): the total is
  spread evenly over the events (`spread_usage`). The mean ITL is then the true per-token mean
  whenever the usage is right (its gaps sum to the decode time over total - 1 tokens); single gaps
  are as even as the spread assumes.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol, cast

import numpy as np
import numpy.typing as npt
import orjson

from gputui.engine.http import ConnectionPool
from gputui.jsontypes import JsonValue

METHOD_CONTINUOUS: Final = "continuous_usage"
METHOD_EVENTS: Final = "events"
METHOD_TOKENIZER: Final = "tokenizer"
METHOD_USAGE_SPREAD: Final = "usage_spread"

_CACHE_LIMIT: Final = 100_000
_PARALLEL: Final = 8
"""/tokenize requests in flight at once, for all the finished requests being counted."""
TOKENIZE_TIMEOUT_S: Final = 10.0
"""A /tokenize that has not answered by then never will: counting stops (the step waits on it)."""

Counts = npt.NDArray[np.int32]


class _Encoding(Protocol):
    """One text's encoding from `tokenizers`, as far as counting goes."""

    @property
    def ids(self) -> list[int]: ...


class _BatchTokenizer(Protocol):
    """The `tokenizers.Tokenizer` method the counter calls (the package is optional)."""

    def encode_batch(self, texts: list[str], add_special_tokens: bool) -> list[_Encoding]: ...


@dataclass(frozen=True, slots=True)
class EventCounterSpec:
    """A picklable recipe for the counter of event texts (built in the engine process)."""

    kind: Literal["server", "tokenizer"]
    dialect: str = "vllm"
    """For `server`: the /tokenize request shape (vllm, sglang and the sim; llamacpp; tgi)."""
    tokenize_path: str = "/tokenize"
    tokenizer_file: str = ""
    """For `tokenizer`: a tokenizer.json."""


class EventCounter:
    """Counts event texts with the server's /tokenize or a local tokenizer (cached per text)."""

    def __init__(
        self,
        spec: EventCounterSpec,
        pool: ConnectionPool | None,
        host: str,
        model: str,
        *,
        timeout_s: float = TOKENIZE_TIMEOUT_S,
    ) -> None:
        self._spec = spec
        self._timeout_s = timeout_s
        self._pool = pool
        self._host = host
        self._model = model
        self._cache: dict[str, int] = {}
        self._pending: dict[str, asyncio.Future[int | None]] = {}
        """Texts on their way through /tokenize: a second request counting one waits for it."""
        self._slots = asyncio.Semaphore(_PARALLEL)
        self._tokenizer: _BatchTokenizer | None = None
        self.broken: str | None = None
        """Why counting stopped working (then every later request counts one token per event)."""
        if spec.kind == "tokenizer":
            try:
                tokenizers = importlib.import_module("tokenizers")
                self._tokenizer = tokenizers.Tokenizer.from_file(spec.tokenizer_file)
            except Exception as exc:  # noqa: BLE001 (tokenizers raises bare Exception subclasses)
                self.broken = f"tokenizer {spec.tokenizer_file}: {exc}"

    async def count(self, texts: Sequence[str]) -> list[int] | None:
        """Tokens of each text (no special tokens); None when counting failed."""
        if self.broken is not None:
            return None
        cache = self._cache
        known = {t: cache[t] for t in texts if t in cache}
        missing = [t for t in dict.fromkeys(texts) if t not in known]
        if missing:
            if self._tokenizer is not None:
                encoded = self._tokenizer.encode_batch(missing, add_special_tokens=False)
                found: list[int | None] = [len(e.ids) for e in encoded]
            else:
                found = list(await asyncio.gather(*(self._counted(t) for t in missing)))
            if any(n is None for n in found):
                return None
            fresh = dict(zip(missing, cast("list[int]", found), strict=True))
            if len(cache) + len(fresh) > _CACHE_LIMIT:
                cache.clear()
            cache.update(fresh)
            known.update(fresh)
        return [known[t] for t in texts]

    async def _counted(self, text: str) -> int | None:
        """One text through /tokenize, shared by every request counting it at the same time.

        At most `_PARALLEL` are in flight for the whole client, however many requests count.
        """
        pending = self._pending.get(text)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[int | None] = asyncio.get_running_loop().create_future()
        self._pending[text] = future
        try:
            async with self._slots:
                found = await self._tokenize(text) if self.broken is None else None
            future.set_result(found)
            return found
        finally:
            del self._pending[text]
            if not future.done():  # cancelled: a request waiting on it counts no further
                future.set_result(None)

    async def _tokenize(self, text: str) -> int | None:
        pool = self._pool
        assert pool is not None
        dialect = self._spec.dialect
        payload: dict[str, object]
        if dialect == "llamacpp":
            payload = {"content": text, "add_special": False}
        elif dialect == "tgi":
            payload = {"inputs": text, "add_special_tokens": False}
        else:
            payload = {"model": self._model, "prompt": text, "add_special_tokens": False}
        body = orjson.dumps(payload)
        request = (
            f"POST {self._spec.tokenize_path} HTTP/1.1\r\nHost: {self._host}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode("latin-1") + body
        try:
            connection, _, _ = await pool.acquire()
        except (OSError, TimeoutError) as exc:
            self.broken = f"/tokenize: {exc}"
            return None
        exchange = connection.start(request, None)
        try:
            await asyncio.wait_for(asyncio.shield(exchange.done), self._timeout_s)
        except TimeoutError:
            exchange.abort("timeout", "")
            pool.release(connection, reusable=False)
            self.broken = f"/tokenize did not answer in {self._timeout_s:g} s"
            return None
        pool.release(connection, reusable=exchange.keep_alive and not exchange.error)
        if exchange.error or exchange.status_code != 200:
            self.broken = f"/tokenize answered {exchange.error or exchange.status_code}"
            return None
        try:
            reply = orjson.loads(bytes(exchange.body))
        except orjson.JSONDecodeError:
            self.broken = "/tokenize did not answer JSON"
            return None
        if isinstance(reply, list):
            return len(reply)
        if isinstance(reply, dict):
            if type(reply.get("count")) is int:
                return int(reply["count"])
            if isinstance(reply.get("tokens"), list):
                return len(reply["tokens"])
        self.broken = "/tokenize answered neither a count nor a token list"
        return None

    def close(self) -> None:
        """Close the /tokenize connections."""
        if self._pool is not None:
            self._pool.close()


def counts_from_running(running: Sequence[JsonValue], n_events: int) -> Counts | None:
    """Per-event tokens from the running `completion_tokens` of each token event, or None.

    None when any token event lacked an int count or the count went backwards.
    """
    if len(running) != n_events or n_events == 0:
        return None
    try:  # one C loop; a None or a string among the counts raises
        cumulative = np.fromiter(running, dtype=np.int64, count=n_events)
    except (TypeError, ValueError):
        return None
    counts = np.diff(cumulative, prepend=0)
    if (counts < 0).any():
        return None
    return counts.astype(np.int32)


def reconcile(counts: Sequence[int], total: int | None) -> Counts:
    """Tokenizer counts made to sum to the usage total, each event keeping at least one token.

    The tokens beyond one per event go to the events in proportion to their own extra tokens
    (largest remainder); with no usage total, the tokenizer's counts stand (at least 1 each).
    """
    found = np.maximum(np.asarray(counts, dtype=np.int64), 1)
    n = int(found.size)
    if total is None or int(found.sum()) == total or total < n:
        return found.astype(np.int32)
    extra = found - 1
    budget = total - n
    weights = extra if extra.sum() > 0 else np.ones(n, dtype=np.int64)
    share = weights * budget / weights.sum()
    base = np.floor(share).astype(np.int64)
    left = budget - int(base.sum())
    if left:
        order = np.argsort(-(share - base), kind="stable")[:left]
        base[order] += 1
    result: Counts = (base + 1).astype(np.int32)
    return result


def spread_usage(n_events: int, total: int) -> Counts:
    """`total` tokens over `n_events` events, as evenly as integers allow (each at least one).

    The remainder goes to the earliest events (largest remainder on equal shares, stable order).
    """
    return reconcile([1] * n_events, total)


CONTINUOUS_USAGE_BACKENDS: Final = frozenset({"vllm", "gputui-sim"})
"""Servers known to honour `stream_options.continuous_usage_stats` (another may reject it)."""
_TOKENIZE_DIALECTS: Final = {
    "vllm": "vllm",
    "sglang": "vllm",
    "gputui-sim": "vllm",
    "llamacpp": "llamacpp",
}


def stream_counting(backend: str | None, tokenizer: str | None = None) -> dict[str, Any]:
    """`ClientConfig` fields for counting the tokens of each event against `backend`.

    Continuous usage where the server honours it; a counter of event texts otherwise: the
    server's /tokenize where it has one, else a local tokenizer.json when given, else none.
    """
    counter: EventCounterSpec | None = None
    if backend in _TOKENIZE_DIALECTS:
        counter = EventCounterSpec(kind="server", dialect=_TOKENIZE_DIALECTS[backend])
    elif tokenizer:
        counter = EventCounterSpec(kind="tokenizer", tokenizer_file=tokenizer)
    return {"continuous_usage": backend in CONTINUOUS_USAGE_BACKENDS, "event_counter": counter}
