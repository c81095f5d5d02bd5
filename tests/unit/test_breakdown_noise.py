"""A breakdown part below zero: within the noise or beyond it, never raw negative microseconds.

Issue 31 saw `▓srv -13426us` and `·client -30510us` on the screen and `server other -3.9 ms` in
compare, with the bar clamping them to nothing without a word.
"""

from __future__ import annotations

from gputui.diagnosis.evidence import histogram_count_line
from gputui.metrics.bottleneck import breakdown_text
from gputui.metrics.ttft_breakdown import noise, part_text, ttft_breakdown
from gputui.ui.render.breakdown import step_bar_lines


def test_noise_combines_the_probes_spread_and_the_mean_ttfts_error() -> None:
    assert noise(0.0003, 0.004, 16) == (0.0003**2 + 0.001**2) ** 0.5
    assert noise(None, None, 0) is None
    assert noise(0.0002, None, 0) == 0.0002


def test_a_negative_part_within_twice_the_noise_says_so() -> None:
    assert part_text(-0.0039, 0.0025) == "within noise (±2.5 ms)"
    assert part_text(-0.0134, 0.0004) == "-13.4 ms (below zero beyond noise, ±0.4 ms)"
    assert part_text(-0.0134, None) == "-13.4 ms (below zero beyond noise, noise unknown)"
    assert part_text(0.0121, 0.0004) == "12 ms" and part_text(0.0031, None) == "3.1 ms"


def test_the_verdict_line_and_the_bar_show_it_in_words() -> None:
    # The server's histogram window caught other requests: its TTFT mean under queue + prefill.
    b = ttft_breakdown(0.040, 0.0003, 0.010, 0.030, server_ttft_mean_s=0.0366, noise_s=0.0008)
    assert b is not None and b["noise_s"] == 0.0008
    text = breakdown_text(b)
    assert "server other -3.4 ms (below zero beyond noise, ±0.8 ms)" in text
    assert "us" not in text
    (line,) = step_bar_lines("step 8", b, 200)
    shown = "".join(t for t, _ in line)
    assert "srv -3.4ms (below zero beyond noise, ±0.8ms)" in shown and "-3400us" not in shown
    quiet = ttft_breakdown(0.040, 0.0003, 0.010, 0.030, server_ttft_mean_s=0.0395, noise_s=0.0008)
    assert quiet is not None
    assert "server other within noise (±0.8 ms)" in breakdown_text(quiet)


def test_a_server_histogram_of_another_set_of_requests_is_said() -> None:
    # CI, real vLLM: a 14.3 s step of 114 requests whose TTFT histogram window held 22.
    latency = {
        "source": "histograms",
        "ttft_s": {"mean": 0.03, "n": 22},
        "window_s": {"first_token": [0.6, 3.3], "finish": [0.7, 3.4]},
    }
    assert histogram_count_line(latency, 114, 14.3) == (
        "the server's TTFT histogram counted 22 of the step's 114 requests (its window 2.7 of "
        "14.3 s): its parts are of another set of requests"
    )
    assert histogram_count_line({**latency, "ttft_s": {"n": 100}}, 114, 14.3) is None
    assert histogram_count_line({**latency, "source": "timings"}, 114, 14.3) is None
