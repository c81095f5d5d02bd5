"""The comparison model: cost by hand, planning, naming, prices, curves, warnings, hardware."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from gputui.errors import UsageError
from gputui.metrics.capacity import qualified_capacity
from gputui.metrics.knee import knee_from_steps
from gputui.metrics.sla import Sla
from gputui.snapshot.compare import (
    Demand,
    NamedSnapshot,
    at_throughput,
    build_comparison,
    name_snapshots,
    parse_prices,
    stored_price,
    sweep_curve,
)
from gputui.snapshot.compare_format import workload_text
from gputui.snapshot.hardware import gpu_summary, gpu_traces, precision_of
from gputui.snapshot.models import (
    CapacityModel,
    KneeModel,
    SlaBounds,
    Snapshot,
    Target,
    Workload,
    step_from_result,
)
from tests.support.steps import make_step

SLA = Sla(ttft_p95_s=1.0, tpot_p95_s=0.035, max_error_rate=0.01)
GIB = 1 << 30


def make_snap(
    points: Sequence[tuple[float, float, float]],
    *,
    label: str | None = "a",
    model: str = "llama",
    sla: Sla = SLA,
    input_tokens: int = 512,
    **extra: Any,
) -> Snapshot:
    """A run of steps (level, out tok/s, P95 TTFT s); knee and capacity set as a run sets them."""
    results = [
        make_step(level, output_tokens_per_s=tok, ttft_p95_s=ttft, index=i, sla=sla)
        for i, (level, tok, ttft) in enumerate(points)
    ]
    cap = qualified_capacity(results, sla)
    knee = knee_from_steps(results, mode="concurrency")
    return Snapshot.model_validate(
        {
            "label": label,
            "complete": True,
            "target": Target(url="http://x/v1", model=model, endpoint="completions"),
            "workload": Workload(
                input_tokens=input_tokens, output_tokens=128, endpoint="completions"
            ),
            "sla": SlaBounds.from_sla(sla),
            "steps": tuple(step_from_result(r) for r in results),
            "capacity": CapacityModel.from_capacity(cap.capacity) if cap.capacity else None,
            "capacity_reason": cap.reason,
            "knee": KneeModel.from_knee(knee.knee) if knee.knee else None,
            **extra,
        }
    )


CURVE = [(1, 100.0, 0.1), (2, 190.0, 0.2), (4, 350.0, 0.4), (8, 600.0, 0.8), (16, 640.0, 1.6)]


def named(*snaps: Snapshot) -> list[NamedSnapshot]:
    return name_snapshots([(s, None) for s in snaps])


def test_cost_column_checked_by_hand() -> None:
    snap = make_snap([(1, 1000.0, 0.1), (2, 1234.5, 0.2)], price_per_hour=4)
    row = build_comparison(named(snap)).rows[0]
    assert row.qualified_output_tokens_per_s == 1234.5
    # 4 / (1234.5 x 3600) x 1e6 = 4 / 4,444,200 x 1e6 = 0.90004950...
    assert row.cost_per_million_output_tokens == pytest.approx(0.9000495027226497, rel=1e-12)
    assert row.cost_per_million_output_tokens == pytest.approx(4 / (1234.5 * 3600) * 1e6)


def test_domain_examples_dearer_server_is_cheaper_per_token() -> None:
    cheap = make_snap([(1, 40.0, 0.1), (2, 80.0, 0.2)], label="cheap")
    dear = make_snap([(1, 80.0, 0.1), (2, 160.0, 0.2)], label="dear")
    cmp = build_comparison(named(cheap, dear), prices={"cheap": 4.0, "dear": 7.0})
    costs = [r.cost_per_million_output_tokens for r in cmp.rows]
    assert costs == [pytest.approx(13.888, abs=1e-3), pytest.approx(12.152, abs=1e-3)]
    assert cmp.rows[1].cost_vs_first == pytest.approx(12.152 / 13.888, abs=1e-3)
    assert cmp.rows[1].output_tokens_per_s_vs_first == 2.0
    assert cmp.rows[0].output_tokens_per_s_vs_first == 1.0


def test_capacity_planning_90_rpm_x_240_tokens() -> None:
    snap = make_snap(CURVE, price_per_hour=4)
    cmp = build_comparison(named(snap), demand=Demand(90, 240, 0.3))
    assert cmp.demand is not None
    assert cmp.demand.output_tokens_per_s == 360
    assert cmp.demand.target_output_tokens_per_s == pytest.approx(468)
    row = cmp.rows[0]
    assert row.qualified_output_tokens_per_s == 600.0  # level 8; 16 breaks the TTFT bound
    assert row.servers_needed == 1
    assert row.total_price_per_hour == 4
    small = build_comparison(named(snap), demand=Demand(90, 240 * 2, 0.3)).rows[0]
    assert small.servers_needed == math.ceil(936 / 600)
    assert small.total_price_per_hour == 8


def test_no_price_and_no_capacity_give_none_not_errors() -> None:
    failing = make_snap([(1, 100.0, 2.0), (2, 150.0, 3.0)])
    row = build_comparison(named(failing), demand=Demand(60, 100)).rows[0]
    assert row.qualified_level is None
    assert row.cost_per_million_output_tokens is None
    assert row.servers_needed is None
    assert row.price_per_hour is None
    priced = build_comparison(named(failing), prices={"a": 3.0}).rows[0]
    assert priced.price_per_hour == 3.0 and priced.cost_per_million_output_tokens is None


def test_stored_price_is_read_defensively_and_flag_overrides_it() -> None:
    assert stored_price(make_snap(CURVE, price_per_hour=7)) == 7.0
    assert stored_price(make_snap(CURVE)) is None
    assert stored_price(make_snap(CURVE, price_per_hour="7")) is None
    assert stored_price(make_snap(CURVE, price_per_hour=True)) is None
    assert stored_price(make_snap(CURVE, price_per_hour=-1)) is None
    snap = make_snap(CURVE, price_per_hour=7)
    assert build_comparison(named(snap), prices={"a": 5.0}).rows[0].price_per_hour == 5.0


def test_names_come_from_labels_then_file_names_and_are_unique() -> None:
    a, b, c = make_snap(CURVE, label="node"), make_snap(CURVE, label="node"), make_snap(CURVE)
    c = c.model_copy(update={"label": None})
    names = name_snapshots([(a, Path("x/a.json")), (b, Path("y/b.json")), (c, Path("z/c.json"))])
    assert [n.name for n in names] == ["node (a.json)", "node (b.json)", "c"]
    same = name_snapshots([(a, Path("a.json")), (a, Path("a.json"))])
    assert [n.name for n in same] == ["node (a.json)", "node (a.json) #2"]


def test_parse_prices_by_label_file_name_or_stem() -> None:
    snaps = name_snapshots(
        [(make_snap(CURVE, label="rtx"), Path("d/r.json")), (make_snap(CURVE, label="a100"), None)]
    )
    assert parse_prices(["rtx=4", "a100=7.5"], snaps) == {"rtx": 4.0, "a100": 7.5}
    assert parse_prices(["r.json=4"], snaps) == {"rtx": 4.0}
    assert parse_prices(["r=4"], snaps) == {"rtx": 4.0}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("rtx", "expected LABEL=PER_HOUR"),
        ("=4", "expected LABEL=PER_HOUR"),
        ("rtx=four", "is not a number"),
        ("rtx=-1", "finite number >= 0"),
        ("rtx=inf", "finite number >= 0"),
        ("h100=9", "no snapshot is named 'h100' (names: rtx)"),
    ],
)
def test_parse_prices_rejects(spec: str, message: str) -> None:
    snaps = named(make_snap(CURVE, label="rtx"))
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_prices([spec], snaps)


def test_sweep_curve_sorts_skips_incomplete_and_keeps_the_last_repeat() -> None:
    snap = make_snap([(4, 350.0, 0.4), (1, 100.0, 0.1), (2, 190.0, 0.2), (8, 600.0, 0.8)])
    steps = list(snap.steps)
    steps.append(steps[0].model_copy(update={"output_tokens_per_s": 360.0, "index": 4}))
    steps.append(steps[3].model_copy(update={"level": 16.0, "incomplete": True, "index": 5}))
    curve = sweep_curve(snap.model_copy(update={"steps": tuple(steps)}))
    assert curve.levels == (1.0, 2.0, 4.0, 8.0)
    assert curve.output_tokens_per_s == (100.0, 190.0, 360.0, 600.0)
    assert curve.ttft_p95_s == (0.1, 0.2, 0.4, 0.8)
    assert curve.tpot_p95_s == (0.02, 0.02, 0.02, 0.02)
    assert curve.mode == "concurrency"


def test_sweep_curve_of_a_knee_run_and_of_an_empty_run() -> None:
    flat = make_snap([(1, 100.0, 0.1), (2, 200.0, 0.1), (4, 400.0, 0.1), (8, 410.0, 0.1)])
    assert flat.knee is not None
    assert sweep_curve(flat).knee == flat.knee
    empty = sweep_curve(make_snap([]))
    assert empty.levels == () and empty.knee is None and empty.mode is None


def test_equal_throughput_interpolates_or_says_why_not() -> None:
    curve = sweep_curve(make_snap(CURVE))
    mid = at_throughput(curve, 475.0)  # halfway between level 4 (350) and level 8 (600)
    assert mid.status == "ok"
    assert mid.level == pytest.approx(6.0)
    assert mid.ttft_p95_s == pytest.approx(0.6)
    assert mid.tpot_p95_s == pytest.approx(0.02)
    high = at_throughput(curve, 700.0)
    assert high.status == "cannot reach" and high.detail == "peak 640.0 out tok/s"
    low = at_throughput(curve, 50.0)
    assert low.status == "not measured" and "concurrency 1" in low.detail
    assert at_throughput(sweep_curve(make_snap([])), 10.0).status == "no steps"


def test_same_runs_have_no_comparability_warning() -> None:
    a, b = make_snap(CURVE, label="a"), make_snap(CURVE, label="b")
    assert build_comparison(named(a, b)).warnings == ()


def test_different_model_precision_workload_and_sla_are_flagged() -> None:
    a = make_snap(CURVE, label="a", precision="bf16")
    b = make_snap(
        CURVE,
        label="b",
        model="qwen",
        precision="fp8",
        input_tokens=1024,
        sla=Sla(ttft_p95_s=2.0, tpot_p95_s=0.035, max_error_rate=0.01),
    )
    warnings = build_comparison(named(a, b)).warnings
    assert warnings[0] == "not comparable: different model (a: llama; b: qwen)"
    assert warnings[1] == "not comparable: different precision (a: bf16; b: fp8)"
    assert warnings[2] == "not comparable: different workload: input_tokens (a: 512; b: 1024)"
    assert warnings[3] == (
        "not comparable: different SLA (a: TTFT<=1 s, TPOT<=35 ms, err<=1 %;"
        " b: TTFT<=2 s, TPOT<=35 ms, err<=1 %)"
    )


def test_precision_known_for_one_only_and_single_run_caveats() -> None:
    a = make_snap(CURVE, label="a", precision="bf16")
    b = make_snap([(1, 100.0, 0.1), (2, 200.0, 0.2)], label="b", complete=False)
    b = b.model_copy(update={"complete": False, "interrupted_by": "SIGINT"})
    failing = make_snap([(1, 100.0, 2.0)], label="c")
    warnings = build_comparison(named(a, b, failing)).warnings
    assert "precision not recorded for b, c: cannot check it matches bf16" in warnings
    assert "b: the run was interrupted (SIGINT); its last step is partial" in warnings
    assert any(
        w.startswith("b: qualified at the highest level tested (concurrency 2)") for w in warnings
    )
    assert any(w.startswith("c: no qualified capacity (no step met the SLA") for w in warnings)


def test_unbounded_sla_is_called_peak_load() -> None:
    snap = make_snap(CURVE, sla=Sla())
    (warning, *_) = build_comparison(named(snap)).warnings
    assert "the SLA sets no bound" in warning


def test_hardware_and_telemetry_are_read_when_present() -> None:
    hardware = {
        "gpus": [{"index": 0, "name": "NVIDIA A100 80GB PCIe", "memory_total_bytes": 80 * GIB}]
    }
    telemetry = {
        "gpu": [
            {
                "t_s": 0.0,
                "index": 0,
                "temperature_c": 40.0,
                "memory_used_bytes": 70 * GIB,
                "throttle_reasons": ["gpu_idle"],
            },
            {
                "t_s": 1.0,
                "index": 0,
                "temperature_c": 71.5,
                "memory_used_bytes": 72 * GIB,
                "throttle_reasons": ["sw_thermal_slowdown", "applications_clocks_setting"],
            },
            {"t_s": 2.0, "index": 0, "power_w": 250.0},
        ]
    }
    snap = make_snap(CURVE, hardware=hardware, telemetry=telemetry, precision="bf16")
    gpu = gpu_summary(snap)
    assert gpu.name == "NVIDIA A100 80GB PCIe" and gpu.count == 1
    assert gpu.memory_total_bytes == 80 * GIB
    assert gpu.peak_vram_used_bytes == 72 * GIB
    assert gpu.vram_free_bytes == 8 * GIB
    assert gpu.max_temperature_c == 71.5
    assert gpu.throttled is True and gpu.throttle_reasons == ("sw_thermal_slowdown",)
    assert precision_of(snap) == "bf16"
    (trace,) = gpu_traces(snap)
    assert trace.t_s == (0.0, 1.0, 2.0)
    assert trace.values["power_w"] == (None, None, 250.0)


def test_idle_only_is_not_throttled_and_two_gpus_report_the_tightest() -> None:
    hardware = {
        "gpus": [
            {"index": 0, "name": "RTX", "memory_total_bytes": 24 * GIB},
            {"index": 1, "name": "RTX", "memory_total_bytes": 24 * GIB},
        ]
    }
    telemetry = {
        "gpu": [
            {"t_s": 0, "index": 0, "memory_used_bytes": 20 * GIB, "throttle_reasons": ["gpu_idle"]},
            {"t_s": 0, "index": 1, "memory_used_bytes": 22 * GIB, "throttle_reasons": []},
        ]
    }
    gpu = gpu_summary(make_snap(CURVE, hardware=hardware, telemetry=telemetry))
    assert gpu.count == 2
    assert gpu.throttled is False
    assert gpu.peak_vram_used_bytes == 22 * GIB
    assert gpu.vram_free_bytes == 2 * GIB


@pytest.mark.parametrize(
    ("hardware", "telemetry"),
    [
        (None, None),
        ({"gpus": "RTX"}, {"gpu": "nope"}),
        ({"gpus": [None, 3, {"name": 5, "memory_total_bytes": "big"}]}, {"gpu": [{"t_s": "x"}, 7]}),
        ([1, 2], [3]),
    ],
)
def test_absent_or_malformed_sections_read_as_unknown(hardware: Any, telemetry: Any) -> None:
    extra = {k: v for k, v in (("hardware", hardware), ("telemetry", telemetry)) if v is not None}
    try:
        snap = make_snap(CURVE, **extra)
    except ValueError:  # the schema itself may refuse a non-object section: also fine
        return
    gpu = gpu_summary(snap)
    assert gpu.name is None
    assert gpu.peak_vram_used_bytes is None and gpu.max_temperature_c is None
    assert gpu.throttled is None
    assert gpu_traces(snap) == []


def test_gpu_description_in_target_is_a_fallback_name() -> None:
    snap = make_snap(CURVE)
    target = snap.target.model_copy(update={"gpu_description": "1x RTX 4090 48GB (modified)"})
    assert gpu_summary(snap.model_copy(update={"target": target})).name == (
        "1x RTX 4090 48GB (modified)"
    )


def test_nothing_to_compare_is_a_usage_error() -> None:
    with pytest.raises(UsageError):
        build_comparison([])


def test_workload_signature_ignores_how_a_run_went_but_not_what_it_asked() -> None:
    base = make_snap(CURVE, label="a")
    run_facts = {
        "seed": 7,
        "scenario_file": "/home/me/chat.toml",
        "input_tokens_check": {"matched": 9, "total": 10, "worst_tokens": 3},
        "input_tokens_method": "exact",
    }
    same = base.model_copy(
        update={"label": "b", "workload": base.workload.model_copy(update=run_facts)}
    )
    assert build_comparison(named(base, same)).warnings == ()
    dist = {"kind": "normal", "mean": 512, "std": 128, "dataset": "/data/a/lengths.jsonl"}
    moved = {**dist, "dataset": "/mnt/b/lengths.jsonl"}
    x = base.model_copy(
        update={"workload": base.workload.model_copy(update={"input_distribution": dist})}
    )
    y = base.model_copy(
        update={
            "label": "b",
            "workload": base.workload.model_copy(update={"input_distribution": moved}),
        }
    )
    assert build_comparison(named(x, y)).warnings == ()
    z = base.model_copy(
        update={
            "label": "c",
            "workload": base.workload.model_copy(update={"input_distribution": {"kind": "fixed"}}),
        }
    )
    (warning,) = build_comparison(named(x, z)).warnings
    assert warning.startswith("not comparable: different workload: input_distribution (a: {")


def test_workload_names_and_length_kinds_show_in_the_row() -> None:
    base = make_snap(CURVE)
    workload = base.workload.model_copy(
        update={
            "scenario": "chat",
            "input_distribution": {"kind": "lognormal", "median": 400},
            "output_distribution": {"kind": "fixed", "tokens": 128},
        }
    )
    row = build_comparison(named(base.model_copy(update={"workload": workload}))).rows[0]
    assert (row.workload_name, row.input_kind, row.output_kind) == ("chat", "lognormal", None)
    assert workload_text(row) == "512 (lognormal) in / 128 out (chat)"
    data = base.workload.model_copy(
        update={"dataset": {"path": "/x/sharegpt.json", "entries_used": 9}}
    )
    row = build_comparison(named(base.model_copy(update={"workload": data}))).rows[0]
    assert row.workload_name == "dataset sharegpt.json"
