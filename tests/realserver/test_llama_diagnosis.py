"""Issue 18 against llama-server: the TTFT breakdown built from llama.cpp's per-request `timings`.

llama.cpp has no latency histograms; its last chunk carries `timings` (prompt_ms from the moment a
slot takes the request, predicted_ms, cache_n). With one stream nothing waits for a slot, so the
client's TTFT = the round trip + prompt_ms + what neither side measured (HTTP parsing,
tokenisation, sampling the first token, the client's reading): that remainder must stay within the
round trip the RTT probe measured plus SLACK_S of a one-thread server's own bookkeeping
(measured: 0.66 ms beside an RTT of 0.11 ms). With four streams the one thread interleaves their
prompts and decodes, which prompt_ms does not see; the timings must still explain most of TTFT.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gputui.snapshot.store import load_snapshot
from tests.support.llama_server import MODEL_ALIAS, LlamaServer
from tests.support.saved import saved

pytestmark = [pytest.mark.realserver, pytest.mark.slow]

SLACK_S = 0.001


def test_breakdown_from_timings_agrees_with_the_clients_ttft(
    llama: LlamaServer, tmp_path: Path
) -> None:
    out = tmp_path / "llama.json"
    result = subprocess.run(
        [
            *(sys.executable, "-m", "gputui", "run", "--url", llama.url, "--model", MODEL_ALIAS),
            *("--concurrency", "1,4", "--step-seconds", "3", "--warmup-seconds", "0.5"),
            *("--ignore-eos", "--input-tokens", "64", "--output-tokens", "16"),
            *("--out", str(out)),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    print(result.stdout)
    assert result.returncode == 0, result.stdout + result.stderr
    snap = load_snapshot(out)
    assert snap.network is not None
    rtt = snap.network.rtt_s.mean or 0.0
    figures = []
    for step in snap.steps:
        latency, b = saved(step.server_latency), saved(step.ttft_breakdown)
        assert latency is not None and latency["source"] == "timings"
        assert b is not None
        figures.append(
            (step.level, round(b["ttft_s"] * 1e3, 2), round(b["prefill_s"] * 1e3, 2),
             round(b["network_s"] * 1e3, 3), round(b["client_s"] * 1e3, 2))
        )  # fmt: skip
        assert b["queue_s"] == 0.0
        assert b["prefill_s"] <= b["ttft_s"]
        # llama.cpp reports no TTFT of its own: the server's rest is not split from the client's,
        # and the breakdown says so (the remainder below is client + server, labelled as such).
        assert b["server_other_s"] is None and b["server_ttft_s"] is None
        assert b["unsplit"] is not None
        assert b["client_s"] >= -rtt, figures
        if step.level == 1:
            assert b["client_s"] <= rtt + SLACK_S, figures
        else:
            assert b["client_s"] <= 0.5 * b["ttft_s"], figures
        assert step.bottleneck is not None
    print("level, TTFT ms, prompt_ms, RTT ms, remainder ms:", figures)
