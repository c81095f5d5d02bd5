"""The knee-and-capacity planner: ramp past the SLA to the knee, bisect on three-way verdicts."""

from __future__ import annotations

from dataclasses import replace

from gputui.metrics.knee_sweep import KneeSweep, gains_line, last_pass_below
from gputui.metrics.step import StepResult
from gputui.metrics.verdict import Verdict
from tests.support.steps import make_step

# A server whose throughput saturates at 64 and whose SLA breaks above 40.
TOKENS = {1: 90, 2: 175, 4: 340, 8: 650, 16: 1200, 32: 2000, 64: 2600, 128: 2700, 256: 2720}


def _verdict(level: float) -> Verdict:
    return "pass" if level <= 40 else "fail"


def _step(level: float, index: int, verdict: Verdict | None = None) -> StepResult:
    tokens = TOKENS.get(int(level), 2000 + (level - 32) * 20)
    step = make_step(level, output_tokens_per_s=tokens, index=index)
    return replace(step, sla_verdict=verdict or _verdict(level), sla_ok=level <= 40)


def _drive(planner: KneeSweep, verdict: dict[float, list[Verdict]] | None = None) -> list[float]:
    steps: list[StepResult] = []
    run: list[float] = []
    for _ in range(40):
        decision = planner.decide(steps)
        if decision.level is None:
            return run
        run.append(decision.level)
        queue = (verdict or {}).get(decision.level)
        given = queue.pop(0) if queue else None
        steps.append(_step(decision.level, len(steps), given))
    raise AssertionError("the planner did not finish")


def test_it_ramps_past_the_sla_boundary_to_the_knee_then_bisects() -> None:
    planner = KneeSweep(max_level=256)
    run = _drive(planner)
    # Past 40 (the SLA boundary) up to 128, where the gain per doubling fell under 10 %.
    assert run[:8] == [1, 2, 4, 8, 16, 32, 64, 128]
    assert 256 not in run
    assert run[8:] == [48, 40, 44]  # bisection between 32 (pass) and 64 (fail)
    steps = [_step(level, i) for i, level in enumerate(run)]
    final = planner.decide(steps)
    assert final.level is None and final.state == "done"
    assert final.knee == 64
    assert final.capacity == 40 and final.first_bad == 44
    gains = dict(final.gains)
    assert gains[128] < 0.10 <= gains[64]
    assert "128 +4 %" in gains_line(final.gains)


def test_an_inconclusive_level_is_run_again_and_never_counts_as_a_pass() -> None:
    planner = KneeSweep(max_level=256)
    run = _drive(planner, {48: ["inconclusive", "inconclusive"], 40: ["inconclusive", "pass"]})
    assert run[8:10] == [48, 48]  # re-run once, then counted as not passing
    assert run.count(40) == 2
    steps: list[StepResult] = []
    verdicts: dict[float, list[Verdict]] = {
        48: ["inconclusive", "inconclusive"],
        40: ["inconclusive", "pass"],
    }
    for i, level in enumerate(run):
        queue = verdicts.get(level)
        steps.append(_step(level, i, queue.pop(0) if queue else None))
    final = planner.decide(steps)
    assert final.capacity is not None and final.capacity <= 44
    assert final.first_bad is not None and final.first_bad <= 48


def test_errors_past_their_bound_end_the_ramp() -> None:
    planner = KneeSweep(max_level=256, max_error_rate=0.01)
    steps = [_step(level, i) for i, level in enumerate([1, 2, 4, 8, 16])]
    steps[-1] = replace(steps[-1], requests_failed=5, requests_ok=95)
    decision = planner.decide(steps)
    assert decision.state in ("bisect", "done")
    assert "errors at concurrency 16" in decision.reason


def test_a_re_run_that_passes_outweighs_the_inconclusive_first_attempt() -> None:
    from gputui.metrics.capacity import qualified_capacity
    from gputui.metrics.sla import Sla

    def at(level: float, index: int, ttft_ci: tuple[float, float]) -> StepResult:
        step = make_step(level, index=index, ttft_p95_s=sum(ttft_ci) / 2, tpot_p95_s=0.02)
        return replace(
            step,
            ttft_s=replace(step.ttft_s, p95_ci=ttft_ci),
            tpot_s=replace(step.tpot_s, p95_ci=(0.019, 0.021)),
        )

    sla = Sla(1.0, 0.035, None)
    straddles, passes, fails = (0.9, 1.1), (0.5, 0.6), (1.2, 1.4)
    steps = [at(32, 0, passes), at(48, 1, straddles), at(48, 2, passes), at(52, 3, fails)]
    result = qualified_capacity(steps, sla)
    assert result.capacity is not None and result.capacity.level == 48
    # a repeat that failed still means the level is not sustained
    steps.append(at(48, 4, fails))
    again = qualified_capacity(steps, sla)
    assert again.capacity is not None and again.capacity.level == 32


def test_from_the_operators_level_a_miss_is_bisected_not_doubled() -> None:
    # The operator passed 16 and 32 by hand, then pressed `a` at 48, which misses the SLA.
    by_hand = [_step(16, 0), _step(32, 1)]
    passed = last_pass_below(by_hand, 48, "concurrency")
    assert passed == 32
    planner = KneeSweep(max_level=256, start=48, bisect_on_miss=True, passed_below=passed)
    steps = list(by_hand)
    run: list[float] = []
    for _ in range(20):
        decision = planner.decide(steps)
        if decision.level is None:
            break
        run.append(decision.level)
        steps.append(_step(decision.level, len(steps)))
    assert run[0] == 48  # the miss
    assert run[1:] and all(32 < level < 48 for level in run[1:])  # between the pass and the miss
    assert run[1:] == [40, 44]
    final = planner.decide(steps)
    assert final.state == "done" and final.capacity == 40 and final.first_bad == 44
    assert "SLA missed at concurrency 48" in final.reason


def test_a_miss_in_the_tuis_ramp_ends_it_and_an_inconclusive_one_is_run_again() -> None:
    planner = KneeSweep(max_level=256, start=4, bisect_on_miss=True)
    run = _drive(planner, {64: ["inconclusive", "fail"]})
    # 4..32 pass, 64 is inconclusive above them: run again, then bisected below, never 128
    assert run[:6] == [4, 8, 16, 32, 64, 64]
    assert 128 not in run and all(32 < level < 64 for level in run[6:])
    assert run[6:] == [48, 40, 44]


def test_the_last_pass_below_is_the_last_attempt_of_each_level() -> None:
    steps = [_step(8, 0), _step(16, 1), _step(16, 2, "fail"), _step(64, 3)]
    assert last_pass_below(steps, 48, "concurrency") == 8  # 16's last attempt failed
    assert last_pass_below(steps, 8, "concurrency") is None
    assert last_pass_below(steps, 48, "rate") is None


def test_with_no_pass_under_a_miss_the_tuis_sweep_halves_down_then_bisects() -> None:
    planner = KneeSweep(max_level=256, start=96, bisect_on_miss=True)
    run = _drive(planner)
    assert run == [96, 48, 24, 36, 42, 39]  # 96, 48 fail; 24 passes; then between 24 and 48
    final = planner.decide([_step(level, i) for i, level in enumerate(run)])
    assert final.capacity == 39 and final.first_bad == 42
