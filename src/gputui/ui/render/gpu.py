"""The GPU panel: per-GPU traces and VRAM, then the server's KV cache and queue.

Per GPU: temperature, SM clock and power traces, utilisation, throttle reasons and a VRAM bar; then
the server's KV-cache gauge with running, waiting and preempted requests, and, when /metrics
counts speculative decoding, its acceptance rate: over the recent scrapes (the counters' growth
across the trace history), else the server's cumulative or gauge figure, labelled as such.

Last, with room: the GPUs' power now and the J per output token it means at the rolling output
rate (issue 29; a step's measured figure is in the steps table). With room, each GPU gets a
block of six lines; without, one line each. A missing source shows its
state ("n/a: NVML: not found"), never a guess.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gputui.frontends.view import LiveView
from gputui.telemetry.samples import GpuSample, ServerSample
from gputui.telemetry.spec_decode import run_spec_decode
from gputui.ui.render import format as fmt
from gputui.ui.render.bars import gauge, level_role
from gputui.ui.render.spans import Line, fit
from gputui.ui.render.spark import sparkline

_BLOCK = 6


def _active_throttle(sample: GpuSample) -> tuple[str, ...]:
    return tuple(r for r in (sample.throttle_reasons or ()) if r != "gpu_idle")


def _num(value: float | None, unit: str, spec: str = ".0f") -> str:
    return fmt.NONE if value is None else f"{value:{spec}}{unit}"


def _trace(
    label: str,
    value: str,
    history: Sequence[GpuSample],
    get: Callable[[GpuSample], float | None],
    width: int,
    role: str,
    ascii: bool,
    suffix: str = "",
) -> Line:
    points = [v for v in (get(s) for s in history) if v is not None]
    spark_w = max(width - 15 - len(suffix), 4)
    lo = min(points) * 0.95 if points else 0.0
    return [
        (label.ljust(6), "label"),
        (value.rjust(8) + " ", role),
        (sparkline(points, spark_w, lo=lo, ascii=ascii), role),
        (suffix, "dim"),
    ]


def _gpu_block(
    sample: GpuSample, history: Sequence[GpuSample], width: int, ascii: bool
) -> list[Line]:
    throttled = _active_throttle(sample)
    heading: Line = [(f"GPU{sample.index} ", "accent"), (sample.name, "accent")]
    heading.append((f"  util {_num(sample.utilization_gpu_pct, '%')}", ""))
    if sample.pstate is not None:
        heading.append((f"  P{sample.pstate}", "dim"))
    temp_role = "crit" if "hw_thermal" in throttled or "sw_thermal" in throttled else "s2"
    clock_role = "warn" if throttled else "s1"
    power_limit = f" /{sample.power_limit_w:.0f}W" if sample.power_limit_w else ""
    lines = [
        heading,
        _trace(
            "temp",
            _num(sample.temperature_c, "°C"),
            history,
            lambda s: s.temperature_c,
            width,
            temp_role,
            ascii,
        ),
        _trace(
            "SM",
            _num(sample.sm_clock_mhz, "MHz"),
            history,
            lambda s: None if s.sm_clock_mhz is None else float(s.sm_clock_mhz),
            width,
            clock_role,
            ascii,
        ),
        _trace(
            "power",
            _num(sample.power_w, "W"),
            history,
            lambda s: s.power_w,
            width,
            "s3",
            ascii,
            power_limit,
        ),
    ]
    if throttled:
        lines.append([("thrott", "label"), (" " + ", ".join(throttled), "crit")])
    else:
        lines.append([("thrott", "label"), (" none", "ok")])
    used, total = sample.memory_used_bytes, sample.memory_total_bytes
    frac = used / total if used is not None and total else None
    text = f"{fmt.gib(used)}/{fmt.gib(total)} GiB"
    lines.append(gauge("VRAM", frac, width, text, role=level_role(frac, 0.9, 0.97), ascii=ascii))
    return lines


def _gpu_line(sample: GpuSample, width: int, ascii: bool) -> Line:
    throttled = _active_throttle(sample)
    used, total = sample.memory_used_bytes, sample.memory_total_bytes
    frac = used / total if used is not None and total else None
    head = (
        f"GPU{sample.index} {_num(sample.temperature_c, '°C')} "
        f"{_num(sample.sm_clock_mhz, 'MHz')} {_num(sample.power_w, 'W')} "
        f"{_num(sample.utilization_gpu_pct, '%')} "
    )
    line: Line = [(head, "crit" if throttled else "")]
    rest = gauge(
        "VRAM", frac, max(width - len(head), 10), f"{fmt.gib(used)}G", role="ok", ascii=ascii
    )
    return line + rest


def _spec_line(server: ServerSample, history: Sequence[ServerSample]) -> Line | None:
    """Speculative decoding's acceptance, when the server reports it."""
    if server.spec_accept_rate is None and server.spec_draft_tokens_total is None:
        return None
    spec = run_spec_decode(history) if history else None
    recent = spec is not None and spec.get("draft_tokens") is not None
    rate = spec["acceptance_rate"] if recent and spec else server.spec_accept_rate
    length = spec["mean_accepted_length"] if recent and spec else server.spec_accept_length
    if rate is None:
        return None
    line: Line = [("spec  ", "label"), (f"accept {fmt.percent(rate, 1)}", "accent")]
    if length is not None:
        line.append((f"  {length:.2f} tok/step", ""))
    if not recent and server.spec_draft_tokens_total is not None:
        line.append(("  since server start", "dim"))
    return line


