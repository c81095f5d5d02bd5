"""An API key given through the environment goes to the server, and nowhere else.

`gputui run` against a scripted server that also echoes the key back in an error body (as some
gateways do): every API request must carry `Authorization: Bearer <key>`, and neither the snapshot
nor anything printed may contain the key, whole or in part.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

import pytest

from gputui.engine.client import ClientConfig, StreamingClient
from gputui.engine.target import parse_target
from gputui.snapshot.store import load_snapshot
from tests.faults.harness import run_args
from tests.support.replay import ReplayServer, chunked, fixed

pytestmark = pytest.mark.timeout(90)

SSE = [("Content-Type", "text/event-stream")]
EVENTS = [
    b'data: {"model":"sim","choices":[{"text":"a","finish_reason":null}]}\n\n',
    b'data: {"model":"sim","choices":[{"text":"b","finish_reason":"length"}]}\n\n',
    b'data: {"choices":[],"usage":{"prompt_tokens":16,"completion_tokens":2}}\n\n',
    b"data: [DONE]\n\n",
]


async def run_against_replay(
    out: Path, secret: str
) -> tuple[int | None, bytes, bytes, list[bytes]]:
    """`gputui run` with the key in its environment; the server keeps every request's bytes."""
    echo = b'{"error": {"message": "Incorrect API key provided: %s", "code": 401}}' % (
        secret.encode()
    )
    responses = [
        chunked(200, SSE, EVENTS, gap_s=0.002),
        chunked(200, SSE, EVENTS, gap_s=0.002),
        fixed(401, [("Content-Type", "application/json")], echo),
    ]
    async with ReplayServer(responses, model="sim") as server:
        proc = await asyncio.create_subprocess_exec(
            *run_args(server.url, out, "--concurrency", "2", "--step-seconds", "1"),
            env={**os.environ, "OPENAI_API_KEY": secret},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        stdout, stderr = await asyncio.wait_for(proc.communicate(), 60)
        return proc.returncode, stdout, stderr, list(server.requests)


def test_api_key_is_sent_and_never_written(tmp_path: Path) -> None:
    secret = f"sk-test-SECRET-{uuid.uuid4().hex}"
    out = tmp_path / "secret.json"
    returncode, stdout, stderr, requests = asyncio.run(run_against_replay(out, secret))
    assert returncode == 0, stderr.decode()[-2000:]

    # The key went where it belongs: on every model-list and completion request.
    api_requests = [r for r in requests if r.split(b" ", 2)[1].startswith(b"/v1/")]
    completions = [r for r in api_requests if r.startswith(b"POST ")]
    assert len(completions) > 10
    for request in api_requests:
        head = request.split(b"\r\n\r\n", 1)[0].decode("latin-1")
        auth = [line for line in head.split("\r\n") if line.lower().startswith("authorization:")]
        assert auth == [f"Authorization: Bearer {secret}"], head

    # ...and nowhere else: not the snapshot, not stdout, not stderr, not even a fragment.
    snap = load_snapshot(out)
    assert sum(s.errors.get("http_401", 0) for s in snap.steps) > 0  # the echoes were counted
    fragment = secret.removeprefix("sk-test-SECRET-")[:12].encode()
    for name, blob in (("snapshot", out.read_bytes()), ("stdout", stdout), ("stderr", stderr)):
        assert secret.encode() not in blob, name
        assert fragment not in blob, name
    leftovers = [p for p in tmp_path.iterdir() if p != out]
    for path in leftovers:
        assert fragment not in path.read_bytes(), path


async def test_a_key_echoed_by_the_server_is_redacted_from_the_record() -> None:
    secret = f"sk-test-SECRET-{uuid.uuid4().hex}"
    echo = b'{"error": {"message": "bad key %s"}}' % secret.encode()
    async with ReplayServer([fixed(401, [("Content-Type", "application/json")], echo)]) as server:
        config = ClientConfig(target=parse_target(server.url), model="m", api_key=secret)
        client = StreamingClient(config)
        try:
            record = await client.send("hi", 2, request_id=0, step_index=0)
        finally:
            await client.aclose()
    assert record.error == "http_401"
    assert record.error_detail == "HTTP 401: bad key [API key]"
    assert secret not in repr(record) and secret not in repr(config)
