"""Hostile snapshot files: `load_snapshot` gives a Snapshot or one SnapshotError line, nothing else.

Random bytes, every truncation of a real snapshot, real snapshots with any field replaced by any
JSON value (deeply nested ones included), keys with newlines and huge values: the loader must
answer with a `SnapshotError` whose message is one bounded line (the CLI prints exactly that), and
never raise anything else (no RecursionError, no KeyError, no UnicodeDecodeError).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputui.errors import SnapshotError
from gputui.snapshot.models import Snapshot
from gputui.snapshot.store import MAX_DEPTH, load_snapshot, save_snapshot
from tests.unit.test_snapshot_models import make_snapshot

FUZZ = settings(
    max_examples=200,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
MAX_MESSAGE = 600
"""Longest acceptable error line beyond the file name."""

VALID = orjson.dumps(make_snapshot().model_dump(mode="json"), option=orjson.OPT_INDENT_2)

json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**63), max_value=2**63 - 1),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=30),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=15,
)


def attempt(path: Path, data: bytes) -> Snapshot | None:
    """Load `data` from a file: a Snapshot (which must save and load back), or None after checking
    the error's shape."""
    path.write_bytes(data)
    try:
        loaded = load_snapshot(path)
    except SnapshotError as exc:
        message = str(exc)
        one_bounded_line = (
            message.startswith(f"{path}: ")
            and "\n" not in message
            and "\r" not in message
            and len(message) - len(str(path)) <= MAX_MESSAGE
        )
        assert one_bounded_line, repr(message[:300])
        return None
    again = path.with_suffix(".again.json")
    save_snapshot(loaded, again)
    assert load_snapshot(again) == loaded
    return loaded


@pytest.fixture
def target(tmp_path: Path) -> Path:
    return tmp_path / "snap.json"


@FUZZ
@given(st.binary(max_size=500))
def test_random_bytes(target: Path, data: bytes) -> None:
    attempt(target, data)


@FUZZ
@given(st.integers(0, len(VALID)))
def test_every_truncation(target: Path, cut: int) -> None:
    result = attempt(target, VALID[:cut])
    assert (result is not None) == (VALID[:cut].strip() == VALID.strip())


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            out += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            out += _paths(item, (*prefix, i))
    return out


BASE = orjson.loads(VALID)
PATHS = _paths(BASE)[1:]


def _replace(data: Any, path: tuple[Any, ...], value: Any) -> None:
    for key in path[:-1]:
        data = data[key]
    data[path[-1]] = value


@FUZZ
@given(st.lists(st.tuples(st.sampled_from(PATHS), json_values), min_size=1, max_size=3))
def test_any_field_replaced_by_any_value(
    target: Path, edits: list[tuple[tuple[Any, ...], Any]]
) -> None:
    data = orjson.loads(VALID)
    for path, value in edits:
        try:
            _replace(data, path, value)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier edit removed this path
    attempt(target, orjson.dumps(data))


@FUZZ
@given(st.text(min_size=1, max_size=20), json_values)
def test_unknown_keys_with_any_name(target: Path, key: str, value: Any) -> None:
    data = orjson.loads(VALID)
    data["steps"][0]["errors"][key + "\n\r"] = value
    attempt(target, orjson.dumps(data))


@pytest.mark.parametrize("depth", [10, 62, 63, 100, 300, 1000, 5000, 200_000])
def test_deep_nesting_everywhere(target: Path, depth: int) -> None:
    deep = b"[" * depth + b"]" * depth
    attempt(target, deep)
    for key in (b"plan", b"validation", b"steps", b"label", b"schema_version"):
        data = VALID.replace(b"{", b'{"%s": %s, ' % (key, deep), 1)
        attempt(target, data)
    nested = b'{"a": ' * min(depth, 1000) + b"1" + b"}" * min(depth, 1000)
    payload = VALID.replace(b'"plan": ', b'"plan": {"deep": %s}, "x": ' % nested, 1)
    loaded = attempt(target, payload)
    assert (loaded is not None) == (depth + 2 <= MAX_DEPTH)  # top level, plan, then depth


def test_reasonable_nesting_loads_and_saves(target: Path) -> None:
    nested = b'{"a": ' * 40 + b"1" + b"}" * 40
    loaded = attempt(target, VALID.replace(b'"plan": ', b'"plan": %s, "x": ' % nested, 1))
    assert loaded is not None and loaded.plan is not None


def test_huge_values_give_a_bounded_line(target: Path) -> None:
    huge = "x\n" * 3_000_000
    for key in ("schema_version", "label", "complete", "created_at"):
        data = orjson.loads(VALID)
        data[key] = huge
        attempt(target, orjson.dumps(data))
    data = orjson.loads(VALID)
    data["steps"][0]["errors"] = {huge: "not a count"}
    attempt(target, orjson.dumps(data))
    attempt(target, b'{"schema_version": 1, "x": "' + b"\xff" * 1_000_000 + b'"}')
    attempt(target, b" " * 5_000_000)


def test_not_a_file(tmp_path: Path) -> None:
    for path in (tmp_path, tmp_path / "missing.json"):
        with pytest.raises(SnapshotError) as info:
            load_snapshot(path)
        assert "\n" not in str(info.value)
