"""The live controller's snapshots and journal: what a session saves, kept apart.

Contract: `frontends.live.LiveController` owns one `LiveSaver`, built with its collaborators: the
Session (its in-flight trace too), the telemetry sampler, the SLA and price history, the event log,
and the controller as its `SaveHost` (the settings now, the load's mode, whether it runs).
`save` writes a snapshot of every finished step so far (the session goes on) with
`snapshot.assemble.save_session`, the function `gputui run` uses; `open_journal` has the Session
journal the run for crash recovery (an OSError is an event, not a failure), with the
`--records` file and the `--serve-metrics` totals following it (`frontends.outputs`);
`run_info` is the run's description in both. `identify` records the server that preflight found.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from gputui.engine.context_limit import ContextLimit
from gputui.engine.identity import ServerIdentity
from gputui.engine.load import LoadMode
from gputui.frontends.live_settings import LiveSettings
from gputui.frontends.outputs import RunOutputs
from gputui.frontends.view import EventKind
from gputui.metrics.sla_terms import TermsHistory
from gputui.session import Session
from gputui.snapshot.assemble import (
    RunInfo,
    assemble_session,
    journal_header,
    journal_lines,
    save_session,
    session_file,
)
from gputui.snapshot.export import write_html_report
from gputui.snapshot.models import Snapshot
from gputui.telemetry.sampler import TelemetrySampler, server_trace
from gputui.workloads.sources import SourcePlan


class SaveHost(Protocol):
    """What the saver reads of the controller at the moment it saves."""

    @property
    def settings(self) -> LiveSettings:
        """The session's settings now (the SLA and price change with the settings dialog)."""
        ...

    @property
    def mode(self) -> LoadMode:
        """The load's mode now."""
        ...

    @property
    def running(self) -> bool:
        """Whether the session has started and not yet stopped."""
        ...


