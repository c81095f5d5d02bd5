"""Run the simulator here until a signal (`serve`) or in a child process (`start_background`).

Contract: `serve` owns its event loop (uvloop when importable), binds, calls `on_ready(port)` once
listening (port 0 picks a free one) and returns after SIGINT or SIGTERM, having closed every
connection. A bind failure raises `OSError` before `on_ready`. `start_background` runs `serve` in a
"spawn" child so the server has its own interpreter and GIL (a thread would share the client's and
distort both sides' timestamps); the child reports its bound port, or its startup error, through a
pipe. A profile crosses the process boundary as a picklable `ProfileSpec` and is built in the child.

Crash simulation: with `die_after_s`, the process exits (`os._exit(DIE_EXIT_CODE)`, after one line
on stderr) that many seconds after the first completion request, with no goodbye to anyone: the
kernel closes its sockets, so streams in flight end mid-response and new connections are refused,
as when a real server crashes. The clock starts at the first request so that the crash lands
mid-run however long the client took to start.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import multiprocessing
import os
import signal
import sys
from collections.abc import Callable
from multiprocessing.connection import Connection
from types import TracebackType
from typing import Final, Protocol

from gputui.sim.faults import FaultSpec
from gputui.sim.netdelay import NetworkDelay
from gputui.sim.profile import Profile
from gputui.sim.server import DEFAULT_MAX_MODEL_LEN, DEFAULT_MODEL_NAME, SimServer

_READY_TIMEOUT_S: Final = 30.0
_STOP_TIMEOUT_S: Final = 5.0
DIE_EXIT_CODE: Final = 3
"""Exit status of a server that died on purpose (`--die-after`)."""


class ProfileSpec(Protocol):
    """A picklable recipe for a profile (e.g. `FixedProfileSpec`), built in the serving process."""

    @property
    def served_model_name(self) -> str:
        """The model name the server answers with."""
        ...

    def build(self) -> Profile:
        """Make the profile."""
        ...


class SimStartError(RuntimeError):
    """The background simulator did not come up."""


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A uvloop loop when uvloop is importable, else asyncio's default."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    return loop


def serve(
    profile: Profile,
    host: str,
    port: int,
    on_ready: Callable[[int], None] | None = None,
    *,
    served_model_name: str = DEFAULT_MODEL_NAME,
    faults: FaultSpec | None = None,
    die_after_s: float | None = None,
    network: NetworkDelay | None = None,
) -> None:
    """Serve `profile` until SIGINT or SIGTERM (or, with `die_after_s`, die; see the docstring)."""
    loop = new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        loop.run_until_complete(
            _serve(
                loop, profile, host, port, on_ready, served_model_name, faults, die_after_s, network
            )
        )
    finally:
        asyncio.set_event_loop(None)
        loop.close()


async def _serve(
    loop: asyncio.AbstractEventLoop,
    profile: Profile,
    host: str,
    port: int,
    on_ready: Callable[[int], None] | None,
    served_model_name: str,
    faults: FaultSpec | None,
    die_after_s: float | None,
    network: NetworkDelay | None = None,
) -> None:
    max_model_len = int(getattr(profile, "max_model_len", DEFAULT_MAX_MODEL_LEN))
    server = SimServer(
        profile,
        served_model_name=served_model_name,
        max_model_len=max_model_len,
        faults=faults,
        network=network,
    )
    if die_after_s is not None:
        delay_s = die_after_s

        def arm() -> None:
            loop.call_later(delay_s, _die, server, delay_s)

        server.on_first_completion = arm
    profile.bind(loop)
    listener = await loop.create_server(
        server.protocol_factory, host, port, reuse_address=True, backlog=4096
    )
    # Everything allocated so far lives as long as the server: keep it out of the collector's scans,
    # which otherwise pause the loop for milliseconds (measured: gen2 3.6 ms at 512 streams).
    gc.collect()
    gc.freeze()
    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        if on_ready is not None:
            on_ready(int(listener.sockets[0].getsockname()[1]))
        await stop.wait()
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
        listener.close()
        server.close_connections()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(listener.wait_closed(), _STOP_TIMEOUT_S)


def _die(server: SimServer, after_s: float) -> None:
    """The crash: one line on stderr, then exit without closing anything."""
    sys.stderr.write(
        f"gputui sim: --die-after {after_s:g} s: exiting now (simulated crash), after "
        f"{server.faults.drawn} completion requests\n"
    )
    sys.stderr.flush()
    os._exit(DIE_EXIT_CODE)


def _child_main(
    spec: ProfileSpec,
    host: str,
    port: int,
    conn: Connection,
    faults: FaultSpec | None = None,
    die_after_s: float | None = None,
    network: NetworkDelay | None = None,
) -> None:
    def ready(bound_port: int) -> None:
        conn.send(("ready", bound_port))
        conn.close()

    try:
        serve(
            spec.build(),
            host,
            port,
            ready,
            served_model_name=spec.served_model_name,
            faults=faults,
            die_after_s=die_after_s,
            network=network,
        )
    except Exception as exc:  # reported to the parent through the pipe
        if conn.closed:
            raise
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
        raise SystemExit(1) from None


class SimProcess:
    """A simulator running in a child process; stop it with `stop()` or a `with` block."""

    def __init__(self, process: multiprocessing.process.BaseProcess, host: str, port: int) -> None:
        self._process = process
        self.host = host
        self.port = port

    @property
    def pid(self) -> int:
        """The child's process id (for CPU accounting or affinity)."""
        pid = self._process.pid
        if pid is None:
            raise RuntimeError("the simulator process was never started")
        return pid

    @property
    def url(self) -> str:
        """Base URL, e.g. http://127.0.0.1:8000."""
        return f"http://{self.host}:{self.port}"

    def stop(self, timeout_s: float = _STOP_TIMEOUT_S) -> None:
        """SIGTERM, wait up to `timeout_s`, then SIGKILL."""
        process = self._process
        if process.is_alive():
            process.terminate()
            process.join(timeout_s)
        if process.is_alive():
            process.kill()
            process.join(timeout_s)

    def __enter__(self) -> SimProcess:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def start_background(
    profile_spec: ProfileSpec,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    ready_timeout_s: float = _READY_TIMEOUT_S,
    faults: FaultSpec | None = None,
    die_after_s: float | None = None,
    network: NetworkDelay | None = None,
) -> SimProcess:
    """Start the simulator in a spawned child process and wait until it listens."""
    ctx = multiprocessing.get_context("spawn")
    parent_conn, child_conn = ctx.Pipe(duplex=False)
    process = ctx.Process(
        target=_child_main,
        args=(profile_spec, host, port, child_conn, faults, die_after_s, network),
        name="gputui-sim",
        daemon=True,
    )
    process.start()
    child_conn.close()
    try:
        if not parent_conn.poll(ready_timeout_s):
            raise SimStartError(f"the simulator did not start within {ready_timeout_s:g} s")
        kind, value = parent_conn.recv()
    except (EOFError, SimStartError) as exc:
        SimProcess(process, host, 0).stop()
        if isinstance(exc, SimStartError):
            raise
        raise SimStartError("the simulator exited during startup") from None
    finally:
        parent_conn.close()
    if kind != "ready":
        SimProcess(process, host, 0).stop()
        raise SimStartError(f"the simulator failed to start: {value}")
    return SimProcess(process, host, int(value))
