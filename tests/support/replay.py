"""A loopback HTTP server that answers every request with scripted raw bytes.

Used to put the real client against byte-exact server behaviour: captured real-server streams,
HTTP errors, cut connections, garbage. Each response is a list of (delay_s, bytes) parts; the
special part `CLOSE` closes the connection there.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence

CLOSE = b"<<close>>"

Part = tuple[float, bytes]


def chunked(
    status: int,
    headers: Sequence[tuple[str, str]],
    events: Sequence[bytes],
    *,
    gap_s: float = 0.0,
    terminate: bool = True,
) -> list[Part]:
    """A chunked response, one HTTP chunk per event, `gap_s` apart."""
    keep = [
        (k, v)
        for k, v in headers
        if k.lower() not in ("content-length", "transfer-encoding", "connection")
    ]
    head = f"HTTP/1.1 {status} X\r\n" + "".join(f"{k}: {v}\r\n" for k, v in keep)
    head += "Transfer-Encoding: chunked\r\n\r\n"
    parts: list[Part] = [(0.0, head.encode("latin-1"))]
    parts.extend((gap_s, b"%x\r\n%s\r\n" % (len(event), event)) for event in events)
    if terminate:
        parts.append((0.0, b"0\r\n\r\n"))
    return parts


def fixed(status: int, headers: Sequence[tuple[str, str]], body: bytes) -> list[Part]:
    """A Content-Length response."""
    keep = [
        (k, v)
        for k, v in headers
        if k.lower() not in ("content-length", "transfer-encoding", "connection")
    ]
    head = f"HTTP/1.1 {status} X\r\n" + "".join(f"{k}: {v}\r\n" for k, v in keep)
    head += f"Content-Length: {len(body)}\r\n\r\n"
    return [(0.0, head.encode("latin-1") + body)]


class ReplayServer:
    """Serves `responses[i % len]` to the i-th request; GET /v1/models lists `model`.

    `by_path` answers a POST to one of its paths with its own response instead (a /tokenize).
    """

    def __init__(
        self,
        responses: Sequence[list[Part]],
        model: str = "m",
        by_path: Mapping[str, list[Part]] | None = None,
    ) -> None:
        self.responses = list(responses)
        self.model = model
        self.by_path = {f"POST {k} ".encode(): v for k, v in (by_path or {}).items()}
        self.requests: list[bytes] = []
        self.port = 0
        self._server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                body = await reader.readexactly(length) if length else b""
                self.requests.append(head + body)
                if head.startswith(b"GET"):
                    payload = b'{"object":"list","data":[{"id":"%s"}]}' % self.model.encode()
                    writer.write(fixed(200, [("Content-Type", "application/json")], payload)[0][1])
                    continue
                parts = (
                    next(
                        (v for k, v in self.by_path.items() if head.startswith(k)),
                        None,
                    )
                    or self.responses[(len(self.requests) - 1) % len(self.responses)]
                )
                for delay, data in parts:
                    if delay:
                        await asyncio.sleep(delay)
                    if data == CLOSE:
                        writer.close()
                        return
                    writer.write(data)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def __aenter__(self) -> ReplayServer:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._server.wait_closed(), 2.0)


@contextlib.asynccontextmanager
async def replay(responses: Sequence[list[Part]]) -> AsyncIterator[ReplayServer]:
    """`async with replay([...]) as server:`."""
    async with ReplayServer(responses) as server:
        yield server
