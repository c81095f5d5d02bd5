"""Whether saved runs can be compared, and what a reader must know before comparing them.

Contract: `comparability_warnings(named)` returns one sentence per problem, in a fixed order:
first what makes the runs *not comparable* (a different model, precision, workload or SLA, or
capacities measured in different load modes), then caveats about single runs (interrupted, no
qualified capacity, an SLA with no bound, a capacity at the highest level tested, which is only a
lower bound). An empty list means the runs measured the same thing the same way. The CLI prints
the sentences to stderr, `--format json` puts them under `warnings` and the HTML in a banner.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import PurePath
from typing import Final, Literal

from gputui.metrics.capacity import level_text
from gputui.snapshot.hardware import precision_of
from gputui.snapshot.models import SlaBounds, Snapshot, Workload

#: Workload keys that record how a run went (measured lengths, calibration, the seed, where the
#: scenario file was), not what the requests asked for: two runs of one workload differ in them.
_WORKLOAD_IGNORED: Final = frozenset(
    {
        "input_tokens_method",
        "input_tokens_check",
        "seed",
        "scenario_file",
        "input_lengths",
        "output_lengths",
        "lengths_by_step",
        "prompt_salt",  # every run draws its own (isolation): two runs never share one
    }
)
#: Keys inside the workload whose values are file paths: compared by file name only, since the
#: same dataset sits in different folders on different machines.
_PATH_KEYS: Final = frozenset({"path", "dataset"})
#: Bookkeeping inside the dataset section (how many entries a run happened to use).
_DATASET_IGNORED: Final = frozenset({"entries_used"})


def sla_text(sla: SlaBounds) -> str:
    """The SLA in one short phrase, e.g. "TTFT<=1 s, TPOT<=35 ms, err<=1 %"."""
    parts = []
    if sla.ttft_p95_s is not None:
        parts.append(f"TTFT<={sla_bound_text(sla.ttft_p95_s)}")
    if sla.tpot_p95_s is not None:
        parts.append(f"TPOT<={sla_bound_text(sla.tpot_p95_s)}")
    if sla.e2e_p95_s is not None:
        parts.append(f"E2E<={sla_bound_text(sla.e2e_p95_s)}")
    if sla.ttfat_p95_s is not None:
        parts.append(f"TTFAT<={sla_bound_text(sla.ttfat_p95_s)}")
    if sla.max_error_rate is not None:
        parts.append(f"err<={sla.max_error_rate * 100:g} %")
    return ", ".join(parts) if parts else "none"


def sla_bound_text(seconds: float) -> str:
    """A latency bound as a person writes it: "1 s", "35 ms"."""
    return f"{seconds:g} s" if seconds >= 1 else f"{seconds * 1000:g} ms"


def _normalized(value: object, key: str = "") -> object:
    if isinstance(value, dict):
        return {
            k: _normalized(v, k)
            for k, v in value.items()
            if not (key == "dataset" and k in _DATASET_IGNORED)
        }
    if isinstance(value, list):
        return [_normalized(v) for v in value]
    if key in _PATH_KEYS and isinstance(value, str):
        return PurePath(value).name
    return value


def workload_signature(workload: Workload) -> dict[str, object]:
    """What the requests asked for, as comparable JSON values (see `_WORKLOAD_IGNORED`)."""
    dumped = workload.model_dump(mode="json")
    return {k: _normalized(v, k) for k, v in dumped.items() if k not in _WORKLOAD_IGNORED}


def workload_name(workload: Workload) -> str | None:
    """The scenario's name, else the dataset's file name, else None (a plain fixed workload)."""
    for key in ("scenario", "name"):
        value = getattr(workload, key, None)
        if isinstance(value, str) and value:
            return value
    dataset = getattr(workload, "dataset", None)
    if isinstance(dataset, Mapping) and isinstance(dataset.get("path"), str):
        return f"dataset {PurePath(dataset['path']).name}"
    return dataset if isinstance(dataset, str) and dataset else None


def length_kind(workload: Workload, which: Literal["input", "output"]) -> str | None:
    """The kind of the input or output length distribution; None when fixed or not recorded."""
    dist = getattr(workload, f"{which}_distribution", None)
    kind = dist.get("kind") if isinstance(dist, Mapping) else None
    return kind if isinstance(kind, str) and kind != "fixed" else None


def _each(named: Sequence[tuple[str, Snapshot]], values: Sequence[object]) -> str:
    return "; ".join(f"{name}: {value}" for (name, _), value in zip(named, values, strict=True))


def _workload_difference(named: Sequence[tuple[str, Snapshot]]) -> str | None:
    signatures = [workload_signature(s.workload) for _, s in named]
    keys = sorted({k for sig in signatures for k in sig})
    differing = [k for k in keys if len({repr(sig.get(k)) for sig in signatures}) > 1]
    if not differing:
        return None
    parts = [f"{key} ({_each(named, [sig.get(key) for sig in signatures])})" for key in differing]
    return "not comparable: different workload: " + ", ".join(parts)


def _capacity_caveats(name: str, snap: Snapshot) -> list[str]:
    cap = snap.capacity
    if cap is None:
        why = snap.capacity_reason or "no reason recorded"
        return [f"{name}: no qualified capacity ({why}); cost and planning are n/a"]
    caveats = []
    if snap.sla == SlaBounds():
        caveats.append(
            f"{name}: the SLA sets no bound, so its capacity is peak load, not interactive capacity"
        )
    tested = [s.level for s in snap.steps if s.mode == cap.mode and not s.incomplete]
    if tested and cap.level >= max(tested):
        caveats.append(
            f"{name}: qualified at the highest level tested ({level_text(cap.mode, cap.level)}):"
            " the true capacity may be higher, so its cost per token is an upper bound"
        )
    return caveats


def comparability_warnings(named: Sequence[tuple[str, Snapshot]]) -> list[str]:
    """Sentences saying why these runs are not comparable, then caveats about single runs."""
    warnings: list[str] = []
    snaps = [s for _, s in named]
    if len(named) > 1:
        if len({s.target.model for s in snaps}) > 1:
            models = _each(named, [s.target.model for s in snaps])
            warnings.append(f"not comparable: different model ({models})")
        precisions = [precision_of(s) for s in snaps]
        known = {p.lower() for p in precisions if p is not None}
        if len(known) > 1:
            warnings.append(f"not comparable: different precision ({_each(named, precisions)})")
        elif known and None in precisions:
            missing = ", ".join(n for (n, _), p in zip(named, precisions, strict=True) if p is None)
            warnings.append(
                f"precision not recorded for {missing}: cannot check it matches {known.pop()}"
            )
        workload = _workload_difference(named)
        if workload is not None:
            warnings.append(workload)
        if len({sla_text(s.sla) for s in snaps}) > 1:
            slas = _each(named, [sla_text(s.sla) for s in snaps])
            warnings.append(f"not comparable: different SLA ({slas})")
        modes = {s.capacity.mode for s in snaps if s.capacity is not None}
        if len(modes) > 1:
            how = _each(named, [s.capacity.mode if s.capacity else "none" for s in snaps])
            warnings.append(f"not comparable: capacities measured in different load modes ({how})")
    for name, snap in named:
        if run_state(snap).startswith("interrupted"):
            warnings.append(f"{name}: the run was {run_state(snap)}; its last step is partial")
        warnings.extend(_capacity_caveats(name, snap))
    return warnings


def run_state(snapshot: Snapshot) -> str:
    """How the run ended: "complete", "interrupted (SIGINT)" or "saved mid-session".

    An interruption is recorded in `interrupted_by` (a signal, or a run recovered from its
    journal); a snapshot that is not complete without it was saved while the session went on
    (the TUI's `s` and `w`) and holds only finished steps. The TUI's `q` saves it complete.
    """
    if snapshot.complete:
        return "complete"
    if snapshot.interrupted_by:
        return f"interrupted ({snapshot.interrupted_by})"
    return "saved mid-session"
