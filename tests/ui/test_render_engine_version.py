"""The header names the engine and the version it reported (snapshot `target.version`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from gputui.ui.render.spans import texts
from gputui.ui.render.status import header_lines
from gputui.ui.replay import load_views

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "snapshots" / "a100-80gb-pcie.json"


def test_the_header_shows_the_engine_and_its_version() -> None:
    view = load_views(FIXTURE)[-1]
    shown = " ".join(texts(header_lines(replace(view, server_version="0.32.0"), 160)))
    assert f"backend {view.backend} 0.32.0" in shown
    unknown = " ".join(texts(header_lines(view, 160)))
    assert f"backend {view.backend} " in unknown and "0.32.0" not in unknown
