"""Inference-server /metrics, normalized: vLLM, SGLang, TGI, llama.cpp and TensorRT-LLM (Triton).

Contract: `read_metrics(text, t_ns)` parses one scrape with prometheus-client's parser and returns a
`MetricsView`: the backend detected from the metric-name prefixes, a `ServerSample` (requests
running and waiting, KV-cache usage 0..1, preemptions, prompt and generation token counters, KV
blocks and block size where the server gives them, prefix-cache queried and hit tokens), and any
dcgm-exporter GPU series found in the same text (the simulator exposes both). A field the backend
does not expose is None, never 0.
Several series of one metric (vLLM's per-engine `engine` label, several models) are summed, except
KV usage, which takes the fullest series: that engine is the one that queues first.

Names (reference.md §4): vLLM `vllm:kv_cache_usage_perc` (V1) and its predecessor
`vllm:gpu_cache_usage_perc` (V0, removed in 0.12); KV blocks from `vllm:cache_config_info`'s
`num_gpu_blocks` and `block_size` labels. SGLang's `token_usage` and `max_total_num_tokens`.
Prefix cache (tokens): vLLM's `vllm:prefix_cache_queries_total` and `vllm:prefix_cache_hits_total`;
SGLang's `sglang:cached_tokens_total` against its `sglang:prompt_tokens_total`. TGI has
no KV metric; its token counters are the `_sum` of its per-request histograms, so they move when a
request finishes, not per token. llama.cpp's `requests_processing`/`requests_deferred`; its
`kv_cache_usage_ratio` exists only in older builds and forks. Triton's `nv_trt_llm_*` gauges carry
the quantity in a label (`request_type`, `kv_cache_block_type`). Speculative decoding counters
(vLLM, llama.cpp) and gauges (SGLang): see `spec_decode`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import httpx

from gputui.telemetry.dcgm import gpu_samples
from gputui.telemetry.prom import DEFAULT_TIMEOUT_S, PromIndex, parse
from gputui.telemetry.samples import GpuSample, ServerSample
from gputui.telemetry.scraper import MetricsScraper
from gputui.telemetry.spec_decode import sglang_spec_fields, spec_fields

BACKEND_PREFIXES: Final[tuple[tuple[str, str], ...]] = (
    ("vllm:", "vllm"),
    ("sglang:", "sglang"),
    ("llamacpp:", "llamacpp"),
    ("nv_trt_llm_", "trtllm"),
    ("trtllm_", "trtllm"),
    ("tgi_", "tgi"),
)
"""Metric-name prefix -> backend, checked in this order."""


@dataclass(frozen=True, slots=True)
class MetricsView:
    """One scrape, normalized."""

    backend: str | None
    server: ServerSample | None
    """None when the text has no series of a known inference server."""
    gpus: tuple[GpuSample, ...] = ()
    """GPU samples from dcgm-exporter series in the same text, if any."""


def detect_backend(index: PromIndex) -> str | None:
    """The inference server whose metric names the scrape carries; None when none is known."""
    for prefix, backend in BACKEND_PREFIXES:
        if any(name.startswith(prefix) for name in index.names):
            return backend
    return None


def _int(value: float | None) -> int | None:
    return None if value is None or not math.isfinite(value) else round(value)


def _fraction(value: float | None) -> float | None:
    return None if value is None else min(1.0, max(0.0, value))


def _ratio(used: float | None, capacity: float | None) -> float | None:
    if used is None or not capacity:
        return None
    return used / capacity


def _label_int(index: PromIndex, name: str, label: str) -> list[int]:
    out = []
    for sample in index.get(name):
        try:
            out.append(int(float(sample.labels.get(label, ""))))
        except ValueError:
            continue  # e.g. num_gpu_blocks="None" before profiling finished
    return out


def _vllm(index: PromIndex, t_ns: int) -> ServerSample:
    usage = index.highest("vllm:kv_cache_usage_perc")
    if usage is None:
        usage = index.highest("vllm:gpu_cache_usage_perc")
    blocks = _label_int(index, "vllm:cache_config_info", "num_gpu_blocks")
    sizes = _label_int(index, "vllm:cache_config_info", "block_size")
    blocks_total = sum(blocks) if blocks else None
    block_size = sizes[0] if sizes else None
    return ServerSample(
        t_ns=t_ns,
        backend="vllm",
        requests_running=_int(index.total("vllm:num_requests_running")),
        requests_waiting=_int(index.total("vllm:num_requests_waiting")),
        kv_cache_usage=_fraction(usage),
        preemptions_total=_int(index.total("vllm:num_preemptions_total")),
        prompt_tokens_total=_int(index.total("vllm:prompt_tokens_total")),
        generation_tokens_total=_int(index.total("vllm:generation_tokens_total")),
        kv_blocks_total=blocks_total,
        kv_block_size=block_size,
        kv_capacity_tokens=_capacity(blocks_total, block_size),
        engine_steps_total=_int(index.total("vllm:iteration_tokens_total_count")),
        step_tokens_total=_int(index.total("vllm:iteration_tokens_total_sum")),
        prefix_cache_queries_total=_int(index.total("vllm:prefix_cache_queries_total")),
        prefix_cache_hits_total=_int(index.total("vllm:prefix_cache_hits_total")),
        **spec_fields(index, "vllm:"),
    )


def _sglang(index: PromIndex, t_ns: int) -> ServerSample:
    capacity = index.total("sglang:max_total_num_tokens")
    usage = index.highest("sglang:token_usage")
    if usage is None:
        usage = _ratio(index.total("sglang:num_used_tokens"), capacity)
    pages = _label_int(index, "sglang:cache_config_info", "page_size")
    page = pages[0] if pages else None
    return ServerSample(
        t_ns=t_ns,
        backend="sglang",
        requests_running=_int(index.total("sglang:num_running_reqs")),
        requests_waiting=_int(index.total("sglang:num_queue_reqs")),
        kv_cache_usage=_fraction(usage),
        preemptions_total=_int(index.total("sglang:num_retracted_requests_total")),
        prompt_tokens_total=_int(index.total("sglang:prompt_tokens_total")),
        generation_tokens_total=_int(index.total("sglang:generation_tokens_total")),
        kv_blocks_total=None if capacity is None or not page else round(capacity) // page,
        kv_block_size=page,
        kv_capacity_tokens=_int(capacity),
        **_sglang_prefix_cache(index),
        **sglang_spec_fields(index),
    )


def _sglang_prefix_cache(index: PromIndex) -> dict[str, int | None]:
    """SGLang's cached prompt tokens (all `cache_source`s) against its prompt tokens."""
    hits = _int(index.total("sglang:cached_tokens_total"))
    queries = _int(index.total("sglang:prompt_tokens_total")) if hits is not None else None
    return {"prefix_cache_queries_total": queries, "prefix_cache_hits_total": hits}


