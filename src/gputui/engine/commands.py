"""The engine's IPC commands: a closed, typed set (parent -> engine process).

Contract: the parent sends only these frozen dataclasses (they pickle across the pipe and Ray);
`check_command` refuses anything else, on the sending side (TypeError: a programming error) and
in the engine (`UnknownCommand`: the engine stops and says why), so a misspelt command is never
silently ignored.
"""

from __future__ import annotations

from dataclasses import dataclass

from gputui.engine.load import LoadMode


@dataclass(frozen=True, slots=True)
class Load:
    """Run this load from now on; requests sent from now count in `step`."""

    mode: LoadMode
    level: float
    step: int


@dataclass(frozen=True, slots=True)
class Pause:
    """Send no new requests (in-flight ones finish)."""


@dataclass(frozen=True, slots=True)
class Resume:
    """Send again at the current load."""


@dataclass(frozen=True, slots=True)
class Burst:
    """Fire `count` requests at once on top of the load."""

    count: int


@dataclass(frozen=True, slots=True)
class Stop:
    """End the loop; `cancel` aborts in-flight requests instead of draining them."""

    cancel: bool


@dataclass(frozen=True, slots=True)
class Reconnect:
    """Close every idle kept-alive connection: later requests open fresh ones (`--repeats`)."""


Command = Load | Pause | Resume | Burst | Stop | Reconnect
COMMANDS = (Load, Pause, Resume, Burst, Stop, Reconnect)


class UnknownCommand(TypeError):
    """Something that is not one of `COMMANDS` reached the engine."""


def check_command(command: object) -> Command:
    """The command itself, or UnknownCommand."""
    if not isinstance(command, COMMANDS):
        raise UnknownCommand(f"unknown engine command: {command!r}")
    return command
