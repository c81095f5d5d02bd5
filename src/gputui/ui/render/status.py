"""The session header (two lines) and the event log."""

from __future__ import annotations

import math
from collections import Counter

from gputui.frontends.view import LiveView
from gputui.session import StatsFrame
from gputui.ui.render import format as fmt
from gputui.ui.render.spans import Line, fit

EVENT_ROLES = {
    "error": "crit",
    "sla": "crit",
    "throttle": "warn",
    "preemption": "warn",
    "warning": "warn",
}


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


def header_lines(view: LiveView, width: int) -> list[Line]:
    """Load, step, in flight, clock and the client's CPU; then target, model, backend, GPUs."""
    state = view.target_state
    dot_role = "ok" if state == "ok" else ("crit" if state.startswith("unreachable") else "warn")
    frame = view.frame
    unit = "concurrent" if view.mode == "concurrency" else "req/s"
    first: Line = [("● ", dot_role), (f"{view.level:g}", "accent"), (f" {unit}", "")]
    first.append((f" ×{view.factor:g}", "dim"))
    if state != "ok":
        first += [("  ", ""), (state, dot_role)]
        if state.startswith("unreachable"):
            first.append((" (retrying)", "dim"))
    elif view.paused:
        first.append(("  ❚❚ paused", "warn"))
    if frame is not None:
        first += [("  step ", "label"), (f"{frame.step_index + 1}", "")]
        first += [(f" {frame.step_elapsed_s:.0f}s", ""), *step_state(view, frame)]
        first += [("  in flight ", "label"), (str(frame.in_flight), "")]
    first += [("  ", ""), (fmt.clock(view.session_s), "")]
    engine_cpu = f"{frame.client_cpu_percent:.0f}%" if frame is not None else "-"
    ui_cpu = f"{view.ui_cpu_percent:.0f}%" if view.ui_cpu_percent is not None else "-"
    first += [("  cpu ", "label"), (f"engine {engine_cpu} ui {ui_cpu}", "")]
    if view.last_saved is not None:
        first += [("  saved ", "label"), (view.last_saved.name, "ok")]
    second: Line = [("  ", ""), (view.target_url, "accent"), ("  ", ""), (view.model, "")]
    second += capacity_bracket(view)
    second += [("  backend ", "label"), (backend_name(view), "")]
    second += [("  GPU ", "label"), (gpu_names(view), "")]
    if view.label:
        second += [("  label ", "label"), (view.label, "")]
    return [fit(first, width), fit(second, width)]


VERDICT_ROLES = {"pass": "ok", "fail": "crit", "inconclusive": "inconclusive"}


def capacity_bracket(view: LiveView) -> Line:
    """The highest level that passed and the next one tested above: "capacity 16 (32: fail)"."""
    capacity = view.capacity
    if capacity is None:
        return []
    unit = "/s" if capacity.mode == "rate" else ""
    line: Line = [("  capacity ", "label"), (f"{capacity.level:g}{unit}", "ok")]
    if capacity.above_level is not None and capacity.above_verdict is not None:
        role = VERDICT_ROLES.get(capacity.above_verdict, "")
        line.append((f" ({capacity.above_level:g}: {capacity.above_verdict})", role))
    return line


def step_state(view: LiveView, frame: StatsFrame) -> Line:
    """Who drives the load (AUTO, HOLD) and where its step is: "settling 2.1 s", "n=143 ±3.2 %"."""
    line: Line = []
    if "auto" in (view.control, frame.step_phase):
        line.append((" AUTO", "accent"))
    elif "holding" in (view.control, frame.step_phase):
        line.append((" HOLD", "accent"))
    if frame.settle_remaining_s is not None or frame.in_warmup:
        left = frame.settle_remaining_s
        line.append((" settling" + (f" {left:.1f} s" if left is not None else ""), "warn"))
        return line
    line += [(" measuring", "label"), (f" n={frame.measured_n}", "")]
    if frame.precision is not None:
        precise = frame.precision <= view.target_precision
        text = "open" if math.isinf(frame.precision) else f"{frame.precision * 100:.1f} %"
        line.append((f" ±{text}", "ok" if precise else "inconclusive"))
    return line


def events_lines(view: LiveView, width: int, height: int) -> list[Line]:
    """The newest events that fit, oldest of them first."""
    events = view.events[-height:] if height > 0 else ()
    lines: list[Line] = []
    for event in events:
        role = EVENT_ROLES.get(event.kind, "dim")
        lines.append(
            [
                (fmt.clock(event.t_s), "dim"),
                (f" {event.kind:<11}", role),
                (event.text, "crit" if role == "crit" else ""),
            ]
        )
    out = [fit(line, width) for line in lines]
    return out + [fit([], width) for _ in range(height - len(out))]
