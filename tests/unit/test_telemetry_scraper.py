"""The one /metrics scraper: each GET parsed once and shared by the panel and the recorder."""

from __future__ import annotations

import httpx
import pytest

from gputui.errors import MetricsUnavailable
from gputui.telemetry.histogram_recorder import HistogramRecorder, recorder_for
from gputui.telemetry.sampler import TelemetrySampler
from gputui.telemetry.scraper import MetricsScraper, Scrape
from gputui.telemetry.server_metrics import ServerMetricsSource

URL = "http://127.0.0.1:9/metrics"


def vllm_text(running: int, ttft_count: int) -> str:
    return (
        "# TYPE vllm:num_requests_running gauge\n"
        f'vllm:num_requests_running{{model_name="m"}} {running}\n'
        "# TYPE vllm:time_to_first_token_seconds histogram\n"
        f'vllm:time_to_first_token_seconds_bucket{{le="0.1",model_name="m"}} {ttft_count}\n'
        f'vllm:time_to_first_token_seconds_bucket{{le="+Inf",model_name="m"}} {ttft_count}\n'
        f'vllm:time_to_first_token_seconds_count{{model_name="m"}} {ttft_count}\n'
        f'vllm:time_to_first_token_seconds_sum{{model_name="m"}} {0.05 * ttft_count}\n'
    )


class FakeServer:
    """Counts GETs; the n-th answers `running = n`, `ttft count = 10 n`."""

    def __init__(self) -> None:
        self.gets = 0

    def handle(self, request: httpx.Request) -> httpx.Response:
        assert request.method == "GET"
        self.gets += 1
        return httpx.Response(200, text=vllm_text(self.gets, 10 * self.gets))


class Clock:
    def __init__(self) -> None:
        self.now_ns = 1_000_000_000

    def __call__(self) -> int:
        self.now_ns += 1_000_000  # 1 ms a read: sent and received stamps differ
        return self.now_ns


def make(server: FakeServer, clock: Clock) -> MetricsScraper:
    client = httpx.Client(transport=httpx.MockTransport(server.handle))
    return MetricsScraper(URL, clock=clock, client=client)


def test_every_listener_hears_each_scrape_once() -> None:
    server, clock = FakeServer(), Clock()
    scraper = make(server, clock)
    heard: list[Scrape] = []
    scraper.subscribe(heard.append)
    first, second = scraper.scrape(), scraper.scrape()
    assert server.gets == scraper.gets == 2
    assert heard == [first, second]
    assert first.t_ns < second.t_ns
    assert second.index.total("vllm:num_requests_running") == 2.0
    scraper.unsubscribe(heard.append)
    scraper.scrape()
    assert len(heard) == 2


def test_the_panel_reuses_the_recorders_scrape_and_the_recorder_hears_the_panels() -> None:
    server, clock = FakeServer(), Clock()
    scraper = make(server, clock)
    source = ServerMetricsSource(URL, scraper=scraper, clock=clock)
    recorder = HistogramRecorder(URL, scraper=scraper, clock=clock)
    assert recorder.scrape()  # the recorder's tick: GET 1
    view = source.scrape()  # the panel's tick finds it unshown and fresh: no GET
    assert server.gets == 1
    assert view.server is not None and view.server.requests_running == 1
    view = source.scrape()  # already shown: the panel sends its own GET 2 ...
    assert server.gets == 2
    assert view.server is not None and view.server.requests_running == 2
    window = recorder.between(0, view.server.t_ns)  # ... which the recorder kept too
    assert window is not None and window.end_ns == view.server.t_ns
    assert window.histograms["ttft"].count == pytest.approx(10.0)
    assert server.gets == 2


def test_a_stale_scrape_is_not_reused() -> None:
    server, clock = FakeServer(), Clock()
    scraper = make(server, clock)
    source = ServerMetricsSource(URL, scraper=scraper, clock=clock, reuse_within_s=0.5)
    scraper.scrape()
    clock.now_ns += 600_000_000
    view = source.scrape()
    assert server.gets == 2
    assert view.server is not None and view.server.requests_running == 2


def test_the_recorder_shares_the_samplers_scraper_only_for_the_same_url() -> None:
    server, clock = FakeServer(), Clock()
    source = ServerMetricsSource(URL, scraper=make(server, clock))
    sampler = TelemetrySampler(server=source)
    shared = recorder_for(URL, sampler)
    shared.scrape()
    assert source.scraper.gets == 1
    other = recorder_for("http://127.0.0.1:9/other", sampler)
    other.stop()
    shared.stop()  # the shared scraper stays open for the sampler
    assert source.scrape().server is not None
    sampler.stop()
    with pytest.raises(MetricsUnavailable, match="closed"):
        source.scraper.scrape()


def test_a_failed_scrape_is_counted_by_the_recorder_and_heard_by_nobody() -> None:
    scraper = MetricsScraper(
        URL, client=httpx.Client(transport=httpx.MockTransport(lambda _r: httpx.Response(500)))
    )
    heard: list[Scrape] = []
    scraper.subscribe(heard.append)
    recorder = HistogramRecorder(URL, scraper=scraper)
    assert not recorder.scrape()
    assert recorder.failures == 1 and "HTTP 500" in (recorder.last_error or "")
    assert heard == [] and scraper.latest is None
