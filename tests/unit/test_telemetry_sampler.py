"""The sampler: threads per source, immutable frames, error states, bounded whole-run traces."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable

import pytest

from gputui.errors import MetricsUnavailable
from gputui.telemetry.nvml import NvmlSource
from gputui.telemetry.sampler import (
    Archive,
    TelemetrySampler,
    downsample,
    flatten_states,
)
from gputui.telemetry.samples import GpuHealth, GpuIdentity, GpuSample, HostSample, ServerSample
from gputui.telemetry.server_metrics import MetricsView
from gputui.telemetry.setup import TelemetryConfig, build_sampler, open_gpu_port
from tests.fakes.fake_nvml import A100_80GB_PCIE, RTX_4090, FakeNvml


def wait_for(predicate: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.01)
    raise AssertionError("condition not met in time")


class FlakyServer:
    """Fails its first scrape, then reports a growing token counter."""

    url = "http://fake/metrics"

    def __init__(self) -> None:
        self.calls = 0
        self.closed = False

    def scrape(self) -> MetricsView:
        self.calls += 1
        if self.calls == 1:
            raise MetricsUnavailable("http://fake/metrics: unreachable (ConnectError)")
        sample = ServerSample(
            t_ns=time.perf_counter_ns(),
            backend="vllm",
            requests_running=3,
            generation_tokens_total=10 * self.calls,
        )
        gpu = GpuSample(index=0, uuid="GPU-sim", name="sim", t_ns=sample.t_ns, source="dcgm")
        return MetricsView(backend="vllm", server=sample, gpus=(gpu,))

    def close(self) -> None:
        self.closed = True


class BuggyHost:
    def sample(self) -> HostSample:
        raise ZeroDivisionError("a bug in a source")

    def close(self) -> None:
        pass


def test_archive_halves_resolution_and_keeps_the_newest() -> None:
    archive: Archive[int] = Archive(capacity=8)
    for i in range(100):
        archive.append(i)
    items = archive.items()
    assert len(items) <= 9
    assert items[0] == 0
    assert items[-1] == 99
    assert items == sorted(items)
    gaps = {b - a for a, b in itertools.pairwise(items[:-1])}
    assert len(gaps) == 1  # evenly spaced before the newest


def test_downsample() -> None:
    assert downsample(list(range(10)), 20) == list(range(10))
    assert downsample(list(range(101)), 5) == [0, 25, 50, 75, 100]
    assert downsample(list(range(10)), None) == list(range(10))
    assert downsample([1, 2, 3], 1) == [3]


def test_sampler_runs_sources_and_survives_errors() -> None:
    nvml = FakeNvml(cards=(A100_80GB_PCIE, RTX_4090))
    server = FlakyServer()
    sampler = TelemetrySampler(
        gpu=NvmlSource(nvml),
        server=server,
        host=BuggyHost(),
        gpu_interval_s=0.01,
        server_interval_s=0.01,
        host_interval_s=0.01,
    )
    first = sampler.latest()
    assert first.seq == 0
    assert first.state("gpu") is not None
    with sampler:
        wait_for(lambda: server.calls >= 3 and len(sampler.traces().gpu) >= 10)
        frame = sampler.latest()
        assert frame.seq > 0
        assert [g.index for g in frame.gpus] == [0, 1]  # NVML, not the server's DCGM series
        assert frame.server is not None
        assert frame.server.requests_running == 3
        states = flatten_states(frame.states)
        assert states["gpu"] == "nvml: ok"
        assert states["server"] == "vllm: ok"
        assert states["host"].startswith("host: error (ZeroDivisionError")
        with pytest.raises(AttributeError):
            frame.seq = 0  # type: ignore[misc]
    assert server.closed
    assert nvml.init_count == 0
    assert not [t for t in threading.enumerate() if t.name.startswith("gputui-telemetry")]
    traces = sampler.traces(downsample_to=4)
    assert len(traces.server) <= 4
    assert len(traces.gpu) <= 8  # 4 polls x 2 GPUs
    assert {g.index for g in traces.gpu} == {0, 1}
    counters = [s.generation_tokens_total or 0 for s in sampler.recent().server]
    assert counters == sorted(counters)


def test_stop_samples_the_server_once_more_after_the_run() -> None:
    """The last sample follows the run's last requests: the counters cover all of them."""
    server = FlakyServer()
    server.calls = 1  # past its failing scrape
    sampler = TelemetrySampler(server=server, absent={"gpu": "none"}, server_interval_s=60.0)
    sampler.start()
    wait_for(lambda: len(sampler.traces(downsample_to=None).server) == 1)
    assert len(sampler.traces(downsample_to=None).server) == 1
    stopping_ns = time.perf_counter_ns()
    sampler.stop()
    trace = sampler.traces(downsample_to=None).server
    assert server.calls == 3 and server.closed
    assert len(trace) == 2 and trace[-1].t_ns > stopping_ns
    assert trace[-1].generation_tokens_total == 30
    sampler.stop()  # twice: nothing more
    assert server.calls == 3


