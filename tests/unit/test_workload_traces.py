"""Trace files: format detection, the three formats, window and time scale, errors in one line."""

from __future__ import annotations

import argparse
import dataclasses
import gc
from pathlib import Path

import pytest

from gputui.cli.shared_flags import add_workload_source_arguments
from gputui.cli.typed import take
from gputui.engine.workload import SourceExhausted
from gputui.errors import UsageError
from gputui.settings import LoadPlanFlags, RunOptions, run_source_plan
from gputui.workloads.conversations import ConversationWorkload
from gputui.workloads.distributions import FixedDist
from gputui.workloads.prompts import WORDS, make_plan
from gputui.workloads.replay import GC_FORCE_FACTOR, GC_GAP_NS, TraceWorkload, _collect_if_due
from gputui.workloads.source import PreparedWorkload
from gputui.workloads.sources import SourceFlags
from gputui.workloads.traces import TraceError, detect_format, load_trace, parse_window

EXAMPLES = Path(__file__).parents[2] / "scenarios" / "traces"


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_detects_each_format_from_its_first_line() -> None:
    assert detect_format('{"timestamp": 0}') == "mooncake"
    assert detect_format("TIMESTAMP,ContextTokens,GeneratedTokens") == "azure"
    assert (
        detect_format("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type")
        == "burstgpt"
    )
    assert detect_format("a,b,c") is None


def test_azure_dates_with_seven_fraction_digits_become_offsets(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "a.csv",
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:46.6805900,374,44\n"
        "2023-11-16 18:15:50.9951690,396,109\n"
        "2023-11-16 18:15:47.1805900,879,0\n",
    )
    trace = load_trace(path)
    assert trace.format == "azure"
    offsets = [e.offset_ns for e in trace.entries]
    assert offsets == pytest.approx([0, 500_000_000, 4_314_579_000], abs=1_000)  # 1 us
    assert [(e.input_tokens, e.output_tokens) for e in trace.entries] == [
        (374, 44),
        (879, 1),  # a zero-length output is sent with 1 token
        (396, 109),
    ]


def test_mooncake_hash_ids_and_window_and_scale(tmp_path: Path) -> None:
    lines = [
        '{"timestamp": 1000, "input_length": 1100, "output_length": 10, "hash_ids": [1, 2, 3]}',
        '{"timestamp": 3000, "input_length": 600, "output_length": 20, "hash_ids": [1, 9]}',
        '{"timestamp": 9000, "input_length": 50, "output_length": 30, "hash_ids": [7]}',
    ]
    path = write(tmp_path, "m.jsonl", "\n".join(lines) + "\n")
    trace = load_trace(path, window=(1.0, 8.0), time_scale=0.5)  # from the first arrival
    assert [(e.offset_ns, e.input_tokens) for e in trace.entries] == [(0, 600)]
    trace = load_trace(path, window=(1.0, 9.0), time_scale=0.5)
    assert [e.offset_ns for e in trace.entries] == [0, 3_000_000_000]  # 6 s at half time
    whole = load_trace(path, time_scale=0.5)
    assert [e.offset_ns for e in whole.entries] == [0, 1_000_000_000, 4_000_000_000]
    assert whole.entries[0].hash_ids == (1, 2, 3)
    assert whole.duration_s == pytest.approx(4.0)


def test_burstgpt_seconds(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "b.csv",
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
        "5,ChatGPT,472,18,490,Conversation log\n"
        "45,GPT-4,1087,0,1087,API log\n",
    )
    trace = load_trace(path)
    assert trace.format == "burstgpt"
    assert [(e.offset_ns, e.input_tokens, e.output_tokens) for e in trace.entries] == [
        (0, 472, 18),
        (40_000_000_000, 1087, 1),
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("hello\n", "unknown trace format"),
        ('{"timestamp": 1, "input_length": 5}\n', "m.txt:1: not a Mooncake trace line"),
        ('{"timestamp": 1, "input_length": -5, "output_length": 1}\n', "bad token count"),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,5\n", "m.txt:2: bad azure"),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\n", "no requests"),
    ],
)
def test_malformed_traces_are_one_line_errors(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, "m.txt", text)
    with pytest.raises(TraceError, match=message) as info:
        load_trace(path)
    assert "\n" not in str(info.value)
    assert info.value.exit_code == 2


def test_window_syntax() -> None:
    assert parse_window("10:40") == (10.0, 40.0)
    assert parse_window(":5") == (0.0, 5.0)
    assert parse_window("1m:90s") == (60.0, 90.0)
    assert parse_window("500ms:") == (0.5, float("inf"))
    with pytest.raises(UsageError):
        parse_window("40:10")


def test_the_shipped_examples_load() -> None:
    for name, fmt in (
        ("azure_example.csv", "azure"),
        ("burstgpt_example.csv", "burstgpt"),
        ("mooncake_example.jsonl", "mooncake"),
    ):
        trace = load_trace(EXAMPLES / name)
        assert trace.format == fmt
        assert len(trace.entries) == 200
        assert 30 < trace.duration_s <= 61


