"""Before any load: is the server there, and does it serve the model? (httpx, off the hot path)."""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from gputui.engine.backend import OPENAI_COMPATIBLE, UNCHECKED, Backend, detect_backend
from gputui.engine.context_limit import ContextLimit, context_limit
from gputui.engine.identity import ServerIdentity
from gputui.engine.identity_probe import probe_identity
from gputui.engine.target import Target
from gputui.errors import ModelNotServed, ServerUnreachable

_METRICS_TIMEOUT_S = 2.0
"""/metrics only names the backend: a slow or absent one must not delay the run."""


@dataclass(frozen=True, slots=True)
class PreflightResult:
    """What the server told us before the run."""

    models: tuple[str, ...]
    probe_path: str | None
    """`/health` when the server has it, else `/v1/models`; None when neither answers 200."""
    server_header: str
    backend: Backend = UNCHECKED
    """What kind of server this is (see engine.backend), for the header and `target.backend`."""
    model: str = ""
    """The model to request: the one asked for, or the only one the server serves."""
    context: ContextLimit | None = None
    """The model's context length, where the server states it (engine.context_limit)."""
    identity: ServerIdentity | None = None
    """What the server says it is: version, limits, settings (engine.identity)."""


def preflight(
    target: Target, model: str | None, *, api_key: str | None, timeout_s: float = 10.0
) -> PreflightResult:
    """Check the target; raise ServerUnreachable or ModelNotServed with a one-line message.

    Without a `model`, the server must serve exactly one, which is then the one requested.
    `timeout_s` bounds each request, and the identity probe's requests in all.
    """
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    models_url = f"{target.api_url}/models"
    try:
        with httpx.Client(timeout=timeout_s, headers=headers) as http:
            response = http.get(models_url)
            health_ok = False
            if response.status_code == 200:
                health = http.get(f"{target.base_url}{target.root_prefix}/health")
                health_ok = health.status_code == 200
    except httpx.HTTPError as exc:
        raise ServerUnreachable(f"cannot reach {target.base_url}: {_describe(exc)}") from None
    if response.status_code in (401, 403):
        raise ServerUnreachable(
            f"{models_url} answered HTTP {response.status_code}: check the API key "
            "(--api-key-env names the environment variable that holds it)"
        )
    if response.status_code != 200:
        raise ServerUnreachable(
            f"{models_url} answered HTTP {response.status_code}: "
            "is this an OpenAI-compatible server?"
        )
    try:
        payload = response.json()
        models = tuple(str(entry["id"]) for entry in payload["data"])
    except (ValueError, KeyError, TypeError):
        raise ServerUnreachable(f"{models_url} did not return an OpenAI model list") from None
    listed = ", ".join(models[:10]) or "none"
    if model is None:
        if len(models) != 1:
            raise ModelNotServed(
                f"--model is required: {target.base_url} serves {len(models)} models ({listed})"
            )
        model = models[0]
    if model not in models:
        raise ModelNotServed(
            f"{target.base_url} does not serve model {model!r} (it lists: {listed})"
        )
    probe_path = f"{target.root_prefix}/health" if health_ok else f"{target.api_prefix}/models"
    server_header = response.headers.get("server", "")
    backend = detect_backend(server_header, payload)
    if backend.name == OPENAI_COMPATIBLE:
        metrics = _metrics_text(f"{target.base_url}{target.root_prefix}/metrics", headers)
        backend = detect_backend(server_header, payload, metrics)
    identity = probe_identity(
        target.base_url + target.root_prefix, backend.name, headers=headers, timeout_s=timeout_s
    )
    if identity is not None and backend.name == OPENAI_COMPATIBLE:
        backend = Backend(identity.engine, f"{identity.sources[0]} answered as {identity.engine}")
    context = context_limit(payload, model, identity)
    return PreflightResult(
        models, probe_path, server_header, backend, model, context, identity=identity
    )


def _metrics_text(url: str, headers: dict[str, str]) -> str | None:
    """The server's /metrics text, or None when it has none (404, refused, slow)."""
    try:
        response = httpx.get(url, headers=headers, timeout=_METRICS_TIMEOUT_S)
    except httpx.HTTPError:
        return None
    return response.text if response.status_code == 200 else None


def _describe(exc: httpx.HTTPError) -> str:
    if isinstance(exc, httpx.ConnectError):
        return "connection refused or host unknown"
    if isinstance(exc, httpx.TimeoutException):
        return "timed out"
    return str(exc) or type(exc).__name__
