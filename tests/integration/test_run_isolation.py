"""Run isolation and prefix-cache hit rates, as a user runs `gputui run` against the simulator.

The GPU-profile simulator caches prompt prefixes in 16-token blocks, like vLLM, and counts them in
vLLM's `vllm:prefix_cache_queries_total` / `vllm:prefix_cache_hits_total`.
"""

from __future__ import annotations

import asyncio
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from gputui.engine.arrivals import ArrivalProcess
from gputui.engine.client import ClientConfig, StreamingClient
from gputui.engine.load import LoadController
from gputui.engine.records import RequestRecord
from gputui.engine.target import parse_target
from gputui.metrics.conversations import turn_stats
from gputui.metrics.prefix_cache import SOURCE_COUNTERS, PrefixCacheMeter
from gputui.sim.gpu_profile import GpuProfileSpec
from gputui.sim.runner import SimProcess, start_background
from gputui.snapshot.models import Snapshot
from gputui.snapshot.store import load_snapshot
from gputui.telemetry.samples import ServerSample
from gputui.telemetry.server_metrics import ServerMetricsSource
from gputui.workloads.config import WorkloadConfig
from gputui.workloads.conversations import ConversationWorkload
from gputui.workloads.distributions import FixedDist
from gputui.workloads.prepare import prepare_workload
from tests.support.saved import saved

MODEL = "llama-3.1-8b"


@pytest.fixture(scope="module")
def gpu_sim() -> Iterator[SimProcess]:
    """The A100 simulator sending `cached_tokens` (vLLM's --enable-prompt-tokens-details): the
    usage figures are the truth the counter-based estimates are held against."""
    spec = GpuProfileSpec(gpu="a100-80gb-pcie", model=MODEL, prompt_tokens_details=True)
    with start_background(spec) as sim:
        yield sim


def counters(url: str) -> tuple[float, float]:
    """The simulator's (queried, hit) prefix-cache tokens so far."""
    found = {}
    for line in httpx.get(url + "/metrics", timeout=5).text.splitlines():
        if line.startswith("vllm:prefix_cache_"):
            found[line.split("{")[0]] = float(line.rsplit(" ", 1)[1])
    return found["vllm:prefix_cache_queries_total"], found["vllm:prefix_cache_hits_total"]


def run(url: str, out: Path, *extra: str, salt: int | None = None) -> tuple[str, Snapshot]:
    """`gputui run` in a subprocess (`salt`: a fixed salt instead of a random one)."""
    argv = ["run", "--url", url, "--input-tokens", "512", "--output-tokens", "16", "--step-seconds",
            "2", "--warmup-seconds", "0.5", "--out", str(out), *extra]  # fmt: skip
    code = "from gputui.cli import main; raise SystemExit(main())"
    if salt is not None:
        code = f"import gputui.workloads.prepare as p; p.new_salt = lambda: {salt}; {code}"
    result = subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return result.stdout, load_snapshot(out)


def test_the_same_run_twice_reads_nothing_from_the_first(
    gpu_sim: SimProcess, tmp_path: Path
) -> None:
    _, first = run(gpu_sim.url, tmp_path / "1.json", "--concurrency", "2")
    stdout, second = run(gpu_sim.url, tmp_path / "2.json", "--concurrency", "2")
    assert first.workload.prompt_salt != second.workload.prompt_salt
    for snap in (first, second):
        assert snap.prefix_cache is not None
        assert snap.prefix_cache["source"] in ("usage", SOURCE_COUNTERS)
        assert saved(snap.prefix_cache)["hit_rate"] < 0.05
        assert snap.workload.input_lengths is not None
        assert snap.workload.input_lengths.measured.mean == 512  # exact with the salt in
        assert snap.steps[0].prefix_cache_hit_rate is not None
        assert snap.steps[0].prefix_cache_warning is None
    assert "run salt" in stdout and "warning" not in stdout
    # reusing the prompts on purpose: the cache serves them, and that is no warning
    _, warm = run(gpu_sim.url, tmp_path / "3.json", "--concurrency", "2", "--reuse-prompts")
    assert warm.workload.prompt_salt is None
    again, reused = run(gpu_sim.url, tmp_path / "4.json", "--concurrency", "2", "--reuse-prompts")
    assert reused.prefix_cache is not None and saved(reused.prefix_cache)["hit_rate"] > 0.5
    assert reused.steps[0].prefix_cache_warning is None and "warning" not in again


def test_a_salted_run_served_from_cache_is_warned_about(
    gpu_sim: SimProcess, tmp_path: Path
) -> None:
    salt = secrets.randbits(62)  # one salt twice: as if the salt had not isolated the runs
    run(gpu_sim.url, tmp_path / "1.json", "--concurrency", "2", salt=salt)
    stdout, second = run(gpu_sim.url, tmp_path / "2.json", "--concurrency", "2", salt=salt)
    step = second.steps[0]
    assert step.prefix_cache_hit_rate is not None and step.prefix_cache_hit_rate > 0.5
    assert step.prefix_cache_warning is not None
    assert "served from the prefix cache (" in step.prefix_cache_warning
    lines = [line for line in stdout.splitlines() if "warning:" in line]
    assert any("salted to be cold" in line for line in lines), stdout


