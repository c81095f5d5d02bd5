"""The help screen: every key, panel and metric in one line each, and the node checks."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from gputui.metrics.bottleneck import VERDICTS
from gputui.metrics.confidence import min_n_two_sided
from gputui.ui.render.breakdown import GLYPHS
from gputui.ui.widgets.key_footer import KeyFooter

KEYS = (
    ("up / +", "multiply the load by the step factor: a new step (its warm-up is not measured)"),
    ("down / -", "divide the load by the step factor: a new step"),
    ("[ / ]", "smaller / larger step factor (1.25, 1.5, 2, 3, 4)"),
    (
        "r",
        "switch concurrency (closed loop) <-> arrival rate (open loop) at about the same load; "
        "the other sweep stays on the chart (◌), and switching back resumes the level you had",
    ),
    ("space", "pause / resume sending; resuming starts a new step"),
    ("b", "fire a burst of requests on top of the load"),
    (
        "h",
        "hold this step: its SLA verdict is looked at only at 120, 240, 480 and 960 requests "
        "(the 2.5 % error split between the looks); it ends at the first look that is pass or "
        "fail while precise (±5 %), else at the 960th request or after 5 min "
        "(--max-step-seconds), whichever is first, and is saved with that look's verdict; no "
        "step opens after it until a load key; load keys end it",
    ),
    ("a", "auto sweep from here: ×2 to a miss, then bisect; load keys end it"),
    ("s", "save a snapshot of the finished steps (asks for a label); the session goes on"),
    ("o / S", "saved sessions: enter or o overlays one's sweep on the chart, d deletes one"),
    (
        "e",
        "SLA and price: the TTFT and TPOT P95 bounds (1s, 35ms), the error-rate bound (1%) and "
        "the price per hour; the finished steps are re-judged at once, the change is saved",
    ),
    ("w", "write this session's HTML report beside the saved sessions (the event log says where)"),
    ("x", "clear the saved sessions overlaid on the sweep chart"),
    ("l", "every event, whole (repeats folded), on a screen of its own; esc goes back"),
    ("t", "every finished step, on a screen of its own; esc goes back"),
    ("q", "stop the load, save the snapshot, exit (SIGHUP and SIGTERM do the same)"),
    ("pgup / pgdn", "scroll the panels when they are stacked (small terminals)"),
    ("? / esc", "open / close this help"),
)

PANELS = (
    (
        "Header",
        "target, model, backend, GPUs; load mode and level, step and its time (warm-up "
        "shown), requests in flight, session clock, CPU of the load engine and of this UI; "
        "what the step's verdict still needs (below), the SLA (errors ≤ 5 % unless set), the "
        "price and the cost per million good output tokens at the capacity (a range when its "
        "95 % interval is wide)",
    ),
    (
        "P95 verdict",
        "a P95 needs 59 requests before its 95 % interval has two ends: before that a step can "
        'fail but not pass. "23 of 59 requests, ~40 s" counts them and the time left at the '
        "step's request rate; then pass (the interval is under the bound), fail (over it) or "
        "inconclusive (it straddles the bound: hold longer with h)",
    ),
    (
        "Sweep",
        "one point per finished step: output tok/s (● solid, left axis) against load; P95 TTFT "
        "(▲ dotted) and P95 TPOT (▼ dashed) on the right (log) axis; dashed lines are the SLA "
        "bounds, labelled at their right end (TTFT p95 1 s); ◆ is the current step, live; "
        "┊ the knee; ★ the SLA-qualified capacity; dim "
        "○ ◇ □ curves are saved sessions (o to overlay, x to clear)",
    ),
    (
        "Latency",
        "percentiles over the rolling window; red with ! = over the SLA bound, yellow = "
        "above 80 % of it; sparklines of output tok/s and error rate, one point per frame",
    ),
    (
        "GPU",
        "per GPU: temperature, SM clock and power over the last minute, utilisation, active "
        "throttle reasons (red), VRAM; the server's KV-cache use, running, waiting, preemptions",
    ),
    (
        "Steps",
        "one row per finished step with its aggregates (warm-up excluded), ± the 95 % interval "
        "of P95 TTFT and tok/s, the SLA verdict (pass / fail / inconclusive / no data), what "
        "bound it and its TTFT bar (below); the number is led by ★ (the highest load that met "
        "every SLA bound), ┊ (the knee) or ~ (a partial step)",
    ),
    (
        "Events",
        "errors by reason, throttling, preemption bursts, SLA breaches, a changed bound-by "
        "verdict, with session time; a repeat is folded into its latest line ('since 0:01:32, "
        "x9': first seen, how often) and a long event wraps; l lists every event whole",
    ),
)

_P95_N = min_n_two_sided(0.95)
NOTATION = (
    (
        "53.3ms?  p95?",
        "the P95's 95 % interval straddles the SLA bound: not decided yet (inconclusive); more "
        "requests narrow it",
    ),
    ("53.3ms!", "over the SLA bound: the whole interval lies above it (fail)"),
    (
        "open  ±open",
        f"the interval has no upper end yet: a P95 needs {_P95_N} requests before it has one, "
        "so until then it cannot pass",
    ),
    (
        "n=0 ±154.6 %",
        "header: requests finished in the step's measured window so far, and the widest 95 % "
        "interval (half-width, relative) of P95 TTFT, P95 TPOT and tok/s; tok/s is measured "
        "in time slices, so it has an interval before any request finishes; green under the "
        "precision target",
    ),
    (
        "settling ≤29 s",
        "the step waits for steady state before it measures; it starts as soon as the latency "
        "stops trending, at the latest after the time shown",
    ),
    (
        "P95 verdict: 23 of 59",
        f"the step has too few requests to decide its P95 against the SLA ({_P95_N} give its "
        "interval an upper end); the time is an estimate at the current rate; h holds the "
        "level until the step is precise",
    ),
    ("HOLD  AUTO", "who sets the load: h's hold (until the step is precise), a's auto sweep"),
    ("capacity 16 (32: fail)", "the capacity, and the next level tested above it with its answer"),
    (
        "pass  fail",
        "the step's SLA answer: every bound's 95 % interval lies within (pass) or one lies over "
        "(fail)",
    ),
    ("inconclusive", "an interval straddles a bound, or has no upper end yet (◐ on the chart)"),
    ("no data", "no request finished in the step: it measured nothing"),
)
"""Every mark and abbreviation the live screen shows."""

METRICS = (
    ("TTFT", "time from sending a request to its first output token"),
    ("TPOT", "per request: (E2E - TTFT) / (output tokens - 1); P95 TPOT is over requests"),
    ("ITL", "every gap between consecutive output tokens (P95 ITL is over all gaps)"),
    ("E2E", "time from sending to the last byte of the response"),
    ("TTFAT", "time to the first answer token, after any thinking (no answer: counted at E2E)"),
    ("tok/s", "output tokens that arrived per second, in-flight requests' too (not input)"),
    (
        "goodput",
        "good output tok/s: tokens of requests that succeeded, met every SLA bound and reached "
        "their length (a failed request is never good); the capacity's tok/s and cost use it",
    ),
    ("err", "failed requests / requests sent, each failure counted with its reason"),
    ("knee", "the load past which throughput grows < 10 % per doubling of load"),
    ("capacity", "the highest load whose step met every P95 bound and the error-rate bound"),
    (
        "~N provisional",
        "no step was decisive, or the open-loop hold failed or was skipped: say which",
    ),
    ("KV", "fraction of the server's KV cache in use; full means queueing and preemption"),
)

DIAGNOSIS = (
    *((name, text) for name, text in VERDICTS.items()),
    (
        "SUSPECT (SUSP)",
        "the client was over its CPU, loop-lag or dispatch bound: its timings queue too",
    ),
    (
        "THROTTLED (THR)",
        "the step (and a capacity taken from it) was measured while the GPU throttled",
    ),
    ("name?", "the most likely cause of a failing or saturated step: the evidence is thin"),
    (
        "TTFT bar",
        f"mean TTFT = {GLYPHS['network']} network (RTT probe) + {GLYPHS['queue']} server queue + "
        f"{GLYPHS['prefill']} server prefill (the server's histograms) + {GLYPHS['server_other']} "
        f"server other (its own TTFT - queue - prefill) + {GLYPHS['client']} client (TTFT - "
        "server TTFT - network; 'client+srv' where the server has no TTFT to split by); bars "
        "share one scale",
    ),
    ("knee", "the knee mark names the verdict of the first step past it, with its evidence"),
)
"""What the steps table's "bound by" says: each verdict from `metrics.bottleneck.VERDICTS`."""

