"""Pre-flight limits on a real vLLM: a workload longer than `max_model_len` never reaches it.

vLLM states `max_model_len` (2048 here) in /v1/models. An input plus output over it is answered
HTTP 400 (input alone too long) or cut short with a 200 (input + max_tokens over it); the issue
saw 976 requests flood the server with 400s and exit 0. `gputui run` must instead stop in one
line and a non-zero exit before any request: vLLM's own HTTP counter
(`http_requests_total` on its generating routes, whatever the answer) must not move.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.realvllm.helpers import generation_posts
from tests.support.vllm_server import MAX_MODEL_LEN, VllmServer

# Not `alone` (tests/conftest.py): no request is timed, and the check is that none is sent
# (3 of 3 passed beside two busy loops on the 2 cores).
pytestmark = [pytest.mark.realvllm, pytest.mark.not_alone]


@pytest.mark.parametrize(
    ("input_tokens", "output_tokens"),
    [(4000, 32), (MAX_MODEL_LEN - 100, 128)],
    ids=["input-over", "input-plus-output-over"],
)
def test_over_long_requests_stop_before_any_request(
    vllm: VllmServer, tmp_path: Path, input_tokens: int, output_tokens: int
) -> None:
    # One request of our own first, so that vLLM's counter of the route exists and counts.
    prompt = {"model": vllm.model, "prompt": "hello", "max_tokens": 1}
    vllm.post("/v1/completions", prompt).raise_for_status()
    before = generation_posts(vllm)
    assert before.get("/v1/completions 2xx", 0) >= 1, before
    result = subprocess.run(
        [
            *(sys.executable, "-m", "gputui", "run", "--url", vllm.url, "--model", vllm.model),
            *("--input-tokens", str(input_tokens), "--output-tokens", str(output_tokens)),
            *("--concurrency", "1", "--step-seconds", "2", "--out", str(tmp_path / "x.json")),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    after = generation_posts(vllm)
    lines = result.stderr.strip().splitlines()
    print(
        f"\n--input-tokens {input_tokens} --output-tokens {output_tokens}: exit "
        f"{result.returncode}, stderr {lines}; vLLM's generating POSTs {before} -> {after}"
    )
    assert result.returncode != 0
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert str(MAX_MODEL_LEN) in lines[0] and str(input_tokens + output_tokens) in lines[0]
    assert after == before  # not one request reached vLLM
    assert not (tmp_path / "x.json").exists()
