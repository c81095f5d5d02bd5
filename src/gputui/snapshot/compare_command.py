"""`gputui compare` and `gputui sessions`: flags in, a comparison or a list out.

Contract: bad flag values are argparse errors (exit 2); a snapshot that does not load is one line
naming the file (exit 1, via `SnapshotError`); anything else prints the result to stdout, or to
`--out` (written whole, then renamed into place). Comparability warnings go to stderr for the
table, md and csv formats, into the document for json and html (and, with `--out`, a one-line
count on stderr so they are not missed). `gputui sessions` reports each unreadable file on stderr
and lists the rest.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import orjson

from gputui.argtypes import non_negative_float, positive_float
from gputui.errors import GputuiError, UsageError
from gputui.snapshot.compare import Demand, build_comparison, load_named, parse_prices
from gputui.snapshot.compare_render import FORMATS, render


def add_compare_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare `gputui compare`'s flags."""
    parser.add_argument("snapshots", nargs="+", metavar="SNAP", help="snapshot JSON files")
    parser.add_argument(
        "--price",
        action="append",
        default=[],
        metavar="LABEL=PER_HOUR",
        help="hourly price of a snapshot's node (repeatable; overrides the price saved by "
        "`gputui run --price-per-hour`)",
    )
    parser.add_argument("--currency", default=None, metavar="TEXT", help="e.g. USD or EUR")
    plan = parser.add_argument_group("capacity planning")
    plan.add_argument(
        "--demand-rpm", type=positive_float, default=None, metavar="N", help="requests per minute"
    )
    plan.add_argument(
        "--mean-output-tokens",
        type=positive_float,
        default=None,
        metavar="N",
        help="mean output tokens per request of that demand",
    )
    plan.add_argument(
        "--headroom", type=non_negative_float, default=0.3, metavar="F", help="default 0.3 (30 %%)"
    )
    parser.add_argument(
        "--at-output-tokens-per-s",
        type=positive_float,
        default=None,
        metavar="T",
        help="also compare latency and load level at this output throughput",
    )
    parser.add_argument("--format", choices=FORMATS, default="table")
    parser.add_argument("--out", default=None, metavar="FILE", help="write here, not to stdout")


def run_compare(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Load, compare, render, write; returns the exit code."""
    if (args.demand_rpm is None) != (args.mean_output_tokens is None):
        parser.error("--demand-rpm and --mean-output-tokens go together")
    named = load_named(args.snapshots)
    try:
        prices = parse_prices(args.price, named)
    except UsageError as exc:
        parser.error(str(exc))
    demand = (
        Demand(args.demand_rpm, args.mean_output_tokens, args.headroom)
        if args.demand_rpm is not None and args.mean_output_tokens is not None
        else None
    )
    comparison = build_comparison(
        named,
        prices=prices,
        currency=args.currency,
        demand=demand,
        at_output_tokens_per_s=args.at_output_tokens_per_s,
    )
    text = render(comparison, args.format)
    if args.format in ("table", "md", "csv"):
        for warning in comparison.warnings:
            sys.stderr.write(f"gputui compare: warning: {warning}\n")
    elif comparison.warnings and args.out is not None:
        count = len(comparison.warnings)
        sys.stderr.write(f"gputui compare: {count} warning(s), shown in {args.out}\n")
    if args.out is None:
        sys.stdout.write(text)
    else:
        _write(Path(args.out), text)
        sys.stderr.write(f"gputui compare: written to {args.out}\n")
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


def add_sessions_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare `gputui sessions`' flags."""
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "--dir",
        default=None,
        metavar="DIR",
        help="folder of saved snapshots (default: the TUI's, under the user data dir)",
    )
    parser.add_argument(
        "--recover",
        action="store_true",
        help="first rebuild a snapshot from each journal a crashed `tui` or `run` left there",
    )


def run_sessions(args: argparse.Namespace) -> int:
    """List the saved sessions; unreadable files are reported on stderr and skipped."""
    from gputui.snapshot.sessions import default_sessions_dir, list_sessions, sessions_table

    folder = Path(args.dir) if args.dir is not None else default_sessions_dir()
    if args.dir is not None and not folder.is_dir():
        raise UsageError(f"--dir {folder}: no such folder")
    skipped: list[dict[str, str]] = []

    def skip(path: Path, message: str) -> None:
        skipped.append({"file": str(path), "error": message})
        sys.stderr.write(f"gputui sessions: skipped {message}\n")

    if args.recover:
        from gputui.snapshot.recovery import recover_leftovers

        lines = recover_leftovers(folder)
        sys.stderr.write("".join(f"gputui sessions: {line}\n" for line in lines))
        if not lines:
            sys.stderr.write(f"gputui sessions: no journal to recover in {folder}\n")
    sessions = list_sessions(folder, on_skip=skip)
    if args.json:
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