def _tgi(index: PromIndex, t_ns: int) -> ServerSample:
    return ServerSample(
        t_ns=t_ns,
        backend="tgi",
        requests_running=_int(index.total("tgi_batch_current_size")),
        requests_waiting=_int(index.total("tgi_queue_size")),
        prompt_tokens_total=_int(index.total("tgi_request_input_length_sum")),
        generation_tokens_total=_int(index.total("tgi_request_generated_tokens_sum")),
    )


def _llamacpp(index: PromIndex, t_ns: int) -> ServerSample:
    return ServerSample(
        t_ns=t_ns,
        backend="llamacpp",
        requests_running=_int(index.total("llamacpp:requests_processing")),
        requests_waiting=_int(index.total("llamacpp:requests_deferred")),
        kv_cache_usage=_fraction(index.highest("llamacpp:kv_cache_usage_ratio")),
        prompt_tokens_total=_int(index.total("llamacpp:prompt_tokens_total")),
        generation_tokens_total=_int(index.total("llamacpp:tokens_predicted_total")),
        **spec_fields(index, "llamacpp:"),
    )


def _trtllm(index: PromIndex, t_ns: int) -> ServerSample:
    def request(kind: str) -> float | None:
        return index.total("nv_trt_llm_request_metrics", request_type=kind)

    def block(kind: str) -> float | None:
        return index.total("nv_trt_llm_kv_cache_block_metrics", kv_cache_block_type=kind)

    running = request("scheduled")
    if running is None:
        running = request("active")
    if running is None:
        running = index.total("trtllm_num_requests_running")  # trtllm-serve
    waiting = request("waiting")
    if waiting is None:
        waiting = index.total("trtllm_num_requests_waiting")
    usage = block("fraction")
    if usage is None:
        usage = _ratio(block("used"), block("max"))
    if usage is None:
        usage = index.highest("trtllm_kv_cache_utilization")
    blocks = _int(block("max"))
    size = _int(block("tokens_per"))
    if size is None:
        size = _int(index.highest("trtllm_kv_cache_tokens_per_block"))
    return ServerSample(
        t_ns=t_ns,
        backend="trtllm",
        requests_running=_int(running),
        requests_waiting=_int(waiting),
        kv_cache_usage=_fraction(usage),
        kv_blocks_total=blocks,
        kv_block_size=size,
        kv_capacity_tokens=_capacity(blocks, size),
    )


def _capacity(blocks: int | None, block_size: int | None) -> int | None:
    return None if blocks is None or block_size is None else blocks * block_size


_NORMALIZERS: Final[dict[str, Callable[[PromIndex, int], ServerSample]]] = {
    "vllm": _vllm,
    "sglang": _sglang,
    "tgi": _tgi,
    "llamacpp": _llamacpp,
    "trtllm": _trtllm,
}


def normalize(index: PromIndex, t_ns: int) -> MetricsView:
    """The normalized view of one parsed scrape."""
    backend = detect_backend(index)
    server = None if backend is None else _NORMALIZERS[backend](index, t_ns)
    return MetricsView(backend=backend, server=server, gpus=gpu_samples(index, t_ns))


def read_metrics(text: str, t_ns: int) -> MetricsView:
    """Parse and normalize Prometheus text (`MetricsUnavailable` if it is not Prometheus text)."""
    return normalize(parse(text), t_ns)


class ServerMetricsSource:
    """The telemetry sampler's server port: a view of the run's one `MetricsScraper`.

    `scrape()` normalizes the scraper's newest scrape when another reader (the histogram
    recorder) fetched one within `reuse_within_s` that this port has not shown yet, and sends a
    GET of its own otherwise: one stream of GETs feeds both the panel and the recorder.
    """

    name = "server"

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        clock: Callable[[], int] = time.perf_counter_ns,
        client: httpx.Client | None = None,
        scraper: MetricsScraper | None = None,
        reuse_within_s: float = 1.0,
    ) -> None:
        self.url = url
        self.scraper = (
            scraper
            if scraper is not None
            else MetricsScraper(url, timeout_s=timeout_s, clock=clock, client=client)
        )
        self._reuse_within_s = reuse_within_s
        self._shown_ns = -1

    def scrape(self) -> MetricsView:
        """One normalized scrape, shared or fresh (`MetricsUnavailable` on any failure).

        Stamped midway between sending and receiving: the server rendered it somewhere in between.
        """
        found = self.scraper.recent(self._shown_ns, self._reuse_within_s)
        if found is None:
            found = self.scraper.scrape()
        self._shown_ns = found.t_ns
        return normalize(found.index, found.t_ns)

    def close(self) -> None:
        """Close the HTTP connection."""
        self.scraper.close()
