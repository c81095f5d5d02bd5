"""The parent's side of the engine process: start it, command it, receive its batches.

A dedicated reader thread drains the pipe at once, so the engine never blocks on a full pipe,
and hands each batch to a callback (in that thread). Statistics are computed by the callback's
owner, outside the engine process, so they never compete with the engine for its core.
"""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess

from gputui.engine.commands import Command, Stop, check_command
from gputui.engine.process import EngineConfig, EngineMessage, EngineStatus, engine_main
from gputui.engine.records import RequestRecord

BatchCallback = Callable[
    [list[RequestRecord], dict[int, int], EngineStatus, list[int | None]], None
]


class EngineHandle:
    """One engine process."""

    def __init__(self, config: EngineConfig, on_batch: BatchCallback) -> None:
        self._config = config
        self._on_batch = on_batch
        self._context = multiprocessing.get_context("spawn")
        self._conn: Connection[Command, EngineMessage] | None = None
        self._process: BaseProcess | None = None
        self._thread: threading.Thread | None = None
        self._send_lock = threading.Lock()
        self.stopped = threading.Event()
        self.ready = threading.Event()
        """Set when the engine's loop runs (its first batch came): load sent earlier would wait."""
        self.final_status: EngineStatus | None = None
        self.pid: int | None = None

    def start(self) -> None:
        """Spawn the engine process and the reader thread."""
        parent, child = self._context.Pipe(duplex=True)
        process = self._context.Process(
            target=engine_main, args=(child, self._config), name="gputui-engine", daemon=True
        )
        process.start()
        child.close()
        self._conn, self._process, self.pid = parent, process, process.pid
        self._thread = threading.Thread(target=self._read, name="gputui-engine-reader", daemon=True)
        self._thread.start()

    def wait_ready(self, timeout_s: float) -> bool:
        """Wait until the engine runs (or has died); True when it is ready."""
        while not self.ready.wait(0.05):
            if self.stopped.is_set() or timeout_s <= 0:
                return False
            timeout_s -= 0.05
        return True

    def send(self, command: Command) -> None:
        """Send a command; ignored once the engine has gone (TypeError for a non-command)."""
        check_command(command)
        with self._send_lock:
            if self.stopped.is_set():
                return
            try:
                assert self._conn is not None, "send before start"
                self._conn.send(command)
            except (BrokenPipeError, OSError):
                self.stopped.set()

    def stop(self, *, cancel: bool, timeout_s: float) -> EngineStatus | None:
        """Ask the engine to stop and wait for its last batch; kill it if it does not come."""
        self.send(Stop(cancel))
        if not self.stopped.wait(timeout_s):
            self.send(Stop(True))
            self.stopped.wait(10.0)
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        if self._process is not None:
            self._process.join(timeout=5.0)
            if self._process.is_alive():
                self._process.kill()
                self._process.join(timeout=5.0)
        return self.final_status

    def _read(self) -> None:
        conn = self._conn
        assert conn is not None, "read before start"
        try:
            while True:
                message = conn.recv()
                if message[0] == "batch":
                    _, records, sent_by_step, status, rtt = message
                    self._on_batch(records, sent_by_step, status, rtt)
                    self.ready.set()
                elif message[0] == "stopped":
                    self.final_status = message[1]
                    break
        except (EOFError, OSError):
            pass  # the engine died: the owner sees `stopped` without a final status
        finally:
            self.stopped.set()