class LiveSaver:
    """Snapshots, the HTML report and the journal of a LiveController (module contract)."""

    def __init__(
        self,
        session: Session,
        telemetry: TelemetrySampler | None,
        terms: TermsHistory,
        host: SaveHost,
        event: Callable[[EventKind, str], None],
    ) -> None:
        self._session = session
        self._telemetry = telemetry
        self._terms = terms
        self._host = host
        self._event = event
        self.backend: str | None = None
        """The server's backend as preflight found it (None until connected)."""
        self._backend_evidence: str | None = None
        self._server_header = ""
        self._identity: ServerIdentity | None = None
        self._context: ContextLimit | None = None
        self.last_saved: Path | None = None
        self.last_label: str | None = None
        """The label of the operator's last save, reused by the final snapshot on quit."""
        self._saved_label: str | None = None
        """The label `last_saved` was written under."""
        settings = host.settings
        self.outputs = RunOutputs(
            settings.records,
            settings.serve_metrics,
            lambda: session.sla,
            lambda message: event("error", message),
        )
        """`--records` and `--serve-metrics`: opened now (a bad path or a port in use stops
        the TUI before it starts), fed by the journal, closed by `close_outputs`."""
        self.outputs.watch(session)
        if self.outputs.url is not None:
            event("info", f"gputui's own metrics at {self.outputs.url}")

    def identify(
        self,
        backend: str | None,
        evidence: str | None,
        server_header: str,
        *,
        server: ServerIdentity | None = None,
        context: ContextLimit | None = None,
    ) -> None:
        """The server preflight found: backend, why, `Server` header, identity, context limit."""
        self.backend = backend
        self._backend_evidence = evidence
        self._server_header = server_header
        self._identity = server
        self._context = context

    @property
    def server_version(self) -> str | None:
        """The engine's version, as the server reported it (for the header)."""
        return self._identity.version if self._identity is not None else None

    def save(self, label: str | None = None) -> Path | None:
        """Save a snapshot of everything finished so far (the session goes on)."""
        if not self._host.running or not self._session.finished_steps():
            self._event("info", "nothing to save yet: no step has finished")
            return None
        if label:
            self.last_label = label  # the quit's final snapshot keeps the name the user gave
        return self.write(label or self._host.settings.label, complete=False)

    def open_journal(self) -> None:
        """Have the Session journal the run (unless the settings turn the journal off)."""
        settings = self._host.settings
        if not settings.journal:
            return
        info = self.run_info(settings.label, complete=False)
        try:
            self._session.open_journal(
                settings.snapshot_dir,
                journal_header(info, settings.sla),
                on_error=lambda message: self._event("error", message),
                extra_lines=journal_lines(self._session, info, self._telemetry),
                taps=self.outputs.taps,
            )
        except OSError as exc:
            off = " and per-request records and /metrics counts" if self.outputs.taps else ""
            self._event("error", f"no journal (crash recovery{off} off): {exc}")

    def close_outputs(self) -> None:
        """Stop serving /metrics and close the records file (after the journal closed)."""
        self.outputs.close()

    def run_info(
        self, label: str | None, *, complete: bool, interrupted_by: str | None = None
    ) -> RunInfo:
        """The run's description, as the snapshot and the journal header carry it."""
        settings = self._host.settings
        client = settings.engine.client
        return RunInfo(
            label=label,
            target=client.target,
            model=client.model,
            endpoint=client.endpoint,
            mode=self._host.mode,
            levels=[s.level for s in self._session.finished_steps()],
            input_tokens=settings.engine.shape.input_tokens,
            output_tokens=settings.engine.shape.output_tokens,
            step_seconds=0.0,
            warmup_seconds=settings.warmup_s,
            complete=complete,
            interrupted_by=interrupted_by,
            extra_body=client.extra_body,
            backend=self.backend,
            server_header=self._server_header,
            backend_evidence=self._backend_evidence,
            identity=self._identity,
            context=self._context,
            client_extra={
                "workers": settings.workers,
                "ray": settings.ray_address,
                **self._session.client_saturation().to_json(),
            },
            price_per_hour=settings.price_per_hour,
            energy_price_per_kwh=settings.energy_price,
            pue=settings.pue,
            precision=settings.precision,
            workload_details=settings.workload_details,
            settings_changes=tuple(self._terms.changes),
        )

    def export_report(self) -> Path | None:
        """Write the session so far as an HTML report beside the snapshots (blocking)."""
        if not self._host.running or not self._session.finished_steps():
            self._event("info", "no report yet: no step has finished")
            return None
        settings = self._host.settings
        label = self.last_label or settings.label
        snapshot = assemble_session(
            self._session,
            self.run_info(label, complete=False),
            self._telemetry,
            finish=self._finish,
        )
        try:
            path = write_html_report(snapshot, settings.snapshot_dir, label)
        except OSError as exc:
            self._event("error", f"report not written: {exc}")
            return None
        self._event("info", f"report written: {path}")
        return path

    def _finish(self, snapshot: Snapshot) -> Snapshot:
        """What the workload source adds (conversations, a trace replay; a plain session's hits)."""
        plan = self._host.settings.source or SourcePlan()
        server = server_trace(self._telemetry)
        return plan.finish(snapshot, self._session.all_records(), server)

    def write(
        self, label: str | None, *, complete: bool, interrupted_by: str | None = None
    ) -> Path:
        """Write the snapshot under `label` (the same label again updates that file)."""
        # The same label again (`q` after `s`) updates that file rather than adding a twin.
        same = self.last_saved is not None and label == self._saved_label
        path = (
            self.last_saved
            if same and self.last_saved
            else session_file(self._host.settings.snapshot_dir, label)
        )
        info = self.run_info(label, complete=complete, interrupted_by=interrupted_by)
        save_session(self._session, info, self._telemetry, path, finish=self._finish)
        self.last_saved, self._saved_label = path, label
        self._event("info", f"{'updated' if same else 'saved'} {path.name}")
        return path