def test_a_failing_server_is_not_sampled_at_stop() -> None:
    server = FlakyServer()
    sampler = TelemetrySampler(server=server, absent={"gpu": "none"}, server_interval_s=60.0)
    sampler.start()
    wait_for(lambda: server.calls >= 1)
    sampler.stop()  # the only scrape failed: the server is not answering, do not wait on it
    assert server.calls == 1 and server.closed
    assert sampler.traces(downsample_to=None).server == ()


def test_gpu_samples_come_from_the_server_text_when_there_is_no_gpu_port() -> None:
    server = FlakyServer()
    sampler = TelemetrySampler(
        server=server, absent={"gpu": "NVML: not found"}, server_interval_s=0.01
    )
    assert flatten_states(sampler.latest().states)["gpu"] == "none: unavailable (NVML: not found)"
    with sampler:
        wait_for(lambda: sampler.latest().gpus != ())
    assert sampler.gpu_source == "dcgm (via /metrics)"
    assert sampler.identities() == ()


def test_identities_from_the_gpu_port() -> None:
    class Port:
        name = "fake"

        def sample(self) -> tuple[GpuSample, ...]:
            return ()

        def identities(self) -> tuple[GpuIdentity, ...]:
            return (GpuIdentity(index=0, uuid="GPU-x", name="X"),)

        def health(self, index: int) -> GpuHealth:
            return GpuHealth()

        def close(self) -> None:
            pass

    assert TelemetrySampler(gpu=Port()).identities()[0].uuid == "GPU-x"


def test_open_gpu_port_falls_back_and_explains(monkeypatch: pytest.MonkeyPatch) -> None:
    port, status = open_gpu_port("auto", None, FakeNvml())
    assert port is not None
    assert status == "ok"
    port.close()
    from gputui.telemetry import smi

    monkeypatch.setattr(smi, "find_nvidia_smi", lambda: None)
    port, status = open_gpu_port("auto", None, FakeNvml(mode="no_library"))
    assert port is None
    assert status.startswith("unavailable: NVML: NVML library")
    assert "nvidia-smi: nvidia-smi not found on PATH" in status
    port, status = open_gpu_port("none")
    assert port is None
    assert status == "not used: GPU telemetry disabled"


def test_build_sampler_with_everything_absent(monkeypatch: pytest.MonkeyPatch) -> None:
    from gputui.telemetry import smi

    monkeypatch.setattr(smi, "find_nvidia_smi", lambda: None)
    sampler = build_sampler(TelemetryConfig(nvml_module=FakeNvml(mode="no_gpu"), host=False))
    states = flatten_states(sampler.latest().states)
    assert states["gpu"].startswith("none: unavailable (NVML: no NVIDIA GPU found")
    assert states["server"] == "none: unavailable (no metrics URL)"
    assert states["host"] == "none: unavailable (disabled)"
    assert sampler.nvml_status.startswith("unavailable: NVML: no NVIDIA GPU")
    sampler.start()
    sampler.stop()


def test_run_flags_become_a_config() -> None:
    import argparse

    from gputui.cli.shared_flags import add_telemetry_arguments
    from gputui.cli.typed import take
    from gputui.errors import UsageError
    from gputui.telemetry.setup import TelemetryFlags, telemetry_config

    parser = argparse.ArgumentParser()
    add_telemetry_arguments(parser)
    config = telemetry_config(take(TelemetryFlags, parser.parse_args([])), "http://10.0.0.5:8000/")
    assert config.metrics_url == "http://10.0.0.5:8000/metrics"
    assert config.gpu == "auto"
    assert config.gpu_interval_s == 0.25
    assert config.host is True
    argv = ["--metrics-url", "http://n:8002", "--dcgm-url", "http://n:9400", "--gpu-hz", "2"]
    config = telemetry_config(
        take(TelemetryFlags, parser.parse_args([*argv, "--no-host-telemetry"])), "x"
    )
    assert (config.metrics_url, config.dcgm_url) == (
        "http://n:8002/metrics",
        "http://n:9400/metrics",
    )
    assert config.gpu_interval_s == 0.5
    assert config.host is False
    off = telemetry_config(
        take(TelemetryFlags, parser.parse_args(["--no-server-metrics"])), "http://h"
    )
    assert off.metrics_url is None
    with pytest.raises(UsageError, match="--metrics-url"):
        telemetry_config(
            take(TelemetryFlags, parser.parse_args(["--metrics-url", "n:8002"])), "http://h"
        )


def test_slow_gpu_ports_are_polled_at_most_once_a_second() -> None:
    from gputui.telemetry.dcgm import DcgmSource

    sampler = build_sampler(
        TelemetryConfig(dcgm_url="http://127.0.0.1:9/metrics", host=False, gpu_interval_s=0.25)
    )
    assert isinstance(sampler._gpu, DcgmSource)
    assert sampler._intervals["gpu"] == 1.0
    assert sampler.nvml_status == "not used: GPUs read from dcgm-exporter"
    sampler.stop()
