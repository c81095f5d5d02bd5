"""TTFAT, reasoning share, per-event token counts and spec-decode acceptance in the metrics."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import numpy as np
import orjson
import pytest

from gputui.cli.sim_flags import add_sim_arguments
from gputui.cli.typed import take
from gputui.engine.event_tokens import EventCounterSpec, stream_counting
from gputui.engine.records import RequestRecord
from gputui.metrics.sla import Sla
from gputui.metrics.step import StepSpec, aggregate_step
from gputui.metrics.streams_text import stream_text
from gputui.metrics.window import RollingWindow
from gputui.sim.command import SimOptions, profile_spec
from gputui.sim.fixed import FixedProfileSpec
from gputui.sim.stream_style import SpecDecoder, StreamStyle
from gputui.snapshot.assemble import request_totals
from gputui.snapshot.models import Step, step_from_result, step_reasoning_share, step_ttfat
from gputui.telemetry.samples import ServerSample
from gputui.telemetry.server_metrics import read_metrics
from gputui.telemetry.spec_decode import run_spec_decode, spec_decode_line
from tests.support.records import ns, rec

SPEC = StepSpec(
    index=0, mode="concurrency", level=2, start_ns=ns(0), measure_start_ns=ns(0), end_ns=ns(10_000)
)


def thinking(sent_ms: float, answer_ms: float, reasoning: int) -> RequestRecord:
    """Tokens every 10 ms from 100 ms after sending; the answer starts at `answer_ms`."""
    stamps = [sent_ms + 100 + 10 * i for i in range(10)]
    base = rec(sent_ms=sent_ms, end_ms=stamps[-1], tokens_ms=stamps, requested=10)
    return replace(base, first_answer_ns=ns(answer_ms), reasoning_tokens=reasoning)


def test_ttfat_without_an_answer_is_censored_at_e2e_and_counted() -> None:
    answered = [thinking(1000 * i, 1000 * i + 150, 5) for i in range(3)]
    silent = replace(thinking(5000, 0, 10), first_answer_ns=None)  # thought to the end
    result = aggregate_step(SPEC, [*answered, silent], Sla())
    assert result.ttfat_no_answer == 1
    assert result.ttfat_s is not None and result.ttfat_s.n == 4
    # the silent one counts its E2E (tokens end 190 ms after sending), the others 150 ms
    assert result.ttfat_s.mean == pytest.approx((3 * 0.15 + 0.19) / 4)
    assert "no answer: 1" in stream_text(result)
    # a TTFAT bound fails the silent one as a request, and the step on its P95
    judged = aggregate_step(SPEC, [*answered, silent], Sla(ttfat_p95_s=0.17))
    assert judged.goodput_share == pytest.approx(0.75)
    assert judged.sla_ok is False
    assert aggregate_step(SPEC, [*answered, silent], Sla(ttft_p95_s=0.17)).sla_ok is True


def test_step_reports_ttfat_and_reasoning_share_beside_ttft() -> None:
    records = [thinking(0, 160, 6), thinking(1000, 1180, 8)]
    result = aggregate_step(SPEC, records, Sla())
    assert result.ttft_s.p50 == pytest.approx(0.1)
    assert result.ttfat_s is not None
    assert result.ttfat_s.n == 2
    assert result.ttfat_s.mean == pytest.approx((0.16 + 0.18) / 2)
    assert result.reasoning_tokens == 14
    assert result.reasoning_share == pytest.approx(14 / 20)
    assert result.event_tokens_method == "events"
    assert stream_text(result) == (
        "TTFAT p50/p95 170.0/179.0 ms (p95 CI 160.0-open), reasoning 70.0 %, "
    )
    step = step_from_result(result)
    loaded = Step.model_validate(orjson.loads(orjson.dumps(step.model_dump(mode="json"))))
    ttfat = step_ttfat(loaded)
    assert ttfat is not None
    assert ttfat.p95 == pytest.approx(0.179)
    assert step_reasoning_share(loaded) == pytest.approx(0.7)
    totals = request_totals(records)
    assert totals["reasoning_tokens_total"] == 14
    assert totals["event_tokens_methods"] == {"events": 2}


def test_without_thinking_there_is_no_ttfat_key() -> None:
    plain = rec(sent_ms=0, end_ms=300, tokens_ms=[100, 200, 300])
    result = aggregate_step(SPEC, [plain], Sla())
    assert result.ttfat_s is None
    assert result.reasoning_share is None
    assert stream_text(result) == ""
    dumped = step_from_result(result).model_dump(mode="json")
    assert "ttfat_s" not in dumped
    assert "reasoning_share" not in dumped
    assert dumped["event_tokens_method"] == "events"


def test_counted_events_carry_their_own_tokens_into_throughput_and_itl() -> None:
    # 3 events of 4, 4 and 2 tokens; the window [0, 150 ms) holds the first two events only.
    base = rec(sent_ms=0, end_ms=200, tokens_ms=[50, 100, 200], output_tokens=10)
    counted = replace(
        base,
        event_tokens=np.array([4, 4, 2], dtype=np.int32),
        event_tokens_method="continuous_usage",
    )
    spec = replace(SPEC, end_ns=ns(150))
    result = aggregate_step(spec, [counted], Sla())
    assert result.output_tokens_per_s == pytest.approx(8 / 0.15)
    assert result.itl_s.n == 9
    assert result.itl_s.mean == pytest.approx(0.15 / 9)
    assert result.event_tokens_method == "continuous_usage"


def test_rolling_window_has_ttfat_only_with_thinking() -> None:
    window = RollingWindow(60)
    window.add([rec(sent_ms=0, end_ms=300, tokens_ms=[100, 200, 300])])
    stats = window.stats(ns(1000))
    assert stats.ttfat_s is None
    assert stats.reasoning_share is None
    window.add([thinking(400, 560, 5)])
    stats = window.stats(ns(2000))
    assert stats.ttfat_s is not None
    assert stats.ttfat_s.n == 1
    assert stats.ttfat_s.p50 == pytest.approx(0.16)
    assert stats.reasoning_share == pytest.approx(5 / 13)


VLLM_SPEC = """# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m"} 2.0
vllm:spec_decode_num_drafts_total{model_name="m",engine="0"} 100.0
vllm:spec_decode_num_draft_tokens_total{model_name="m",engine="0"} 400.0
vllm:spec_decode_num_accepted_tokens_total{model_name="m",engine="0"} 250.0
"""


def test_vllm_spec_decode_counters_give_the_acceptance_rate() -> None:
    server = read_metrics(VLLM_SPEC, 1).server
    assert server is not None
    assert server.spec_draft_tokens_total == 400
    assert server.spec_accepted_tokens_total == 250
    assert server.spec_accept_rate == pytest.approx(0.625)
    assert server.spec_accept_length == pytest.approx(3.5)
    plain = read_metrics('vllm:num_requests_running{model_name="m"} 1.0\n', 1).server
    assert plain is not None
    assert plain.spec_accept_rate is None


def test_sglang_and_llamacpp_spec_decode() -> None:
    sglang = read_metrics("sglang:spec_accept_rate 0.8\nsglang:spec_accept_length 3.2\n", 1).server
    assert sglang is not None
    assert sglang.spec_accept_rate == pytest.approx(0.8)
    assert sglang.spec_accept_length == pytest.approx(3.2)
    text = (
        "llamacpp:requests_processing 1\n"
        "llamacpp:spec_decode_num_drafts_total 10\n"
        "llamacpp:spec_decode_num_draft_tokens_total 50\n"
        "llamacpp:spec_decode_num_accepted_tokens_total 20\n"
    )
    llama = read_metrics(text, 1).server
    assert llama is not None
    assert llama.spec_accept_rate == pytest.approx(0.4)


def test_run_acceptance_counts_only_the_run() -> None:
    def sample(drafts: int, draft: int, accepted: int) -> ServerSample:
        return ServerSample(
            t_ns=0,
            backend="vllm",
            spec_drafts_total=drafts,
            spec_draft_tokens_total=draft,
            spec_accepted_tokens_total=accepted,
        )

    # Before the run: 1000 draft tokens at 90 %; during it: 400 more of which 100 accepted.
    spec = run_spec_decode(
        [sample(250, 1000, 900), sample(300, 1200, 950), sample(350, 1400, 1000)]
    )
    assert spec is not None
    assert spec["acceptance_rate"] == pytest.approx(0.25)
    assert spec["mean_accepted_length"] == pytest.approx(2.0)
    assert spec_decode_line(spec) == (
        "speculative decoding (server): acceptance 25.0 %, 2.00 tokens per step "
        "(100 of 400 draft tokens)"
    )
    assert run_spec_decode([ServerSample(t_ns=0, backend="vllm")]) is None
    assert spec_decode_line(None) is None


def test_spec_decoder_accepts_until_the_first_rejection() -> None:
    decoder = SpecDecoder(4, 0.7, seed=1)
    steps = [decoder.step(1000) for _ in range(20_000)]
    assert set(steps) <= {1, 2, 3, 4, 5}
    # E[accepted] = 0.7 + 0.7^2 + 0.7^3 + 0.7^4 = 1.7731
    assert np.mean(steps) - 1 == pytest.approx(1.7731, abs=0.03)
    assert decoder.accepted_tokens / decoder.draft_tokens == pytest.approx(1.7731 / 4, abs=0.01)
    assert decoder.step(1) == 1  # never past the request's last token


def test_stream_counting_by_backend(tmp_path: Path) -> None:
    assert stream_counting("vllm") == {
        "continuous_usage": True,
        "event_counter": EventCounterSpec(kind="server", dialect="vllm"),
    }
    assert stream_counting("llamacpp")["event_counter"].dialect == "llamacpp"
    assert stream_counting("llamacpp")["continuous_usage"] is False
    file = str(tmp_path / "tokenizer.json")
    assert stream_counting("tgi", file)["event_counter"] == EventCounterSpec(
        kind="tokenizer", tokenizer_file=file
    )
    assert stream_counting(None) == {"continuous_usage": False, "event_counter": None}


def sim_args(*argv: str) -> SimOptions:
    parser = argparse.ArgumentParser()
    add_sim_arguments(parser)
    return take(SimOptions, parser.parse_args(list(argv)))


def test_sim_flags_shape_the_stream() -> None:
    spec = profile_spec(
        sim_args(
            "--reasoning-share",
            "0.6",
            "--reasoning-field",
            "reasoning_content",
            "--tokens-per-event",
            "4",
            "--tool-calls",
            "--spec-decode-k",
            "3",
            "--spec-accept",
            "0.5",
        )
    )
    assert isinstance(spec, FixedProfileSpec)
    assert spec.stream_style == StreamStyle(
        reasoning_share=0.6,
        reasoning_field="reasoning_content",
        tool_calls=True,
        tokens_per_event=4,
        spec_decode_k=3,
        spec_accept=0.5,
    )
    assert profile_spec(sim_args()).stream_style is None
    with pytest.raises(ValueError, match="fixed profile"):
        profile_spec(
            sim_args("--gpu", "h100-sxm", "--model", "llama-3.1-8b", "--spec-decode-k", "2")
        )


@pytest.mark.parametrize("flag", ["--reasoning-share=1.5", "--tokens-per-event=0"])
def test_sim_rejects_bad_stream_flags(flag: str) -> None:
    with pytest.raises(SystemExit):
        sim_args(flag)
