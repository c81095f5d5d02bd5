"""KV capacity judged by admission, and the scheduler limit that binds, from vLLM's gauges.

The cases are issue 31's real-vLLM misreadings: a KV cache that holds 2 of 8 requests read
`scheduler-limit` ("each engine step's token budget is taken") at 87 % usage with 6 waiting and
2 running, one decode token each; `--max-num-seqs 2` at 4 streams read the token budget too.
"""

from __future__ import annotations

from dataclasses import replace

from gputui.diagnosis.window import server_window
from gputui.metrics.bottleneck import bottleneck
from gputui.metrics.step_evidence import StepEvidence
from gputui.telemetry.samples import ServerSample

MS = 1_000_000


def _samples(
    running: list[int], waiting: list[int], usage: list[float], *, blocks: int = 32, size: int = 32
) -> list[ServerSample]:
    return [
        ServerSample(
            t_ns=(i + 1) * 500 * MS,
            backend="vllm",
            requests_running=r,
            requests_waiting=w,
            kv_cache_usage=u,
            preemptions_total=0,
            kv_blocks_total=blocks,
            kv_block_size=size,
            kv_capacity_tokens=blocks * size,
            engine_steps_total=100 * i,
            step_tokens_total=100 * i * r,  # decode only: one token per running request a step
        )
        for i, (r, w, u) in enumerate(zip(running, waiting, usage, strict=True))
    ]


def _evidence(window: dict[str, object], level: float, **more: object) -> StepEvidence:
    keys = set(StepEvidence.__dataclass_fields__)
    fields = {k: v for k, v in window.items() if k in keys}
    return StepEvidence(level=level, closed_loop_streams=level, **fields, **more)  # type: ignore[arg-type]


def test_a_cache_holding_2_of_8_reads_kv_capacity_at_87_percent() -> None:
    # 32 blocks of 32 tokens; 2 running requests hold 28 of them; each prompt needs 12 (384).
    samples = _samples([2] * 10, [6] * 10, [0.875] * 10)
    window = server_window(samples, 0, 10_000 * MS, need_tokens=384.0)
    assert window["kv_free_blocks_waiting"] == 4 and window["kv_need_blocks"] == 12
    assert window["kv_blocked_share"] == 1.0
    assert window["tokens_per_engine_step"] == 2.0
    found = bottleneck(_evidence(dict(window), 8))
    assert found["verdict"] == "kv-capacity", found  # was scheduler-limit (token budget)
    assert found["evidence"][0].startswith(
        "KV cache 88%; 4 of 32 KV blocks free while requests waited (median), a prompt needs 12: "
        "no room in 100% of those samples"
    )


def test_a_sequence_limit_of_2_at_4_streams_reads_the_sequence_limit() -> None:
    # max_num_seqs 2: two run, two wait, and the cache has room for both of them.
    samples = _samples([2, 2, 1, 2, 2, 2, 2, 2, 2, 2], [2, 2, 2, 1, 2, 2, 2, 2, 2, 2], [0.3] * 10)
    window = server_window(samples, 0, 10_000 * MS, need_tokens=128.0)
    assert window["kv_blocked_share"] == 0.0 and window["running_held_share"] == 0.9
    found = bottleneck(_evidence(dict(window), 4, breakdown={"ttft_s": 0.1, "queue_share": 0.6}))
    assert found["verdict"] == "scheduler-limit", found
    assert found["evidence"][0].startswith(
        "sequence limit: running held at 2 in 90% of the samples with requests waiting"
    )
    assert "max_num_seqs" in found["evidence"][0] and "token budget" not in found["evidence"][0]