NODE = (
    ("gputui vram-check", "write and verify the card's VRAM, measure its bandwidth"),
    ("gputui burn", "sustained GEMMs: do the clocks hold, or does the card throttle?"),
    ("gputui gpu", "an acceptance view of this node's NVIDIA GPUs"),
)
"""Checks of the node itself, run outside the TUI before blaming the server for a bad curve."""


def _table(title: str, rows: tuple[tuple[str, str], ...]) -> Table:
    table = Table.grid(padding=(0, 2))
    table.title = title
    table.title_justify = "left"
    table.add_column(style="bold", no_wrap=True)
    table.add_column()
    for key, text in rows:
        table.add_row(key, Text(text))
    return table


class HelpScreen(Screen[None]):
    """Keys, panels and metrics, one line each."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark,q", "close", "Close", id="close_help", tooltip="Back"),
    ]

    def compose(self) -> ComposeResult:
        """Three short tables."""
        with VerticalScroll(id="help-body"):
            yield Static("gputui · live serving-load experiments", id="help-title")
            yield Static(_table("Keys", KEYS), classes="help-table")
            yield Static(_table("Panels", PANELS), classes="help-table")
            yield Static(_table("Notation", NOTATION), classes="help-table")
            yield Static(_table("Metrics", METRICS), classes="help-table")
            yield Static(
                _table("Bound by (first rule that holds)", DIAGNOSIS), classes="help-table"
            )
            yield Static(_table("Node (before the run)", NODE), classes="help-table")
        yield KeyFooter()

    def action_close(self) -> None:
        """Back to the live screen."""
        self.dismiss()
