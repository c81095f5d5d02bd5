"""Prepare a run's workload: count, calibrate, verify, and say how exact the lengths are.

Contract: `prepare_workload` runs in the parent before the engine starts (blocking httpx against
the target; a few dozen /tokenize calls, plus two per dataset entry it samples). It returns a
`PreparedRun`: the picklable spec for `EngineConfig.workload`, the method by which input lengths
were made (`server /tokenize (exact)`, `tokenizer.json (exact)` or `approximate (...)`), the
snapshot's workload fields, and notes for the user. Datasets are read from local paths only.

Run isolation: every run draws a new salt (`prompts.new_salt`) written at the start of every
prompt, so no run reads another's prefix cache; `isolate=False` (`--reuse-prompts`) or a
workload that shares prefixes on purpose (`shared_prefix_tokens`, `unique_prefix = false`) sends
no salt. The snapshot records it (`prompt_salt`, `prompt_isolation`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import httpx

from gputui.engine.target import Endpoint, Target
from gputui.engine.workload import ChatMessage
from gputui.errors import ServerUnreachable
from gputui.jsontypes import JsonObject
from gputui.workloads.calibrate import Calibration, Probe, calibrate, verify
from gputui.workloads.config import DatasetConfig, WorkloadConfig
from gputui.workloads.counters import (
    METHOD_APPROXIMATE,
    CounterMode,
    CountFailed,
    TokenCounter,
    WordCounter,
    open_counter,
    usage_probe,
)
from gputui.workloads.datasets import DatasetEntry, load_dataset, sample_entries
from gputui.workloads.distributions import EmpiricalDist, LengthDist
from gputui.workloads.errors import WorkloadFileError
from gputui.workloads.prompts import LEAD, BodyText, new_salt
from gputui.workloads.source import Entry, PreparedWorkload

_VERIFY_REQUESTS = 6
MIN_TOKENS_BACKENDS = frozenset({"vllm", "sglang", "gputui-sim"})
"""Servers known to honour `min_tokens` (docs/reference.md §5): `min_tokens = "auto"` sends it
only to these, since another server may reject a field it does not know."""


@dataclass(frozen=True, slots=True)
class PreparedRun:
    """A calibrated workload and what to record about it."""

    spec: PreparedWorkload
    """For `EngineConfig.workload`."""
    method: str
    """How input lengths were made exact (or not): the snapshot's `input_tokens_method`."""
    exact: bool
    nominal_input: int
    """Mean requested input length (the snapshot's `workload.input_tokens`)."""
    nominal_output: int
    details: dict[str, Any]
    """Extra `workload` fields for the snapshot (see snapshot.models.Workload)."""
    notes: tuple[str, ...] = ()
    """Lines worth showing the user (fallbacks, raised lengths)."""

    def describe(self) -> str:
        """One line: the lengths and how they were made."""
        spec = self.spec
        inp = spec.input.describe() if spec.input else f"{len(spec.entries)} dataset prompts"
        out = spec.output.describe() if spec.output else "dataset output lengths"
        return f"input {inp}, output {out}; input lengths: {self.method}"


