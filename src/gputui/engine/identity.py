"""What the server says it is, parsed from each engine's own info endpoint (pure functions).

Engine, version, model, context limit and the settings that bound a knee; the GETs are in
`engine.identity_probe`.

Each engine exposes a different document (fixtures of each, with where they came from, in
tests/fixtures/real-servers/identity/):

- vLLM: `GET /version` (`version`); `GET /server_info?config_format=json` (only with
  `VLLM_SERVER_DEV_MODE=1`): `vllm_config.scheduler_config` `max_num_seqs` and
  `max_num_batched_tokens`, `cache_config` `num_gpu_blocks` and `block_size`, `model_config`
  `max_model_len` and `model`. Its /v1/models entry gives `max_model_len` without dev mode.
- llama.cpp's llama-server: `GET /props`: `default_generation_settings.n_ctx` (one slot's
  context), `total_slots` (its parallel sequences), `model_path`, `build_info` (its version).
- TGI: `GET /info`: `model_id`, `version`, `max_input_tokens` and `max_total_tokens` (1.x:
  `max_input_length`), `max_concurrent_requests`, and in 1.x-2.x `max_batch_total_tokens`,
  `max_batch_prefill_tokens`, `max_batch_size`.
- SGLang: `GET /server_info` (`/get_server_info` before 0.5): the server arguments
  (`context_length`, `max_running_requests`, `chunked_prefill_size`, `max_prefill_tokens`,
  `page_size`, `model_path`, `served_model_name`), the scheduler's `max_total_num_tokens` (its KV
  pool in tokens) and `max_req_input_len`, and `version`. It also holds the server's API key in
  clear: only the named fields are ever kept.

`settings` keeps every figure read under the engine's own name, so the snapshot says exactly what
the server was configured with; the common fields (`max_sequences`, `max_batch_tokens`,
`kv_blocks`) are those figures under one name each.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Final

from gputui.engine.context_limit import ContextLimit

Settings = dict[str, int | str]


@dataclass(frozen=True, slots=True)
class ServerIdentity:
    """The server's own account of itself; None wherever it did not say."""

    engine: str
    version: str | None = None
    model: str | None = None
    """The model as the server names what it loaded (a path or hub id)."""
    context_tokens: int | None = None
    """Input plus output of one request."""
    max_input_tokens: int | None = None
    """A separate bound on the input (TGI, SGLang)."""
    max_sequences: int | None = None
    """Sequences decoded together (vLLM max_num_seqs, SGLang max_running_requests, slots)."""
    max_batch_tokens: int | None = None
    """Tokens scheduled in one step (vLLM max_num_batched_tokens, SGLang chunked prefill)."""
    kv_blocks: int | None = None
    kv_tokens: int | None = None
    """The KV cache's capacity in tokens (SGLang max_total_num_tokens, vLLM blocks x size)."""
    settings: Settings = field(default_factory=dict)
    """Every figure read, under the engine's own name."""
    sources: tuple[str, ...] = ()
    """The endpoints that said it, e.g. ("/version", "/server_info")."""

    def context_limit(self) -> ContextLimit | None:
        """The limit the pre-flight checks against, with who said so."""
        if self.context_tokens is None and self.max_input_tokens is None:
            return None
        where = ", ".join(self.sources) or self.engine
        total = self.context_tokens
        if total is None:
            assert self.max_input_tokens is not None
            total = self.max_input_tokens + 1  # an input bound alone: at least one output token
        return ContextLimit(total, where, input_tokens=self.max_input_tokens)

    def merged(self, other: ServerIdentity) -> ServerIdentity:
        """This identity with `other`'s answers where this one had none."""
        return replace(
            self,
            version=self.version or other.version,
            model=self.model or other.model,
            context_tokens=self.context_tokens or other.context_tokens,
            max_input_tokens=self.max_input_tokens or other.max_input_tokens,
            max_sequences=self.max_sequences or other.max_sequences,
            max_batch_tokens=self.max_batch_tokens or other.max_batch_tokens,
            kv_blocks=self.kv_blocks or other.kv_blocks,
            kv_tokens=self.kv_tokens or other.kv_tokens,
            settings={**other.settings, **self.settings},
            sources=self.sources + tuple(s for s in other.sources if s not in self.sources),
        )


def _int(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value) if value > 0 else None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _pick(doc: Mapping[str, object], names: tuple[str, ...]) -> Settings:
    """The named figures present in `doc` (positive ints and non-empty strings only)."""
    out: Settings = {}
    for name in names:
        value = doc.get(name)
        number = _int(value)
        if number is not None:
            out[name] = number
        elif isinstance(value, str) and value:
            out[name] = value
    return out


def _first(settings: Settings, *names: str) -> int | None:
    for name in names:
        value = settings.get(name)
        if isinstance(value, int):
            return value
    return None


