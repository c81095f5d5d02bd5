"""The session loop's thread and inbox: messages handled one at a time, in the order posted.

Contract: `post` hands a message to the thread (a `queue.SimpleQueue`; never waits), or, before
`start` and after the last message, handles it at once in the caller's thread (one at a time).
Each posted message gets a ticket, its place in the order; `behind` says whether a message this
thread posted is not handled yet (a reader then waits for it: `session.loop.SessionLoop.current`).
Between messages the owner's `due(now)` runs what is due by `time.monotonic()` (frames, the
watched step's rules) and returns when it next wants to run (None: only after a message).
Nothing here knows what a message means: `handle` does, and says when the last one came.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

M = TypeVar("M")


class Inbox(Generic[M]):
    """One thread handling messages in order (module contract)."""

    def __init__(
        self,
        handle: Callable[[M], bool],
        due: Callable[[float], float | None],
        name: str,
    ) -> None:
        self._handle = handle
        """Handles one message; True: it was the last (the thread ends after it)."""
        self._due = due
        self._name = name
        self.applied = 0
        """Messages handled so far; each posted message's ticket is its place in that count."""
        self._tickets = 0
        self._mine = threading.local()
        """The ticket of the last message this thread posted (`behind`)."""
        self._queue: queue.SimpleQueue[M] = queue.SimpleQueue()
        self._post_lock = threading.Lock()
        """Orders what enters the inbox with the loop's start and end (never held by readers)."""
        self._inline = threading.RLock()
        """Serializes messages handled in the caller's thread (re-entered by a question)."""
        self._running = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Handle messages on a thread of their own from now on."""
        with self._inline, self._post_lock:  # after any message handled inline so far
            self._running = True
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()

    def join(self, timeout_s: float) -> None:
        """Wait for the thread to end (after the last message)."""
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=timeout_s)

    @property
    def on_thread(self) -> bool:
        """The caller is the inbox's own thread."""
        return threading.current_thread() is self._thread

    def behind(self) -> bool:
        """A message this thread posted is not handled yet."""
        return self.applied < getattr(self._mine, "ticket", 0)

    def post(self, message: M) -> None:
        """Hand over a message (handled at once, in this thread, when no thread runs)."""
        with self._post_lock:
            self._tickets += 1
            self._mine.ticket = self._tickets
            if self._running:
                self._queue.put(message)
                return
        with self._inline:
            self._one(message)

    def _one(self, message: M) -> bool:
        self.applied += 1  # messages are handled in the order of their tickets
        return self._handle(message)

    def _run(self) -> None:
        next_at = self._due(time.monotonic())
        while True:
            timeout = None if next_at is None else max(0.0, next_at - time.monotonic())
            try:
                message: M | None = self._queue.get(timeout=timeout)
            except queue.Empty:
                message = None
            if message is not None and self._one(message):
                break
            next_at = self._due(time.monotonic())
        with self._inline:  # what was posted before the end: handled here, inline from now on
            with self._post_lock:
                self._running = False
            while True:
                try:
                    self._one(self._queue.get_nowait())
                except queue.Empty:
                    break
