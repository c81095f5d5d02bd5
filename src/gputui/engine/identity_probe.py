"""One probe for the server's identity: the GETs of each engine's info endpoint (httpx, pre-flight).

Which endpoints are asked depends on the backend the pre-flight found (engine.backend): vLLM
`/version` and `/server_info?config_format=json` (a 404 without dev mode), llama-server `/props`,
TGI `/info`, SGLang `/server_info` then `/get_server_info`. A server whose kind is unknown
(`openai-compatible`: no /metrics, a gateway's /v1/models) is asked TGI's, SGLang's and
llama.cpp's in turn, and the first document that parses as one names the engine. Every GET has a
short timeout and any failure is "not said": identity never stops a run. The whole probe keeps
within the pre-flight's `timeout_s` (a TUI's first look allows 3 s): each GET gets what is left
of it, at most its own bound, and one that would start after it is not asked.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Final

import httpx
import orjson

from gputui.engine.identity import (
    ServerIdentity,
    llamacpp_identity,
    sglang_identity,
    tgi_identity,
    vllm_identity,
)

_TIMEOUT_S: Final = 2.0
_VLLM_INFO_TIMEOUT_S: Final = 30.0
"""vLLM's /server_info collects its host's environment on its first call (15 s measured on a busy
2-core host; cached by vLLM afterwards)."""
_SGLANG_PATHS: Final = ("/server_info", "/get_server_info")


class _Prober:
    """GETs of JSON documents within one deadline (the pre-flight's timeout, for them all)."""

    def __init__(self, http: httpx.Client, timeout_s: float) -> None:
        self._http = http
        self._deadline = time.perf_counter() + timeout_s

    def get(self, url: str, timeout_s: float = _TIMEOUT_S) -> object:
        """The JSON document at `url`, or None (refused, slow, not 200, not JSON, no time left).

        Read chunk by chunk, so a server that trickles its answer cannot hold the probe past the
        deadline either.
        """
        left = self._deadline - time.perf_counter()
        if left <= 0:
            return None
        try:
            with self._http.stream("GET", url, timeout=min(timeout_s, left)) as response:
                if response.status_code != 200:
                    return None
                body = bytearray()
                for chunk in response.iter_bytes():
                    body += chunk
                    if time.perf_counter() > self._deadline:
                        return None
            return orjson.loads(body)
        except (httpx.HTTPError, orjson.JSONDecodeError):
            return None


def _sglang(get: _Prober, root_url: str) -> ServerIdentity | None:
    for path in _SGLANG_PATHS:
        found = sglang_identity(get.get(root_url + path), path)
        if found is not None:
            return found
    return None


def probe_identity(
    root_url: str,
    backend: str,
    *,
    headers: dict[str, str] | None = None,
    timeout_s: float = _VLLM_INFO_TIMEOUT_S,
) -> ServerIdentity | None:
    """What the server at `root_url` (its base, without /v1) says it is; None when it says nothing.

    `backend` is the pre-flight's guess; for `openai-compatible` the engines are tried in turn.
    The probe takes at most about `timeout_s` in all.
    """
    with httpx.Client(headers=headers or {}) as http:
        get = _Prober(http, timeout_s)
        if backend in ("vllm", "gputui-sim"):  # the simulator answers vLLM's /version
            version = get.get(root_url + "/version")
            info = (
                get.get(root_url + "/server_info?config_format=json", _VLLM_INFO_TIMEOUT_S)
                if version is not None  # the simulator and vLLM without dev mode answer 404 fast
                else None
            )
            found = replace(vllm_identity(version, info), engine=backend)
            return found if found.sources else None
        if backend == "llamacpp":
            return llamacpp_identity(get.get(root_url + "/props"))
        if backend == "tgi":
            return tgi_identity(get.get(root_url + "/info"))
        if backend == "sglang":
            return _sglang(get, root_url)
        if backend != "openai-compatible":
            return None
        return (
            tgi_identity(get.get(root_url + "/info"))
            or _sglang(get, root_url)
            or llamacpp_identity(get.get(root_url + "/props"))
        )
