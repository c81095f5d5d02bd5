"""The TTFT split takes the server's parts from one set of requests (issue 31).

vLLM observes TTFT at a request's first token, queue/prefill/decode/E2E at its end: the step's
two histogram windows held different requests, and in the full suite the simulator's 8 ms of
server overhead read 6.1 ms (and 10.3 ms in a run here, where the first-token window took in
two first-wave requests of 147 ms TTFT that the finish window did not).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

import pytest

from gputui.diagnosis.evidence import latency_breakdowns
from gputui.metrics.step import StepResult
from gputui.telemetry.histogram_recorder import HistogramRecorder
from gputui.telemetry.latency_histograms import Histogram

MS = 1_000_000


def _result(ttft_s: float, e2e_s: float | None) -> StepResult:
    means = SimpleNamespace(ttft_s=SimpleNamespace(mean=ttft_s), e2e_s=SimpleNamespace(mean=e2e_s))
    return cast("StepResult", means)


def _mean(value_s: float) -> dict[str, float]:
    return {"mean": value_s}


def test_server_other_is_of_the_requests_queue_and_prefill_are_of() -> None:
    # The level-4 step measured here: first-token window mean 105.739 ms (two of 147.7 ms in);
    # finish window, the step's 36 requests: queue 21.211, prefill 74.228, E2E 540.118, decode
    # 432.679 ms. The sim spent 8 ms on each request before its queue.
    latency = {
        "source": "histograms",
        "ttft_s": _mean(0.105739),
        "queue_s": _mean(0.021211),
        "prefill_s": _mean(0.074228),
        "e2e_s": _mean(0.540118),
        "decode_s": _mean(0.436679),
    }
    result = _result(0.104115, 0.5405)
    breakdown, _ = latency_breakdowns(result, latency, [], 0.0001)
    assert breakdown is not None
    assert breakdown["server_ttft_s"] == pytest.approx(0.103439)  # E2E - decode, not 105.739
    assert breakdown["server_other_s"] == pytest.approx(0.008, abs=1e-6)  # was 10.3 ms
    assert breakdown["client_s"] == pytest.approx(0.104115 - 0.103439 - 0.0001, abs=1e-6)


def test_without_e2e_and_decode_the_ttft_histogram_is_used() -> None:
    latency = {"ttft_s": _mean(0.05), "queue_s": _mean(0.01), "prefill_s": _mean(0.03)}
    result = _result(0.052, None)
    breakdown, _ = latency_breakdowns(result, latency, [], None)
    assert breakdown is not None
    assert breakdown["server_other_s"] == pytest.approx(0.01)


def _counted(n: float) -> dict[str, Histogram]:
    return {"e2e": Histogram("e2e", (1.0, float("inf")), (n, n), n * 0.5, n)}


def test_a_window_starts_after_the_earlier_loads_last_observation() -> None:
    # Scrapes 0.5 s apart. The step's window starts at 0.6 s; the warm-up's last request was
    # seen at 0.55 s, after the scrape at 0.5 s: that scrape would take it in.
    recorder = HistogramRecorder("http://127.0.0.1:9/metrics")
    for k, t_ms in enumerate((0, 500, 1000, 1500)):
        recorder.add(t_ms * MS, _counted(float(k)), "vllm")
    recorder.stop()
    outer = recorder.between(600 * MS, 1500 * MS)
    assert outer is not None and outer.start_ns == 500 * MS
    clean = recorder.between(600 * MS, 1500 * MS, floor_ns=550 * MS)
    assert clean is not None and clean.start_ns == 1000 * MS
    kept = recorder.between(600 * MS, 1500 * MS, floor_ns=450 * MS)  # seen before the scrape
    assert kept is not None and kept.start_ns == 500 * MS
