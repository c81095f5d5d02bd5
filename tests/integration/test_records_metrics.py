"""`--records` and `--serve-metrics` on a real 3-step `gputui run` against the simulator.

The records file is read with the standard library only (json, statistics): its rows per step
are the snapshot's counts and a step's P95 TTFT recomputed from it is the snapshot's; `gputui
records SNAPSHOT` writes the same rows again. /metrics is scraped while the run goes and once
more as the server closes: it parses with prometheus-client's own parser and its counts are the
snapshot's.
"""

from __future__ import annotations

import json
import statistics
import threading
import urllib.request
from collections import Counter
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gputui.cli import main
from gputui.frontends.outputs import RunOutputs
from gputui.sim.runner import SimProcess
from tests.support.launch import free_port


def _scrape(url: str) -> dict[str, float]:
    """Every sample of one scrape, by name and labels (parsed by prometheus-client)."""
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    samples: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            samples[f"{sample.name}{{{labels}}}"] = sample.value
    return samples


def test_records_and_metrics_of_a_three_step_run(
    fixed_sim: SimProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out, records = tmp_path / "run.json", tmp_path / "records.jsonl"
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    during: list[dict[str, float]] = []
    final: list[dict[str, float]] = []
    stop = threading.Event()

    def scrape_while_running() -> None:
        while not stop.wait(0.4):
            try:
                during.append(_scrape(url))
            except OSError:
                continue

    close = RunOutputs.close

    def scrape_then_close(self: RunOutputs) -> None:
        if self.url is not None:
            final.append(_scrape(self.url))  # the last scrape a Prometheus could make
        close(self)

    monkeypatch.setattr(RunOutputs, "close", scrape_then_close)
    scraper = threading.Thread(target=scrape_while_running, daemon=True)
    scraper.start()
    try:
        code = main(
            ["run", "--url", fixed_sim.url, "--model", "sim", "--concurrency", "2,4,8",
             "--step-seconds", "1.5", "--warmup-seconds", "0.3", "--input-tokens", "16",
             "--output-tokens", "8", "--out", str(out), "--records", str(records),
             "--serve-metrics", str(port), "--gpu-telemetry", "none"]
        )  # fmt: skip
    finally:
        stop.set()
        scraper.join(timeout=5)
    assert code == 0
    snap = json.loads(out.read_text())
    rows = [json.loads(line) for line in records.read_text().splitlines()]

    # every request once; rows per step are the snapshot's counts
    totals = snap["totals"]
    assert len(rows) == len({r["id"] for r in rows}) == totals["requests"]
    per_step = Counter(r["step"] for r in rows)
    steps = snap["steps"]
    assert len(steps) == 3
    for step in steps:
        assert per_step[step["index"]] == step["requests_ok"] + step["requests_failed"] > 0
    unmeasured = sum(
        s["requests_warmup"] + (s.get("requests_burst") or 0) + (s.get("requests_under_burst") or 0)
        for s in steps
    )
    assert per_step[None] == unmeasured
    # one step's P95 TTFT, recomputed with the standard library, within 0.1 ms
    last = steps[-1]
    ttft = sorted(r["ttft_s"] for r in rows if r["step"] == last["index"] and r["ok"])
    p95 = statistics.quantiles(ttft, n=100, method="inclusive")[94]
    assert abs(p95 - last["ttft_s"]["p95"]) < 1e-4
    assert {r["level"] for r in rows if r["step"] == last["index"]} == {last["level"]}
    assert all(r["sent_ns"] <= r["first_token_ns"] <= r["last_ns"] for r in rows if r["ok"])

    # the saved session gives the same rows again
    again = tmp_path / "again.jsonl"
    assert main(["records", str(out), "-o", str(again)]) == 0
    assert sorted(again.read_text().splitlines()) == sorted(records.read_text().splitlines())

    # /metrics: scraped during the run, and at the end equal to the snapshot
    assert during, "no scrape answered during the run"
    assert any(s.get("gputui_in_flight_requests{}", 0) > 0 for s in during)
    assert any(s.get("gputui_requests_total{outcome=ok}", 0) > 0 for s in during)
    (end,) = final
    assert end["gputui_requests_total{outcome=ok}"] == totals["requests_ok"]
    assert sum(v for k, v in end.items() if k.startswith("gputui_requests_total")) == len(rows)
    assert end["gputui_output_tokens_total{}"] == totals["output_tokens_total"]
    assert end["gputui_input_tokens_total{}"] == totals["input_tokens_total"]
    assert end["gputui_ttft_seconds_count{}"] == totals["requests_ok"]
    assert end["gputui_e2e_seconds_bucket{le=+Inf}"] == totals["requests_ok"]
    assert end["gputui_good_requests_total{}"] == sum(1 for r in rows if r["good"])
    assert end["gputui_steps_finished_total{}"] == 3
    assert end["gputui_load_level{mode=concurrency}"] == 8
    tokens = sum(r["output_tokens"] for r in rows if r["ok"])
    assert end["gputui_itl_seconds_count{}"] == tokens - totals["requests_ok"]