def _server_lines(
    server: ServerSample | None,
    width: int,
    ascii: bool,
    state: str,
    history: Sequence[ServerSample] = (),
) -> list[Line]:
    if server is None:
        return [[("KV    ", "label"), (f"n/a: {state}", "dim")]]
    usage = server.kv_cache_usage
    kv = gauge("KV", usage, width, fmt.percent(usage, 0), role=level_role(usage), ascii=ascii)
    counts: Line = [
        ("      ", "label"),
        (f"running {_num(server.requests_running, '', 'd')}", ""),
        (f"  waiting {_num(server.requests_waiting, '', 'd')}", "warn"),
        (f"  preempted {_num(server.preemptions_total, '', 'd')}", "crit"),
    ]
    if not server.requests_waiting:
        counts[2] = (counts[2][0], "")
    if not server.preemptions_total:
        counts[3] = (counts[3][0], "")
    spec = _spec_line(server, history)
    return [kv, counts] if spec is None else [kv, counts, spec]


def _state(view: LiveView, kind: str) -> str:
    telemetry = view.telemetry
    state = telemetry.state(kind) if telemetry is not None else None  # type: ignore[arg-type]
    if state is None:
        return "no telemetry"
    detail = f": {state.detail}" if state.detail else ""
    return f"{state.source} {state.status}{detail}"


def _energy_line(view: LiveView, gpus: Sequence[GpuSample]) -> Line | None:
    """Live power of the GPUs and J per output token (that power / the rolling output tok/s)."""
    power = [s.power_w for s in gpus if s.power_w is not None]
    if not power:
        return None
    watts = sum(power)
    line: Line = [("energy", "label"), (f" {watts:.0f} W", "s3")]
    if len(power) > 1:
        line.append((f" ({len(power)} GPUs)", "dim"))
    rate = view.frame.window.output_tokens_per_s if view.frame is not None else 0.0
    if rate > 0:
        line.append((f"  {watts / rate:.3g} J/out tok", "accent"))
    return line


def gpu_lines(view: LiveView, width: int, height: int, *, ascii: bool = False) -> list[Line]:
    """The panel's lines, exactly `height` of `width` cells."""
    telemetry = view.telemetry
    gpus = telemetry.gpus if telemetry is not None else ()
    server = telemetry.server if telemetry is not None else None
    server_history = view.traces.server if view.traces is not None else ()
    tail = _server_lines(server, width, ascii, _state(view, "server"), server_history)
    lines: list[Line] = []
    if not gpus:
        lines.append([("GPU   ", "label"), (f"n/a: {_state(view, 'gpu')}", "dim")])
    elif len(gpus) * _BLOCK + len(tail) <= height:
        history = view.traces.gpu if view.traces is not None else ()
        for sample in gpus:
            mine = [s for s in history if s.index == sample.index]
            lines += _gpu_block(sample, mine, width, ascii)
    else:
        lines += [_gpu_line(sample, width, ascii) for sample in gpus]
    lines += tail
    energy = _energy_line(view, gpus)
    if energy is not None:
        lines.append(energy)
    out = [fit(line, width) for line in lines[:height]]
    return out + [fit([], width) for _ in range(height - len(out))]
