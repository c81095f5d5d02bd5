"""Tests that must not share the CPUs: a lock across pytest-xdist's workers.

The suite runs on four workers (`-n 4`), and most of it does not mind a neighbour. A test marked
`alone` times something another busy process would distort (a client-overhead split, a
bottleneck verdict, a real server's cache under load), so it waits until the other workers'
current tests end and holds them off until it is done.

The exclusive hold covers an `alone` test's call only: its setup (a real server's start, a
simulator's) runs under a shared hold beside the other workers (`Holder`). A real server's start
trades a hold kept from the test before for a shared one (`HOLDER.share()`, called by
tests.support's server starters), so that no server starts while the other workers wait.

The lock is a writer-preferring reader-writer lock on two files: every test holds the main lock
shared, an `alone` test holds it exclusive; an `alone` test first takes the turnstile, which every
other test passes through before it takes its shared hold, so a waiting `alone` test is never
starved by a stream of ordinary ones. Consecutive `alone` tests of one group (a real server's
folder, a module) keep the exclusive hold between them (`Holder`), so the server or simulator
they share never idles beside the other workers' tests, nor theirs beside it. Without xdist
nothing is locked.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path


def lock_paths() -> tuple[Path, Path] | None:
    """The turnstile and the main lock of this xdist run, or None outside xdist."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if run is None:
        return None
    base = Path(tempfile.gettempdir()) / f"gputui-tests-{run}"
    return base.with_suffix(".turnstile"), base.with_suffix(".lock")


@contextlib.contextmanager
def _flocked(path: Path, operation: int) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, operation)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def held(alone: bool) -> Iterator[None]:
    """Hold the lock for one test: exclusive when `alone`, else shared."""
    paths = lock_paths()
    if paths is None:
        yield
        return
    turnstile, main = paths
    if alone:
        with _flocked(turnstile, fcntl.LOCK_EX), _flocked(main, fcntl.LOCK_EX):
            yield
        return
    with _flocked(turnstile, fcntl.LOCK_EX):
        pass  # waits here while an `alone` test is waiting or running
    with _flocked(main, fcntl.LOCK_SH):
        yield


class Holder:
    """One worker's hold: shared for a test's setup, exclusive for an `alone` test's call, and
    kept from one test to the next while both are `alone` in one group.

    An `alone` test's setup (starting a real server: vLLM's CPU build takes about a minute) runs
    under the shared hold, beside the other workers' tests: what it must not share is its timed
    call, and a minute of the other worker idle per server start was the suite's largest waste.
    """

    def __init__(self) -> None:
        self._stack: ExitStack | None = None
        self._exclusive = False

    def _take(self, alone: bool) -> None:
        self._stack = ExitStack()
        self._stack.enter_context(held(alone))
        self._exclusive = alone

    def setup(self) -> None:
        """Before a test's setup: the shared hold, unless a hold is kept from the test before."""
        if self._stack is None:
            self._take(False)

    def call(self, alone: bool) -> None:
        """Before a test's call: an `alone` test trades a shared hold for the exclusive one."""
        if alone and not self._exclusive:
            self.release()
            self._take(True)
        elif self._stack is None:
            self._take(False)

    def after(self, keep: bool) -> None:
        """After a test: release the hold, or `keep` it (exclusive) for the next test."""
        if keep and self._exclusive:
            return
        self.release()

    def share(self) -> None:
        """Trade an exclusive hold kept from the test before (`after`) for a shared one.

        A real server's start in a fixture (vLLM's CPU build: about a minute, the limited vLLM of
        test_vllm_verdicts: 40 s) runs beside the other workers as the first test's does, not
        while they wait; the test's call takes the exclusive hold back (`call`).
        """
        if self._exclusive:
            self.release()
            self._take(False)

    def release(self) -> None:
        """Let go of whatever is held."""
        if self._stack is None:
            return
        stack, self._stack = self._stack, None
        self._exclusive = False
        stack.close()


HOLDER = Holder()
"""This worker's hold (tests/conftest.py drives it around each test)."""
