"""The TUI's prompts: token-exact as in `gputui run`, salted per session, marked when they are not.

Built by `gputui tui`'s own `live_controller` from parsed flags, against the simulator over
loopback HTTP (its /tokenize counts, its prefix cache serves repeated prompts).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import gputui.workloads.prepare as prepare
from gputui.cli import build_parser
from gputui.cli.options import tui_options
from gputui.frontends.live import LiveController
from gputui.sim.gpu_profile import GpuProfileSpec
from gputui.sim.runner import SimProcess, start_background
from gputui.snapshot.models import Snapshot
from gputui.snapshot.store import load_snapshot
from gputui.ui.app import AppOptions, make_app
from gputui.ui.command import live_controller
from gputui.ui.render.spans import texts
from gputui.ui.render.status import header_lines
from gputui.ui.widgets.live_panels import SessionHeader
from tests.support.saved import saved
from tests.ui.conftest import wait_for

READ_FROM = ("usage", "server counters")


def _tui(url: str, folder: Path, *extra: str) -> LiveController:
    args = build_parser().parse_args(
        ["tui", "--url", url, "--model", "sim", "--output-tokens", "8", "--warmup-seconds", "0",
         "--snapshot-dir", str(folder), *extra]
    )  # fmt: skip
    return live_controller(tui_options(args))[0]


def _measured_inputs(controller: LiveController) -> list[int]:
    return [r.input_tokens for r in controller.session.all_records() if r.ok and r.input_tokens]


async def test_the_tui_sends_token_exact_prompts(fixed_sim: SimProcess, tmp_path: Path) -> None:
    controller = _tui(fixed_sim.url, tmp_path, "--input-tokens", "512")
    workload = controller.settings.workload_details
    assert workload["input_tokens_method"] == "server /tokenize (exact)"
    assert workload["prompt_salt"] and controller.settings.notices == ()
    app = make_app(controller, AppOptions(snapshot_dir=tmp_path))
    app.animation_level = "none"
    controller.start()
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            await wait_for(pilot, lambda: len(_measured_inputs(controller)) >= 20)
            header = app.screen.query_one(SessionHeader)
            shown = [
                "".join(s.text for s in header.render_line(y))
                for y in range(header.content_size.height)
            ]
            assert not any("approximate" in line for line in shown), shown
    finally:
        path = controller.stop(save=True)
    measured = _measured_inputs(controller)
    mean = sum(measured) / len(measured)
    assert abs(mean - 512) <= 0.01 * 512, mean  # the acceptance: within 1 % (it is exact)
    assert set(measured) == {512}
    assert path is not None
    snap = load_snapshot(path)
    assert snap.workload.input_tokens == 512
    assert snap.workload.input_tokens_method == "server /tokenize (exact)"
    assert snap.workload.prompt_salt == workload["prompt_salt"]
    assert snap.workload.input_lengths is not None
    assert snap.workload.input_lengths.measured.mean == 512


def test_approximate_prompts_are_marked_in_the_header(
    fixed_sim: SimProcess, tmp_path: Path
) -> None:
    controller = _tui(fixed_sim.url, tmp_path, "--token-counter", "approximate")
    assert controller.settings.notices == ("prompts approximate",)
    assert str(controller.settings.workload_details["input_tokens_method"]).startswith(
        "approximate"
    )
    header = " ".join(texts(header_lines(controller.view(), 200)))
    assert "prompts approximate" in header
    reused = _tui(fixed_sim.url, tmp_path, "--reuse-prompts")
    assert reused.settings.notices == ("prompts reused",)
    assert reused.settings.workload_details["prompt_salt"] is None


def _session(url: str, folder: Path, *extra: str) -> Snapshot:
    """A short TUI session at 2 streams of 512-token prompts, saved."""
    return _session_with_events(url, folder, *extra)[0]


def _session_with_events(url: str, folder: Path, *extra: str) -> tuple[Snapshot, list[str]]:
    controller = _tui(url, folder, "--input-tokens", "512", "--start-level", "2", *extra)
    controller.start()
    started = time.monotonic()
    deadline = started + 30
    try:
        # and at least 2.5 s: the saved snapshot has no sample after the TUI's stop, so a step's
        # last ~1 s (one server scrape) is outside the counters' span (a cached session can send
        # its 16 requests within a second, and then no request has a counter share)
        while time.monotonic() < deadline and (
            len(_measured_inputs(controller)) < 16 or time.monotonic() - started < 2.5
        ):
            time.sleep(0.2)
    finally:
        path = controller.stop(save=True)
    assert path is not None
    return load_snapshot(path), [e.text for e in controller.session.events.items()]


def test_a_second_tui_session_reads_nothing_from_the_firsts_cache(tmp_path: Path) -> None:
    spec = GpuProfileSpec(gpu="a100-80gb-pcie", model="llama-3.1-8b", served_model_name="sim")
    with start_background(spec) as sim:
        first = _session(sim.url, tmp_path / "a", "--reuse-prompts")
        salted = _session(sim.url, tmp_path / "b")
        reused = _session(sim.url, tmp_path / "c", "--reuse-prompts")
    for snap in (first, salted, reused):
        # usage while the simulator sends cached_tokens, its counters where it does not
        assert snap.prefix_cache is not None and snap.prefix_cache["source"] in READ_FROM
        assert snap.steps and snap.steps[0].prefix_cache_source in READ_FROM
    assert first.prefix_cache is not None and saved(first.prefix_cache)["hit_rate"] < 0.05
    assert salted.prefix_cache is not None and saved(salted.prefix_cache)["hit_rate"] < 0.05
    assert salted.workload.prompt_salt is not None
    assert salted.workload.prompt_isolation == "per-run salt"
    # without the salt the same prompts come back from the first session's cache (those requests
    # the first session sent: a longer session sends more)
    assert reused.prefix_cache is not None and saved(reused.prefix_cache)["hit_rate"] > 0.25
    assert reused.workload.prompt_isolation == "off (--reuse-prompts)"


# Not `alone` (as its sibling above is not): beside 2 and 3 busy loops on a 2-core host it
# passed 5 of 5 (7.8-11.4 s); a neighbour slows both sessions alike, and each runs until 16
# requests and 2.5 s, so the second still reads the first's cache through the counters.
def test_a_cold_session_served_from_cache_is_warned_about_on_screen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(prepare, "new_salt", lambda: 0x5A17)  # as if the salt had not isolated
    spec = GpuProfileSpec(gpu="a100-80gb-pcie", model="llama-3.1-8b", served_model_name="sim")
    with start_background(spec) as sim:
        first, events = _session_with_events(sim.url, tmp_path / "a")
        second, later = _session_with_events(sim.url, tmp_path / "b")
    assert first.workload.prompt_salt == second.workload.prompt_salt
    assert not any("salted to be cold" in text for text in events)
    warned = [text for text in later if "salted to be cold" in text]
    assert warned and warned[0].startswith("step 1 (2): ")
    assert second.steps[0].prefix_cache_warning == warned[0]
