"""Datasets of real prompts: ShareGPT-format JSON and JSONL, read from a local path only.

Contract: `load_dataset(path)` returns `DatasetEntry`s or raises `WorkloadFileError` naming the
file, the entry or line, the field and what was expected. Nothing is ever downloaded.

- ShareGPT (the convention of `vllm bench serve`): a JSON list of objects whose `conversations`
  is a list of `{"from": ..., "value": str}`; the first turn is the prompt, the second the reference
  completion (its length, once tokenized, is the output length). Conversations with fewer than two
  turns are skipped, as vLLM does; anything else malformed is an error.
- JSONL: one JSON object per line, `{"prompt": str, "output_tokens": int > 0}`, optionally
  `"input_tokens": int > 0` (otherwise the prompt is counted); blank lines are skipped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import orjson

from gputui.workloads.errors import WorkloadFileError

DatasetFormat = Literal["auto", "sharegpt", "jsonl"]


@dataclass(frozen=True, slots=True)
class DatasetEntry:
    """One prompt and what is known of its lengths."""

    prompt: str
    output_tokens: int | None = None
    """Given by the file (JSONL); None when it must be counted from `completion`."""
    completion: str | None = None
    """The reference answer (ShareGPT), whose token count is the output length."""
    input_tokens: int | None = None
    """Given by the file (JSONL, optional); otherwise the prompt is counted."""


def detect_format(path: Path, head: bytes) -> Literal["sharegpt", "jsonl"]:
    """`.jsonl` is JSONL, `.json` is ShareGPT; otherwise a leading `[` means ShareGPT."""
    if path.suffix.lower() == ".jsonl":
        return "jsonl"
    if path.suffix.lower() == ".json":
        return "sharegpt"
    return "sharegpt" if head.lstrip()[:1] == b"[" else "jsonl"


def load_dataset(path: Path, fmt: DatasetFormat = "auto") -> list[DatasetEntry]:
    """Every usable entry of a dataset file (raises WorkloadFileError)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise WorkloadFileError(path, "", "dataset file not found") from None
    except OSError as exc:
        raise WorkloadFileError(path, "", f"cannot read the dataset: {exc.strerror}") from None
    kind = detect_format(path, data[:64]) if fmt == "auto" else fmt
    entries = _sharegpt(path, data) if kind == "sharegpt" else _jsonl(path, data)
    if not entries:
        raise WorkloadFileError(path, "", f"no usable entries in this {kind} dataset")
    return entries


def _sharegpt(path: Path, data: bytes) -> list[DatasetEntry]:
    try:
        root = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise WorkloadFileError(path, "", f"not valid JSON ({exc})") from None
    if not isinstance(root, list):
        got = type(root).__name__
        raise WorkloadFileError(path, "(top level)", f"expected a JSON list (ShareGPT), got {got}")
    entries = []
    for i, item in enumerate(root):
        if not isinstance(item, dict):
            raise WorkloadFileError(path, f"[{i}]", f"expected an object, got {_kind(item)}")
        turns = item.get("conversations")
        if not isinstance(turns, list):
            raise WorkloadFileError(
                path, f"[{i}].conversations", f"expected a list of turns, got {_kind(turns)}"
            )
        if len(turns) < 2:
            continue
        texts = []
        for j in (0, 1):
            turn = turns[j]
            where = f"[{i}].conversations[{j}]"
            if not isinstance(turn, dict):
                raise WorkloadFileError(path, where, f"expected an object, got {_kind(turn)}")
            value = turn.get("value")
            if not isinstance(value, str):
                raise WorkloadFileError(
                    path, f"{where}.value", f"expected a string, got {_kind(value)}"
                )
            texts.append(value)
        if texts[0].strip() and texts[1].strip():
            entries.append(DatasetEntry(prompt=texts[0], completion=texts[1]))
    return entries


def _jsonl(path: Path, data: bytes) -> list[DatasetEntry]:
    entries = []
    for number, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"line {number}"
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise WorkloadFileError(path, where, f"not valid JSON ({exc})") from None
        if not isinstance(obj, dict):
            raise WorkloadFileError(path, where, f"expected a JSON object, got {_kind(obj)}")
        prompt = obj.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            raise WorkloadFileError(
                path, f"{where}: prompt", f"expected a non-empty string, got {_kind(prompt)}"
            )
        output = _positive(path, where, obj, "output_tokens", required=True)
        given = _positive(path, where, obj, "input_tokens", required=False)
        entries.append(DatasetEntry(prompt=prompt, output_tokens=output, input_tokens=given))
    return entries


def _positive(
    path: Path, where: str, obj: Mapping[str, object], key: str, *, required: bool
) -> int | None:
    value = obj.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        shown = "missing" if key not in obj else repr(value)
        raise WorkloadFileError(
            path, f"{where}: {key}", f"expected a positive integer, got {shown}"
        )
    return value


def _kind(value: object) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, str):
        return repr(value[:40])
    return type(value).__name__


def sample_entries(
    entries: Sequence[DatasetEntry], max_entries: int, seed: int
) -> list[DatasetEntry]:
    """A seeded subset of at most `max_entries` (all of them, shuffled, when fewer)."""
    rng = np.random.default_rng([seed % (1 << 64), 0xDA7A])
    order = rng.permutation(len(entries))[:max_entries]
    return [entries[i] for i in order.tolist()]
