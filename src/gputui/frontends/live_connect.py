"""The live controller's connection: check the target in the background until it answers.

Contract: `Connector.start` runs `check` (by default `engine.preflight.preflight`) on its own
thread every `retry_s` until it passes; an unreachable target is a state (`state`), reported once
per change as an event, never an error. Once it passes, `identify` gets the answer, `state`
becomes "ok" and `on_connected` runs, all on that thread. `stop` ends the retries and waits for
the thread. The check is injectable, so a test connects to no server at all.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from gputui.engine.backend import OPENAI_COMPATIBLE
from gputui.engine.client import ClientConfig
from gputui.engine.preflight import PreflightResult, preflight
from gputui.errors import GputuiError
from gputui.frontends.live_settings import backend_from_server
from gputui.frontends.view import EventKind

Check = Callable[[ClientConfig], PreflightResult]
"""Checks the target a client config names; raises a `GputuiError` while it cannot."""
RETRY_S = 2.0


def check_target(client: ClientConfig) -> PreflightResult:
    """The real check: the server's models, health and kind (`engine.preflight`)."""
    return preflight(client.target, client.model, api_key=client.api_key, timeout_s=5.0)


def identity(checked: PreflightResult) -> tuple[str | None, str | None, str]:
    """The backend the check found (or the `Server` header names), why, and that header."""
    detected = checked.backend
    name: str | None = detected.name
    if name == OPENAI_COMPATIBLE:
        name = backend_from_server(checked.server_header)
    return name, detected.evidence, checked.server_header


class Connector:
    """Connects a live session to its target (module contract)."""

    def __init__(
        self,
        client: ClientConfig,
        identify: Callable[[PreflightResult], None],
        on_connected: Callable[[], None],
        event: Callable[[EventKind, str], None],
        *,
        check: Check = check_target,
        retry_s: float = RETRY_S,
    ) -> None:
        self._client = client
        self._identify = identify
        self._on_connected = on_connected
        self._event = event
        self._check = check
        self._retry_s = retry_s
        self.state = "connecting"
        """"connecting", "unreachable: <why>" or "ok"."""
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def connected(self) -> bool:
        """Whether the target has answered."""
        return self.state == "ok"

    def start(self) -> None:
        """Check the target in the background until it answers (or `stop`)."""
        self._thread = threading.Thread(target=self._run, name="gputui-connect", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """No more retries; wait for the check under way."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout_s)

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                checked = self._check(self._client)
            except GputuiError as exc:
                state = f"unreachable: {exc}"
                if state != self.state:
                    self._event("error", f"target {state}; retrying every {self._retry_s:g} s")
                self.state = state
                self._stopping.wait(self._retry_s)
                continue
            self._identify(checked)
            if self._stopping.is_set():
                return
            self.state = "ok"
            self._event("info", f"connected to {self._client.target.base_url}")
            self._on_connected()
            return