def vllm_identity(version_doc: object, server_info: object) -> ServerIdentity:
    """The /version and (dev mode) /server_info?config_format=json of vLLM; either may be None."""
    sources: list[str] = []
    version = None
    if isinstance(version_doc, dict):
        version = _str(version_doc.get("version"))
        sources.append("/version")
    settings: Settings = {}
    model = None
    config = server_info.get("vllm_config") if isinstance(server_info, dict) else None
    if isinstance(config, dict):
        sources.append("/server_info")
        parts = {k: config.get(k) for k in ("model_config", "scheduler_config", "cache_config")}
        model_config, scheduler, cache = (p if isinstance(p, dict) else {} for p in parts.values())
        settings.update(_pick(model_config, ("max_model_len",)))
        settings.update(_pick(scheduler, ("max_num_seqs", "max_num_batched_tokens")))
        settings.update(_pick(cache, ("num_gpu_blocks", "block_size")))
        model = _str(model_config.get("model"))
    blocks, size = _first(settings, "num_gpu_blocks"), _first(settings, "block_size")
    return ServerIdentity(
        engine="vllm",
        version=version,
        model=model,
        context_tokens=_first(settings, "max_model_len"),
        max_sequences=_first(settings, "max_num_seqs"),
        max_batch_tokens=_first(settings, "max_num_batched_tokens"),
        kv_blocks=blocks,
        kv_tokens=blocks * size if blocks and size else None,
        settings=settings,
        sources=tuple(sources),
    )


def llamacpp_identity(props: object) -> ServerIdentity | None:
    """llama-server's /props (None when it is not that document)."""
    if not isinstance(props, dict) or "default_generation_settings" not in props:
        return None
    generation = props.get("default_generation_settings")
    settings = _pick(props, ("total_slots", "build_info"))
    if isinstance(generation, dict):
        settings.update(_pick(generation, ("n_ctx",)))
    return ServerIdentity(
        engine="llamacpp",
        version=_str(props.get("build_info")),
        model=_str(props.get("model_path")) or _str(props.get("model_alias")),
        context_tokens=_first(settings, "n_ctx"),
        max_sequences=_first(settings, "total_slots"),
        settings=settings,
        sources=("/props",),
    )


_TGI_FIGURES: Final = (
    "max_input_tokens",
    "max_input_length",
    "max_total_tokens",
    "max_concurrent_requests",
    "max_batch_total_tokens",
    "max_batch_prefill_tokens",
    "max_batch_size",
    "max_client_batch_size",
    "max_best_of",
    "max_waiting_tokens",
)


def tgi_identity(info: object) -> ServerIdentity | None:
    """TGI's /info (None when it is not that document: it names a `model_id` and a router)."""
    if not isinstance(info, dict) or "model_id" not in info or "max_total_tokens" not in info:
        return None
    settings = _pick(info, _TGI_FIGURES)
    return ServerIdentity(
        engine="tgi",
        version=_str(info.get("version")),
        model=_str(info.get("model_id")),
        context_tokens=_first(settings, "max_total_tokens"),
        max_input_tokens=_first(settings, "max_input_tokens", "max_input_length"),
        max_sequences=_first(settings, "max_batch_size"),
        max_batch_tokens=_first(settings, "max_batch_prefill_tokens"),
        kv_tokens=_first(settings, "max_batch_total_tokens"),
        settings=settings,
        sources=("/info",),
    )


_SGLANG_FIGURES: Final = (
    "context_length",
    "max_running_requests",
    "chunked_prefill_size",
    "max_prefill_tokens",
    "max_total_num_tokens",
    "max_req_input_len",
    "page_size",
    "schedule_policy",
    "tp_size",
    "dp_size",
)


def sglang_identity(info: object, path: str = "/server_info") -> ServerIdentity | None:
    """SGLang's /server_info or /get_server_info (None when it is not that document)."""
    if not isinstance(info, dict) or "max_total_num_tokens" not in info:
        return None
    settings = _pick(info, _SGLANG_FIGURES)
    served = info.get("served_model_name")
    return ServerIdentity(
        engine="sglang",
        version=_str(info.get("version")),
        model=_str(info.get("model_path")) or _str(served),
        context_tokens=_first(settings, "context_length"),
        max_input_tokens=_first(settings, "max_req_input_len"),
        max_sequences=_first(settings, "max_running_requests"),
        max_batch_tokens=_first(settings, "chunked_prefill_size", "max_prefill_tokens"),
        kv_tokens=_first(settings, "max_total_num_tokens"),
        settings=settings,
        sources=(path,),
    )


def describe_server(identity: ServerIdentity | None, context: ContextLimit | None) -> str | None:
    """One line for `gputui run`'s header: the engine, version, limit and settings it stated."""
    if identity is None and context is None:
        return None
    parts: list[str] = []
    if identity is not None:
        parts.append(" ".join(p for p in (identity.engine, identity.version) if p))
    if context is not None:
        bound = f", input at most {context.input_tokens}" if context.input_tokens else ""
        parts.append(f"context {context.tokens} tokens{bound} ({context.source})")
    if identity is not None and identity.settings:
        figures = ", ".join(
            f"{k} {v}" for k, v in identity.settings.items() if k not in _CONTEXT_NAMES
        )
        if figures:
            parts.append(f"{figures} ({', '.join(identity.sources)})")
    return "server " + "; ".join(parts)


_CONTEXT_NAMES: Final = frozenset(
    {
        "max_model_len",
        "n_ctx",
        "max_total_tokens",
        "max_input_tokens",
        "max_input_length",
        "context_length",
        "max_req_input_len",
        "build_info",
    }
)
