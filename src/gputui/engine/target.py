"""Where the load goes: the server's base URL, split once into what the hot loop needs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from gputui.errors import UsageError

Endpoint = Literal["completions", "chat", "responses", "messages"]
"""`completions` (/v1/completions), `chat` (/v1/chat/completions), `responses` (/v1/responses),
`messages` (Anthropic's /v1/messages)."""
_PATHS: dict[str, str] = {
    "completions": "/completions",
    "chat": "/chat/completions",
    "responses": "/responses",
    "messages": "/messages",
}


def applies_chat_template(endpoint: Endpoint) -> bool:
    """True when the server wraps the prompt in the model's chat template (all but completions)."""
    return endpoint != "completions"


@dataclass(frozen=True, slots=True)
class Target:
    """An OpenAI-compatible server, e.g. `http://127.0.0.1:8000` or `https://host/v1`."""

    scheme: str
    host: str
    port: int
    api_prefix: str
    """The path before `/completions`, normally `/v1`."""

    @property
    def base_url(self) -> str:
        """`scheme://host:port`, for display and for the snapshot."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    @property
    def api_url(self) -> str:
        """The URL the OpenAI routes hang from."""
        return self.base_url + self.api_prefix

    @property
    def root_prefix(self) -> str:
        """The path that `/health` and `/metrics` hang from (the API prefix minus `/v1`)."""
        return self.api_prefix.removesuffix("/v1")

    def endpoint_path(self, endpoint: Endpoint) -> str:
        """The request path for an endpoint kind."""
        return self.api_prefix + _PATHS[endpoint]


def parse_target(url: str) -> Target:
    """Parse `--url`: the server's base, with or without `/v1`; raises UsageError when unusable."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https"):
        raise UsageError(f"--url must start with http:// or https://, got {url!r}")
    if not parts.hostname:
        raise UsageError(f"--url has no host: {url!r}")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise UsageError(f"--url has an invalid port: {url!r}") from None
    if parts.query or parts.fragment:
        raise UsageError(f"--url must be the server's base URL, without ? or #: {url!r}")
    path = parts.path.rstrip("/")
    for suffix in ("/chat/completions", "/completions", "/responses", "/messages"):
        path = path.removesuffix(suffix)
    if not path.endswith("/v1"):
        path += "/v1"
    return Target(scheme=parts.scheme, host=parts.hostname, port=port, api_prefix=path)
