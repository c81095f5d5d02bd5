"""The session header: the load and step, the target, then the terms (verdict, SLA, cost)."""

from __future__ import annotations

import math
from collections import Counter

from gputui.frontends.view import LiveView
from gputui.session import StatsFrame
from gputui.session.frames import Handover
from gputui.session.steady import UNMEASURED
from gputui.ui.render import format as fmt
from gputui.ui.render.spans import Line, fit
from gputui.ui.render.terms import terms_parts


def gpu_names(view: LiveView) -> str:
    """The GPUs as "2x NVIDIA A100-SXM4-80GB", or what is known instead."""
    gpus = view.telemetry.gpus if view.telemetry is not None else ()
    if gpus:
        counts = Counter(g.name for g in gpus)
        return ", ".join(f"{n}x {name}" if n > 1 else name for name, n in counts.items())
    return view.gpu_description or "n/a"


def backend_name(view: LiveView) -> str:
    """The backend the target said it is, else the one its /metrics names suggest."""
    if view.backend:
        return view.backend
    state = view.telemetry.state("server") if view.telemetry is not None else None
    if state is not None and state.status == "ok" and state.source != "server":
        return f"{state.source} (by its metrics)"
    return "unknown"


Group = tuple[int, Line]
"""A header item that is never split: (priority, spans); 0 stays longest, 3 goes first."""


def pack(groups: list[Group], width: int, max_lines: int) -> list[Line]:
    """Groups flowed into lines two spaces apart, never cut: the least important go first."""
    kept = list(groups)
    while True:
        lines: list[Line] = [[]]
        for _, spans in kept:
            size = sum(len(t) for t, _ in spans)
            used = sum(len(t) for t, _ in lines[-1])
            if lines[-1] and used + 2 + size > width:
                lines.append([])
            lines[-1] += [("  ", ""), *spans] if lines[-1] else spans
        if len(lines) <= max_lines or len(kept) <= 1:
            return [fit(line, width) for line in lines[:max_lines]]
        worst = max(range(len(kept)), key=lambda i: (kept[i][0], i))
        del kept[worst]


COMPACT_BELOW = 120
"""Narrower headers say the hand-over in short: "closing: 12 left at 64, ~4 s, then 128"."""


def header_groups(view: LiveView, width: int = COMPACT_BELOW) -> list[Group]:
    """Load, step, in flight, clock, the client's CPU; target, model, capacity, backend, GPUs."""
    state = view.target_state
    dot_role = "ok" if state == "ok" else ("crit" if state.startswith("unreachable") else "warn")
    frame = view.frame
    unit = "concurrent" if view.mode == "concurrency" else "req/s"
    load: Line = [("● ", dot_role), (f"{view.level:g}", "accent"), (f" {unit}", "")]
    groups: list[Group] = [(0, [*load, (f" ×{view.factor:g}", "dim")])]
    if state != "ok":
        tail = [(" (retrying)", "dim")] if state.startswith("unreachable") else []
        if len(state) + 13 + sum(len(t) for t, _ in groups[0][1]) > width:
            state = state.split(":", 1)[0]  # the why is in the event log; the state stays shown
        groups.append((0, [(state, dot_role), *tail]))
    elif view.paused:
        groups.append((0, [("❚❚ paused", "warn")]))
    if view.stopped:  # every step is finished and saved: no live step to show
        groups.append((0, [("stopped", "warn")]))
    elif frame is not None and frame.step_phase == UNMEASURED and view.control == "operator":
        # After a hold: the load runs on, but no step is open until a load key opens one.
        groups.append((0, [("no step open", "warn"), (" (+ - to measure)", "dim")]))
        groups.append((2, [("in flight ", "label"), (str(frame.in_flight), "")]))
    elif frame is not None:
        step: Line = [("step ", "label"), (f"{len(view.steps) + 1}", "")]
        if frame.handover is not None:
            step += handover_state(frame.handover, compact=width < COMPACT_BELOW)
        else:
            step += [(f" {frame.step_elapsed_s:.0f}s", ""), *step_state(view, frame)]
        groups.append((0, step))
        groups.append((2, [("in flight ", "label"), (str(frame.in_flight), "")]))
    groups.append((1, [(fmt.clock(view.session_s), "")]))
    engine_cpu = f"{frame.client_cpu_percent:.0f}%" if frame is not None else "-"
    ui_cpu = f"{view.ui_cpu_percent:.0f}%" if view.ui_cpu_percent is not None else "-"
    groups.append((3, [("cpu ", "label"), (f"engine {engine_cpu} ui {ui_cpu}", "")]))
    if view.last_saved is not None:
        groups.append((2, [("saved ", "label"), (view.last_saved.name, "ok")]))
    groups += [(1, [(view.target_url, "accent")]), (1, [(view.model, "")])]
    for notice in view.notices:  # e.g. "prompts approximate": the lengths are not exact
        groups.append((1, [(notice, "warn")]))
    capacity = capacity_bracket(view)
    if capacity:
        groups.append((0, capacity))
    engine = backend_name(view)
    if view.server_version:
        engine += f" {view.server_version}"
    groups.append((2, [("backend ", "label"), (engine, "")]))
    groups.append((2, [("GPU ", "label"), (gpu_names(view), "")]))
    if view.label:
        groups.append((3, [("label ", "label"), (view.label, "")]))
    return groups


