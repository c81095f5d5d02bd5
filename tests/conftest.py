"""Shared fixtures: a fixed-profile simulator on an ephemeral loopback port."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gputui.sim.fixed import FixedProfileSpec
from gputui.sim.runner import SimProcess, start_background


@pytest.fixture(scope="module")
def fixed_sim() -> Iterator[SimProcess]:
    """`gputui sim --profile fixed --ttft-ms 20 --itl-ms 5`, serving model `sim`."""
    with start_background(FixedProfileSpec(ttft_ms=20, itl_ms=5, served_model_name="sim")) as sim:
        yield sim
