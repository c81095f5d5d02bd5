"""Each verdict rule against a real vLLM (the CPU build): a sequence limit, a KV cache too small for
the streams, and a healthy single stream, each read right (issue 31).

One extra vLLM start serves both limits: `--max-num-seqs 4` and a KV cache of 64 blocks of 32
tokens (`--num-gpu-blocks-override 64 --block-size 32`; the CPU backend takes block sizes that are
multiples of 32; `--max-model-len 1024` so that 64 blocks hold one request of that length). vLLM
publishes the block count and size (`cache_config_info`) but not `max_num_seqs`:

- short requests (64 + 64 tokens: 4 blocks, the cache holds 16 of them) at 8 streams: 4 run and
  4 wait with the cache three-quarters free: the sequence limit binds;
- long ones (480 + 96 tokens: 18 blocks, the cache holds 3) at 8 streams: 3 run, 5 wait, the free
  blocks short of a prompt's 15: the KV cache binds, whatever its usage reads (about 90 %: vLLM
  allocates whole blocks).

Before issue 31, `--max-num-seqs 2` at 4 streams read "each engine step's token budget is taken",
and a cache holding 2 of 8 requests read the same at 87 % usage.

On the 2-core host vLLM's CPU build computes on the client's cores: `run_gputui` starts the client
in its own session ahead of vLLM's (tests.support.priority), or its loop lags by seconds and each
step reads host-contended. Where the host is contended all the same, the server's own evidence
(a held sequence limit, KV admission, preemptions) still names the bound, the step suspect.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from gputui.metrics.step_diagnosis import BottleneckVerdict, bottleneck_verdict
from tests.realvllm.helpers import run_gputui
from tests.support.vllm_server import VllmServer, find_vllm, vllm_server

pytestmark = [pytest.mark.realvllm]

LIMITS = (
    *("--max-num-seqs", "4", "--block-size", "32", "--num-gpu-blocks-override", "64"),
    *("--max-model-len", "1024"),
)
STEP = ("--step-seconds", "5", "--warmup-seconds", "2")


@pytest.fixture(scope="module")
def limited() -> Iterator[VllmServer]:
    """vLLM with 4 sequences at most and a KV cache of 64 blocks of 32 tokens."""
    found = find_vllm()
    if isinstance(found, str):
        pytest.skip(found)
    python, model = found
    with vllm_server(python, model, extra_args=LIMITS) as server:
        print(f"\nvLLM (limited) ready in {server.started_s:.1f} s at {server.url}")
        yield server


def _verdict(
    out: Path, args: tuple[str, ...], server: VllmServer, **tokens: int
) -> BottleneckVerdict:
    snap, _, _ = run_gputui(server, out, args, **tokens)
    (step,) = snap.steps
    verdict = bottleneck_verdict(step.bottleneck)
    assert verdict is not None, "the step was not diagnosed"
    return verdict


def test_a_sequence_limit_reads_the_sequence_limit(limited: VllmServer, tmp_path: Path) -> None:
    verdict = _verdict(
        tmp_path / "seqs.json", ("--concurrency", "8", *STEP), limited,
        input_tokens=64, output_tokens=64,
    )  # fmt: skip
    first = verdict["evidence"][0]
    assert verdict["verdict"] == "scheduler-limit", verdict
    assert first.startswith("sequence limit: running held at 4 in "), first
    assert "max_num_seqs" in first and "token budget" not in first
    assert "the cache holds 16 requests of the step's length whole" in first


def test_a_kv_cache_too_small_reads_kv_capacity(limited: VllmServer, tmp_path: Path) -> None:
    verdict = _verdict(
        tmp_path / "kv.json", ("--concurrency", "8", *STEP), limited,
        input_tokens=480, output_tokens=96,
    )  # fmt: skip
    if verdict["verdict"] == "host-contended":
        # vLLM's CPU build shares the client's cores: its loop lags by seconds, the client rule
        # decides (suspect) and the gauges sampled in the window may show nothing waiting; the
        # server's own preemption counter still names the KV cache as what ran short
        assert verdict.get("client_state") == "host-contended" and verdict["suspect"], verdict
        queue = next(e for e in verdict["evidence"] if " preemptions" in e)
        preempted = re.search(r"(\d+) preemptions", queue)
        assert preempted is not None and int(preempted.group(1)) > 0, queue
        return
    first = verdict["evidence"][0]
    assert verdict["verdict"] == "kv-capacity", verdict
    assert "the cache holds 3 requests of the step's length whole" in first, first
    assert "a prompt needs 15" in first and "requests wait for KV blocks" in first


def test_a_single_stream_reads_healthy(vllm: VllmServer, tmp_path: Path) -> None:
    verdict = _verdict(
        tmp_path / "one.json", ("--concurrency", "1", "--step-seconds", "4", "--warmup-seconds",
        "1"), vllm, input_tokens=128, output_tokens=32,
    )  # fmt: skip
    # Nothing binds one stream: no queue, no limit, no prefill beside its decode (the host's
    # pauses once read as prefill-interference), and not the client (whose CPU is far from a
    # core); a host still busy despite the client's priority is named as such, never the client.
    assert verdict["verdict"] in ("none", "host-contended"), verdict
    assert verdict.get("client_state") != "client-bound", verdict
    if verdict["verdict"] == "host-contended":
        assert verdict.get("client_state") == "host-contended", verdict
    waiting = next(e for e in verdict["evidence"] if "waiting" in e)
    assert "0 preemptions" in waiting, waiting