def test_multi_turn_hit_rates_per_turn_and_the_runs_total(
    gpu_sim: SimProcess, tmp_path: Path
) -> None:
    before = counters(gpu_sim.url)
    stdout, snap = run(
        gpu_sim.url, tmp_path / "mt.json", "--endpoint", "chat", "--sessions", "4", "--turns", "3",
        "--step-seconds", "4",
    )  # fmt: skip
    after = counters(gpu_sim.url)
    server_rate = (after[1] - before[1]) / (after[0] - before[0])
    assert snap.conversations is not None
    rows = saved(snap.conversations)["turns_by_turn"]
    rates = [row["prefix_cache_hit_rate"] for row in rows]
    assert len(rates) == 3 and all(rate is not None for rate in rates)
    assert rates[0] < 0.05 < rates[1] < rates[2]  # each turn finds its own history cached
    assert all(row["prefix_cache_source"] for row in rows)
    assert snap.prefix_cache is not None
    assert snap.prefix_cache["hit_rate"] == pytest.approx(server_rate, abs=0.02)
    turn_lines = [line for line in stdout.splitlines() if line.startswith("turn ")]
    assert len(turn_lines) == 3 and all("hit rate" in line for line in turn_lines)


class _Scraper:
    """The server's /metrics every `interval_s` in a thread, as the telemetry sampler reads them."""

    def __init__(self, url: str, interval_s: float) -> None:
        self._interval_s = interval_s
        self._source = ServerMetricsSource(url + "/metrics")
        self.samples: list[ServerSample] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            server = self._source.scrape().server
            if server is not None:
                self.samples.append(server)

    def __enter__(self) -> _Scraper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self._source.close()


async def _talk(url: str, workload: ConversationWorkload) -> list[RequestRecord]:
    records: list[RequestRecord] = []
    client = StreamingClient(
        ClientConfig(
            target=parse_target(url), model=MODEL, endpoint="chat", extra_body={"ignore_eos": True}
        )
    )
    load = LoadController(client, workload.build(), ArrivalProcess("constant"), records.append)
    load.set_load("concurrency", 4, 0)
    deadline = time.perf_counter() + 30
    while time.perf_counter() < deadline:
        if sum(r.turn == 3 and r.ok for r in records) >= 8:
            break
        await asyncio.sleep(0.05)
    load.set_load("concurrency", 0, 1)
    await load.stop(cancel=False, drain_timeout_s=30)
    await client.aclose()
    return records


@pytest.mark.parametrize("interval_s", [0.25, 1.0])
def test_without_cached_tokens_the_counters_give_the_hit_rates(
    gpu_sim: SimProcess, interval_s: float
) -> None:
    """vLLM's default (no `--enable-prompt-tokens-details`): usage carries no cached tokens.

    At 1 s (the telemetry sampler's interval) a run this short gives too few blocks to fit each
    turn's rate: the total holds, the turns are blurred.
    """
    prepared = prepare_workload(
        WorkloadConfig(input=FixedDist(tokens=384), output=FixedDist(tokens=16)),
        target=parse_target(gpu_sim.url),
        model=MODEL,
        endpoint="chat",
        backend="gputui-sim",
    )
    workload = ConversationWorkload(prepared.spec, 3)
    before = counters(gpu_sim.url)
    with _Scraper(gpu_sim.url, interval_s) as scraper:
        time.sleep(interval_s + 0.1)  # a scrape before the first request
        truth = asyncio.run(_talk(gpu_sim.url, workload))
        time.sleep(2.5 * interval_s)  # a scrape after the last request
    after = counters(gpu_sim.url)
    server_rate = (after[1] - before[1]) / (after[0] - before[0])
    stripped = [replace(r, cached_input_tokens=None) for r in truth]
    meter = PrefixCacheMeter(stripped, scraper.samples)
    total = meter.share(stripped)
    assert total is not None and total.source == SOURCE_COUNTERS
    assert total.requests >= 0.8 * sum(r.ok for r in truth)  # the last block may stay open
    assert total.hit_rate == pytest.approx(server_rate, abs=0.02)
    rows = turn_stats(stripped, meter)
    exact = turn_stats(truth)  # what usage said, for comparison
    assert [row["turn"] for row in rows] == [1, 2, 3]
    assert {row["prefix_cache_source"] for row in rows} == {SOURCE_COUNTERS}
    if interval_s > 0.5:
        return
    estimates = [rate for row in rows if (rate := row["prefix_cache_hit_rate"]) is not None]
    truths = [rate for row in exact if (rate := row["prefix_cache_hit_rate"]) is not None]
    assert len(estimates) == len(rows) and len(truths) == len(exact)
    assert estimates[0] < 0.05 < estimates[1] <= estimates[2], (estimates, truths)
    for estimate, true in zip(estimates, truths, strict=True):
        assert abs(estimate - true) < 0.12, (estimates, truths)  # turns 2 and 3 may blur
