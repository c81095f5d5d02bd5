"""Which inference server is at the target: vLLM, SGLang, TGI, llama.cpp, TensorRT-LLM or other.

Contract: `detect_backend(server_header, models_payload, metrics_text)` is a pure function of what
preflight saw, and always returns a `Backend`: one of `BACKENDS` (or `gputui-sim`), with the
evidence that decided it, so the TUI header and the snapshot's `target.backend` never show a guess
without its reason. Evidence, strongest first:

1. `/v1/models` `owned_by`, when it is a value a server writes about itself (vLLM `vllm`, SGLang
   `sglang`, llama.cpp `llamacpp`, trtllm-serve `tensorrt_llm`, the simulator `gputui-sim`). This
   outranks /metrics because the simulator deliberately exposes vLLM's metric names.
2. `/metrics` names: a server's own prefix (`vllm:`, `sglang:`, `llamacpp:`, `tgi_`,
   `nv_trt_llm_`/`trtllm_`); the prefix table is telemetry's, so both agree on every scrape.
3. The HTTP `Server` header (`llama.cpp`); uvicorn fronts most Python servers and says nothing.
4. Otherwise `openai-compatible`: it spoke the protocol, and that is all we know (llama-cpp-python,
   `transformers serve`, gateways).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

from gputui.telemetry.server_metrics import BACKEND_PREFIXES

BACKENDS: Final = ("vllm", "sglang", "tgi", "llamacpp", "trtllm", "openai-compatible")
OPENAI_COMPATIBLE: Final = "openai-compatible"
SIMULATOR: Final = "gputui-sim"

_OWNED_BY: Final[dict[str, str]] = {
    "vllm": "vllm",
    "sglang": "sglang",
    "llamacpp": "llamacpp",
    "tensorrt_llm": "trtllm",
    SIMULATOR: SIMULATOR,
}
"""`owned_by` values that servers write about themselves (their ModelCard defaults)."""

_SERVER_HEADERS: Final[tuple[tuple[str, str], ...]] = (
    ("llama.cpp", "llamacpp"),
    (SIMULATOR, SIMULATOR),
)


@dataclass(frozen=True, slots=True)
class Backend:
    """The detected server kind and what gave it away."""

    name: str
    evidence: str
    """e.g. "/v1/models owned_by=llamacpp" or "no server-specific sign"."""


UNCHECKED: Final = Backend(OPENAI_COMPATIBLE, "not checked")


def detect_backend(
    server_header: str = "",
    models_payload: object = None,
    metrics_text: str | None = None,
) -> Backend:
    """The backend behind the target, from what preflight fetched (any part may be missing)."""
    for owner in _owners(models_payload):
        name = _OWNED_BY.get(owner.lower())
        if name is not None:
            return Backend(name, f"/v1/models owned_by={owner}")
    if metrics_text:
        found = backend_from_metric_names(metric_names(metrics_text))
        if found is not None:
            return Backend(found[0], f"/metrics names {found[1]}*")
    header = server_header.lower()
    for needle, name in _SERVER_HEADERS:
        if needle in header:
            return Backend(name, f"Server: {server_header}")
    return Backend(OPENAI_COMPATIBLE, "no server-specific sign")


def backend_from_metric_names(names: set[str]) -> tuple[str, str] | None:
    """(backend, matching prefix) for a set of exposed metric names; None when none is known."""
    for prefix, backend in BACKEND_PREFIXES:
        if any(name.startswith(prefix) for name in names):
            return backend, prefix
    return None


def metric_names(text: str) -> set[str]:
    """Every sample name in Prometheus text (a cheap scan: a partial scrape still names itself)."""
    names = set()
    for line in text.splitlines():
        if line and not line.startswith("#"):
            end = len(line)
            for stop in ("{", " "):
                at = line.find(stop)
                if 0 <= at < end:
                    end = at
            names.add(line[:end])
    return names


def _owners(payload: object) -> Iterator[str]:
    if not isinstance(payload, dict):
        return
    data = payload.get("data")
    if not isinstance(data, list):
        return
    for entry in data:
        if isinstance(entry, dict) and isinstance(entry.get("owned_by"), str):
            yield entry["owned_by"]
