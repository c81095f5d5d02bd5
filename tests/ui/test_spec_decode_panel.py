"""The server panel shows speculative decoding's acceptance from the simulator's /metrics."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from gputui.sim.fixed import FixedProfileSpec
from gputui.sim.runner import start_background
from gputui.sim.stream_style import StreamStyle
from gputui.telemetry.sampler import Traces
from gputui.telemetry.samples import ServerSample
from gputui.telemetry.server_metrics import read_metrics
from gputui.ui.render.gpu import gpu_lines
from gputui.ui.render.spans import texts
from gputui.ui.replay import load_views

FIXTURE = Path(__file__).parent / "fixtures" / "sweep-a100.json"


def _scrape(url: str) -> ServerSample:
    text = httpx.get(url + "/metrics", timeout=5).text
    sample = read_metrics(text, time.perf_counter_ns()).server
    assert sample is not None
    return sample


def _complete(url: str, n: int) -> None:
    for _ in range(n):
        body = {"model": "sim", "prompt": "hi", "max_tokens": 64, "ignore_eos": True}
        assert httpx.post(url + "/v1/completions", json=body, timeout=30).status_code == 200


def test_the_server_panel_shows_the_recent_acceptance_rate() -> None:
    style = StreamStyle(spec_decode_k=4, spec_accept=0.7, seed=3)
    spec = FixedProfileSpec(ttft_ms=5, itl_ms=1, served_model_name="sim", stream_style=style)
    with start_background(spec) as sim:
        _complete(sim.url, 3)  # the server's history before gputui looked
        first = _scrape(sim.url)
        _complete(sim.url, 8)
        last = _scrape(sim.url)
    assert first.spec_draft_tokens_total and last.spec_draft_tokens_total
    drafted = last.spec_draft_tokens_total - first.spec_draft_tokens_total
    accepted = (last.spec_accepted_tokens_total or 0) - (first.spec_accepted_tokens_total or 0)
    view = load_views(FIXTURE)[0]
    assert view.telemetry is not None
    live = replace(
        view,
        telemetry=replace(view.telemetry, server=last),
        traces=Traces(gpu=view.traces.gpu if view.traces else (), server=(first, last), host=()),
    )
    lines = texts(gpu_lines(live, 70, 9))
    spec_row = lines[8].split()
    assert spec_row[:2] == ["spec", "accept"]
    assert spec_row[2] == f"{100 * accepted / drafted:.1f}%"  # the growth, not the history
    # 0.7 per draft token, stopped at the first rejection: about 44 % of 4 drafts accepted
    assert float(spec_row[2].rstrip("%")) == pytest.approx(44.3, abs=8)
    assert spec_row[4] == "tok/step" and "since" not in lines[8]
    # one scrape only: the server's cumulative figure, said to be so
    alone = replace(
        live, traces=Traces(gpu=live.traces.gpu if live.traces else (), server=(last,), host=())
    )
    assert "since server start" in texts(gpu_lines(alone, 80, 9))[8]


def test_no_spec_line_without_speculative_decoding() -> None:
    view = load_views(FIXTURE)[0]
    assert not any(line.startswith("spec") for line in texts(gpu_lines(view, 70, 9)))
