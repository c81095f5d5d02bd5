"""`--repeats N`: the whole plan again on fresh connections, and the spread across the runs.

Contract:
- `fresh_start(session, stop, base_url)` readies the next repeat: it stops sending, waits for the
  requests in flight (bounded; the session's loop says when none is left, `Session.drained`),
  closes the engine's kept-alive connections (`Reconnect`), asks the server to drop its prefix
  cache where it offers it (vLLM and `gputui sim`: `POST /reset_prefix_cache` at the server's
  root) and sends again; it returns what the reset did.
- the run-to-run spread across the repeats is `metrics.repeats.repeat_spread` (the snapshot's
  optional `repeats` key).
"""

from __future__ import annotations

import threading
import urllib.error
import urllib.request

from gputui.control.runner import Stop
from gputui.session import Session

_DRAIN_TIMEOUT_S = 120.0


def reset_prefix_cache(base_url: str, timeout_s: float = 10.0) -> str:
    """POST /reset_prefix_cache; "reset", "not offered" or why it failed."""
    url = base_url.rstrip("/") + "/reset_prefix_cache"
    request = urllib.request.Request(url, data=b"", method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return "reset" if 200 <= response.status < 300 else f"HTTP {response.status}"
    except urllib.error.HTTPError as exc:
        return "not offered" if exc.code in (404, 405) else f"HTTP {exc.code}"
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        return f"failed: {exc}"


def fresh_start(session: Session, stop: Stop, base_url: str) -> str:
    """Drain, reconnect and reset the prefix cache before the next repeat (module contract)."""
    session.pause()
    drained = session.drained()  # answered by the session's loop: no poll
    woke = threading.Event()
    drained.add_done_callback(lambda _: woke.set())
    stop.wake(woke)
    try:
        woke.wait(_DRAIN_TIMEOUT_S)
    finally:
        stop.unwake(woke)
    session.reconnect()
    outcome = reset_prefix_cache(base_url)
    session.resume()
    return outcome