def header_lines(view: LiveView, width: int, height: int = 3) -> list[Line]:
    """The header in `height` lines of `width`, no item cut: the least important left out.

    The load and step come first, then the target and what it serves, then the terms (the
    verdict's progress, the SLA, the price and the cost): each part has its own lines when
    there are three or more, and drops its least important items when they do not fit them.
    """
    groups = header_groups(view, width)
    split = next(i for i, (_, spans) in enumerate(groups) if spans[0][0] == view.target_url)
    terms = terms_parts(view)
    if height <= 2:
        top = (height + 1) // 2 if height == 2 else height
        rest = groups[split:] + terms
        return [*pack(groups[:split], width, top), *pack(rest, width, height - top)]
    top = (height - 1) // 2
    middle = height - 1 - top
    return [
        *pack(groups[:split], width, top),
        *pack(groups[split:], width, middle),
        *pack(terms, width, 1),
    ]


VERDICT_ROLES = {"pass": "ok", "fail": "crit", "inconclusive": "inconclusive"}


def capacity_bracket(view: LiveView) -> Line:
    """The highest level that passed and the next one tested above: "capacity 16 (32: fail)"."""
    capacity = view.capacity
    if capacity is None:
        return []
    unit = "/s" if capacity.mode == "rate" else ""
    line: Line = [("capacity ", "label"), (f"{capacity.level:g}{unit}", "ok")]
    if capacity.provisional:  # on point estimates: no step was decisive
        line[-1] = (f"~{capacity.level:g}{unit} provisional", "warn")
    if capacity.above_level is not None and capacity.above_verdict is not None:
        role = VERDICT_ROLES.get(capacity.above_verdict, "")
        line.append((f" ({capacity.above_level:g}: {capacity.above_verdict})", role))
    for caveat in capacity.caveats:  # "21 and 32 fail below it", "... (SUSPECT)"
        line.append((f" · {caveat.split(':')[0]}", "warn"))
    return line


def handover_state(handover: Handover, *, compact: bool = False) -> Line:
    """The hand-over: "closing: 12 requests finishing at 64, ~4 s, then 128" (after the step)."""
    left = handover.requests_left
    text = f"{left} request{'' if left == 1 else 's'} finishing at {handover.level:g}"
    if compact:
        text = f"{left} left at {handover.level:g}"
    if handover.eta_s is not None:
        text += f", ~{math.ceil(handover.eta_s):.0f} s"
    return [(" closing: ", "warn"), (text, ""), (f", then {handover.next_level:g}", "accent")]


def step_state(view: LiveView, frame: StatsFrame) -> Line:
    """Who drives the load (AUTO, HOLD) and where its step is: "settling 2.1 s", "n=143 ±3.2 %"."""
    line: Line = []
    if "auto" in (view.control, frame.step_phase):
        line.append((" AUTO", "accent"))
    elif "holding" in (view.control, frame.step_phase):
        line.append((" HOLD", "accent"))
    if frame.paused or view.paused:  # nothing is sent: its clock stands (`build_frame`)
        line.append((" paused", "warn"))
        return line
    if frame.settle_remaining_s is not None or frame.in_warmup:
        left = frame.settle_remaining_s
        # The warm-up's longest: steady state usually ends it sooner.
        line.append((" settling" + (f" ≤{left:.0f} s" if left is not None else ""), "warn"))
        if frame.first_verdict_s is not None:  # settled, then enough requests for a P95
            line.append((f", verdict ~{math.ceil(frame.first_verdict_s):.0f} s", "dim"))
        return line
    line += [(" measuring", "label"), (f" n={frame.measured_n}", "")]
    if frame.precision is not None:
        precise = frame.precision <= view.target_precision
        text = "open" if math.isinf(frame.precision) else f"{frame.precision * 100:.1f} %"
        line.append((f" ±{text}", "ok" if precise else "inconclusive"))
    return line
