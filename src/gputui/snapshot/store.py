"""Saving and loading snapshot files.

Contract:
- `save_snapshot` writes indented JSON (orjson) to a temp file beside the target, fsyncs it and
  `os.replace`s it over the target, so a reader (or a crash, or a second SIGINT) sees the old file
  or the new one, never half of one. It blocks: async callers run it through `asyncio.to_thread`.
- `load_snapshot` raises `SnapshotError` with one line naming the file and what is wrong (missing,
  not JSON, not an object, no or unknown `schema_version`, or the first invalid field), because the
  CLI prints exactly that line. Whatever the file holds (any bytes, any nesting, keys with newlines,
  megabyte values), that line stays one bounded line and no other exception escapes: the fuzz tests
  in tests/unit/test_fuzz_snapshot.py hold it to that.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Final

import orjson
from pydantic import ValidationError

from gputui.errors import SnapshotError
from gputui.snapshot.models import SCHEMA_VERSION, Snapshot


def save_snapshot(snapshot: Snapshot, path: str | os.PathLike[str]) -> None:
    """Write the snapshot atomically (temp file, fsync, rename); OSError becomes SnapshotError."""
    target = Path(path)
    data = orjson.dumps(snapshot.model_dump(mode="json"), option=orjson.OPT_INDENT_2)
    try:
        fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as exc:
        raise SnapshotError(f"{target}: cannot write: {exc.strerror or exc}") from exc
    tmp = Path(tmp_name)
    try:
        # mkstemp creates 0600; keep the mode of the file being replaced, else the usual 0644.
        os.fchmod(fd, target.stat().st_mode & 0o777 if target.exists() else 0o644)
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        tmp.replace(target)
    except OSError as exc:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise SnapshotError(f"{target}: cannot write: {exc.strerror or exc}") from exc
    _fsync_directory(target.parent)


def _fsync_directory(directory: Path) -> None:
    """Make the rename itself durable; not every platform or filesystem allows it."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


MAX_DEPTH: Final = 64
"""Deepest nesting a snapshot may have: real ones nest a handful of levels, and orjson writes no
more than 254, so a deeper file would load and then fail to save (or to print)."""


def _deeper_than(value: object, limit: int) -> bool:
    """Whether JSON `value` nests more than `limit` levels (iterative: no recursion to exhaust)."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children: Iterable[object]
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def _one_line(text: str, limit: int = 200) -> str:
    """Collapse whitespace and cut: quoted file content must not make a line many, or megabytes."""
    line = " ".join(text[: limit * 4].split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _field_path(loc: tuple[int | str, ...]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            name = _one_line(str(part), 40)
            path += f".{name}" if path else name
    return _one_line(path, 160) or "(top level)"


def _check_version(source: Path, data: dict[str, object]) -> None:
    if "schema_version" not in data:
        raise SnapshotError(f"{source}: not a gputui snapshot: schema_version is missing")
    version = data["schema_version"]
    if not isinstance(version, int) or isinstance(version, bool):
        shown = _one_line(repr(version), 60)
        raise SnapshotError(f"{source}: schema_version must be an integer, got {shown}")
    if version > SCHEMA_VERSION:
        raise SnapshotError(
            f"{source}: written by a newer gputui: schema_version {version}, "
            f"this gputui reads {SCHEMA_VERSION}"
        )
    if version < SCHEMA_VERSION:
        raise SnapshotError(
            f"{source}: unsupported schema_version {version}, this gputui reads {SCHEMA_VERSION}"
        )


def load_snapshot(path: str | os.PathLike[str]) -> Snapshot:
    """Read and validate a snapshot file, or raise SnapshotError with one line saying why not."""
    source = Path(path)
    try:
        raw = source.read_bytes()
    except FileNotFoundError:
        raise SnapshotError(f"{source}: no such file") from None
    except OSError as exc:
        raise SnapshotError(f"{source}: cannot read: {exc.strerror or exc}") from exc
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        detail = "empty file" if not raw.strip() else _one_line(str(exc))
        raise SnapshotError(f"{source}: not valid JSON (truncated or corrupt?): {detail}") from exc
    if not isinstance(data, dict):
        kind = type(data).__name__
        raise SnapshotError(f"{source}: not a gputui snapshot: top level is {kind}, not an object")
    _check_version(source, data)
    if _deeper_than(data, MAX_DEPTH):
        raise SnapshotError(
            f"{source}: not a gputui snapshot: nested deeper than {MAX_DEPTH} levels"
        )
    try:
        return Snapshot.model_validate(data)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        more = exc.error_count() - 1
        suffix = f" (and {more} more)" if more else ""
        message = _one_line(str(first["msg"]))
        raise SnapshotError(
            f"{source}: {_field_path(tuple(first['loc']))}: {message}{suffix}"
        ) from exc