def test_waiting_with_room_and_decode_only_steps_is_not_the_token_budget() -> None:
    # Running wanders (no ceiling held), the cache has room, the steps carry 1 token a request.
    samples = _samples([3, 5, 4, 6, 2, 5, 3, 6, 4, 5], [1] * 10, [0.2] * 10)
    window = server_window(samples, 0, 10_000 * MS, need_tokens=128.0)
    found = bottleneck(_evidence(dict(window), 8, breakdown={"ttft_s": 0.1, "queue_share": 0.6}))
    assert found["verdict"] != "scheduler-limit" or "token budget" not in found["evidence"][0]
    assert not any("token budget" in line for line in found["evidence"])


def test_a_full_percentage_alone_is_not_kv_capacity_where_blocks_are_known() -> None:
    # 95 % used, yet a prompt of 1 block fits the 2 free ones: the cache admits.
    samples = _samples([6] * 10, [1] * 10, [0.94] * 10)
    window = server_window(samples, 0, 10_000 * MS, need_tokens=20.0)
    evidence = _evidence(dict(window), 8)
    assert window["kv_blocked_share"] == 0.0
    assert bottleneck(evidence)["verdict"] != "kv-capacity"
    assert bottleneck(replace(evidence, preemptions=3))["verdict"] == "kv-capacity"


def test_a_held_sequence_limit_decides_on_a_contended_host() -> None:
    # The CI host: vLLM's CPU build shares the client's 2 cores, the client's loop is 1.8 s late
    # and it waited longer than it ran. The server's own gauges still show 4 running (its
    # ceiling) and 2 waiting (the late client kept fewer in flight: no backlog as deep as the
    # batch) with the cache three-quarters free: the sequence limit binds, and the step says it
    # was measured on a contended host.
    samples = _samples([4] * 10, [2] * 9 + [3], [0.25] * 10, blocks=64)
    window = server_window(samples, 0, 10_000 * MS, need_tokens=64.0)
    contended = {
        "client_cpu_mean_pct": 2.0,
        "client_cpu_max_pct": 5.0,
        "client_run_wait_pct": 45.0,
        "loop_lag_max_ms": 1785.0,
    }
    found = bottleneck(_evidence(dict(window), 8, **contended))
    assert found["verdict"] == "scheduler-limit", found
    assert found["evidence"][0].startswith("sequence limit: running held at 4 in 100% of ")
    assert found["suspect"] is True and found["client_state"] == "host-contended"
    # Without the server's queue the same client reads host-contended, as before.
    idle = _samples([1] * 10, [0] * 10, [0.05] * 10, blocks=64)
    quiet = server_window(idle, 0, 10_000 * MS, need_tokens=64.0)
    assert bottleneck(_evidence(dict(quiet), 1, **contended))["verdict"] == "host-contended"


def test_a_sequence_limit_read_between_waves_still_reads_the_sequence_limit() -> None:
    # vLLM 0.32 (CPU), max_num_seqs 4, 8 streams of equal requests: its gauges (the last engine
    # step's) caught 4 running with 4 waiting in 3 of the step's 5 samples and 1 running with 3
    # waiting in 2, the cache 97 % free (a wave had just finished).
    samples = _samples([4, 4, 1, 1, 4], [4, 4, 3, 3, 4], [0.254, 0.19, 0.032, 0.032, 0.254])
    window = server_window(samples, 0, 5_000 * MS, need_tokens=64.0)
    assert window["running_held_share"] == 0.6
    found = bottleneck(_evidence(dict(window), 8, breakdown={"ttft_s": 0.7, "queue_share": 0.96}))
    assert found["verdict"] == "scheduler-limit", found
    assert found["evidence"][0].startswith("sequence limit: running held at 4 in 60% of the ")
    # Running that wanders while requests wait with room is no ceiling.
    wander = _samples([4, 2, 1, 3, 4], [4, 3, 3, 2, 4], [0.25, 0.1, 0.03, 0.2, 0.25])
    loose = server_window(wander, 0, 5_000 * MS, need_tokens=64.0)
    assert loose["running_held_share"] == 0.4
    assert bottleneck(_evidence(dict(loose), 8))["verdict"] != "scheduler-limit"
