"""Shared fixtures (a fixed-profile simulator on an ephemeral loopback port) and the CI switch.

`GPUTUI_REQUIRE=e2e,browser,realserver,realvllm` names test groups (markers) that must run: a skip
of any test in a required group becomes a failure that says why it skipped. `.ci/run` sets it after
installing tmux and Chromium (and adds realserver and realvllm once their setups succeeded), so a
missing tool fails CI instead of quietly skipping its tests.
"""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator

import pytest

from gputui.sim.fixed import FixedProfileSpec
from gputui.sim.runner import SimProcess, start_background
from tests.support import alone


@pytest.fixture(scope="module")
def fixed_sim() -> Iterator[SimProcess]:
    """`gputui sim --profile fixed --ttft-ms 20 --itl-ms 5`, serving model `sim`."""
    with start_background(FixedProfileSpec(ttft_ms=20, itl_ms=5, served_model_name="sim")) as sim:
        yield sim


REQUIRED_GROUPS = ("e2e", "browser", "realserver", "realvllm")
"""Markers that `GPUTUI_REQUIRE` may name."""


def _required() -> set[str]:
    names = {n.strip() for n in os.environ.get("GPUTUI_REQUIRE", "").split(",") if n.strip()}
    if os.environ.get("GPUTUI_REQUIRE_REALSERVER") == "1":
        names.add("realserver")
    if os.environ.get("GPUTUI_REQUIRE_REALVLLM") == "1":
        names.add("realvllm")
    unknown = names - set(REQUIRED_GROUPS)
    if unknown:
        raise pytest.UsageError(f"GPUTUI_REQUIRE names unknown groups: {sorted(unknown)}")
    return names


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, None]:
    """Turn the skip of a test in a required group into a failure (see the module docstring)."""
    outcome = yield
    report = outcome.get_result()
    if not report.skipped or hasattr(report, "wasxfail"):
        return
    groups = {m.name for m in item.iter_markers()} & _required()
    if groups:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"required group {sorted(groups)} skipped: {reason}"


def pytest_configure(config: pytest.Config) -> None:
    """Reject a misspelt `GPUTUI_REQUIRE` before any test runs; under `--dist loadgroup`, hand
    out the groups in collection order (below), not xdist's default of most tests first."""
    _required()
    if getattr(config.option, "dist", None) == "loadgroup":
        config.option.loadscopereorder = False


_HOLDER = alone.HOLDER


@pytest.hookimpl(hookwrapper=True, tryfirst=True)  # outside pytest-timeout: waiting is not running
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Every test holds the shared lock from its setup on (a server's start runs beside the
    other workers); an `alone` test trades it for the exclusive one at its call (alone.py)."""
    _HOLDER.setup()
    try:
        yield
    finally:
        keep = nextitem is not None and _alone(item) and _alone(nextitem)
        _HOLDER.after(keep and _group(item) == _group(nextitem))


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """An `alone` test's call runs alone: the exclusive hold (within its timeout: the wait is for
    the other workers' current test)."""
    _HOLDER.call(_alone(item))
    yield


def _alone(item: pytest.Item) -> bool:
    return item.get_closest_marker("alone") is not None


def _group(item: pytest.Item | None) -> str | None:
    marker = None if item is None else item.get_closest_marker("xdist_group")
    return None if marker is None else str(marker.args[0] if marker.args else "")


REAL_SERVER_FOLDERS = ("realvllm", "realserver")
"""Folders whose tests share one real server each and time it: `alone` (a real server's timings
and cache under a neighbour's load mean nothing) unless marked `not_alone` (what they assert
holds beside a busy neighbour), and all on the one worker of `SERIAL_GROUP`."""

SERIAL_GROUP = "serial"
"""Under xdist, one group for every `alone` test and every real-server test, handed out first.

Its `alone` tests run back to back and keep the exclusive hold from one to the next (alone.py),
so the other workers drain once per run of them, not once per test spread over the suite (a
drain waits for the longest test then running: up to 35 s). Handed out first, the serial part
is over early and the other workers' tests fill the end of the run, where xdist's default order
(groups with most tests first) left single long tests to run out one by one."""


LIVE_TIMING_FOLDERS = ("integration", "e2e", "faults", "ui", *REAL_SERVER_FOLDERS)
"""Folders whose tests time live servers in real time on a shared host: a failure there is run
once more (pytest-rerunfailures) and counted as `rerun` in the summary line, never hidden. A real
regression fails both runs; the unit tests (pure functions, virtual time) are not rerun, but
for the few that run in real time and say so with their own `flaky` mark."""


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups into the test ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the live-timing tests for one rerun; under `pytest -n N --dist loadgroup`, keep each
    module (its module-scoped simulator) on one worker, and put the real servers' and the
    `alone` tests in `SERIAL_GROUP`, first. Serial runs are neither grouped nor reordered."""
    for item in items:
        folders = item.nodeid.split("::", 1)[0].split("/")[1:-1]
        if any(f in LIVE_TIMING_FOLDERS for f in folders) and not item.get_closest_marker("flaky"):
            item.add_marker(pytest.mark.flaky(reruns=1))
    if not getattr(config.option, "loadgroup", False):  # set on xdist's workers by --dist loadgroup
        return
    modules: dict[str, int] = {}
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        real = any(p in REAL_SERVER_FOLDERS for p in path.split("/")[:-1])
        if real and item.get_closest_marker("not_alone") is None:
            item.add_marker(pytest.mark.alone)
        group = SERIAL_GROUP if real or _alone(item) else path
        item.add_marker(pytest.mark.xdist_group(group))
        modules.setdefault(path, len(modules))

    def order(item: pytest.Item) -> tuple[bool, int, bool]:
        """The serial group first; in it, each module's `not_alone` tests before its `alone`
        ones (a module's server start is shared: its tests that need no exclusive hold run
        before the drain). Otherwise the collection order (the sort is stable)."""
        if _group(item) != SERIAL_GROUP:
            return True, 0, False
        return False, modules[item.nodeid.split("::", 1)[0]], _alone(item)

    items.sort(key=order)
