"""Token-exact prompts against a real tokenizer and chat template: llama.cpp's llama-server.

Skips (with how to build it) when the llama-server binary or its tiny model is absent; see
tests/support/llama_server.py. Lengths are scaled down to the tiny model's context.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gputui.snapshot.store import load_snapshot
from tests.support.llama_server import LlamaServer, find_llama_server, llama_server

ROOT = Path(__file__).resolve().parents[2]
EXACT_CHAT = "server /tokenize (exact; chat template overhead from a usage probe)"


@pytest.fixture(scope="module")
def llama() -> Iterator[LlamaServer]:
    found = find_llama_server()
    if isinstance(found, str):
        pytest.skip(found)
    binary, model = found
    with llama_server(binary, model, parallel=2) as server:
        yield server


@pytest.mark.parametrize(
    ("args", "method"),
    [
        (["--scenario", "chat", "--input-tokens", "200", "--output-tokens", "4"], EXACT_CHAT),
        (
            [
                *("--scenario", "shared-prefix", "--input-tokens", "300"),
                *("--shared-prefix-tokens", "200", "--output-tokens", "4"),
            ],
            EXACT_CHAT,
        ),
        (
            [
                *("--scenario", "mixed", "--endpoint", "completions", "--output-dist", "4"),
                *("--input-dist", "lognormal:mean=150,std=100,min=40,max=400"),
            ],
            "server /tokenize (exact)",
        ),
    ],
    ids=["chat", "shared-prefix", "mixed-completions"],
)
def test_llama_server_bills_exactly_what_was_asked(
    llama: LlamaServer, tmp_path: Path, args: list[str], method: str
) -> None:
    out = tmp_path / "run.json"
    result = subprocess.run(
        [
            *(sys.executable, "-m", "gputui", "run", "--url", llama.url, "--model", "tiny-llama"),
            *args,
            *("--concurrency", "2", "--step-seconds", "1.5", "--warmup-seconds", "0"),
            *("--out", str(out)),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    work = load_snapshot(out).workload
    assert work.input_tokens_method == method
    for check in (work.input_lengths, work.output_lengths):
        assert check is not None
        assert check.requested.n > 5
        assert check.exact == check.requested.n
