"""`gputui compare` and `gputui sessions`: typed options in, a comparison or a list out.

Contract: bad flag values are argparse errors and bad combinations a `FlagError` (exit 2); a
snapshot that does not load is one line naming the file (exit 1, via `SnapshotError`); anything else
prints the result to stdout, or to `--out` (written whole, then renamed into place). Comparability
warnings go to stderr for the table, md and csv formats, into the document for json and html (and,
with `--out`, a one-line count on stderr so they are not missed). `gputui sessions` reports each
unreadable file on stderr and lists the rest.
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import orjson

from gputui.errors import FlagError, GputuiError, UsageError
from gputui.snapshot.compare import Demand, build_comparison, load_named, parse_prices
from gputui.snapshot.compare_render import render


@dataclass(frozen=True, slots=True)
class CompareOptions:
    """`gputui compare`'s flags."""

    snapshots: tuple[str, ...]
    price: tuple[str, ...] = ()
    currency: str | None = None
    energy_price: float | None = None
    """Per kWh; None: each snapshot's saved one (`run --energy-price`)."""
    pue: float | None = None
    demand_rpm: float | None = None
    mean_output_tokens: float | None = None
    headroom: float = 0.3
    at_output_tokens_per_s: float | None = None
    format: str = "table"
    out: str | None = None


@dataclass(frozen=True, slots=True)
class SessionsOptions:
    """`gputui sessions`' flags."""

    json: bool = False
    dir: str | None = None
    recover: bool = False


def run_compare(options: CompareOptions) -> int:
    """Load, compare, render, write; returns the exit code (a bad flag raises FlagError)."""
    if (options.demand_rpm is None) != (options.mean_output_tokens is None):
        raise FlagError("--demand-rpm and --mean-output-tokens go together")
    named = load_named(options.snapshots)
    try:
        prices = parse_prices(options.price, named)
    except UsageError as exc:
        raise FlagError(str(exc)) from None
    demand = (
        Demand(options.demand_rpm, options.mean_output_tokens, options.headroom)
        if options.demand_rpm is not None and options.mean_output_tokens is not None
        else None
    )
    comparison = build_comparison(
        named,
        prices=prices,
        currency=options.currency,
        demand=demand,
        at_output_tokens_per_s=options.at_output_tokens_per_s,
        energy_price_per_kwh=options.energy_price,
        pue=options.pue,
    )
    text = render(comparison, options.format)
    if options.format in ("table", "md", "csv"):
        for warning in comparison.warnings:
            sys.stderr.write(f"gputui compare: warning: {warning}\n")
    elif comparison.warnings and options.out is not None:
        count = len(comparison.warnings)
        sys.stderr.write(f"gputui compare: {count} warning(s), shown in {options.out}\n")
    if options.out is None:
        sys.stdout.write(text)
    else:
        _write(Path(options.out), text)
        sys.stderr.write(f"gputui compare: written to {options.out}\n")
    return 0


def _write(path: Path, text: str) -> None:
    folder = path.parent if str(path.parent) else Path()
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
        Path(tmp).chmod(0o644)
        Path(tmp).replace(path)
    except OSError as exc:
        raise GputuiError(f"--out {path}: cannot write: {exc.strerror or exc}") from exc


def run_sessions(options: SessionsOptions) -> int:
    """List the saved sessions; unreadable files are reported on stderr and skipped."""
    from gputui.snapshot.sessions import default_sessions_dir, list_sessions, sessions_table

    folder = Path(options.dir) if options.dir is not None else default_sessions_dir()
    if options.dir is not None and not folder.is_dir():
        raise UsageError(f"--dir {folder}: no such folder")
    skipped: list[dict[str, str]] = []

    def skip(path: Path, message: str) -> None:
        skipped.append({"file": str(path), "error": message})
        sys.stderr.write(f"gputui sessions: skipped {message}\n")

    if options.recover:
        from gputui.snapshot.recovery import recover_leftovers

        lines = recover_leftovers(folder)
        sys.stderr.write("".join(f"gputui sessions: {line}\n" for line in lines))
        if not lines:
            sys.stderr.write(f"gputui sessions: no journal to recover in {folder}\n")
    sessions = list_sessions(folder, on_skip=skip)
    if options.json:
        document = {
            "dir": str(folder),
            "sessions": [s.to_dict() for s in sessions],
            "skipped": skipped,
        }
        sys.stdout.write(orjson.dumps(document, option=orjson.OPT_INDENT_2).decode() + "\n")
    elif sessions:
        sys.stdout.write(sessions_table(sessions))
    else:
        sys.stdout.write(f"no saved sessions in {folder}\n")
    return 0