def plan_workload() -> PreparedWorkload:
    plan = make_plan(
        "completions", WORDS, seed=0, unique_prefix=True, shared_prefix_tokens=0, overhead=1
    )
    return PreparedWorkload(plan=plan, input=None, output=None)


def test_mooncake_prompts_share_their_hash_id_blocks_token_for_token(tmp_path: Path) -> None:
    lines = [
        '{"timestamp": 0, "input_length": 1100, "output_length": 10, "hash_ids": [1, 2, 3]}',
        '{"timestamp": 5, "input_length": 700, "output_length": 20, "hash_ids": [1, 9]}',
    ]
    trace = load_trace(write(tmp_path, "m.jsonl", "\n".join(lines)))
    source = TraceWorkload(plan_workload(), trace).build()
    a, b = source.next(0), source.next(1)
    assert len(a.prompt.split()) == 1100 and len(b.prompt.split()) == 700  # one token per word
    assert a.input_tokens == 1100 and b.input_tokens == 700
    shared = 1 + 512  # the lead word and hash id 1's block
    assert a.prompt.split()[:shared] == b.prompt.split()[:shared]
    assert a.prompt.split()[shared] != b.prompt.split()[shared]


def test_dataset_order_sends_each_entry_once() -> None:
    entries = tuple((f"text {i}", 2, 5) for i in range(10))
    base = plan_workload()
    for order in ("sequential", "shuffle"):
        spec = PreparedWorkload(
            plan=base.plan, input=None, output=None, entries=entries, order=order, seed=3
        )
        source = spec.build()
        bodies = [source.next(k).prompt.rsplit(" ", 2)[-1] for k in range(10)]
        assert sorted(bodies, key=int) == [str(i) for i in range(10)]
        assert (bodies == [str(i) for i in range(10)]) == (order == "sequential")
        with pytest.raises(SourceExhausted):
            source.next(10)


def run_args(*argv: str) -> RunOptions:
    parser = argparse.ArgumentParser()
    add_workload_source_arguments(parser)
    return RunOptions(url="http://127.0.0.1:9", source=take(SourceFlags, parser.parse_args(argv)))


def test_a_trace_sets_a_one_step_plan_without_warmup() -> None:
    args = run_args("--trace", str(EXAMPLES / "azure_example.csv"), "--time-scale", "0.5")
    args, plan = run_source_plan(args)
    assert plan.trace is not None
    assert args.plan.step_seconds == pytest.approx(plan.trace.duration_s + 1.0)
    assert args.plan.warmup_seconds == 0.0
    assert args.plan.rate and args.plan.rate[0] > 0
    assert args.shared.input_tokens and args.shared.output_tokens


def test_sessions_set_the_users_and_conflict_with_a_trace() -> None:
    args = run_args("--sessions", "16", "--turns", "5", "--think-time", "uniform:500,1500")
    args, plan = run_source_plan(args)
    assert args.plan.concurrency == (16,)
    assert plan.conversations and plan.turns == 5 and plan.think_ms is not None
    with pytest.raises(UsageError, match="not both"):
        run_source_plan(run_args("--sessions", "2", "--trace", "x.csv"))
    with pytest.raises(UsageError, match="need --trace"):
        run_source_plan(run_args("--time-scale", "2"))


def test_sessions_with_a_rate_cap_the_open_loop() -> None:
    args = run_args("--sessions", "8", "--turns", "3")
    args = dataclasses.replace(args, plan=LoadPlanFlags(rate=(2.0,)))
    args, plan = run_source_plan(args)
    assert args.plan.rate == (2.0,) and args.plan.concurrency is None  # the rate stays the load
    lengths = FixedDist(tokens=64)
    base = dataclasses.replace(plan_workload(), input=lengths, output=lengths)
    workload = plan.engine_workload(base)
    assert isinstance(workload, ConversationWorkload)
    assert (workload.turns, workload.max_active) == (3, 8)


def test_the_replay_collects_garbage_only_in_gaps_or_when_it_piles_up() -> None:
    was = gc.isenabled()
    gc.disable()
    try:
        gc.collect()
        threshold = gc.get_threshold()[0]
        junk: list[list[int]] = [[] for _ in range(threshold + 10)]  # tracked, past the threshold
        before = gc.get_count()[0]
        assert before >= threshold
        _collect_if_due(GC_GAP_NS // 2)  # the next arrival is close: leave it
        assert gc.get_count()[0] >= before
        _collect_if_due(GC_GAP_NS)  # a gap: collect the young generation now
        assert gc.get_count()[0] < threshold
        junk += [[] for _ in range(GC_FORCE_FACTOR * threshold)]
        _collect_if_due(0)  # no gap, but too much piled up: collect anyway
        assert gc.get_count()[0] < threshold
    finally:
        if was:
            gc.enable()
    assert junk
