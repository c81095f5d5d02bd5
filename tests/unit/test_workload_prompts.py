"""Token-exact prompts: calibrated against fake servers of each /tokenize dialect, and a BPE."""

from __future__ import annotations

import itertools
import random
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from gputui.engine.target import Endpoint, parse_target
from gputui.engine.workload import RequestSpec
from gputui.sim.tokenizer import count_tokens
from gputui.workloads.config import DatasetConfig, WorkloadConfig
from gputui.workloads.counters import (
    METHOD_SERVER,
    LocalCounter,
    WordCounter,
    detect_server_counter,
)
from gputui.workloads.distributions import FixedDist, LognormalDist, UniformDist
from gputui.workloads.prepare import PreparedRun, prepare_workload
from gputui.workloads.prompts import LEAD, WORDS

TARGET = parse_target("http://fake.test:8000")
TEMPLATE = 7
"""Tokens a fake chat template adds around the messages."""


def billed(body: dict[str, Any], *, chat: bool) -> int:
    """What the fake server bills: the simulator's tokenizer, plus TEMPLATE for chat."""
    if chat:
        text = " ".join(str(m["content"]) for m in body["messages"])
        return count_tokens(text) + TEMPLATE
    return count_tokens(str(body["prompt"])) + 1  # a BOS token


def fake_server(dialect: str, *, usage: bool = True) -> tuple[httpx.Client, list[str]]:
    """A server with one /tokenize dialect (or none) and usage-reporting completions."""
    paths: list[str] = []

    def handle(request: httpx.Request) -> httpx.Response:
        paths.append(request.url.path)
        body = orjson.loads(request.content) if request.content else {}
        if request.url.path == "/tokenize":
            if dialect == "vllm" and "messages" in body:
                return httpx.Response(200, json={"count": billed(body, chat=True)})
            if dialect == "vllm" and "prompt" in body:
                return httpx.Response(200, json={"count": billed(body, chat=False)})
            if dialect == "llamacpp":  # ignores fields it does not know
                text = str(body.get("content", ""))
                n = count_tokens(text) + (1 if body.get("add_special") and text else 0)
                return httpx.Response(200, json={"tokens": list(range(n))})
            if dialect == "tgi" and "inputs" in body:
                n = billed({"prompt": body["inputs"]}, chat=False)
                return httpx.Response(200, json=[{"id": i} for i in range(n)])
            return httpx.Response(404 if dialect == "none" else 422, json={"error": "no"})
        if request.url.path.endswith("completions") and usage:
            chat = request.url.path.endswith("/chat/completions")
            tokens = billed(body, chat=chat)
            return httpx.Response(200, json={"usage": {"prompt_tokens": tokens}})
        return httpx.Response(404)

    return httpx.Client(transport=httpx.MockTransport(handle)), paths


def prepare(
    workload: WorkloadConfig, endpoint: Endpoint, dialect: str = "vllm", **kwargs: Any
) -> PreparedRun:
    client, _ = fake_server(dialect, usage=kwargs.pop("usage", True))
    return prepare_workload(
        workload, target=TARGET, model="m", endpoint=endpoint, http=client, **kwargs
    )


def bill(spec: RequestSpec, endpoint: Endpoint) -> int:
    if endpoint == "chat":
        messages = spec.messages or ({"role": "user", "content": spec.prompt},)
        return billed({"messages": messages}, chat=True)
    return billed({"prompt": spec.prompt}, chat=False)


FIXED = WorkloadConfig(input=FixedDist(tokens=1024), output=FixedDist(tokens=256))
MIXED = WorkloadConfig(
    input=LognormalDist(mean=600, std=500, min=8, max=4000),
    output=UniformDist(min=1, max=64),
    seed=11,
)
SHARED = WorkloadConfig(
    input=FixedDist(tokens=3072), output=FixedDist(tokens=8), shared_prefix_tokens=2048
)


@pytest.mark.parametrize("dialect", ["vllm", "llamacpp", "tgi"])
def test_each_tokenize_dialect_is_detected(dialect: str) -> None:
    client, _ = fake_server(dialect)
    counter = detect_server_counter(client, TARGET, "m")
    assert counter is not None
    assert counter.dialect == dialect
    assert counter.count("hello world") == 3  # BOS + 2


def test_no_tokenize_endpoint() -> None:
    client, _ = fake_server("none")
    assert detect_server_counter(client, TARGET, "m") is None


@pytest.mark.parametrize("endpoint", ["completions", "chat"])
@pytest.mark.parametrize("workload", [FIXED, MIXED, SHARED], ids=["fixed", "mixed", "shared"])
def test_vllm_tokenize_makes_every_request_exact(
    endpoint: Endpoint, workload: WorkloadConfig
) -> None:
    prepared = prepare(workload, endpoint)
    assert prepared.method == METHOD_SERVER
    assert prepared.exact
    assert prepared.details["input_tokens_check"]["matched"] == 8
    source = prepared.spec.build()
    for request_id in range(300):
        spec = source.next(request_id)
        assert spec.input_tokens == bill(spec, endpoint), request_id


