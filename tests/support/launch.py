"""Start a real server on a free loopback port, retrying when another process takes the port first.

Both real-server harnesses (llama-server, vLLM) pick a free port, launch, wait until the server
answers, and stop it by its PID however the test ends: that loop lives here once.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable, Iterator
from typing import Protocol, TypeVar


class Launched(Protocol):
    """What the loop needs of a started server: its log, to tell a lost port from a failure."""

    def log_tail(self) -> str: ...


S = TypeVar("S", bound=Launched)


def free_port() -> int:
    """A port nothing listens on now (another process may still take it before we bind)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def on_a_free_port(
    launch: Callable[[int], S],
    wait_ready: Callable[[S], None],
    stop: Callable[[S], None],
    *,
    lost_port: str,
    name: str,
    attempts: int = 3,
) -> Iterator[S]:
    """Launch on a free port until one binds; yield the ready server; always stop it.

    `wait_ready` raises RuntimeError when the server does not come up; a log tail that contains
    `lost_port` (the server's own words for a port in use) means try another port.
    """
    server: S | None = None
    for _attempt in range(attempts):
        server = launch(free_port())
        try:
            wait_ready(server)
        except RuntimeError:
            stop(server)
            if lost_port in server.log_tail().lower():
                continue
            raise
        except BaseException:
            stop(server)
            raise
        try:
            yield server
        finally:
            stop(server)
        return
    tail = server.log_tail() if server is not None else ""
    raise RuntimeError(f"{name} could not bind a free port:\n{tail}")
