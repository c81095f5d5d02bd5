"""The live controller's snapshots and journal: what a session saves, kept apart.

Contract: `frontends.live.LiveController` inherits `LiveSavingMixin`. `save` writes a snapshot of
every finished step so far (the session goes on) with `snapshot.assemble.save_session`, the
function `gputui run` uses; `_open_journal` has the Session journal the run for crash recovery
(an OSError is an event, not a failure); `_run_info` is the run's description in both.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from gputui.control.sweep import InFlightTrace
from gputui.engine.load import LoadMode
from gputui.frontends.live_settings import LiveSettings
from gputui.frontends.view import EventKind
from gputui.session import Session
from gputui.snapshot.assemble import (
    RunInfo,
    journal_header,
    journal_lines,
    save_session,
    session_file,
)
from gputui.telemetry.sampler import TelemetrySampler


class LiveSavingMixin:
    """Snapshots and the journal of a LiveController (module contract)."""

    settings: LiveSettings
    _session: Session
    _telemetry: TelemetrySampler | None
    _trace: InFlightTrace
    _mode: LoadMode
    _backend: str | None
    _server_header: str
    _backend_evidence: str | None
    _last_saved: Path | None
    _last_label: str | None
    _saved_label: str | None = None
    """The label `_last_saved` was written under."""
    _running: bool
    _event: Callable[[EventKind, str], None]

    def save(self, label: str | None = None) -> Path | None:
        """Save a snapshot of everything finished so far (the session goes on)."""
        if not self._running or not self._session.finished_steps():
            self._event("info", "nothing to save yet: no step has finished")
            return None
        if label:
            self._last_label = label  # the quit's final snapshot keeps the name the user gave
        return self._save(label or self.settings.label, complete=False)

    def _open_journal(self) -> None:
        if not self.settings.journal:
            return
        info = self._run_info(self.settings.label, complete=False)
        try:
            self._session.open_journal(
                self.settings.snapshot_dir,
                journal_header(info, self.settings.sla),
                on_error=lambda message: self._event("error", message),
                extra_lines=journal_lines(self._session, info, self._telemetry),
            )
        except OSError as exc:
            self._event("error", f"no journal (crash recovery off): {exc}")

    def _run_info(
        self, label: str | None, *, complete: bool, interrupted_by: str | None = None
    ) -> RunInfo:
        client = self.settings.engine.client
        return RunInfo(
            label=label,
            target=client.target,
            model=client.model,
            endpoint=client.endpoint,
            mode=self._mode,
            levels=[s.level for s in self._session.finished_steps()],
            input_tokens=self.settings.engine.shape.input_tokens,
            output_tokens=self.settings.engine.shape.output_tokens,
            step_seconds=0.0,
            warmup_seconds=self.settings.warmup_s,
            complete=complete,
            interrupted_by=interrupted_by,
            extra_body=client.extra_body,
            backend=self._backend,
            server_header=self._server_header,
            backend_evidence=self._backend_evidence,
            client_extra={
                "workers": self.settings.workers,
                "ray": self.settings.ray_address,
                **self._trace.saturation(),
            },
            price_per_hour=self.settings.price_per_hour,
            precision=self.settings.precision,
        )

    def _save(
        self, label: str | None, *, complete: bool, interrupted_by: str | None = None
    ) -> Path:
        # The same label again (`q` after `s`) updates that file rather than adding a twin.
        same = self._last_saved is not None and label == self._saved_label
        path = (
            self._last_saved
            if same and self._last_saved
            else session_file(self.settings.snapshot_dir, label)
        )
        info = self._run_info(label, complete=complete, interrupted_by=interrupted_by)
        plan = self.settings.source
        save_session(
            self._session,
            info,
            self._telemetry,
            path,
            finish=(lambda s: plan.finish(s, self._session.all_records())) if plan else None,
        )
        self._last_saved, self._saved_label = path, label
        self._event("info", f"{'updated' if same else 'saved'} {path.name}")
        return path
