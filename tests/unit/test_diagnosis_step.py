"""The step diagnoser's histogram windows, on records alone (no server needed)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

from gputui.diagnosis.step import StepDiagnoser
from gputui.engine.records import RequestRecord
from gputui.metrics.step import StepResult
from gputui.telemetry.histogram_recorder import HistogramRecorder

MS = 1_000_000
LO, HI = 1_000 * MS, 2_000 * MS


class Recorder:
    """Keeps the windows the diagnoser asks the histograms for."""

    def __init__(self) -> None:
        self.windows: list[tuple[int, int]] = []

    def between(
        self, lo_ns: int, hi_ns: int, *, inner_lo: bool, inner_hi: bool, floor_ns: int
    ) -> None:
        del inner_lo, inner_hi, floor_ns
        self.windows.append((lo_ns, hi_ns))


def test_a_step_of_empty_answers_still_gets_its_windows() -> None:
    """Ok requests with no token (an empty answer) have no TTFT: the E2E cap still applies."""
    recorder = Recorder()
    diagnoser = StepDiagnoser(recorder=cast("HistogramRecorder", recorder))
    result = cast(
        "StepResult",
        SimpleNamespace(
            index=1, ttft_s=SimpleNamespace(mean=0.05), e2e_s=SimpleNamespace(mean=0.2)
        ),
    )
    sent = LO + 100 * MS
    measured = [
        RequestRecord(request_id=i, step_index=1, sent_ns=sent, end_ns=sent + 150 * MS, ok=True)
        for i in range(3)
    ]
    latency = diagnoser._server_latency(
        result, measured, measured, (LO, HI), rtt_ns=0, next_step=True
    )
    assert latency is None  # the recorder had no histograms
    assert recorder.windows == [
        (LO + 50 * MS, HI + 50 * MS),  # first-token window: shifted by the mean TTFT
        (LO + 200 * MS, HI + 150 * MS),  # finish window: ends at the quickest E2E after HI
    ]
