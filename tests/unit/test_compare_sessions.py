"""The sessions list: valid snapshots newest first, unreadable files skipped and reported."""

from __future__ import annotations

from pathlib import Path

import pytest

from gputui.errors import SnapshotError
from gputui.snapshot.sessions import (
    default_sessions_dir,
    delete_session,
    list_sessions,
    sessions_table,
)
from gputui.snapshot.store import save_snapshot
from tests.unit.test_compare import CURVE, make_snap


def write(folder: Path, name: str, created_at: str, label: str | None) -> Path:
    snap = make_snap(CURVE, label=label, created_at=created_at)
    path = folder / name
    save_snapshot(snap, path)
    return path


def test_lists_newest_first_and_reports_bad_files(tmp_path: Path) -> None:
    old = write(tmp_path, "old.json", "2025-01-01T10:00:00+00:00", "old")
    new = write(tmp_path, "new.json", "2025-03-01T10:00:00+00:00", None)
    (tmp_path / "broken.json").write_text('{"schema_version": 1, "label": ')
    (tmp_path / "future.json").write_text('{"schema_version": 9}')
    (tmp_path / "x.journal").write_text("{}\n")
    (tmp_path / ".new.json.123.tmp").write_text("")
    (tmp_path / ".hidden.json").write_text("{}")
    skipped: list[tuple[Path, str]] = []
    sessions = list_sessions(tmp_path, on_skip=lambda p, m: skipped.append((p, m)))
    assert [s.path for s in sessions] == [new, old]
    assert [s.name for s in sessions] == ["new", "old"]
    assert [p.name for p, _ in skipped] == ["broken.json", "future.json"]
    assert skipped[0][1].startswith(f"{tmp_path / 'broken.json'}: not valid JSON")
    assert "written by a newer gputui: schema_version 9" in skipped[1][1]
    first = sessions[0]
    assert first.capacity_level == "concurrency 8"
    assert first.capacity_output_tokens_per_s == 600.0
    assert first.gpu is None and first.model == "llama" and first.steps == 5
    assert first.to_dict()["file"] == str(new)


def test_missing_folder_is_empty_and_skips_are_optional(tmp_path: Path) -> None:
    assert list_sessions(tmp_path / "nope") == []
    (tmp_path / "bad.json").write_text("[]")
    assert list_sessions(tmp_path) == []


def test_table_has_one_line_per_session(tmp_path: Path) -> None:
    write(tmp_path, "a.json", "2025-01-01T10:00:00+00:00", "rtx")
    text = sessions_table(list_sessions(tmp_path))
    lines = text.splitlines()
    assert lines[0].split() == ["date", "label", "target", "GPU", "capacity", "knee", "file"]
    assert lines[2].startswith("2025-01-01 10:00:00  rtx    llama @ http://x/v1  unknown")
    assert "600.0 good out tok/s at concurrency 8" in lines[2]
    assert lines[2].endswith(str(tmp_path / "a.json"))


def test_delete_session(tmp_path: Path) -> None:
    path = write(tmp_path, "a.json", "2025-01-01T10:00:00+00:00", "rtx")
    delete_session(path)
    assert not path.exists()
    with pytest.raises(SnapshotError, match="no such file"):
        delete_session(path)
    with pytest.raises(SnapshotError, match="not a snapshot file"):
        delete_session(tmp_path / "x.journal")


def test_default_dir_is_the_user_data_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert default_sessions_dir() == tmp_path / "gputui" / "sessions"


def test_the_listed_file_is_a_path_compare_takes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from gputui.cli import main

    write(tmp_path, "a.json", "2025-01-01T10:00:00+00:00", "rtx")
    assert main(["sessions", "--dir", str(tmp_path)]) == 0
    listed = capsys.readouterr().out.splitlines()[2].split()[-1]
    assert listed == str(tmp_path / "a.json")
    monkeypatch.chdir("/")  # from anywhere: not a name relative to the folder
    assert main(["compare", listed, "--format", "json"]) == 0
    assert '"label"' in capsys.readouterr().out


def test_sessions_help_says_where_the_folder_is(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gputui.cli import main

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    with pytest.raises(SystemExit) as done:
        main(["sessions", "--help"])
    assert done.value.code == 0
    text = "".join(capsys.readouterr().out.split())  # argparse wraps the path at its hyphens
    folder = tmp_path / "gputui" / "sessions"
    assert f"Listthesnapshotssavedin{folder}" in text
    assert f"(default:{folder})" in text
