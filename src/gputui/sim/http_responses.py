"""The simulator's fixed-length HTTP/1.1 responses: JSON bodies and vLLM-style errors.

Contract: each function returns the whole response as bytes (status line, headers, body), for one
`transport.write`; `keep_alive=False` adds `connection: close`. Why a module of its own: the
server's endpoints, the non-streaming sink and the fault injector all answer this way, and the
streaming sinks (sinks.py) have nothing to do with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import orjson

from gputui.jsontypes import JsonOut

_REASONS: Final = {
    200: b"OK",
    400: b"Bad Request",
    404: b"Not Found",
    405: b"Method Not Allowed",
    429: b"Too Many Requests",
    500: b"Internal Server Error",
    503: b"Service Unavailable",
}


def http_response(
    status: int,
    body: bytes,
    content_type: bytes,
    *,
    keep_alive: bool,
    extra_headers: bytes = b"",
) -> bytes:
    """A complete fixed-length HTTP/1.1 response."""
    connection = b"" if keep_alive else b"connection: close\r\n"
    return b"HTTP/1.1 %d %s\r\ncontent-type: %s\r\ncontent-length: %d\r\n%s%s\r\n%s" % (
        status,
        _REASONS[status],
        content_type,
        len(body),
        connection,
        extra_headers,
        body,
    )


def json_response(
    status: int,
    body: JsonOut | Mapping[str, object],
    *,
    keep_alive: bool,
    extra_headers: bytes = b"",
) -> bytes:
    """A JSON response (`body`: JSON values, or a TypedDict of them)."""
    return http_response(
        status,
        orjson.dumps(body),
        b"application/json",
        keep_alive=keep_alive,
        extra_headers=extra_headers,
    )


def error_response(
    status: int, message: str, *, keep_alive: bool, extra_headers: bytes = b""
) -> bytes:
    """An OpenAI-style error response, as vLLM sends it."""
    kind = {
        400: "BadRequestError",
        404: "NotFoundError",
        405: "MethodNotAllowed",
        429: "RateLimitError",
        503: "ServiceUnavailableError",
    }.get(status, "InternalServerError")
    body = {"error": {"message": message, "type": kind, "param": None, "code": status}}
    return json_response(status, body, keep_alive=keep_alive, extra_headers=extra_headers)
