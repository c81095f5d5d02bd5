"""The snapshot schema: exact key names, conversions from metrics, validation."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from gputui.metrics.capacity import Capacity
from gputui.metrics.knee import Knee
from gputui.metrics.sla import Sla, step_meets_sla
from gputui.metrics.step import StepResult, StepSpec, aggregate_step
from gputui.snapshot.models import (
    CapacityModel,
    Client,
    KneeModel,
    Network,
    SlaBounds,
    Snapshot,
    Stats,
    Target,
    Workload,
    step_from_result,
)
from tests.support.records import ns, rec

STATS_KEYS = {"mean", "p50", "p90", "p95", "p99", "n"}
STATS_KEYS |= {"p50_ci", "p95_ci", "p99_ci"}  # added in v1 (optional): issue 16
OPTIONAL_STEP_KEYS = {
    "event_tokens_method",
    "ttfat_s",
    "reasoning_share",
    "ttfat_no_answer",
    "ttft_schedule_s",
    "slot_waits",
}
STEP_KEYS = {
    "index",
    "mode",
    "level",
    "duration_s",
    "warmup_s",
    "requests_ok",
    "requests_failed",
    "errors",
    "requests_per_s",
    "input_tokens_per_s",
    "output_tokens_per_s",
    "ttft_s",
    "tpot_s",
    "itl_s",
    "e2e_s",
    "connect_s",
    "goodput_requests_per_s",
    "goodput_output_tokens_per_s",
    "sla_ok",
    "incomplete",
    "output_tokens_from_usage",
    "short_outputs",
} | {  # added in v1 (optional, None by default): the step's diagnosis (issue 18)
    "server_latency",
    "ttft_breakdown",
    "e2e_breakdown",
    "roofline",
    "bottleneck",
}
STEP_KEYS |= {  # added in v1 (optional): intervals and the three-way verdict, issue 16
    "output_tokens_per_s_ci",
    "goodput_output_tokens_per_s_ci",  # issue 31
    "requests_per_s_ci",
    "rate_ci_batches",
    "error_rate_ci",
    "goodput_share",
    "goodput_share_ci",
    "sla_verdict",
}
STEP_KEYS |= {"error_messages", "ended_early"}  # optional, issue 21: the server's own words
DIAGNOSIS_KEYS = {"server_latency", "ttft_breakdown", "e2e_breakdown", "roofline", "bottleneck"}


def step_result() -> StepResult:
    spec = StepSpec(
        index=0,
        mode="concurrency",
        level=2,
        start_ns=ns(0),
        measure_start_ns=ns(100),
        end_ns=ns(2100),
    )
    records = [
        rec(
            sent_ms=200,
            end_ms=700,
            tokens_ms=[400, 500, 600, 700],
            input_tokens=32,
            requested=4,
            connect_ms=1.5,
        ),
        rec(sent_ms=300, end_ms=900, tokens_ms=[450, 900], input_tokens=32, requested=4),
        rec(sent_ms=300, end_ms=310, ok=False, error="http_429"),
    ]
    return aggregate_step(spec, records, Sla(ttft_p95_s=1.0, tpot_p95_s=0.5))


def make_snapshot(**overrides: object) -> Snapshot:
    fields: dict[str, object] = {
        "created_at": "2026-05-01T12:00:00.000+00:00",
        "label": "4090-48g qwen-14b",
        "complete": True,
        "target": Target(url="http://10.0.0.5:8000", model="qwen", endpoint="chat", backend="vllm"),
        "workload": Workload(
            input_tokens=512,
            output_tokens=256,
            endpoint="chat",
            arrival="poisson",
            burstiness=1.0,
            extra_body={"temperature": 0.0},
            ignore_eos=True,
        ),
        "sla": SlaBounds(ttft_p95_s=1.0, tpot_p95_s=0.035, max_error_rate=0.01),
        "steps": (step_from_result(step_result()),),
        "network": Network(
            rtt_s=Stats(mean=0.001, p50=0.001, p90=0.002, p95=0.002, p99=0.003, n=40),
            probe_path="/health",
            probes_failed=1,
        ),
        "client": Client(cpu_s=1.5, wall_s=60.0, event_loop="uvloop", uvloop=True),
    }
    fields.update(overrides)
    return Snapshot.model_validate(fields)


def test_top_level_and_nested_keys_are_exact() -> None:
    data = make_snapshot().model_dump(mode="json")
    v1 = {"schema_version", "gputui_version", "created_at", "label", "complete", "target"}
    v1 |= {"workload", "sla", "steps", "network", "client"}
    added_in_v1 = {"plan", "interrupted_by", "requests_cancelled"}  # optional, with defaults
    added_in_v1 |= {
        "knee",
        "capacity",
        "knee_reason",
        "capacity_reason",
        "hardware",
        "telemetry",
        "validation",
        "bursts",
        "prefix_cache",
        "conversations",
        "trace",
        "price_per_hour",
        "precision",
        "energy_price_per_kwh",  # issue 29
        "pue",
    }
    assert set(data) == v1 | added_in_v1
    assert data["schema_version"] == 1
    target = {"url", "model", "endpoint", "backend", "server_header"}
    target |= {  # the server's identity and limits (added in v1, optional)
        "engine",
        "version",
        "engine_model",
        "context_limit",
        "context_limit_source",
        "max_input_tokens",
        "max_batch_tokens",
        "max_sequences",
        "kv_blocks",
        "kv_tokens",
        "engine_settings",
        "identity_sources",
    }
    assert set(data["target"]) == target
    workload = {"input_tokens", "output_tokens", "endpoint", "arrival", "burstiness"}
    workload |= {"extra_body", "ignore_eos", "input_tokens_method"}
    workload |= {  # added in v1 (optional): scenarios, distributions, requested vs measured
        "input_tokens_check",
        "scenario",
        "scenario_file",
        "seed",
        "input_distribution",
        "output_distribution",
        "dataset",
        "unique_prefix",
        "shared_prefix_tokens",
        "min_tokens",
        "prompt_salt",
        "prompt_isolation",
        "input_lengths",
        "output_lengths",
        "lengths_by_step",
    }
    assert set(data["workload"]) == workload
    assert set(data["sla"]) == {
        "ttft_p95_s",
        "tpot_p95_s",
        "max_error_rate",
        "e2e_p95_s",  # issue 31: the full-request and first-answer bounds
        "ttfat_p95_s",
    }
    # Optional step keys (issue 17): the event-counting method; TTFAT and reasoning share only
    # for streams with thinking; multi-turn runs and trace replays fill the source keys.
    source_keys = {"turns", "prefix_cache_hit_rate", "conversations", "dispatch_lateness"}
    source_keys |= {"requests_warmup"}  # issue 24: the steps account for every request
    source_keys |= {"handover_s"}  # issue 28: the old load's time after the step closed
    source_keys |= {"requests_burst"}  # issue 28: a burst's requests, apart from the step
    source_keys |= {"requests_under_burst", "burst_window_s"}  # issue 28: a burst's window
    source_keys |= {"prefix_cache_source", "prefix_cache_warning"}
    source_keys |= {"telemetry", "energy"}  # issue 29: null without telemetry
    assert set(data["steps"][0]) - OPTIONAL_STEP_KEYS == STEP_KEYS | source_keys
    for key in ("ttft_s", "tpot_s", "itl_s", "e2e_s", "connect_s"):
        assert set(data["steps"][0][key]) == STATS_KEYS
    assert set(data["network"]) == {"rtt_s", "probe_path", "probes_failed"}
    assert set(data["network"]["rtt_s"]) == STATS_KEYS
    client = {"cpu_s", "wall_s", "event_loop", "uvloop", "connections_opened"}
    client |= {"arrivals_dropped"}  # issue 31: arrivals a level change dropped, counted
    assert set(data["client"]) == client


def test_step_from_result_keeps_every_number() -> None:
    result = step_result()
    step = step_from_result(result)
    assert (step.requests_ok, step.requests_failed) == (2, 1)
    assert step.errors == {"http_429": 1}
    assert step.ttft_s.to_summary() == result.ttft_s
    assert step.itl_s.to_summary() == result.itl_s
    assert step.connect_s.n == 1
    assert step.connect_s.mean == pytest.approx(0.0015)
    for name in STEP_KEYS - {"ttft_s", "tpot_s", "itl_s", "e2e_s", "connect_s"} - DIAGNOSIS_KEYS:
        assert getattr(step, name) == getattr(result, name), name
    # a saved step can be re-judged against another SLA
    assert step_meets_sla(step, Sla(max_error_rate=0.5)) is True
    assert step_meets_sla(step, Sla(max_error_rate=0.1)) is False


def test_sla_bounds_convert_both_ways() -> None:
    sla = Sla(ttft_p95_s=1.0, tpot_p95_s=None, max_error_rate=0.02)
    assert SlaBounds.from_sla(sla).to_sla() == sla


def test_defaults_and_optional_sections() -> None:
    snap = make_snapshot(network=None, client=None, label=None, steps=())
    assert (snap.network, snap.client, snap.steps) == (None, None, ())
    fresh = Snapshot(complete=False, target=snap.target, workload=snap.workload, sla=snap.sla)
    assert fresh.schema_version == 1
    assert fresh.created_at.endswith("+00:00")


def test_models_are_frozen_and_keep_unknown_keys() -> None:
    snap = make_snapshot(telemetry={"gpu": [{"index": 0}]})
    with pytest.raises(ValidationError):
        snap.__setattr__("complete", False)
    assert snap.model_dump(mode="json")["telemetry"] == {"gpu": [{"index": 0}]}


@pytest.mark.parametrize("created_at", ["2026-05-01T12:00:00", "yesterday"])
def test_created_at_needs_an_iso_time_with_a_timezone(created_at: str) -> None:
    with pytest.raises(ValidationError, match="created_at"):
        make_snapshot(created_at=created_at)


def test_bad_step_mode_is_rejected() -> None:
    data = make_snapshot().model_dump(mode="json")
    data["steps"][0]["mode"] = "burst"
    with pytest.raises(ValidationError, match="mode"):
        Snapshot.model_validate(data)


def test_knee_and_capacity_sections_from_the_metrics() -> None:
    knee = Knee(16.0, "concurrency", "gain_per_doubling", "the knee is 16", index=4)
    capacity = Capacity(
        level=24.0,
        mode="concurrency",
        output_tokens_per_s=1500.0,
        requests_per_s=6.25,
        ttft_p95_s=0.4,
        tpot_p95_s=0.02,
        error_rate=0.0,
    )
    snap = make_snapshot(
        knee=KneeModel.from_knee(knee),
        capacity=CapacityModel.from_capacity(capacity),
        capacity_reason="concurrency 24 is the highest level that met every SLA bound",
        validation={"rate_per_s": 5.0, "sla_ok": True},
        bursts=[{"peak_rate_per_s": 10.0, "recovered_s": 12.5}],
    )
    data = snap.model_dump(mode="json")
    assert data["knee"] == {
        "level": 16.0,
        "mode": "concurrency",
        "method": "gain_per_doubling",
        "reason": "the knee is 16",
        "explanation": None,
        "bound_by": None,
        "bound_at": None,
    }
    assert data["capacity"] == {
        "level": 24.0,
        "mode": "concurrency",
        "output_tokens_per_s": 1500.0,
        "requests_per_s": 6.25,
        "ttft_p95_s": 0.4,
        "tpot_p95_s": 0.02,
        "error_rate": 0.0,
        # added in v1 (optional): intervals and bracketing levels, issue 16
        "output_tokens_per_s_ci": None,
        "requests_per_s_ci": None,
        "ttft_p95_ci": None,
        "tpot_p95_ci": None,
        "error_rate_ci": None,
        "below_level": None,
        "below_verdict": None,
        "above_level": None,
        "above_verdict": None,
        # added in v1 (optional): a capacity on point estimates and its caveats, issue 23
        "provisional": False,
        "provisional_reason": None,
        "caveats": [],
        # added in v1 (optional): every output token beside the good output, issue 31
        "all_output_tokens_per_s": None,
    }
    assert data["bursts"] == [{"peak_rate_per_s": 10.0, "recovered_s": 12.5}]
    assert Snapshot.model_validate(data) == snap


def test_files_without_the_analysis_sections_still_load() -> None:
    data = make_snapshot().model_dump(mode="json")
    for key in ("knee", "capacity", "capacity_reason", "validation", "bursts"):
        del data[key]
    snap = Snapshot.model_validate(data)
    assert (snap.knee, snap.capacity, snap.capacity_reason) == (None, None, None)
    assert (snap.validation, snap.bursts) == (None, ())