@pytest.mark.parametrize("dialect", ["llamacpp", "tgi"])
def test_chat_template_overhead_comes_from_a_usage_probe(dialect: str) -> None:
    prepared = prepare(MIXED, "chat", dialect)
    assert prepared.method == "server /tokenize (exact; chat template overhead from a usage probe)"
    source = prepared.spec.build()
    for request_id in range(200):
        spec = source.next(request_id)
        assert spec.input_tokens == bill(spec, "chat")


def test_no_tokenize_falls_back_to_approximate_and_says_so() -> None:
    prepared = prepare(FIXED, "completions", "none", usage=False)
    assert prepared.method == "approximate (one token per common word assumed)"
    assert not prepared.exact
    assert any("no /tokenize" in note for note in prepared.notes)
    probed = prepare(FIXED, "completions", "none")
    assert probed.method == (
        "approximate (1.00 tokens per word and the special-token overhead from two usage probes)"
    )
    spec = probed.spec.build().next(0)
    assert spec.input_tokens == bill(spec, "completions")  # exact here, but not promised


def test_shared_prefix_is_shared_and_the_rest_unique() -> None:
    prepared = prepare(SHARED, "chat")
    source = prepared.spec.build()
    requests = [source.next(i) for i in range(50)]
    systems = {r.messages[0]["content"] for r in requests if r.messages}
    assert len(systems) == 1
    (system,) = systems
    assert count_tokens(system) == 2048
    assert len({r.prompt.split()[1] for r in requests}) > 40
    completions = prepare(SHARED, "completions").spec.build().next(0)
    assert completions.messages is None
    assert completions.prompt.startswith(system)


def test_prefixes_are_unique_and_differ_from_the_first_word() -> None:
    plan = prepare(FIXED, "completions").spec.plan
    source = prepare(FIXED, "completions", isolate=False).spec.build()
    assert source.next(0).prompt.split()[1] != plan.salt.split()[0]
    prompts = [source.next(i).prompt for i in range(20_000)]
    prefixes = [" ".join(p.split()[1 : 1 + plan.prefix_words]) for p in prompts]
    assert len(set(prefixes)) == len(prefixes)
    assert all(a.split()[1] != b.split()[1] for a, b in itertools.pairwise(prompts))


@pytest.mark.parametrize("endpoint", ["completions", "chat"])
def test_each_run_salts_the_start_of_every_prompt_and_stays_exact(endpoint: Endpoint) -> None:
    runs = [prepare(MIXED, endpoint) for _ in range(3)]
    salts = [run.spec.plan.salt for run in runs]
    assert len(set(salts)) == 3
    assert all(len(salt.split()) == runs[0].spec.plan.salt_words >= 3 for salt in salts)
    for run in runs:
        assert run.details["prompt_salt"] == run.spec.plan.salt
        assert run.details["prompt_isolation"] == "per-run salt"
        assert run.details["input_tokens_check"]["matched"] == 8
    sources = [run.spec.build() for run in runs]
    for request_id in range(200):
        specs = [source.next(request_id) for source in sources]
        assert len({spec.input_tokens for spec in specs}) == 1  # same lengths, same seed
        for spec, salt in zip(specs, salts, strict=True):
            assert spec.input_tokens == bill(spec, endpoint), request_id
            assert spec.prompt.startswith(f"{LEAD} {salt} ")  # the first block differs per run
        assert len({spec.prompt for spec in specs}) == 3


def test_reused_or_shared_prompts_carry_no_salt() -> None:
    reused = [prepare(MIXED, "chat", isolate=False) for _ in range(2)]
    assert [run.details["prompt_salt"] for run in reused] == [None, None]
    assert reused[0].details["prompt_isolation"] == "off (--reuse-prompts)"
    first, second = (run.spec.build() for run in reused)
    assert [first.next(i) for i in range(50)] == [second.next(i) for i in range(50)]
    shared = prepare(SHARED, "chat")
    assert shared.details["prompt_salt"] is None
    assert shared.details["prompt_isolation"] == "off (shared prefixes on purpose)"
    plain = FIXED.model_copy(update={"unique_prefix": False})
    assert prepare(plain, "completions").details["prompt_salt"] is None


def test_without_unique_prefix_equal_lengths_give_equal_prompts() -> None:
    same = FIXED.model_copy(update={"unique_prefix": False})
    source = prepare(same, "completions").spec.build()
    assert len({source.next(i).prompt for i in range(0, 500, 61)}) == 1


