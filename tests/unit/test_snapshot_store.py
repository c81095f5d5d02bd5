"""Saving atomically and loading with one-line errors."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

from gputui.errors import GputuiError, SnapshotError
from gputui.snapshot.store import load_snapshot, save_snapshot
from tests.unit.test_snapshot_models import make_snapshot


def test_round_trip(tmp_path: Path) -> None:
    snap = make_snapshot()
    path = tmp_path / "run.json"
    save_snapshot(snap, path)
    assert load_snapshot(path) == snap
    assert load_snapshot(str(path)) == snap


def test_file_is_indented_json(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    save_snapshot(make_snapshot(), path)
    text = path.read_text()
    assert text.startswith('{\n  "schema_version": 1,')
    assert orjson.loads(text)["steps"][0]["errors"] == {"http_429": 1}


def test_unknown_keys_survive_a_load_and_save(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    data = make_snapshot().model_dump(mode="json")
    data["telemetry"] = {"gpu": [{"index": 0}]}
    data["steps"][0]["gpu_util_mean"] = 0.97
    path.write_bytes(orjson.dumps(data))
    save_snapshot(load_snapshot(path), path)
    again = orjson.loads(path.read_bytes())
    assert again["telemetry"] == {"gpu": [{"index": 0}]}
    assert again["steps"][0]["gpu_util_mean"] == 0.97


def test_atomic_write_leaves_no_temp_file(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    save_snapshot(make_snapshot(label="first"), path)
    save_snapshot(make_snapshot(label="second"), path)
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]
    assert load_snapshot(path).label == "second"
    assert path.stat().st_mode & 0o777 == 0o644


def test_failed_replace_keeps_the_old_file_and_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "run.json"
    save_snapshot(make_snapshot(label="old"), path)

    def refuse(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(SnapshotError, match="No space left on device"):
        save_snapshot(make_snapshot(label="new"), path)
    monkeypatch.undo()
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]
    assert load_snapshot(path).label == "old"


def test_unwritable_directory_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "missing-dir" / "run.json"
    with pytest.raises(SnapshotError, match=r"missing-dir/run\.json: cannot write"):
        save_snapshot(make_snapshot(), path)


def load_error(path: Path) -> str:
    with pytest.raises(SnapshotError) as info:
        load_snapshot(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: ")
    assert isinstance(info.value, GputuiError)
    return message[len(f"{path}: ") :]


def write_json(path: Path, data: object) -> Path:
    path.write_bytes(orjson.dumps(data))
    return path


def test_missing_file(tmp_path: Path) -> None:
    assert load_error(tmp_path / "nope.json") == "no such file"


def test_truncated_json(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    save_snapshot(make_snapshot(), path)
    path.write_bytes(path.read_bytes()[:200])
    assert load_error(path).startswith("not valid JSON (truncated or corrupt?): ")


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_bytes(b"")
    assert load_error(path) == "not valid JSON (truncated or corrupt?): empty file"


def test_not_an_object(tmp_path: Path) -> None:
    path = write_json(tmp_path / "run.json", [1, 2])
    assert load_error(path) == "not a gputui snapshot: top level is list, not an object"


def test_schema_version_missing(tmp_path: Path) -> None:
    data = make_snapshot().model_dump(mode="json")
    del data["schema_version"]
    path = write_json(tmp_path / "run.json", data)
    assert load_error(path) == "not a gputui snapshot: schema_version is missing"


def test_schema_version_not_an_integer(tmp_path: Path) -> None:
    data = make_snapshot().model_dump(mode="json") | {"schema_version": "1"}
    path = write_json(tmp_path / "run.json", data)
    assert load_error(path) == "schema_version must be an integer, got '1'"


def test_newer_schema_version(tmp_path: Path) -> None:
    data = make_snapshot().model_dump(mode="json") | {"schema_version": 2}
    path = write_json(tmp_path / "run.json", data)
    assert load_error(path) == ("written by a newer gputui: schema_version 2, this gputui reads 1")


def test_older_schema_version(tmp_path: Path) -> None:
    data = make_snapshot().model_dump(mode="json") | {"schema_version": 0}
    path = write_json(tmp_path / "run.json", data)
    assert load_error(path) == "unsupported schema_version 0, this gputui reads 1"


def test_first_validation_error_names_the_field(tmp_path: Path) -> None:
    data = make_snapshot().model_dump(mode="json")
    data["steps"][0]["ttft_s"]["p95"] = "fast"
    path = write_json(tmp_path / "run.json", data)
    assert (
        load_error(path) == "steps[0].ttft_s.p95: Input should be a valid number, unable to "
        "parse string as a number"
    )


def test_missing_field_counts_the_rest(tmp_path: Path) -> None:
    data = make_snapshot().model_dump(mode="json")
    del data["target"]["url"]
    del data["complete"]
    path = write_json(tmp_path / "run.json", data)
    assert load_error(path) == "complete: Field required (and 1 more)"
