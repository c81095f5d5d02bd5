"""Datasets: ShareGPT JSON and JSONL, and errors that point at the entry and field."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from gputui.workloads.datasets import DatasetEntry, load_dataset, sample_entries
from gputui.workloads.errors import WorkloadFileError

SHAREGPT = [
    {
        "id": "a",
        "conversations": [
            {"from": "human", "value": "What is a GPU?"},
            {"from": "gpt", "value": "A graphics processor."},
            {"from": "human", "value": "ignored third turn"},
        ],
    },
    {"id": "b", "conversations": [{"from": "human", "value": "one turn only"}]},
    {"id": "c", "conversations": [{"from": "human", "value": "Hi"}, {"from": "gpt", "value": ""}]},
    {
        "id": "d",
        "conversations": [
            {"from": "human", "value": "Explain KV cache."},
            {"from": "gpt", "value": "It stores keys and values."},
        ],
    },
]


def write(tmp_path: Path, name: str, data: bytes | str) -> Path:
    path = tmp_path / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return path


def test_sharegpt_follows_vllm_bench_serve(tmp_path: Path) -> None:
    path = write(tmp_path, "sg.json", orjson.dumps(SHAREGPT))
    entries = load_dataset(path)
    assert entries == [
        DatasetEntry(prompt="What is a GPU?", completion="A graphics processor."),
        DatasetEntry(prompt="Explain KV cache.", completion="It stores keys and values."),
    ]


def test_jsonl(tmp_path: Path) -> None:
    lines = [
        {"prompt": "Say hi", "output_tokens": 16},
        {},
        {"prompt": "Count to ten", "output_tokens": 32, "input_tokens": 4, "extra": "kept out"},
    ]
    text = "\n".join("" if not x else orjson.dumps(x).decode() for x in lines) + "\n"
    entries = load_dataset(write(tmp_path, "d.jsonl", text))
    assert entries == [
        DatasetEntry(prompt="Say hi", output_tokens=16),
        DatasetEntry(prompt="Count to ten", output_tokens=32, input_tokens=4),
    ]


def test_format_is_sniffed_without_a_known_suffix(tmp_path: Path) -> None:
    assert len(load_dataset(write(tmp_path, "sg.data", orjson.dumps(SHAREGPT)))) == 2
    jsonl = '{"prompt": "x", "output_tokens": 1}\n'
    assert len(load_dataset(write(tmp_path, "d.data", jsonl))) == 1
    assert len(load_dataset(write(tmp_path, "d.txt", jsonl), "jsonl")) == 1


@pytest.mark.parametrize(
    ("name", "content", "where", "expected"),
    [
        ("a.json", b"{nope", "", "not valid JSON"),
        ("a.json", b'{"conversations": []}', "(top level)", "expected a JSON list"),
        ("a.json", b"[1]", "[0]", "expected an object, got int"),
        ("a.json", b'[{"conversations": "x"}]', "[0].conversations", "expected a list of turns"),
        (
            "a.json",
            b'[{"conversations": [{"value": "a"}, {"value": 3}]}]',
            "[0].conversations[1].value",
            "expected a string, got int",
        ),
        ("a.json", b"[]", "", "no usable entries"),
        ("d.jsonl", b'{"prompt": "a", "output_tokens": 1}\n{oops\n', "line 2", "not valid JSON"),
        ("d.jsonl", b'["a"]\n', "line 1", "expected a JSON object"),
        ("d.jsonl", b'{"output_tokens": 3}\n', "line 1: prompt", "expected a non-empty string"),
        ("d.jsonl", b'{"prompt": "a"}\n', "line 1: output_tokens", "got missing"),
        (
            "d.jsonl",
            b'{"prompt": "a", "output_tokens": "9"}\n',
            "line 1: output_tokens",
            "expected a positive integer, got '9'",
        ),
        ("d.jsonl", b'{"prompt": "a", "output_tokens": 0}\n', "line 1: output_tokens", "got 0"),
    ],
)
def test_malformed_datasets(
    tmp_path: Path, name: str, content: bytes, where: str, expected: str
) -> None:
    path = write(tmp_path, name, content)
    with pytest.raises(WorkloadFileError) as info:
        load_dataset(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ")
    if where:
        assert f": {where}: " in message
    assert expected in message
    assert "\n" not in message


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(WorkloadFileError, match="dataset file not found"):
        load_dataset(tmp_path / "absent.jsonl")


def test_sample_is_seeded_and_bounded() -> None:
    entries = [DatasetEntry(prompt=str(i), output_tokens=1) for i in range(100)]
    first = sample_entries(entries, 10, seed=5)
    assert first == sample_entries(entries, 10, seed=5)
    assert first != sample_entries(entries, 10, seed=6)
    assert len({e.prompt for e in first}) == 10
    assert len(sample_entries(entries, 1000, seed=5)) == 100
