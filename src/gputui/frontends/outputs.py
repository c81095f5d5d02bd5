"""A session's outputs beside its snapshot: `--records FILE` and `--serve-metrics HOST:PORT`.

Contract: `RunOutputs` opens both before any load (a file that cannot be written, or a port in
use, is one line and exit code 2: `UsageError`), `watch(session)` points the collector at the
Session once it exists, `taps` are handed to `Session.open_journal` (the seam through which both
follow the finished requests), and `close` stops the server and closes the file (idempotent;
both front ends call it at exit). The server runs on a daemon thread of prometheus-client's own
`start_http_server`, with a private registry.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from wsgiref.simple_server import WSGIServer

from prometheus_client import start_http_server
from prometheus_client.registry import CollectorRegistry

from gputui.errors import UsageError
from gputui.frontends.exporter import GputuiCollector, LiveReads, RequestTotals
from gputui.metrics.sla import Sla
from gputui.snapshot.journal import JournalTap
from gputui.snapshot.records_file import RecordsFile, open_records


class RunOutputs:
    """The records file and the metrics server of one session (module contract)."""

    def __init__(
        self,
        records: Path | None,
        serve_metrics: tuple[str, int] | None,
        sla: Callable[[], Sla],
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        self.records: RecordsFile | None = None
        self.totals: RequestTotals | None = None
        self.collector: GputuiCollector | None = None
        self.registry: CollectorRegistry | None = None
        self.address: tuple[str, int] | None = None
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None
        if records is not None:
            try:
                self.records = open_records(records, sla, on_error)
            except OSError as exc:
                raise UsageError(f"--records {records}: cannot write: {_reason(exc)}") from None
        if serve_metrics is not None:
            try:
                self._serve(serve_metrics, sla)
            except OSError as exc:
                self.close()
                host, port = serve_metrics
                raise UsageError(f"--serve-metrics {host}:{port}: {_reason(exc)}") from None

    def _serve(self, address: tuple[str, int], sla: Callable[[], Sla]) -> None:
        self.totals = RequestTotals(sla)
        self.collector = GputuiCollector(self.totals)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self.collector)
        host, port = address
        self._server, self._thread = start_http_server(port, addr=host, registry=self.registry)
        self.address = (host, int(self._server.server_address[1]))

    @property
    def taps(self) -> list[JournalTap]:
        """What follows the journal: the records file, the request totals."""
        taps: list[JournalTap] = []
        if self.records is not None:
            taps.append(self.records)
        if self.totals is not None:
            taps.append(self.totals)
        return taps

    @property
    def url(self) -> str | None:
        """Where the metrics are served."""
        if self.address is None:
            return None
        host, port = self.address
        return f"http://{f'[{host}]' if ':' in host else host}:{port}/metrics"

    def watch(self, session: LiveReads) -> None:
        """Export this session's live state from now on."""
        if self.collector is not None:
            self.collector.session = session

    def close(self) -> None:
        """Stop serving and close the records file (what is still held is written first)."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
            self._thread = None
        if self.records is not None:
            self.records.close()


def _reason(exc: OSError) -> str:
    return exc.strerror.lower() if exc.strerror else str(exc)
