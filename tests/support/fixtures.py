"""Read the real servers' captured responses, kept byte for byte in tests/fixtures/real-servers/.

They are copies of ../shared/fixtures/real-servers/, held inside the repository so that no test
skips on a clone without the shared folder.
"""

from __future__ import annotations

from pathlib import Path

REAL_SERVERS = Path(__file__).resolve().parents[1] / "fixtures" / "real-servers"


def fixture_path(name: str) -> Path:
    """Path of a captured response (a missing one is a broken checkout: fail, do not skip)."""
    path = REAL_SERVERS / name
    assert path.is_file(), f"real-server fixture {name} missing from {REAL_SERVERS}"
    return path


def split_response(name: str) -> tuple[int, list[tuple[str, str]], bytes]:
    """Status code, headers and (de-chunked) body of a captured HTTP response."""
    raw = fixture_path(name).read_bytes()
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = [
        tuple(line.split(": ", 1)) if ": " in line else (line.rstrip(":"), "") for line in lines[1:]
    ]
    return status, [(k, v) for k, v in headers], body


def sse_events(body: bytes) -> list[bytes]:
    """The body's SSE events, each with its trailing blank line."""
    return [event + b"\n\n" for event in body.split(b"\n\n") if event.strip()]
