"""The TTFT decomposition as a stacked bar (issue 18), and a step's "bound by" cell.

A step's mean TTFT splits into network, server queue, server prefill, the server's other time
(its own TTFT beyond queue and prefill) and the client's rest (`metrics.ttft_breakdown`). The bar
draws each part with its own glyph and role, so it reads without colour too: network `░` (`~`),
queue `▒` (`=`), prefill `█` (`#`), server other `▓` (`+`), client `·` (`.`). Where the server
reports no TTFT to split by, the client's part holds the server's rest and reads `client+srv`.
Bars of one table share a scale (`scale_s`, the longest TTFT), so their lengths compare.
"""

from __future__ import annotations

from collections.abc import Mapping

from gputui.frontends.view import LiveView
from gputui.metrics.json_read import number
from gputui.metrics.ttft_breakdown import part_text
from gputui.ui.render import format as fmt
from gputui.ui.render.spans import Line

PARTS = ("network", "queue", "prefill", "server_other", "client")
GLYPHS = {"network": "░", "queue": "▒", "prefill": "█", "server_other": "▓", "client": "·"}
ASCII_GLYPHS = {"network": "~", "queue": "=", "prefill": "#", "server_other": "+", "client": "."}
ROLES = {
    "network": "bnet",
    "queue": "bqueue",
    "prefill": "bprefill",
    "server_other": "bserver",
    "client": "bclient",
}
NAMES = {
    "network": "net",
    "queue": "queue",
    "prefill": "prefill",
    "server_other": "srv",
    "client": "client",
}


def decomposition_bar(
    breakdown: Mapping[str, object] | None, width: int, scale_s: float, *, ascii: bool = False
) -> Line:
    """`width` cells: each part's share of `scale_s`, largest remainder rounding; blank if none."""
    if not breakdown or width <= 0 or scale_s <= 0:
        return [(" " * max(width, 0), "")]
    glyphs = ASCII_GLYPHS if ascii else GLYPHS
    seconds = {p: max(number(breakdown, f"{p}_s") or 0.0, 0.0) for p in PARTS}
    total = sum(seconds.values())
    cells = min(width, max(1, round(width * total / scale_s))) if total > 0 else 0
    exact = {p: cells * v / total for p, v in seconds.items()} if total > 0 else {}
    counts = {p: int(x) for p, x in exact.items()}
    by_rest = sorted(exact, key=lambda p: exact[p] - counts[p], reverse=True)
    for p in by_rest[: cells - sum(counts.values())]:
        counts[p] += 1
    line: Line = [(glyphs[p] * counts[p], ROLES[p]) for p in PARTS if counts.get(p)]
    line.append((" " * (width - cells), ""))
    return line


def legend(*, ascii: bool = False, short: bool = False) -> Line:
    """The bar's key: '░net ▒queue █prefill ▓srv ·client' (short: '░n ▒q █p ▓s ·c')."""
    glyphs = ASCII_GLYPHS if ascii else GLYPHS
    line: Line = []
    for p in PARTS:
        line += [(glyphs[p], ROLES[p]), ((NAMES[p][0] if short else NAMES[p]) + " ", "label")]
    return line


SHORT = {"decode-bandwidth": "decode-bw", "prefill-compute": "prefill-comp"}
SHORT |= {"server-overhead": "srv-overhead", "prefill-interference": "prefill-intf"}
SHORT |= {"scheduler-limit": "sched-limit", "decode-compute": "decode-comp"}
SHORT |= {"host-contended": "host-busy"}
"""Verdict names in a narrow steps table (the help screen spells them out)."""


def bound_by(verdict: Mapping[str, object] | None, *, short: bool = False) -> tuple[str, str]:
    """The verdict and its role: 'SUSPECT' marks a client-bound step, 'THROTTLED' a throttled one.

    Either flag means the step's figures are not the server's alone, so both read in monochrome
    (upper case) and in colour (crit, warn). `short` abbreviates the long names (`SHORT`) and
    the flags (SUSP, THR).
    """
    if verdict is None:
        return "-", "dim"
    name = str(verdict.get("verdict", "-"))
    suspect = bool(verdict.get("suspect")) or name in ("client", "host-contended")
    throttled = bool(verdict.get("throttled")) or name == "throttled"
    flags = (" SUSPECT" if suspect and not (short and name == "client") else "") + (
        " THROTTLED" if throttled and name != "throttled" else ""
    )
    if short:  # a client verdict is suspect by definition: its name says it
        flags = flags.replace("SUSPECT", "SUSP").replace("THROTTLED", "THR")
    role = "crit" if suspect or name == "errors" else "warn" if throttled else "accent"
    if name == "none" and role == "accent":
        role = "dim"
    likely = "?" if verdict.get("low_confidence") else ""  # the most likely cause, thin evidence
    return (SHORT.get(name, name) if short else name) + likely + flags, role


def knee_label(view: LiveView) -> str:
    """The knee mark's text: 'knee 32 · queue', what bound the first step past the knee.

    The bound is the view's (`metrics.knee_summary`: a step with data), as the snapshot saves it.
    """
    knee = view.knee
    if knee is None:
        return ""
    bound = view.knee_bound
    tail = f" · {bound.verdict}{'?' if bound.low_confidence else ''}" if bound else ""
    return f"knee {knee.level:g}{tail}"


def step_bar_lines(
    label: str, breakdown: Mapping[str, object], width: int, *, ascii: bool = False
) -> list[Line]:
    """'step 8 mean TTFT 939ms ▒▒▒██▓· ▒queue 669ms █prefill 251ms ▓srv 9ms ░net 2ms ·client 9ms'.

    Without the server's own TTFT there is no `srv` part and the client's reads 'client+srv'.
    Every part keeps its value: when they do not all fit beside the bar, they take a second line.
    """
    glyphs = ASCII_GLYPHS if ascii else GLYPHS
    ttft = number(breakdown, "ttft_s") or 0.0
    bar_w = max(min(24, width // 4), 8)
    line: Line = [(f"{label} ", "label"), (f"mean TTFT {fmt.duration(ttft)} ", "")]
    line += decomposition_bar(breakdown, bar_w, ttft, ascii=ascii)
    parts: Line = []
    for p in ("queue", "prefill", "server_other", "network", "client"):
        value = number(breakdown, f"{p}_s")
        if p == "server_other" and value is None:
            continue
        name = "client+srv" if p == "client" and breakdown.get("unsplit") else NAMES[p]
        value = float(value or 0.0)
        text = (  # a part below zero is drawn as none: its text says why (no raw negative us)
            fmt.duration(value)
            if value >= 0.0
            else part_text(value, number(breakdown, "noise_s"), unit="ms")
        )
        parts += [(f" {glyphs[p]}", ROLES[p]), (f"{name} {text}", "dim")]
    if sum(len(t) for t, _ in line + parts) <= width:
        return [line + parts]
    return [line, [(" " * (len(label) - 1), ""), *parts]]
