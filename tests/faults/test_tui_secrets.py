"""An API key in the TUI's environment goes to the server and nowhere else: not the snapshot, not
the journal, not the screen, not a screenshot."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from gputui.sim.fixed import FixedProfileSpec
from gputui.sim.runner import start_background
from gputui.ui.app import AppOptions, make_app
from gputui.ui.screens.help import HelpScreen
from gputui.ui.screens.live import LiveScreen
from gputui.ui.screens.sessions import SessionsScreen
from tests.e2e.tmux import needs_tmux, tmux_session, tui_command, wait_for
from tests.faults.test_tui_server_death import live_controller
from tests.ui.conftest import wait_for as pilot_wait

pytestmark = pytest.mark.timeout(60)

PROFILE = FixedProfileSpec(ttft_ms=20, itl_ms=2, served_model_name="sim")


def _secret() -> tuple[str, bytes]:
    """A key, and a fragment of it that no legitimate output would contain."""
    secret = f"sk-test-SECRET-{uuid.uuid4().hex}"
    return secret, secret.removeprefix("sk-test-SECRET-")[:12].encode()


@pytest.mark.e2e
@needs_tmux
def test_the_key_is_in_no_file_and_not_on_screen(tmp_path: Path) -> None:
    secret, fragment = _secret()
    folder = tmp_path / "snapshots"
    status = tmp_path / "status"
    screens: list[str] = []
    with start_background(PROFILE) as sim, tmux_session() as tui:
        command = tui_command(sim.url, folder, "--label", "keyed")
        tui.start(command, env={"OPENAI_API_KEY": secret}, status_file=status)
        screens.append(tui.wait(lambda s: "step 1" in s and "in flight" in s))
        environ = Path(f"/proc/{tui.app_pid()}/environ").read_bytes()
        assert secret.encode() in environ  # the TUI has the key, so the test means something
        tui.keys("+")
        screens.append(tui.wait(lambda s: "● 2 concurrent" in s))
        (journal,) = wait_for(lambda: sorted(folder.glob("*.journal")), bool, 10)
        wait_for(journal.read_bytes, lambda b: b'"kind":"step"' in b, 10)
        journalled = journal.read_bytes()
        tui.keys("?")
        screens.append(tui.wait(lambda s: "live serving-load experiments" in s))
        tui.keys("Escape")
        tui.wait(lambda s: "in flight" in s)
        tui.keys("o")
        screens.append(tui.wait(lambda s: "Saved sessions" in s))
        tui.keys("Escape")
        tui.wait(lambda s: "in flight" in s)
        tui.keys("q")
        assert wait_for(lambda: status.read_text().strip() if status.exists() else "", bool) == "0"
    saved = {p.name: p.read_bytes() for p in folder.iterdir()}
    assert [name for name in saved if name.endswith("-keyed.json")]
    blobs = {"journal": journalled, "screen": "\n".join(screens).encode(), **saved}
    for name, blob in blobs.items():
        assert fragment not in blob, name


async def test_screenshots_of_a_session_holding_the_key(tmp_path: Path) -> None:
    secret, fragment = _secret()
    with start_background(PROFILE) as sim:
        controller = live_controller(sim.url, tmp_path, api_key=secret)
        assert controller.settings.engine.client.api_key == secret
        app = make_app(controller, AppOptions(snapshot_dir=tmp_path, label="keyed"))
        app.animation_level = "none"
        controller.start()
        shots: list[str] = []
        try:
            async with app.run_test(size=(120, 40)) as pilot:
                view = controller.view
                await pilot_wait(pilot, lambda: view().frame is not None and view().seq > 3)
                for key, screen in (("question_mark", HelpScreen), ("o", SessionsScreen)):
                    shots.append(app.save_screenshot(path=str(tmp_path)))
                    await pilot.press(key)
                    await pilot_wait(pilot, lambda s=screen: isinstance(app.screen, s))  # type: ignore[misc]
                    shots.append(app.save_screenshot(path=str(tmp_path)))
                    await pilot.press("escape")
                    await pilot_wait(pilot, lambda: isinstance(app.screen, LiveScreen))
        finally:
            controller.stop(save=False)
    assert len(set(shots)) == 4
    for shot in shots:
        svg = Path(shot).read_bytes()  # noqa: ASYNC240 - the app has exited
        assert svg.startswith(b"<svg") and len(svg) > 10_000
        assert fragment not in svg, shot