def test_same_seed_same_requests_in_any_order() -> None:
    ids = list(range(3000))
    first = prepare(MIXED, "chat", isolate=False).spec.build()
    expected = [first.next(i) for i in ids]
    random.Random(1).shuffle(ids)
    second = prepare(MIXED, "chat", isolate=False).spec.build()
    again = {i: second.next(i) for i in ids}
    assert expected == [again[i] for i in range(3000)]
    other = prepare(MIXED.model_copy(update={"seed": 12}), "chat", isolate=False).spec.build()
    assert [other.next(i) for i in range(20)] != expected[:20]


def test_min_tokens_follows_the_setting_and_the_backend() -> None:
    on = prepare(FIXED, "completions", backend="vllm").spec.build().next(3)
    assert on.extra_body == {"min_tokens": on.max_tokens}
    assert prepare(FIXED, "completions", backend="llamacpp").spec.build().next(3).extra_body is None
    forced = FIXED.model_copy(update={"min_tokens": True})
    assert prepare(forced, "completions", backend="tgi").spec.build().next(3).extra_body


def test_next_is_cheap() -> None:
    source = prepare(MIXED, "chat").spec.build()
    source.next(0)
    start = time.perf_counter_ns()
    for request_id in range(1, 5001):
        source.next(request_id)
    per_call_us = (time.perf_counter_ns() - start) / 5000 / 1e3
    assert per_call_us < 200  # typically ~5 µs; generous for a shared CI core


def test_dataset_prompts_are_exact_and_keep_their_output_lengths(tmp_path: Path) -> None:
    lines = [
        {
            "prompt": "Explain the KV cache to a new engineer.\nUse two paragraphs.",
            "output_tokens": 7,
        },
        {"prompt": "Why is decode memory-bound?", "output_tokens": 3},
        {"prompt": "a " * 50, "output_tokens": 5},
    ]
    path = tmp_path / "d.jsonl"
    path.write_text("\n".join(orjson.dumps(x).decode() for x in lines))
    workload = WorkloadConfig(dataset=DatasetConfig(path="d.jsonl"))
    prepared = prepare(workload, "chat", base_dir=tmp_path)
    assert prepared.exact
    assert prepared.details["dataset"]["entries_used"] == 3
    source = prepared.spec.build()
    seen = set()
    for request_id in range(60):
        spec = source.next(request_id)
        assert spec.input_tokens == bill(spec, "chat")
        seen.add(spec.max_tokens)
        assert spec.prompt.split()[-1] in ("paragraphs.", "memory-bound?", "a")
    assert seen == {3, 5, 7}


def test_sharegpt_empirical_lengths(tmp_path: Path) -> None:
    data = [
        {"conversations": [{"value": "w " * n}, {"value": "x " * (2 * n)}]} for n in (10, 20, 30)
    ]
    (tmp_path / "sg.json").write_bytes(orjson.dumps(data))
    workload = WorkloadConfig(
        input={"kind": "empirical", "dataset": "sg.json"},  # type: ignore[arg-type]
        output={"kind": "empirical", "dataset": "sg.json"},  # type: ignore[arg-type]
    )
    prepared = prepare(workload, "completions", base_dir=tmp_path)
    assert prepared.details["input_distribution"]["n"] == 3
    source = prepared.spec.build()
    lengths = {source.next(i).max_tokens for i in range(100)}
    assert lengths == {20, 40, 60}
    base = prepared.spec.plan.base_tokens
    assert {source.next(i).input_tokens for i in range(100)} == {max(n, base) for n in (10, 20, 30)}


def test_a_real_bpe_tokenizer_json(tmp_path: Path) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    models, pre_tokenizers = tokenizers.models, tokenizers.pre_tokenizers
    processors, trainers = tokenizers.processors, tokenizers.trainers
    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    # Train on half the pool, so the other half's words are split into several tokens.
    corpus = [" ".join(WORDS[: len(WORDS) // 2])] * 50 + [LEAD]
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=600, show_progress=False))
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", special_tokens=[("<s>", tok.token_to_id(LEAD))]
    )
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    counter = LocalCounter(path)
    client, _ = fake_server("none", usage=False)
    prepared = prepare_workload(
        MIXED,
        target=TARGET,
        model="m",
        endpoint="completions",
        http=client,
        token_counter="tokenizer",
        tokenizer=path,
    )
    assert prepared.method == "tokenizer.json (exact)"
    pool = prepared.spec.plan.words
    assert 16 <= len(pool) < len(WORDS)
    assert all(counter.count(f"{LEAD} {w}") - counter.count(LEAD) == 1 for w in pool)
    source = prepared.spec.build()
    for request_id in range(200):
        spec = source.next(request_id)
        assert counter.count(spec.prompt) == spec.input_tokens


def test_word_counter_is_the_approximation() -> None:
    counter = WordCounter()
    assert counter.count("one two  three") == 3
    assert counter.count_chat([{"role": "user", "content": "x"}]) is None
    assert not counter.exact
