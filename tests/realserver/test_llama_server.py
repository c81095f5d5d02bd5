"""gputui against a real server: llama.cpp's llama-server, a tiny model, on loopback.

The tiny model never emits end-of-sequence, so every request yields exactly `max_tokens` tokens:
what gputui counts can be held to the server's own counters, token for token.

What llama.cpp's numbers mean (tools/server, llama.cpp as vendored by llama-cpp-python 0.3.36):
- `llamacpp:prompt_tokens_total` counts prompt tokens *evaluated*, excluding those reused from the
  prefix cache, which `llamacpp:prompt_tokens_cached_total` counts; usage's `prompt_tokens` is the
  whole prompt, so sum(prompt_tokens) = evaluated + cached, and usage's
  `prompt_tokens_details.cached_tokens` = the cached part. gputui's prompts start with a
  per-request prefix, yet a slot can still reuse a few leading tokens (BOS, the chat template).
- `llamacpp:tokens_predicted_total` counts generated tokens, added when a slot is released.
- `timings.predicted_ms` runs from the end of the prompt to the last sampled token; the first token
  comes free with the prompt, so its per-token figure is predicted_ms / (predicted_n - 1): the same
  span gputui's TPOT measures, (E2E - TTFT) / (output_tokens - 1). `timings.prompt_ms` starts when
  a slot takes the request, so TTFT (which also holds the queue wait) can never be shorter.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from gputui.engine.client import ClientConfig
from gputui.engine.load import RequestShape
from gputui.engine.preflight import preflight
from gputui.engine.process import EngineConfig
from gputui.engine.records import RequestRecord
from gputui.engine.target import parse_target
from gputui.metrics.sla import Sla
from gputui.session import Session
from gputui.snapshot.store import load_snapshot
from gputui.telemetry.server_metrics import read_metrics
from tests.realserver.conftest import PARALLEL
from tests.support.llama_server import MODEL_ALIAS, LlamaServer

pytestmark = [pytest.mark.realserver, pytest.mark.slow]

LEVELS = (1, 2, 4, 8)
INPUT_TOKENS = 32
OUTPUT_TOKENS = 32


@pytest.mark.not_alone  # the backend's name: nothing timed (tests/conftest.py)
def test_preflight_names_the_backend(llama: LlamaServer) -> None:
    checked = preflight(parse_target(llama.url), MODEL_ALIAS, api_key=None)
    assert checked.backend.name == "llamacpp"
    assert checked.server_header == "llama.cpp"
    assert checked.probe_path == "/health"


def test_sweep_agrees_with_the_server_counters(llama: LlamaServer, tmp_path: Path) -> None:
    out = tmp_path / "llama.json"
    before = llama.counters()
    result = subprocess.run(
        [
            *(sys.executable, "-m", "gputui", "run", "--url", llama.url, "--model", MODEL_ALIAS),
            *("--concurrency", ",".join(map(str, LEVELS)), "--step-seconds", "3"),
            *("--warmup-seconds", "0.5", "--ignore-eos", "--out", str(out)),
            *("--input-tokens", str(INPUT_TOKENS), "--output-tokens", str(OUTPUT_TOKENS)),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    after = llama.counters()
    print(result.stdout)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "backend llamacpp" in result.stdout
    assert "warning:" not in result.stdout

    snap = load_snapshot(out)
    assert snap.target.backend == "llamacpp"
    assert [step.level for step in snap.steps] == [float(x) for x in LEVELS]
    for step in snap.steps:
        assert step.requests_failed == 0, step.errors
        assert step.requests_ok >= 3
        assert step.output_tokens_from_usage
        assert step.short_outputs == 0
        assert step.ttft_s.p50 is not None and step.tpot_s.p50 is not None
        # Every request yields OUTPUT_TOKENS, so the two rates must tell the same story.
        tokens_per_s = step.requests_per_s * OUTPUT_TOKENS
        assert step.output_tokens_per_s == pytest.approx(tokens_per_s, rel=0.1)
    # Continuous batching: one decode serves every busy slot, so each stream slows as more share
    # it. (The tiny model is too small for batching to raise total throughput on a CPU: per-token
    # overhead, not compute, bounds it.)
    tpot = [step.tpot_s.p50 for step in snap.steps]
    assert tpot[-1] > 2 * tpot[0], tpot  # type: ignore[operator]

    assert snap.model_extra is not None
    totals: dict[str, Any] = snap.model_extra["totals"]
    print("gputui totals:", totals)

    def delta(name: str) -> int:
        return round(after[f"llamacpp:{name}"] - before[f"llamacpp:{name}"])

    server = {n: delta(n) for n in ("tokens_predicted_total", "prompt_tokens_total")}
    server["prompt_tokens_cached_total"] = delta("prompt_tokens_cached_total")
    print("llama-server counters (delta over the run):", server)
    assert totals["requests_failed"] == 0
    assert totals["response_models"] == {MODEL_ALIAS: totals["requests"]}
    assert totals["output_tokens_total"] == totals["requests"] * OUTPUT_TOKENS
    assert totals["output_tokens_total"] == server["tokens_predicted_total"]
    assert totals["input_tokens_total"] == (
        server["prompt_tokens_total"] + server["prompt_tokens_cached_total"]
    )
    assert totals["cached_input_tokens_total"] == server["prompt_tokens_cached_total"]


def _session_records(llama: LlamaServer, levels: tuple[int, ...], step_s: float) -> Session:
    config = EngineConfig(
        client=ClientConfig(
            target=parse_target(llama.url),
            model=MODEL_ALIAS,
            endpoint="chat",
            extra_body={"ignore_eos": True},
        ),
        shape=RequestShape(INPUT_TOKENS, OUTPUT_TOKENS),
    )
    session = Session(config, Sla(), warmup_s=0.3)
    session.start(frame_interval_s=None)
    try:
        for level in levels:
            session.set_load("concurrency", level)
            time.sleep(step_s)
    finally:
        session.stop(cancel=False, drain_timeout_s=30.0)
    return session


def test_step_timings_agree_with_the_servers_own(llama: LlamaServer) -> None:
    session = _session_records(llama, (1, 4), 2.5)
    specs = session.step_specs()
    for spec, step in zip(specs, session.finished_steps(), strict=True):
        measured = [r for r in session.all_records() if r.step_index == spec.index and r.ok]
        measured = [r for r in measured if r.sent_ns >= spec.measure_start_ns]
        assert len(measured) == step.requests_ok > 0
        ours_ms, theirs_ms = _decode_per_token_ms(measured)
        print(
            f"concurrency {spec.level:g}: gputui TPOT mean {step.tpot_s.mean * 1e3:.3f} ms, "  # type: ignore[operator]
            f"llama-server predicted_ms/(n-1) mean {theirs_ms.mean():.3f} ms "
            f"({len(measured)} requests)"
        )
        assert step.tpot_s.mean is not None
        assert step.tpot_s.mean * 1e3 == pytest.approx(ours_ms.mean(), rel=1e-6)
        # The same span on two clocks: the server's ends at the last sampled token, ours at the
        # last byte, so ours is a little longer; per token the two agree closely.
        ratio = ours_ms / theirs_ms
        assert 0.9 < float(np.median(ratio)) < 1.3, ratio
        for record in measured:
            timings = record.server_timings
            assert timings is not None and timings.prompt_ms is not None
            assert timings.predicted_n == record.output_tokens == OUTPUT_TOKENS
            assert record.input_tokens == (timings.prompt_n or 0) + (timings.cache_n or 0)
            assert record.first_token_ns is not None
            ttft_ms = (record.first_token_ns - record.sent_ns) / 1e6
            assert ttft_ms >= timings.prompt_ms - 0.01


def _decode_per_token_ms(records: list[RequestRecord]) -> tuple[np.ndarray, np.ndarray]:
    ours, theirs = [], []
    for r in records:
        t = r.server_timings
        assert r.first_token_ns is not None and t is not None
        assert t.predicted_ms is not None and t.predicted_n is not None
        ours.append((r.end_ns - r.first_token_ns) / 1e6 / (r.output_tokens - 1))
        theirs.append(t.predicted_ms / (t.predicted_n - 1))
    return np.array(ours), np.array(theirs)


async def _stream(client: httpx.AsyncClient, url: str, max_tokens: int) -> int:
    body = {"model": MODEL_ALIAS, "prompt": "hello", "max_tokens": max_tokens, "stream": True}
    body["ignore_eos"] = True
    chunks = 0
    async with client.stream("POST", url + "/v1/completions", json=body) as response:
        async for _ in response.aiter_lines():
            chunks += 1
    return chunks


@pytest.mark.not_alone  # slots and waiting requests counted: 3 of 3 beside two busy loops
async def test_queue_and_slots_under_load_are_normalized(llama: LlamaServer) -> None:
    """More requests than slots: /metrics shows them processing and deferred, /slots agrees."""
    extra = 4
    async with httpx.AsyncClient(timeout=120.0) as client:
        tasks = [
            asyncio.create_task(_stream(client, llama.url, 1500)) for _ in range(PARALLEL + extra)
        ]
        try:
            deadline = time.monotonic() + 20.0
            while True:
                metrics = (await client.get(llama.url + "/metrics")).text
                slots = (await client.get(llama.url + "/slots")).json()
                view = read_metrics(metrics, time.perf_counter_ns())
                sample = view.server
                assert sample is not None
                if sample.requests_running == PARALLEL and sample.requests_waiting == extra:
                    break
                assert time.monotonic() < deadline, (metrics, sample)
                await asyncio.sleep(0.05)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    assert view.backend == "llamacpp"
    print("normalized:", sample)
    busy = [slot for slot in slots if slot["is_processing"]]
    assert len(slots) == PARALLEL
    assert len(busy) == sample.requests_running
    fill = [(_slot_tokens(slot), int(slot["n_ctx"])) for slot in busy]
    print("per-slot KV tokens in use / n_ctx:", [f"{n}/{ctx}" for n, ctx in fill])
    assert all(0 < n <= ctx for n, ctx in fill)


def _slot_tokens(slot: dict[str, Any]) -> int:
    """Tokens a busy slot holds in its KV cache: its prompt plus what it has decoded so far."""
    decoded = sum(int(t.get("n_decoded", 0)) for t in slot.get("next_token", []))
    return int(slot["n_prompt_tokens"]) + decoded
