"""`gputui compare` with diagnosed runs: the "bound by" slice, the stacked TTFT chart, the knee."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gputui.diagnosis.step import knee_explanation
from gputui.metrics.step_diagnosis import BottleneckVerdict, StepDiagnosis
from gputui.snapshot.compare import build_comparison, load_named, name_snapshots
from gputui.snapshot.compare_diagnosis import diagnosed_step
from gputui.snapshot.compare_format import markdown, table
from gputui.snapshot.models import Snapshot
from gputui.snapshot.report_html import html_report
from gputui.snapshot.store import load_snapshot

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "snapshots"


def _breakdown(queue_s: float) -> dict[str, Any]:
    ttft = 0.003 + queue_s + 0.180 + 0.027
    return {
        "ttft_s": ttft, "network_s": 0.003, "queue_s": queue_s, "prefill_s": 0.180,
        "client_s": 0.027, "explained_share": (ttft - 0.027) / ttft,
    }  # fmt: skip


def _diagnosed(snapshot: Snapshot) -> Snapshot:
    steps = []
    for step in snapshot.steps:
        queued = step.level > (snapshot.knee.level if snapshot.knee else 1e9)
        verdict = "queue" if queued else "decode-bandwidth"
        evidence = ["KV cache full 97%, 41 waiting, 24 preemptions"] if queued else []
        steps.append(
            step.model_copy(
                update={
                    "ttft_breakdown": _breakdown(0.410 if queued else 0.001),
                    "roofline": {
                        "decode_bandwidth_utilization": 0.74,
                        "prefill_compute_utilization": 0.05,
                    },
                    "bottleneck": {
                        "verdict": verdict,
                        "evidence": evidence,
                        "suspect": False,
                        "throttled": False,
                    },
                }
            )
        )
    return snapshot.model_copy(update={"steps": tuple(steps)})


def test_old_snapshots_compare_as_before() -> None:
    cmp = build_comparison(load_named(sorted(FIXTURES.glob("*.json"))))
    assert "bound by" not in table(cmp)
    assert "Where TTFT went" not in html_report(cmp)


def test_diagnosed_runs_get_a_bound_by_slice_and_stacked_charts() -> None:
    paths = sorted(FIXTURES.glob("*.json"))
    named = name_snapshots([(_diagnosed(load_snapshot(p)), p) for p in paths])
    cmp = build_comparison(named)
    text = table(cmp)
    assert "bound by" in text
    step = diagnosed_step(named[0].snapshot)
    assert step is not None
    assert step.bottleneck is not None
    assert str(step.bottleneck["verdict"]) in text
    assert "bound by" in markdown(cmp)
    page = html_report(cmp)
    # Each run's chart, drawn for a desktop and for a phone.
    assert page.count('aria-label="TTFT breakdown per step') == 2 * len(paths)
    assert page.count("<rect") >= 4 * sum(len(n.snapshot.steps) for n in named)
    assert html_report(cmp) == page  # deterministic


def test_the_slice_shows_the_servers_other_time_or_says_it_is_unsplit() -> None:
    paths = sorted(FIXTURES.glob("*.json"))[:2]
    split = _breakdown(0.001) | {"server_other_s": 0.009, "client_s": 0.018, "unsplit": None}
    unsplit = _breakdown(0.001) | {"server_other_s": None, "unsplit": "no server TTFT"}
    snaps = []
    for path, b in zip(paths, (split, unsplit), strict=True):
        diagnosed = _diagnosed(load_snapshot(path))
        steps = tuple(s.model_copy(update={"ttft_breakdown": b}) for s in diagnosed.steps)
        snaps.append((diagnosed.model_copy(update={"steps": steps}), path))
    text = table(build_comparison(name_snapshots(snaps)))
    assert "server other" in text
    assert "9.0 ms" in text and "18.0 ms" in text  # the split run: server 9, client 18
    assert "27.0 ms (+server)" in text  # the unsplit run: its client part holds the server's rest


def test_knee_carries_the_first_step_past_it() -> None:
    steps = [
        {"level": 16.0, "bottleneck": {"verdict": "decode-bandwidth", "evidence": []}},
        {"level": 64.0, "bottleneck": {"verdict": "queue", "evidence": ["x"]}},
        {
            "level": 48.0,
            "ttft_breakdown": _breakdown(0.410),
            "bottleneck": {
                "verdict": "queue",
                "evidence": ["TTFT ...", "KV cache full 97%, 41 waiting, 24 preemptions"],
            },
        },
    ]
    text = knee_explanation(32.0, steps)
    assert text == (
        "knee at 32: bound by queue at 48; KV cache full 97%, 41 waiting, 24 preemptions; "
        "TTFT 620 ms = queue 410 + prefill 180 + network 3 + client 27"
    )
    assert knee_explanation(64.0, steps) is None
    interfered = [
        {
            "level": 64.0,
            "bottleneck": {
                "verdict": "prefill-interference",
                "evidence": [
                    "ITL P95 204 ms is 12x its median 17 ms: ...",
                    "KV cache 8%, 4 waiting",
                ],
            },
        }
    ]
    assert knee_explanation(32.0, interfered) == (
        "knee at 32: bound by prefill-interference at 64; "
        "ITL P95 204 ms is 12x its median 17 ms: ..."
    )


def test_attach_writes_steps_knee_and_a_throttled_capacity() -> None:
    from gputui.diagnosis.step import StepDiagnoser

    snap = load_snapshot(sorted(FIXTURES.glob("*.json"))[0])
    assert snap.capacity is not None and snap.knee is not None
    diagnoser = StepDiagnoser()
    for step in snap.steps:
        past = step.level > snap.knee.level
        diagnoser.diagnoses[step.index] = StepDiagnosis(
            ttft_breakdown=_breakdown(0.410) if past else None,
            bottleneck=BottleneckVerdict(
                verdict="queue" if past else "throttled",
                evidence=["KV cache full 97%, 41 waiting"] if past else [],
                suspect=False,
                throttled=not past,
            ),
        )
    out = diagnoser.attach(snap)
    assert all(s.bottleneck is not None for s in out.steps)
    assert out.knee is not None and out.knee.explanation is not None
    assert out.knee.explanation.startswith(f"knee at {snap.knee.level:g}: bound by queue")
    at_capacity = next(s for s in out.steps if s.level == snap.capacity.level)
    assert at_capacity.bottleneck is not None
    expected = bool(at_capacity.bottleneck["throttled"])
    assert getattr(out.capacity, "measured_while_throttled", None) is expected