def prepare_workload(
    workload: WorkloadConfig,
    *,
    target: Target,
    model: str,
    endpoint: Endpoint,
    api_key: str | None = None,
    token_counter: CounterMode = "auto",
    tokenizer: Path | None = None,
    base_dir: Path = Path(),
    scenario_name: str | None = None,
    scenario_file: str | None = None,
    backend: str | None = None,
    timeout_s: float = 30.0,
    http: httpx.Client | None = None,
    isolate: bool = True,
) -> PreparedRun:
    """Calibrate prompts against the target (see the module docstring).

    `backend` (engine.backend's name for the target) decides `min_tokens = "auto"`; `http` is
    a client to use instead of a new one (tests pass one with a mock transport); `isolate`
    salts the prompts (module docstring).
    """
    send_min = (
        workload.min_tokens
        if isinstance(workload.min_tokens, bool)
        else backend in MIN_TOKENS_BACKENDS
    )
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    notes: list[str] = []
    isolation = isolation_of(workload, isolate=isolate)
    salt = new_salt() if isolation == ISOLATED else None
    own = http is None
    http = httpx.Client(timeout=timeout_s, headers=headers) if http is None else http
    try:
        counter, fallback = open_counter(token_counter, http, target, model, tokenizer)
        if fallback:
            notes.append(fallback)
        probe = partial(usage_probe, http, target, model, endpoint)
        try:
            calibration = _calibrate(counter, endpoint, workload, probe, salt)
        except CountFailed as exc:
            notes.append(f"token counting failed ({exc}): input lengths are approximate")
            counter = WordCounter()
            calibration = _calibrate(counter, endpoint, workload, None, salt)
        try:
            spec = _spec(workload, calibration, counter, base_dir, send_min)
            check = verify(counter, calibration, _samples(spec))
        except CountFailed as exc:
            raise ServerUnreachable(f"counting tokens failed mid-way: {exc}") from None
    finally:
        if own:
            http.close()
    method, exact = calibration.method, calibration.exact
    if check is not None and not check.ok:
        exact = False
        method = (
            f"{METHOD_APPROXIMATE} ({method}: {check.total - check.matched} of {check.total} "
            f"calibration prompts off by up to {check.worst} tokens)"
        )
    notes.extend(calibration.notes)
    base = calibration.plan.base_tokens
    if spec.input is not None and spec.input.bounds()[0] < base:
        notes.append(
            f"input lengths under {base} tokens are raised to {base} "
            "(special tokens, template, the run's salt and the unique prefix)"
        )
    nominal_in, nominal_out = _nominal(spec)
    details: dict[str, Any] = {
        "scenario": scenario_name,
        "scenario_file": scenario_file,
        "seed": workload.seed,
        "input_distribution": spec.input.params() if spec.input else None,
        "output_distribution": spec.output.params() if spec.output else None,
        "dataset": _dataset_info(workload.dataset, base_dir, len(spec.entries)),
        "unique_prefix": workload.unique_prefix,
        "shared_prefix_tokens": workload.shared_prefix_tokens,
        "min_tokens": send_min,
        "prompt_salt": calibration.plan.salt or None,
        "prompt_isolation": isolation,
        "input_tokens_method": method,
        "input_tokens_check": None
        if check is None
        else {"matched": check.matched, "total": check.total, "worst_tokens": check.worst},
    }
    return PreparedRun(spec, method, exact, nominal_in, nominal_out, details, tuple(notes))


ISOLATED = "per-run salt"
REUSED = "off (--reuse-prompts)"
SHARED = "off (shared prefixes on purpose)"


def isolation_of(workload: WorkloadConfig, *, isolate: bool) -> str:
    """How this run's prompts are kept from other runs' prefix cache (`prompt_isolation`)."""
    if not isolate:
        return REUSED
    if workload.shared_prefix_tokens > 0 or not workload.unique_prefix:
        return SHARED
    return ISOLATED


def _calibrate(
    counter: TokenCounter,
    endpoint: Endpoint,
    workload: WorkloadConfig,
    probe: Probe | None,
    salt: int | None,
) -> Calibration:
    return calibrate(
        counter,
        endpoint,
        seed=workload.seed,
        unique_prefix=workload.unique_prefix,
        shared_prefix_tokens=workload.shared_prefix_tokens,
        probe=probe,
        salt=salt,
    )


def _spec(
    workload: WorkloadConfig,
    calibration: Calibration,
    counter: TokenCounter,
    base_dir: Path,
    min_tokens: bool,
) -> PreparedWorkload:
    tail = _TailCounter(counter, calibration.plan.tokens_per_word)
    entries: tuple[Entry, ...] = ()
    if workload.dataset is not None:
        entries = _entries(workload.dataset, workload.seed, tail, base_dir)
    return PreparedWorkload(
        plan=calibration.plan,
        input=_resolve(workload.input, "input", tail, base_dir),
        output=_resolve(workload.output, "output", tail, base_dir),
        entries=entries,
        seed=workload.seed,
        min_tokens=min_tokens,
    )


