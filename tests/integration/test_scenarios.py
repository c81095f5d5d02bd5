"""Scenarios against the simulator: every one runs, and lengths are exactly what was asked."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from gputui.sim.fixed import FixedProfileSpec
from gputui.sim.runner import SimProcess, start_background
from gputui.snapshot.models import LengthCheck, Snapshot
from gputui.snapshot.store import load_snapshot
from gputui.workloads import load_scenario
from gputui.workloads.distributions import FixedDist
from gputui.workloads.prompts import LEAD, WORDS
from tests.support.replay import ReplayServer, chunked

GPUTUI = [sys.executable, "-m", "gputui"]
ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = sorted((ROOT / "scenarios").glob("*.toml"))


@pytest.fixture(scope="module")
def fast_sim() -> Iterator[SimProcess]:
    """5 ms to the first token, 1 ms per token after: a 1024-token answer takes about 1 s."""
    with start_background(FixedProfileSpec(ttft_ms=5, itl_ms=1, served_model_name="sim")) as sim:
        yield sim


def run(url: str, out: Path, *extra: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    args = [*GPUTUI, "run", "--url", url, "--model", "sim", "--out", str(out), *extra]
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def assert_exact(check: LengthCheck | None) -> None:
    assert check is not None
    assert check.requested.n > 0
    assert check.exact == check.requested.n == check.measured.n
    assert (check.shorter, check.longer, check.unknown) == (0, 0, 0)


def short_run(sim: SimProcess, out: Path, *extra: str) -> Snapshot:
    result = run(
        sim.url, out, *extra, "--concurrency", "2", "--step-seconds", "1.5", "--warmup-seconds", "0"
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return load_snapshot(out)


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_every_scenario_runs_with_exact_lengths(
    fast_sim: SimProcess, tmp_path: Path, path: Path
) -> None:
    scenario = load_scenario(path)
    snap = short_run(fast_sim, tmp_path / "s.json", "--scenario", str(path))
    work = snap.workload
    assert work.scenario == scenario.name
    assert work.endpoint == scenario.endpoint
    assert work.input_tokens_method == "server /tokenize (exact)"
    assert work.input_tokens_check == {"matched": 8, "total": 8, "worst_tokens": 0}
    assert work.unique_prefix
    assert work.shared_prefix_tokens == scenario.workload.shared_prefix_tokens
    assert work.min_tokens  # the simulator honours min_tokens
    assert_exact(work.input_lengths)
    assert_exact(work.output_lengths)
    assert work.input_lengths is not None and work.output_lengths is not None
    multiturn = (scenario.workload.turns or 1) > 1  # each turn's input is the history + message
    for dist, check in (
        (scenario.workload.input, work.input_lengths),
        (scenario.workload.output, work.output_lengths),
    ):
        if isinstance(dist, FixedDist) and not (check is work.input_lengths and multiturn):
            assert check.requested.min == check.requested.max == dist.tokens
            assert check.measured.min == check.measured.max == dist.tokens
    assert snap.steps[0].short_outputs == 0
    assert snap.sla.ttft_p95_s == scenario.sla.ttft_p95_s


def test_the_reference_chat_case_in_full(fast_sim: SimProcess, tmp_path: Path) -> None:
    out = tmp_path / "chat.json"
    result = run(
        fast_sim.url,
        out,
        "--scenario",
        "chat",
        "--concurrency",
        "4",
        "--step-seconds",
        "2",
        "--warmup-seconds",
        "0.5",
    )
    assert result.returncode == 0, result.stderr
    assert (
        "scenario chat (scenarios/chat.toml): input fixed 1024, output fixed 256" in result.stdout
    )
    assert "input tokens: requested mean 1024.0 (p50 1024, p95 1024), measured mean 1024.0" in (
        result.stdout
    )
    snap = load_snapshot(out)
    assert snap.workload.input_tokens == 1024
    assert snap.workload.output_tokens == 256
    assert snap.workload.input_distribution == {"kind": "fixed", "tokens": 1024}
    assert_exact(snap.workload.input_lengths)
    assert_exact(snap.workload.output_lengths)
    (step_lengths,) = snap.workload.lengths_by_step
    assert step_lengths.input.exact >= 20


def test_datasets_run_exact(fast_sim: SimProcess, tmp_path: Path) -> None:
    jsonl = tmp_path / "d.jsonl"
    rows = [
        {"prompt": "Explain the KV cache.\nBe brief, please.", "output_tokens": 12},
        {"prompt": "Why is decode bound by memory bandwidth?", "output_tokens": 40},
    ]
    jsonl.write_text("\n".join(orjson.dumps(r).decode() for r in rows) + "\n")
    snap = short_run(fast_sim, tmp_path / "j.json", "--dataset", str(jsonl), "--endpoint", "chat")
    assert snap.workload.dataset is not None
    assert snap.workload.dataset["entries_used"] == 2
    assert_exact(snap.workload.input_lengths)
    assert_exact(snap.workload.output_lengths)
    assert snap.workload.output_lengths is not None
    assert {
        snap.workload.output_lengths.requested.min,
        snap.workload.output_lengths.requested.max,
    } == {
        12,
        40,
    }
    sharegpt = tmp_path / "sg.json"
    convs = [
        {"conversations": [{"from": "human", "value": f"q {'w ' * n}"}, {"value": "a " * 9}]}
        for n in (5, 50)
    ]
    sharegpt.write_bytes(orjson.dumps(convs))
    snap = short_run(fast_sim, tmp_path / "g.json", "--dataset", str(sharegpt))
    assert_exact(snap.workload.input_lengths)
    assert_exact(snap.workload.output_lengths)
    assert snap.workload.output_tokens == 9


def test_a_local_tokenizer_json(fast_sim: SimProcess, tmp_path: Path) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    models, pre_tokenizers = tokenizers.models, tokenizers.pre_tokenizers
    vocab = {w: i for i, w in enumerate([LEAD, *WORDS, "[UNK]"])}
    tok = tokenizers.Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()  # what the simulator bills
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    snap = short_run(
        fast_sim,
        tmp_path / "t.json",
        *("--scenario", "mixed", "--token-counter", "tokenizer", "--tokenizer", str(path)),
    )
    assert snap.workload.input_tokens_method == (
        "tokenizer.json (exact; chat template overhead from a usage probe)"
    )
    assert_exact(snap.workload.input_lengths)


def test_short_outputs_are_reported(tmp_path: Path) -> None:
    spec = FixedProfileSpec(ttft_ms=5, itl_ms=1, eos_after=4, served_model_name="sim")
    with start_background(spec) as sim:
        out = tmp_path / "short.json"
        result = run(
            sim.url,
            out,
            *("--input-tokens", "32", "--output-tokens", "16", "--no-ignore-eos"),
            *("--no-min-tokens", "--concurrency", "2", "--step-seconds", "1"),
            "--warmup-seconds",
            "0",
        )
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stdout.splitlines() if "warning:" in line]
    assert any("stopped before the output tokens asked for" in w for w in warnings)
    snap = load_snapshot(out)
    assert snap.steps[0].short_outputs == snap.steps[0].requests_ok > 0
    lengths = snap.workload.output_lengths
    assert lengths is not None and lengths.shorter == lengths.requested.n
    assert lengths.measured.max == 4
    assert "shorter" in result.stdout


def test_a_bad_scenario_is_one_line_and_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[workload]\ninput = {kind = "normal", mean = 100}\noutput = 8\n')
    result = run("http://127.0.0.1:9", tmp_path / "x.json", "--scenario", str(bad))
    assert result.returncode == 2
    assert result.stderr == f"gputui: {bad}: workload.input.std: missing (required)\n"
    result = run("http://127.0.0.1:9", tmp_path / "x.json", "--concurrency", "1")
    assert result.returncode == 2  # lengths default to the TUI's, the step length does not
    assert "--step-seconds is required" in result.stderr.splitlines()[-1]


SSE = [
    b'data: {"choices":[{"index":0,"text":"a","finish_reason":null}]}\n\n',
    b'data: {"choices":[{"index":0,"text":"b","finish_reason":"length"}]}\n\n',
    b'data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}\n\n',
    b"data: [DONE]\n\n",
]


async def captured_bodies(tmp_path: Path, seed: str, *extra: str) -> list[bytes]:
    """The completion request bodies of one run against a server that records them."""
    response = chunked(200, [("Content-Type", "text/event-stream")], SSE)
    async with ReplayServer([response], model="sim") as server:
        proc = await asyncio.create_subprocess_exec(
            *GPUTUI,
            *("run", "--url", server.url, "--model", "sim", "--out", str(tmp_path / "r.json")),
            *("--scenario", "mixed", "--endpoint", "completions", "--seed", seed),
            *("--concurrency", "1", "--step-seconds", "1", "--warmup-seconds", "0"),
            *("--gpu-telemetry", "none", *extra),
            cwd=ROOT,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        _, stderr = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 0, stderr.decode()
        requests = list(server.requests)
    bodies = []
    for raw in requests:
        head, _, body = raw.partition(b"\r\n\r\n")
        if head.startswith(b"POST /v1/completions") and b'"stream":true' in body:
            bodies.append(body)
    return bodies


async def test_same_seed_sends_identical_requests(tmp_path: Path) -> None:
    first = await captured_bodies(tmp_path, "5", "--reuse-prompts")
    second = await captured_bodies(tmp_path, "5", "--reuse-prompts")
    other = await captured_bodies(tmp_path, "6", "--reuse-prompts")
    salted = await captured_bodies(tmp_path, "5")
    n = min(len(first), len(second), len(other), len(salted))
    assert n >= 5
    assert first[:n] == second[:n]
    # without --reuse-prompts each run salts its prompts: the same requests but for the salt
    for reused, fresh in zip(first[:n], salted[:n], strict=True):
        a, b = orjson.loads(reused), orjson.loads(fresh)
        assert a["max_tokens"] == b["max_tokens"] and a["prompt"] != b["prompt"]
        words, salted_words = a["prompt"].split(), b["prompt"].split()
        assert len(salted_words) == len(words)  # one token a word: the same length
        assert any(  # the lead word, k salt words, then the same prompt k words shorter
            salted_words[k + 1 :] == words[1 : len(words) - k] for k in range(3, 9)
        )
    assert len(set(first[:n])) == n  # every prompt unique
    assert all(a != b for a, b in zip(first[:n], other[:n], strict=True))
    lengths = {orjson.loads(b)["max_tokens"] for b in first[:n]}
    assert len(lengths) > 1  # mixed: a spread of output lengths
