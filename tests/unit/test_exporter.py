"""gputui's own /metrics (`frontends.exporter`, `frontends.outputs`) and the example dashboard."""

from __future__ import annotations

import json
import re
import socket
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import REGISTRY

from gputui.cli import main
from gputui.errors import UsageError
from gputui.frontends.exporter import (
    METRIC_NAMES,
    TTFT_BUCKETS_S,
    GputuiCollector,
    Histogram,
    RequestTotals,
)
from gputui.frontends.outputs import RunOutputs
from gputui.metrics.sla import Sla
from tests.support.records import rec

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "examples" / "grafana-gputui.json"
HISTOGRAMS = ("gputui_ttft_seconds", "gputui_tpot_seconds", "gputui_itl_seconds")
DECLARED = set(METRIC_NAMES) | {
    f"{h}_{part}"
    for h in (*HISTOGRAMS, "gputui_e2e_seconds")
    for part in ("bucket", "sum", "count")
}
"""Every sample name gputui may export."""


def test_histogram_buckets_are_prometheus_le_buckets() -> None:
    histogram = Histogram((0.1, 1.0))
    histogram.add(np.array([0.05, 0.1, 0.5, 1.0, 3.0, np.nan]))
    family = histogram.family("gputui_x", "x")
    buckets = {s.labels["le"]: s.value for s in family.samples if s.name.endswith("_bucket")}
    assert buckets == {"0.1": 2, "1": 4, "+Inf": 5}  # a value on a bound is in its bucket
    total = next(s.value for s in family.samples if s.name.endswith("_sum"))
    assert total == pytest.approx(4.65)
    assert TTFT_BUCKETS_S[0] <= 0.005 and TTFT_BUCKETS_S[-1] >= 600  # ms to minutes


def _totals() -> RequestTotals:
    totals = RequestTotals(lambda: Sla(ttft_p95_s=0.1, tpot_p95_s=0.05))
    records = [
        rec(sent_ms=0, end_ms=180, tokens_ms=[50, 100, 150, 180], input_tokens=10),  # good
        rec(sent_ms=0, end_ms=900, tokens_ms=[500, 900], input_tokens=10),  # TTFT over
        rec(sent_ms=0, end_ms=5, ok=False, error="http_503"),
        # within both bounds, but 3 tokens of the 8 asked: short, so not good (the goodput's rule)
        rec(sent_ms=0, end_ms=150, tokens_ms=[50, 100, 150], input_tokens=10, requested=8),
    ]
    totals.take([], records)
    return totals


def test_the_exposition_parses_and_names_only_what_it_declares() -> None:
    collector = GputuiCollector(_totals())
    from prometheus_client.registry import CollectorRegistry

    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    text = generate_latest(registry).decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in families.values()
        for s in f.samples
    }
    assert samples[("gputui_requests_total", (("outcome", "ok"),))] == 3
    assert samples[("gputui_requests_total", (("outcome", "http_503"),))] == 1
    assert samples[("gputui_good_requests_total", ())] == 1
    assert samples[("gputui_output_tokens_total", ())] == 9
    assert samples[("gputui_input_tokens_total", ())] == 30
    assert samples[("gputui_ttft_seconds_count", ())] == 3
    assert samples[("gputui_itl_seconds_count", ())] == 6  # one gap per token after the first
    assert samples[("gputui_ttft_seconds_bucket", (("le", "0.05"),))] == 2
    exported = {s[0] for s in samples}
    assert exported <= DECLARED
    assert not any(n.startswith("gputui") for n in generate_latest(REGISTRY).decode().split())


def test_the_server_serves_the_registry_and_a_port_in_use_is_one_line() -> None:
    outputs = RunOutputs(None, ("127.0.0.1", 0), lambda: Sla())
    try:
        assert outputs.url is not None
        with urllib.request.urlopen(outputs.url, timeout=5) as response:
            text = response.read().decode()
        names = {f.name for f in text_string_to_metric_families(text)}
        assert {"gputui_requests", "gputui_build_info"} <= names
        assert outputs.address is not None
        in_use = r"^--serve-metrics 127\.0\.0\.1:\d+: address already in use$"
        with pytest.raises(UsageError, match=in_use):
            RunOutputs(None, outputs.address, lambda: Sla())
    finally:
        outputs.close()
    with socket.socket() as probe:  # closed: nothing listens there any more
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(outputs.address)


def test_a_records_path_that_cannot_be_written_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"--records .*: cannot write: .*folder"):
        RunOutputs(tmp_path, None, lambda: Sla())
    with pytest.raises(UsageError, match="no such file or directory"):
        RunOutputs(tmp_path / "missing" / "r.jsonl", None, lambda: Sla())


def test_cli_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["run", "--url", "http://127.0.0.1:9", "--serve-metrics", "host:99999"])
    bad = capsys.readouterr().err
    assert exited.value.code == 2 and len(bad.splitlines()) == 1
    assert "--serve-metrics: not HOST:PORT or PORT" in bad
    snap = tmp_path / "old.json"
    fixture = ROOT / "tests" / "fixtures" / "snapshots" / "a100-80gb-pcie.json"
    snap.write_bytes(fixture.read_bytes())
    assert main(["records", str(snap)]) == 1
    old = capsys.readouterr().err
    assert len(old.splitlines()) == 1 and "no per-request records" in old


def test_the_example_dashboard_parses_and_uses_only_exported_names() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    used = {name for e in exprs for name in re.findall(r"\bgputui_[a-z0-9_]+", e)}
    assert used <= DECLARED, used - DECLARED
    required = {"gputui_requests_total", "gputui_output_tokens_total", "gputui_in_flight_requests",
                "gputui_load_level", "gputui_ttft_seconds_bucket", "gputui_itl_seconds_bucket",
                "gputui_e2e_seconds_bucket"}  # fmt: skip
    assert required <= used