class _TailCounter:
    """Tokens a text adds after a space (what it costs inside a prompt), cached per text."""

    def __init__(self, counter: TokenCounter, tokens_per_word: float) -> None:
        self._counter = counter
        self._tokens_per_word = tokens_per_word
        self._base: int | None = None

    def __call__(self, text: str) -> int:
        if not self._counter.exact:
            return round(len(text.split()) * self._tokens_per_word)
        if self._base is None:
            self._base = self._counter.count(LEAD)
        return self._counter.count(f"{LEAD} {text}") - self._base

    def prompt_tokens(self, entry: DatasetEntry) -> int:
        """A dataset prompt's tokens: counted, or the file's figure when counting is a guess."""
        if entry.input_tokens is not None and not self._counter.exact:
            return entry.input_tokens
        return self(entry.prompt.strip())


def _entries(
    dataset: DatasetConfig, seed: int, tail: _TailCounter, base_dir: Path
) -> tuple[Entry, ...]:
    path = _path(dataset.path, base_dir)
    sampled = sample_entries(load_dataset(path, dataset.format), dataset.max_entries, seed)
    out: list[Entry] = []
    for entry in sampled:
        tokens = tail.prompt_tokens(entry)
        output = _output_tokens(entry, tail)
        if dataset.max_input_tokens is not None and tokens > dataset.max_input_tokens:
            continue
        if dataset.max_output_tokens is not None and output > dataset.max_output_tokens:
            continue
        if tokens > 0 and output > 0:
            out.append((entry.prompt.strip(), tokens, output))
    if not out:
        raise WorkloadFileError(path, "", "no entry is within max_input_tokens/max_output_tokens")
    return tuple(out)


def _output_tokens(entry: DatasetEntry, tail: _TailCounter) -> int:
    if entry.output_tokens is not None:
        return entry.output_tokens
    return tail(entry.completion or "")


def _resolve(
    dist: LengthDist | None, which: str, tail: _TailCounter, base_dir: Path
) -> LengthDist | None:
    """An empirical distribution gets its dataset's lengths; others pass through."""
    if not isinstance(dist, EmpiricalDist) or dist.values:
        return dist
    path = _path(dist.dataset, base_dir)
    entries = sample_entries(load_dataset(path, dist.format), 1000, 0)
    if which == "input":
        values = [tail.prompt_tokens(e) for e in entries]
    else:
        values = [_output_tokens(e, tail) for e in entries]
    kept = tuple(v for v in values if v > 0)
    if not kept:
        raise WorkloadFileError(path, "", f"no entry has a positive {which} length")
    return dist.model_copy(update={"dataset": str(path), "values": kept})


def _path(text: str, base_dir: Path) -> Path:
    path = Path(text).expanduser()
    return path if path.is_absolute() else base_dir / path


def _samples(spec: PreparedWorkload) -> list[tuple[str, tuple[ChatMessage, ...] | None, int]]:
    """Requests built exactly as the run builds them, and the longest and shortest synthetic."""
    plan = spec.plan
    source = spec.build()
    samples: list[tuple[str, tuple[ChatMessage, ...] | None, int]] = []
    for request_id in range(_VERIFY_REQUESTS):
        request = source.next(request_id)
        assert request.input_tokens is not None
        samples.append((request.prompt, request.messages, request.input_tokens - plan.overhead))
    if spec.input is not None:
        lo, hi = spec.input_bounds()
        body = BodyText(plan.words, spec.seed, plan.body_words(hi))
        for request_id, length in ((10**6, lo), (10**6 + 1, hi)):
            m = plan.body_words(length)
            prompt, messages = plan.render(request_id, body.slice(request_id, m))
            samples.append((prompt, messages, length - plan.overhead))
    return samples


def _nominal(spec: PreparedWorkload) -> tuple[int, int]:
    base = spec.plan.base_tokens
    if spec.input is not None:
        n_in = max(round(spec.input.nominal()), base)
    else:
        n_in = round(sum(base + t for _, t, _ in spec.entries) / len(spec.entries))
    if spec.output is not None:
        n_out = round(spec.output.nominal())
    else:
        n_out = round(sum(o for _, _, o in spec.entries) / len(spec.entries))
    return n_in, max(n_out, 1)


def _dataset_info(dataset: DatasetConfig | None, base_dir: Path, used: int) -> JsonObject | None:
    if dataset is None:
        return None
    info: JsonObject = dataset.model_dump(mode="json")
    info.update(path=str(_path(dataset.path, base_dir)), entries_used=used)
    return info
