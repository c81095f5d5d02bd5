"""Server /metrics normalization: vLLM (both name generations), SGLang, TGI, llama.cpp, Triton."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from gputui.errors import MetricsUnavailable, UsageError
from gputui.telemetry.prom import NO_METRICS_HINT, fetch, metrics_url, parse
from gputui.telemetry.server_metrics import detect_backend, read_metrics
from tests.support.fixtures import split_response

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "metrics"


def text(name: str) -> str:
    return (FIXTURES / name).read_text()


def real(name: str) -> str:
    status, headers, body = split_response(name)
    assert status == 200
    assert ("Content-Type", "text/plain; version=0.0.4") in headers
    return body.decode()


def test_vllm_current_names_sum_engines_and_take_the_fullest_kv() -> None:
    view = read_metrics(text("vllm_v1.txt"), 5)
    s = view.server
    assert view.backend == "vllm"
    assert s is not None
    assert s.t_ns == 5
    assert (s.requests_running, s.requests_waiting) == (14, 3)
    assert s.kv_cache_usage == pytest.approx(0.62)
    assert s.preemptions_total == 3
    assert s.prompt_tokens_total == 200704
    assert s.generation_tokens_total == 52453
    assert (s.kv_blocks_total, s.kv_block_size) == (54000, 16)
    assert s.kv_capacity_tokens == 54000 * 16
    assert view.gpus == ()


def test_vllm_old_names() -> None:
    s = read_metrics(text("vllm_v0.txt"), 0).server
    assert s is not None
    assert s.backend == "vllm"
    assert s.kv_cache_usage == pytest.approx(0.873)  # vllm:gpu_cache_usage_perc
    assert (s.requests_running, s.requests_waiting, s.preemptions_total) == (12, 5, 17)
    assert s.kv_blocks_total is None  # num_gpu_blocks="None"
    assert s.kv_capacity_tokens is None
    assert s.kv_block_size == 16


def test_vllm_prefers_the_current_kv_name_when_both_are_exposed() -> None:
    both = text("vllm_v1.txt") + (
        "# TYPE vllm:gpu_cache_usage_perc gauge\n"
        'vllm:gpu_cache_usage_perc{engine="0",model_name="m"} 0.99\n'
    )
    s = read_metrics(both, 0).server
    assert s is not None
    assert s.kv_cache_usage == pytest.approx(0.62)


def test_sglang() -> None:
    view = read_metrics(text("sglang.txt"), 0)
    s = view.server
    assert view.backend == "sglang"
    assert s is not None
    assert (s.requests_running, s.requests_waiting) == (162, 2826)
    assert s.kv_cache_usage == pytest.approx(0.28)
    assert s.kv_capacity_tokens == 442354
    assert s.preemptions_total == 4
    assert s.prompt_tokens_total == 8_128_902
    assert s.generation_tokens_total == 7_557_572


def test_sglang_prefix_cache_from_cached_tokens_by_source() -> None:
    assert read_metrics(text("sglang.txt"), 0).server.prefix_cache_hits_total is None  # type: ignore[union-attr]
    added = (
        "# TYPE sglang:cached_tokens_total counter\n"
        'sglang:cached_tokens_total{model_name="m",cache_source="device"} 3000.0\n'
        'sglang:cached_tokens_total{model_name="m",cache_source="host"} 168.0\n'
    )
    s = read_metrics(text("sglang.txt") + added, 0).server
    assert s is not None
    assert (s.prefix_cache_queries_total, s.prefix_cache_hits_total) == (8_128_902, 3168)


def test_sglang_usage_from_used_tokens_when_token_usage_is_missing() -> None:
    lines = [ln for ln in text("sglang.txt").splitlines() if "token_usage" not in ln]
    s = read_metrics("\n".join(lines) + "\n", 0).server
    assert s is not None
    assert s.kv_cache_usage == pytest.approx(123859 / 442354)


def test_tgi_has_no_kv_metric_and_counts_tokens_from_histogram_sums() -> None:
    s = read_metrics(text("tgi.txt"), 0).server
    assert s is not None
    assert s.backend == "tgi"
    assert (s.requests_running, s.requests_waiting) == (32, 7)
    assert s.kv_cache_usage is None
    assert s.preemptions_total is None
    assert s.prompt_tokens_total == 201000
    assert s.generation_tokens_total == 102912


@pytest.mark.parametrize(
    ("name", "running", "waiting", "prompt", "generated"),
    [
        ("llama_server.metrics.txt", 0, 0, 2438, 14892),
        ("llama_server.metrics_under_load.txt", 4, 4, 415, 1664),
    ],
)
def test_llamacpp_real_captures(
    name: str, running: int, waiting: int, prompt: int, generated: int
) -> None:
    view = read_metrics(real(name), 0)
    s = view.server
    assert view.backend == "llamacpp"
    assert s is not None
    assert (s.requests_running, s.requests_waiting) == (running, waiting)
    assert (s.prompt_tokens_total, s.generation_tokens_total) == (prompt, generated)
    assert s.kv_cache_usage is None  # removed upstream (PR #13660)
    assert s.preemptions_total is None


def test_llamacpp_older_builds_report_kv_usage() -> None:
    s = read_metrics(text("llamacpp_old.txt"), 0).server
    assert s is not None
    assert s.kv_cache_usage == pytest.approx(0.4375)
    assert (s.requests_running, s.requests_waiting) == (2, 1)


def test_trtllm_via_triton() -> None:
    view = read_metrics(text("trtllm_triton.txt"), 0)
    s = view.server
    assert view.backend == "trtllm"
    assert s is not None
    assert (s.requests_running, s.requests_waiting) == (4, 3)  # scheduled, waiting
    assert s.kv_cache_usage == pytest.approx(1560 / 6240)  # used / max without "fraction"
    assert (s.kv_blocks_total, s.kv_block_size) == (6240, 64)
    assert s.kv_capacity_tokens == 6240 * 64
    assert s.prompt_tokens_total is None


def test_trtllm_fraction_label_wins() -> None:
    extra = (
        'nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="fraction",model="tensorrt_llm",'
        'version="1"} 0.4875\n'
    )
    body = text("trtllm_triton.txt").replace(
        "# HELP nv_trt_llm_general", extra + "# HELP nv_trt_llm_general"
    )
    s = read_metrics(body, 0).server
    assert s is not None
    assert s.kv_cache_usage == pytest.approx(0.4875)


def test_unknown_and_dcgm_only_text_has_no_backend() -> None:
    assert detect_backend(parse("# TYPE up gauge\nup 1\n")) is None
    view = read_metrics(text("dcgm_exporter.txt"), 0)
    assert view.backend is None
    assert view.server is None
    assert len(view.gpus) == 2


def test_not_prometheus_text_is_a_clear_error() -> None:
    with pytest.raises(MetricsUnavailable, match="not Prometheus text"):
        read_metrics('{"detail":"Not Found"}', 0)


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000/metrics"),
        ("http://127.0.0.1:8000/", "http://127.0.0.1:8000/metrics"),
        ("https://node:8002/metrics", "https://node:8002/metrics"),
        ("http://h:9400/custom/path", "http://h:9400/custom/path"),
    ],
)
def test_metrics_url(given: str, expected: str) -> None:
    assert metrics_url(given) == expected


@pytest.mark.parametrize("bad", ["127.0.0.1:8000", "ftp://h/metrics", "http://", "http://h:x/"])
def test_metrics_url_rejects_unusable_urls(bad: str) -> None:
    with pytest.raises(UsageError):
        metrics_url(bad)


@pytest.mark.parametrize(
    "name", ["llama_cpp_python.metrics_404.txt", "transformers_serve.metrics_404.txt"]
)
def test_fetch_404_says_which_flag_exposes_metrics(name: str) -> None:
    status, headers, body = split_response(name)

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, headers=headers, content=body)

    with (
        httpx.Client(transport=httpx.MockTransport(handler)) as client,
        pytest.raises(MetricsUnavailable) as caught,
    ):
        fetch("http://h/metrics", client)
    assert NO_METRICS_HINT in str(caught.value)
    assert "404" in str(caught.value)


def test_fetch_unreachable_and_server_errors() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    with (
        httpx.Client(transport=httpx.MockTransport(refuse)) as client,
        pytest.raises(MetricsUnavailable, match="unreachable"),
    ):
        fetch("http://h/metrics", client)

    def boom(request: httpx.Request) -> httpx.Response:
        return httpx.Response(503)

    with (
        httpx.Client(transport=httpx.MockTransport(boom)) as client,
        pytest.raises(MetricsUnavailable, match="HTTP 503"),
    ):
        fetch("http://h/metrics", client)
